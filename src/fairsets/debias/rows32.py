r"""A :class:`~fairsets.debias.transform.DebiasTransform` applied in float32, row by row: for large files.

:meth:`DebiasTransform.apply` is the reference: every step in float64. Its cost is the float64
product ``x @ A.T`` (about twice a float32 one) plus several float64 passes over ``(n, d)``.
:class:`Rows32` computes the same three steps with one float32 product and per-row scalars:

* ``p = x @ A.T + b`` in float32 (``A``, ``b`` rounded to float32 once);
* per row, accumulated in float32 and combined in float64: ``|x|``, ``|p|`` and ``x . p``, hence
  ``cos theta``, ``theta`` and the SLERP weights ``c1 = sin((1 - alpha) theta) / sin theta``,
  ``c2 = sin(alpha theta) / sin theta``;
* the output as one linear combination per row,
  ``v = c1 x + (c2 |x| / |p|) p + (beta |x|) t``
  (``u |x| = x`` and ``q |x| = p |x| / |p|``: eq. 8-10 and 11-13 rewritten, not changed).

The edge cases are those of :func:`fairsets.debias.slerp.slerp` (zero rows, a zero projection,
nearly opposite rows) with one difference: where ``theta < 1e-7`` the weights are their limit
``(1 - alpha, alpha)`` instead of ``(1, 0)``. In float32 ``cos theta`` rounds to 1 for angles up
to ~3e-4, and the limit is within ``alpha * theta`` of the exact answer there, where ``(1, 0)``
would be ``alpha * theta`` off.

**Tolerance** (a definition, tested in ``tests/debias/test_debias_rows32.py``): every output row is
within ``1e-5 * |x|`` (Euclidean) of :meth:`DebiasTransform.apply`'s row, for rows whose erased
vector keeps at least 1% of their norm (``|x A.T + b| >= 0.01 |x|``). The error comes from the
float32 product (``~sqrt(d) * 2**-24 * |x|``) and reaches the output through the direction
``p / |p|``, so it grows as ``1e-7 |x| / |p|``: for a row the eraser removes almost whole, that
direction is rounding noise in float64 and float32 alike (the output stays finite and no longer
than ``|x|``, plus the compensation).

**Rows are independent**: no quantity mixes rows, so a row's bytes do not depend on the rows
beside it or on how a file is cut into blocks, as long as the BLAS computes each row of a matrix
product the same way whatever the number of rows (OpenBLAS, which numpy's wheels ship, does;
``fairsets debias apply`` also cuts files at fixed row numbers, so its bytes do not rely on it).
"""

from __future__ import annotations

import itertools
import math
from concurrent.futures import Executor

import numpy as np

from .slerp import _EPS_ANGLE

__all__ = ["Rows32"]

#: Blocks of fewer rows are padded with zero rows to this many: OpenBLAS computes a product of 1 to
#: 3 rows another way (other rounding) than one of more rows.
_MIN_ROWS = 16


class Rows32:
    """``transform`` prepared for float32 rows: ``Rows32(t)(x)`` ~ ``t.apply(x)`` (see the module)."""

    def __init__(self, transform: object) -> None:
        A = np.asarray(transform.A)  # type: ignore[attr-defined]
        self.dim = int(A.shape[0])
        self.AT = np.ascontiguousarray(A.T, dtype=np.float32)
        b = np.asarray(transform.b)  # type: ignore[attr-defined]
        self.b = b.astype(np.float32) if np.any(b != 0.0) else None
        self.alpha = float(transform.alpha)  # type: ignore[attr-defined]
        target = transform.target  # type: ignore[attr-defined]
        beta = float(transform.beta)  # type: ignore[attr-defined]
        self.beta = beta if target is not None and beta != 0.0 else 0.0
        self.target = np.asarray(target, dtype=np.float32) if self.beta else None
        self._scratch = np.empty((0, self.dim), np.float32)

    def __call__(
        self, x: np.ndarray, out: np.ndarray | None = None, pool: Executor | None = None, parts: int = 1
    ) -> np.ndarray:
        """Debias ``(n, d)`` float32 rows (C order, finite: the caller checks) into float32 rows.

        Args:
            x: the rows.
            out: an ``(n, d)`` float32 C-order array to write into (a new one when None). Reusing
                one buffer (and this object's scratch space) across blocks spares an allocation and
                its page faults per block.
            pool, parts: after the matrix product (which the BLAS runs on its own threads), the
                per-row passes run on ``parts`` slices of the rows in ``pool``'s threads (numpy
                releases the GIL in them).

        The bytes are the same whatever ``out``, ``pool`` and ``parts``: every row is computed alone.
        """
        n = x.shape[0]
        p = np.empty(x.shape, np.float32) if out is None else out
        if self.alpha == 0.0:  # the original rows (plus the compensation): no product needed
            p[...] = x
        elif 0 < n < _MIN_ROWS:  # BLAS takes other paths for a few rows: pad them
            pad = np.zeros((_MIN_ROWS, x.shape[1]), np.float32)
            pad[:n] = x
            p[...] = (pad @ self.AT)[:n]
        else:
            np.matmul(x, self.AT, out=p)
        tmp = self._tmp(x.shape)
        if pool is None or parts < 2 or n < 2 * _MIN_ROWS:
            self._finish(x, p, tmp)
            return p
        cuts = [n * i // parts for i in range(parts + 1)]
        slices = [slice(a, b) for a, b in itertools.pairwise(cuts)]
        for done in [pool.submit(self._finish, x[s], p[s], tmp[s]) for s in slices]:
            done.result()
        return p

    def _finish(self, x: np.ndarray, p: np.ndarray, tmp: np.ndarray) -> None:
        """Turn the product ``p`` of rows ``x`` into debiased rows, in place (``tmp``: scratch)."""
        nx = np.sqrt(np.einsum("ij,ij->i", x, x).astype(np.float64))
        if self.alpha != 0.0:
            if self.b is not None:
                p += self.b
            s1, s2 = self._weights(x, p, nx)
            p *= s2.astype(np.float32)[:, None]
            if np.any(s1 != 0.0):
                p += np.multiply(x, s1.astype(np.float32)[:, None], out=tmp)
        if self.target is not None:
            g = (self.beta * nx).astype(np.float32)[:, None]
            p += np.multiply(g, self.target[None, :], out=tmp)

    def _tmp(self, shape: tuple[int, ...]) -> np.ndarray:
        if self._scratch.shape[0] < shape[0] or self._scratch.shape[1:] != shape[1:]:
            self._scratch = np.empty(shape, np.float32)
        return self._scratch[: shape[0]]

    def _weights(self, x: np.ndarray, p: np.ndarray, nx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-row ``(s1, s2)`` with ``v = s1 x + s2 p`` (float64, shape ``(n,)``)."""
        a = self.alpha
        n = x.shape[0]
        npj = np.sqrt(np.einsum("ij,ij->i", p, p).astype(np.float64))
        inv_p = np.divide(1.0, npj, out=np.zeros(n), where=npj > 0)
        if a == 1.0:  # the projected direction at the original norm
            return np.zeros(n), nx * inv_p
        inv_x = np.divide(1.0, nx, out=np.zeros(n), where=nx > 0)
        cos = np.clip(np.einsum("ij,ij->i", x, p).astype(np.float64) * inv_x * inv_p, -1.0, 1.0)
        theta = np.arccos(cos)
        sin_t = np.sin(theta)
        near_same = theta < _EPS_ANGLE
        near_opposite = (math.pi - theta) < _EPS_ANGLE
        regular = ~(near_same | near_opposite)
        safe_sin = np.where(regular, sin_t, 1.0)
        c1 = np.where(regular, np.sin((1.0 - a) * theta) / safe_sin, 1.0 - a)
        c2 = np.where(regular, np.sin(a * theta) / safe_sin, a)
        if near_opposite.any():  # normalised linear interpolation, as slerp() does
            nl = np.sqrt(np.maximum((1.0 - a) ** 2 + a * a + 2.0 * a * (1.0 - a) * cos, 0.0))
            inv_l = np.divide(1.0, nl, out=np.ones(n), where=nl > 0)
            c1 = np.where(near_opposite, (1.0 - a) * inv_l, c1)
            c2 = np.where(near_opposite, a * inv_l, c2)
        return c1, c2 * nx * inv_p
