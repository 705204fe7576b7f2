"""LEACE (LEAst-squares Concept Erasure, Belrose et al. 2023) as a plain affine map.

:func:`fit_leace` fits :class:`concept_erasure.LeaceFitter` (float64, CPU) on the embeddings and the
one-hot encoding of the labels (any number of classes), and rewrites its eraser

    ``x' = x - ((x - bias) @ proj_right^T) @ proj_left^T``

as ``x' = x @ A.T + b`` with ``A = I - proj_left @ proj_right`` and
``b = proj_left @ proj_right @ bias``, so that applying it needs numpy only. After erasure no linear
classifier predicts the labels from the (training) embeddings better than a constant one.

torch and concept-erasure are imported lazily.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from .inlp import check_inputs

__all__ = ["fit_leace"]


def fit_leace(X: np.ndarray, y: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Fit a LEACE eraser for the labels ``y`` and return it as ``(A, b)``.

    Args:
        X: ``(n, d)`` embeddings, used as given (pass L2-normalised rows if that is your space).
        y: ``n`` labels, two classes or more.

    Returns:
        ``(A, b)``: ``(d, d)`` and ``(d,)`` float64 arrays; the erased embeddings are ``X @ A.T + b``.

    Raises:
        ValueError: on invalid inputs (see :func:`fairsets.debias.inlp.check_inputs`).
        ImportError: if concept-erasure (and torch) are not installed.
    """
    x, codes, classes = check_inputs(X, y)
    try:
        with warnings.catch_warnings():  # torch.jit deprecation noise from concept-erasure's import
            warnings.simplefilter("ignore", DeprecationWarning)
            import torch
            from concept_erasure import LeaceFitter
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("LEACE needs the 'concept-erasure' package (and torch)") from e

    onehot = np.zeros((codes.shape[0], classes.shape[0]), dtype=np.float64)
    onehot[np.arange(codes.shape[0]), codes] = 1.0
    xt = torch.from_numpy(np.ascontiguousarray(x))
    zt = torch.from_numpy(onehot)
    eraser = LeaceFitter.fit(xt, zt).eraser
    left = eraser.proj_left.detach().cpu().numpy().astype(np.float64)
    right = eraser.proj_right.detach().cpu().numpy().astype(np.float64)
    lr = left @ right
    d = x.shape[1]
    A = np.eye(d) - lr
    bias = eraser.bias  # None only for a non-affine fitter; LeaceFitter.fit is affine by default
    b = np.zeros(d) if bias is None else lr @ bias.detach().cpu().numpy().astype(np.float64)
    return np.ascontiguousarray(A), np.ascontiguousarray(b)
