"""Spherical linear interpolation between original and debiased embeddings (eq. 8-10).

For each row, with ``u = x / |x|`` and ``q = p / |p|`` (``x`` original, ``p`` projected):

    ``theta = arccos(clip(u . q, -1, 1))``
    ``v = (sin((1 - alpha) theta) u + sin(alpha theta) q) / sin(theta) * |x|``

``alpha = 0`` keeps the original, ``alpha = 1`` gives the projected direction at the original
magnitude, and in between the output turns from ``u`` towards ``q`` by the angle ``alpha * theta``.

Edge cases: where ``theta < 1e-7`` (the projection barely moved the row) the result is ``u * |x|``;
a zero original row stays zero; a zero projected row (``q`` undefined, taken as 0, ``theta = pi/2``)
gives ``cos(alpha pi / 2) * x``, shrinking to 0 at ``alpha = 1``; for nearly opposite rows
(``pi - theta < 1e-7``, possible only with an affine eraser) the geodesic is undefined and the
normalised linear interpolation ``(1 - alpha) u + alpha q`` (rescaled to unit norm) is used.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["slerp", "slerp_rows"]

_EPS_ANGLE = 1e-7


def check_alpha(alpha: float) -> float:
    """Return ``alpha`` as a float, or raise ValueError unless it is a number in [0, 1]."""
    try:
        a = float(alpha)
    except (TypeError, ValueError) as e:
        raise ValueError(f"alpha must be a number in [0, 1], got {alpha!r}") from e
    if not (math.isfinite(a) and 0.0 <= a <= 1.0):
        raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
    return a


def slerp(v_orig: np.ndarray, v_proj: np.ndarray, alpha: float) -> np.ndarray:
    """Row-wise SLERP from ``v_orig`` towards ``v_proj``, rescaled to the norm of ``v_orig``.

    Args:
        v_orig: ``(n, d)`` (or ``(d,)``) original embeddings.
        v_proj: same shape: the debiased embeddings.
        alpha: debiasing strength in [0, 1] (0: original, 1: projected direction).

    Returns:
        float64 array of the same shape as the inputs.

    Raises:
        ValueError: if ``alpha`` is outside [0, 1] or the shapes differ.
    """
    a = check_alpha(alpha)
    x = np.asarray(v_orig, dtype=np.float64)
    p = np.asarray(v_proj, dtype=np.float64)
    if x.shape != p.shape:
        raise ValueError(f"v_orig and v_proj must have the same shape, got {x.shape} and {p.shape}")
    if x.ndim not in (1, 2):
        raise ValueError(f"expected (n, d) or (d,) arrays, got shape {x.shape}")
    one_d = x.ndim == 1
    x2 = x.reshape(1, -1) if one_d else x
    p2 = p.reshape(1, -1) if one_d else p
    nx = np.linalg.norm(x2, axis=1, keepdims=True)
    out = slerp_rows(x2, p2.copy(), a, nx)  # a copy: slerp_rows writes into its second argument
    return out.reshape(-1) if one_d else out


def slerp_rows(x2: np.ndarray, p2: np.ndarray, a: float, nx: np.ndarray) -> np.ndarray:
    """:func:`slerp` on checked ``(n, d)`` float64 rows, given ``nx = |x2|`` row norms (``(n, 1)``).

    ``p2`` is used as scratch space: pass an array the caller no longer needs (the projection just
    computed). Each branch does the same arithmetic as before, in as few passes over ``(n, d)`` as
    that allows, so the results are bit-for-bit those of the straightforward formulas.
    """
    if a == 0.0:  # the original (rescaled to its own norm): nothing to interpolate
        return x2.copy()
    npj = np.linalg.norm(p2, axis=1, keepdims=True)
    q = np.divide(p2, np.where(npj > 0, npj, 1.0), out=p2)
    if a == 1.0:  # eq. 9 at alpha = 1 is the projected direction; skip the trigonometry
        return np.multiply(q, nx, out=q)
    u = x2 / np.where(nx > 0, nx, 1.0)
    cos = np.clip(np.einsum("ij,ij->i", u, q), -1.0, 1.0)[:, None]
    theta = np.arccos(cos)
    sin_t = np.sin(theta)

    near_same = theta < _EPS_ANGLE
    near_opposite = (math.pi - theta) < _EPS_ANGLE
    regular = ~(near_same | near_opposite)
    safe_sin = np.where(regular, sin_t, 1.0)
    out = (np.sin((1.0 - a) * theta) * u + np.sin(a * theta) * q) / safe_sin
    out = np.where(near_same, u, out)
    if near_opposite.any():
        lin = (1.0 - a) * u + a * q
        nl = np.linalg.norm(lin, axis=1, keepdims=True)
        out = np.where(near_opposite, lin / np.where(nl > 0, nl, 1.0), out)
    out = out * nx
    return out
