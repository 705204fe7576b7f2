"""Embedding debiasing: INLP, LEACE, SLERP and similarity compensation (IndicFairFace §4.4, §10).

>>> from fairsets.debias import fit_transform, DebiasTransform
>>> tf = fit_transform(X_train, states, method="inlp", alpha=1.0, target=t)  # doctest: +SKIP
>>> tf.save("debias.npz")                                                   # doctest: +SKIP
>>> DebiasTransform.load("debias.npz").apply(X_test)                        # doctest: +SKIP

* :func:`fit_inlp` — multi-class Iterative Nullspace Projection (:mod:`.inlp`);
* :func:`fit_leace` — LEACE via concept-erasure, as an affine ``(A, b)`` (:mod:`.leace`);
* :func:`slerp` — eq. 8-10 (:mod:`.slerp`);
* :class:`DebiasTransform` / :func:`fit_transform` — eraser + SLERP + compensation ``beta t`` and
  the portable ``.npz`` file, applicable with numpy alone (:mod:`.transform` documents the formula).
* :class:`~fairsets.debias.rows32.Rows32` — the same transform in float32, row by row, for large
  files (:mod:`.rows32` states its tolerance).

Importing this package imports neither torch, sklearn nor concept-erasure; fitting does, lazily.
"""

from __future__ import annotations

from .inlp import InlpResult, fit_inlp
from .leace import fit_leace
from .slerp import slerp
from .transform import FORMAT, METHODS, DebiasTransform, fit_transform

__all__ = [
    "FORMAT",
    "METHODS",
    "DebiasTransform",
    "InlpResult",
    "fit_inlp",
    "fit_leace",
    "fit_transform",
    "slerp",
]
