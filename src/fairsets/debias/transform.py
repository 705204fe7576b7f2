r"""A fitted debiasing transform: eraser + SLERP + similarity compensation, saved as a portable ``.npz``.

A :class:`DebiasTransform` maps embeddings ``X`` (rows) to debiased embeddings in three steps:

1. **Erase** (affine): ``p = x @ A.T + b`` — INLP (``A = P``, ``b = 0``) or LEACE.
2. **SLERP** (eq. 8-10) from ``x`` towards ``p`` with strength ``alpha``, rescaled to ``|x|``.
3. **Compensate** (eq. 11-13): in the unit-norm space add ``beta * t`` (``t`` the unit-norm target
   text embedding, e.g. of "An Indian person"), then rescale: ``v + beta * |x| * t``.

``beta`` is **one global value** fitted on the training rows, as the paper's single compensation
vector ``c = beta t``: ``delta_S = mean cos(x, t) - mean cos(v, t)`` (before and after SLERP) and
``beta = 2 delta_S``. A per-sample ``beta`` would give back to every row exactly the similarity it
lost, undoing the equalisation of per-group similarity that the debiasing is for; one shared
``beta`` shifts all groups alike and restores the average alignment only. ``beta`` is negative when
the erasure *raised* the mean similarity (LEACE's affine shift can do that); the compensation then
brings it back down, as eq. 11-13 prescribe.

File format (``.npz``, no pickle)
---------------------------------
A standard numpy zip archive (deterministic bytes: fixed member order and timestamps) with:

* ``A`` — ``(d, d)`` float64, ``b`` — ``(d,)`` float64;
* ``target`` — ``(d,)`` float64 unit vector, or a zero-length array when there is none;
* ``header`` — a 0-d unicode array holding JSON: ``{"format": "fairsets.debias/1", "method",
  "alpha", "beta", "dim", "has_target", "meta", "sha256": {"A": ..., "b": ..., "target": ...}}``
  (SHA-256 of each array's little-endian C-order bytes).

It needs only numpy to apply::

    import json, numpy as np
    z = np.load("transform.npz", allow_pickle=False)
    h = json.loads(str(z["header"]))
    A, b, t, a, beta = z["A"], z["b"], z["target"], h["alpha"], h["beta"]
    x = X.astype(np.float64)                               # (n, d)
    p = x @ A.T + b                                        # 1. erase
    n = np.linalg.norm(x, axis=1, keepdims=True)
    u = x / n
    q = p / np.linalg.norm(p, axis=1, keepdims=True)
    th = np.arccos(np.clip((u * q).sum(1, keepdims=True), -1, 1))
    v = (np.sin((1 - a) * th) * u + np.sin(a * th) * q) / np.sin(th) * n   # 2. SLERP (v = x if th ~ 0)
    if h["has_target"]:
        v = v + beta * n * t                               # 3. compensate
    out = v.astype(np.float32)

(:func:`fairsets.debias.slerp.slerp` documents the edge cases: ``th`` ~ 0, zero rows.)
:meth:`DebiasTransform.apply` returns float32 and is deterministic (same input array, same bytes);
applying in chunks may differ from applying at once in the last bits of float64 matrix products.
:class:`fairsets.debias.rows32.Rows32` computes the same maths in float32 row by row (what
``fairsets debias apply`` streams files with), within ``1e-5 * |x|`` per row of :meth:`apply`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fairsets.core.checked_npz import array_sha256, read_checked_npz, write_checked_npz

from .inlp import check_inputs, fit_inlp
from .leace import fit_leace
from .slerp import check_alpha, slerp_rows

__all__ = ["FORMAT", "METHODS", "DebiasTransform", "fit_transform"]

#: Value of ``header["format"]`` in a saved transform.
FORMAT = "fairsets.debias/1"
_ARRAYS = ("A", "b", "target")

#: An eraser: ``(X float64 (n, d), codes int (n,), **kwargs) -> (A, b, info)``, the erased
#: embeddings being ``X @ A.T + b``; ``info`` (a JSON-serialisable fit report) is merged into the
#: transform's ``meta``.
Erased = tuple[np.ndarray, np.ndarray, dict[str, Any]]
Eraser = Callable[..., Erased]


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _erase_inlp(X: np.ndarray, y: Sequence[Any], **kwargs: Any) -> Erased:
    res = fit_inlp(X, y, **kwargs)
    info = {
        "iterations": res.iterations,
        "accuracies": [float(a) for a in res.accuracies],
        "final_accuracy": float(res.final_accuracy),
        "chance": float(res.chance),
        "removed_rank": res.rank,
        "fit_params": {k: _plain(v) for k, v in kwargs.items() if k != "progress"},
    }
    return res.projection, np.zeros(res.projection.shape[0]), info


def _erase_leace(X: np.ndarray, y: Sequence[Any], **kwargs: Any) -> Erased:
    if kwargs:
        raise TypeError(f"method 'leace' takes no fit options, got {sorted(kwargs)}")
    A, b = fit_leace(X, y)
    return A, b, {"erased_rank": int(np.linalg.matrix_rank(np.eye(A.shape[0]) - A)), "fit_params": {}}


#: The erasers :func:`fit_transform` knows. A new one is a function of the :data:`Eraser` shape plus
#: an entry here.
METHODS: dict[str, Eraser] = {"inlp": _erase_inlp, "leace": _erase_leace}


def _f64(a: Any, name: str) -> np.ndarray:
    arr = np.array(a, dtype="<f8", order="C", copy=True)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} holds non-finite values")
    arr.setflags(write=False)
    return arr


def _json_roundtrip(meta: Any) -> dict[str, Any]:
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise ValueError(f"meta must be a dict, got {type(meta).__name__}")
    try:
        return json.loads(json.dumps(meta, allow_nan=False, sort_keys=True))
    except (TypeError, ValueError) as e:
        raise ValueError(f"meta must be JSON-serialisable (no NaN/inf): {e}") from e


def _unit(target: Any, dim: int) -> np.ndarray:
    t = np.asarray(target)
    if t.dtype.kind not in "fiu":
        raise ValueError(f"target must hold real numbers, got dtype {t.dtype}")
    t = t.astype(np.float64).reshape(-1) if t.ndim == 2 and 1 in t.shape else t.astype(np.float64)
    if t.shape != (dim,):
        raise ValueError(f"target must have shape ({dim},) like the embeddings, got {np.shape(target)}")
    norm = float(np.linalg.norm(t))
    if not math.isfinite(norm) or norm == 0.0:
        raise ValueError("target must be a finite, non-zero vector")
    return t / norm


def _mean_cos(x: np.ndarray, t: np.ndarray) -> float:
    norms = np.linalg.norm(x, axis=1)
    ok = norms > 0
    return float(np.mean((x[ok] @ t) / norms[ok])) if ok.any() else 0.0


@dataclass(frozen=True, eq=False)
class DebiasTransform:
    """A fitted, portable debiasing transform (see the module docstring for the maths and file).

    Attributes:
        method: the eraser that produced ``A`` and ``b`` (``"inlp"`` or ``"leace"``).
        A: ``(d, d)`` float64; the erased embedding is ``x @ A.T + b``.
        b: ``(d,)`` float64.
        alpha: SLERP strength in [0, 1].
        target: ``(d,)`` float64 unit-norm target text embedding, or None.
        beta: compensation strength (0.0 without target or compensation).
        meta: JSON-serialisable provenance (model id, attribute, groups, split, n, fit report...).
            Stored as a JSON round-trip of what was given, so it equals what :meth:`load` returns.
    """

    method: str
    A: np.ndarray
    b: np.ndarray
    alpha: float = 1.0
    target: np.ndarray | None = None
    beta: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.method, str) or not self.method:
            raise ValueError(f"method must be a non-empty string, got {self.method!r}")
        A = _f64(self.A, "A")
        if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0:
            raise ValueError(f"A must be a square (d, d) matrix, got shape {A.shape}")
        d = A.shape[0]
        b = _f64(self.b, "b")
        if b.shape != (d,):
            raise ValueError(f"b must have shape ({d},), got {b.shape}")
        target = None
        if self.target is not None:
            target = _f64(self.target, "target")
            if target.shape != (d,):
                raise ValueError(f"target must have shape ({d},), got {target.shape}")
            if not math.isclose(float(np.linalg.norm(target)), 1.0, rel_tol=1e-9):
                raise ValueError("target must have unit norm")
        beta = float(self.beta)
        if not math.isfinite(beta):
            raise ValueError(f"beta must be finite, got {self.beta!r}")
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "alpha", check_alpha(self.alpha))
        object.__setattr__(self, "beta", beta)
        object.__setattr__(self, "meta", _json_roundtrip(self.meta))

    @property
    def dim(self) -> int:
        """Embedding dimension ``d``."""
        return int(self.A.shape[0])

    def apply(self, X: np.ndarray) -> np.ndarray:
        """Debias embeddings.

        Args:
            X: ``(n, d)`` or ``(d,)`` real-valued embeddings (any float or int dtype).

        Returns:
            float32 array of the same shape.

        Raises:
            ValueError: if the dimension differs from :attr:`dim`, or ``X`` is not a finite real
                1-D/2-D array.
        """
        x = np.asarray(X)
        if x.ndim not in (1, 2):
            raise ValueError(f"X must be (n, d) or (d,), got shape {x.shape}")
        if x.dtype.kind not in "fiub":
            raise ValueError(f"X must hold real numbers, got dtype {x.dtype}")
        if x.shape[-1] != self.dim:
            raise ValueError(
                f"embedding dimension {x.shape[-1]} does not match the transform's dimension {self.dim}"
            )
        one_d = x.ndim == 1
        if x.dtype.kind == "f" and not np.isfinite(x).all():  # checked before widening: half the bytes
            raise ValueError("X holds non-finite values (NaN or inf)")
        x64 = np.array(x, dtype=np.float64, order="C", copy=True).reshape(-1, self.dim)
        if x.dtype.kind != "f" and not np.isfinite(x64).all():  # very large ints
            raise ValueError("X holds non-finite values (NaN or inf)")
        v = self._debias64(x64)
        out = v.astype(np.float32)
        return out.reshape(-1) if one_d else out

    def _debias64(self, x64: np.ndarray, *, compensate: bool = True) -> np.ndarray:
        # The same arithmetic as ``slerp(x, x @ A.T + b, alpha) + beta * |x| * target``, with the
        # passes over (n, d) fused in place: the row norms are computed once and the projection's
        # buffer carries the result (``apply`` is a few times the cost of the product, not ~4x).
        p = x64 @ self.A.T
        p += self.b
        norms = np.linalg.norm(x64, axis=1, keepdims=True)
        v = slerp_rows(x64, p, self.alpha, norms)
        if compensate and self.target is not None and self.beta != 0.0:
            v += (self.beta * norms) * self.target[None, :]
        return v

    def header(self) -> dict[str, Any]:
        """The JSON header written by :meth:`save`."""
        arrays = self._arrays()
        return {
            "format": FORMAT,
            "method": self.method,
            "alpha": self.alpha,
            "beta": self.beta,
            "dim": self.dim,
            "has_target": self.target is not None,
            "meta": self.meta,
            "sha256": {name: array_sha256(arr) for name, arr in arrays.items()},
        }

    def _arrays(self) -> dict[str, np.ndarray]:
        target = self.target if self.target is not None else np.zeros(0, dtype="<f8")
        return {"A": self.A, "b": self.b, "target": target}

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the transform to ``path`` (an ``.npz``; written atomically, no pickle).

        The bytes are deterministic: the same transform gives the same file.

        Returns:
            The path written.
        """
        return write_checked_npz(path, self.header(), self._arrays())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> DebiasTransform:
        """Read a transform written by :meth:`save`, verifying its format and checksums.

        Raises:
            FileNotFoundError: if ``path`` does not exist.
            ValueError: if the file is not a fairsets debias transform, or is corrupt or modified.
        """
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(p)
        what = f"{p} is not a fairsets debias transform ({FORMAT} .npz)"
        header, arrays = read_checked_npz(p, FORMAT, _ARRAYS, what)
        try:
            has_target = bool(header["has_target"])
            dim = int(header["dim"])
            out = cls(
                method=header["method"],
                A=arrays["A"],
                b=arrays["b"],
                alpha=header["alpha"],
                target=arrays["target"] if has_target else None,
                beta=header["beta"],
                meta=header.get("meta") or {},
            )
        except (KeyError, TypeError) as e:
            raise ValueError(f"{what}: incomplete header ({e})") from e
        if out.dim != dim or (not has_target and arrays["target"].size != 0):
            raise ValueError(f"{p}: corrupt or modified: header and arrays disagree (dim {dim} vs {out.dim})")
        return out

    def __repr__(self) -> str:
        tgt = "yes" if self.target is not None else "no"
        return (
            f"DebiasTransform(method={self.method!r}, dim={self.dim}, alpha={self.alpha}, "
            f"target={tgt}, beta={self.beta:.6g})"
        )


def fit_transform(
    X: np.ndarray,
    y: Sequence[Any],
    *,
    method: str = "inlp",
    alpha: float = 1.0,
    target: np.ndarray | None = None,
    compensate: bool = True,
    meta: dict[str, Any] | None = None,
    **fit_kwargs: Any,
) -> DebiasTransform:
    """Fit a :class:`DebiasTransform` on labelled (training) embeddings.

    Args:
        X: ``(n, d)`` training embeddings.
        y: ``n`` labels of the protected attribute (e.g. state), two classes or more.
        method: eraser, a key of :data:`METHODS` (``"inlp"``, ``"leace"``).
        alpha: SLERP strength in [0, 1] (1: fully erased direction, 0: unchanged).
        target: text embedding of the target concept; normalised to unit norm and stored.
        compensate: fit ``beta = 2 * delta_S`` on ``X`` (needs ``target``); False gives ``beta = 0``.
        meta: JSON-serialisable provenance to store (model_id, attribute, split...). The fit adds
            ``n``, ``dim``, ``groups`` and ``group_counts`` (unless given), the eraser's report
            (INLP: ``iterations``, ``accuracies``, ``final_accuracy``, ``chance``, ``removed_rank``;
            LEACE: ``erased_rank``; both: ``fit_params``) and, with a target, ``compensation``
            (mean similarities before/after, delta_S, beta).
        **fit_kwargs: passed to the eraser (INLP: ``max_iter``, ``tol``, ``dev_fraction``, ``seed``,
            ``C``, ``progress``).

    Returns:
        The fitted transform.

    Raises:
        ValueError: on an unknown method or invalid inputs.
    """
    if method not in METHODS:
        raise ValueError(f"unknown debiasing method {method!r}; choose one of {sorted(METHODS)}")
    a = check_alpha(alpha)
    x, codes, classes = check_inputs(X, y)
    t = None if target is None else _unit(target, x.shape[1])
    out_meta = _json_roundtrip(meta)  # fail before fitting
    A, b, info = METHODS[method](x, codes, **fit_kwargs)  # codes: y may be a one-shot iterable

    out_meta.setdefault("n", int(x.shape[0]))
    out_meta.setdefault("dim", int(x.shape[1]))
    counts = np.bincount(codes, minlength=classes.shape[0])
    names = [str(c) for c in classes.tolist()]
    out_meta.setdefault("groups", names)
    out_meta.setdefault("group_counts", dict(zip(names, (int(k) for k in counts), strict=True)))
    out_meta.update(info)  # the fit report wins over same-named keys given in ``meta``

    beta = 0.0
    if t is not None:
        draft = DebiasTransform(method=method, A=A, b=b, alpha=a, target=t, beta=0.0)
        v = draft._debias64(x, compensate=False)
        s_orig = _mean_cos(x, t)
        s_deb = _mean_cos(v, t)
        delta = s_orig - s_deb
        beta = 2.0 * delta if compensate else 0.0
        out_meta["compensation"] = {
            "enabled": bool(compensate),
            "mean_cos_original": s_orig,
            "mean_cos_debiased": s_deb,
            "delta_s": delta,
            "beta": beta,
            "rule": "beta = 2 * (mean cos(x, t) - mean cos(slerp(x), t)) over the fit rows",
        }
    return DebiasTransform(method=method, A=A, b=b, alpha=a, target=t, beta=beta, meta=out_meta)
