"""Rows32: the float32, row-by-row apply of a transform, against the float64 reference."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from fairsets.debias import DebiasTransform, fit_transform
from fairsets.debias.rows32 import Rows32

D = 48


def _rows(seed: int = 0, n: int = 600) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, D)) * rng.uniform(0.1, 20.0, (n, 1)) + rng.standard_normal(D)
    return X.astype(np.float32)


def _transforms() -> list[DebiasTransform]:
    """Fitted INLP and LEACE (affine: b != 0) transforms, at alpha 0, 0.35 and 1, with a target."""
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(3), 120)
    planted = np.linalg.qr(rng.standard_normal((D, 3)))[0].T * 2.5
    X = rng.standard_normal((len(y), D)) + planted[y] + 1.0
    t = rng.standard_normal(D)
    out = []
    for method, kw in (("inlp", {"max_iter": 4, "seed": 0}), ("leace", {})):
        pytest.importorskip("sklearn" if method == "inlp" else "concept_erasure")
        base = fit_transform(X, y.astype(str), method=method, alpha=1.0, target=t, **kw)
        assert base.beta != 0.0
        for alpha in (0.0, 0.35, 1.0):
            out.append(DebiasTransform(base.method, base.A, base.b, alpha, base.target, base.beta))
    return out


def _edge_rows(tr: DebiasTransform) -> np.ndarray:
    """A zero row, a row the eraser keeps whole (theta ~ 0 for INLP), one it removes but for 5%."""
    eig, vec = np.linalg.eigh((tr.A + tr.A.T) / 2)
    kept, gone = vec[:, np.argmax(eig)], vec[:, np.argmin(eig)]
    return np.stack([np.zeros(D), 3.0 * kept, 2.0 * gone + 0.1 * kept]).astype(np.float32)


def _max_rel_error(got: np.ndarray, ref: np.ndarray, x: np.ndarray) -> float:
    norms = np.linalg.norm(x.astype(np.float64), axis=1)
    err = np.linalg.norm(got.astype(np.float64) - ref.astype(np.float64), axis=1)
    return float(np.max(err / np.where(norms > 0, norms, 1.0)))


@pytest.mark.parametrize("k", range(6))
def test_within_the_documented_tolerance_of_apply(k: int) -> None:
    tr = _transforms()[k]
    X = np.concatenate([_rows(k), _edge_rows(tr)])
    got = Rows32(tr)(X)
    assert got.dtype == np.float32 and got.shape == X.shape
    assert _max_rel_error(got, tr.apply(X), X) <= 1e-5
    assert not np.any(got[-3])  # a zero row stays zero (no compensation: beta * |x| = 0)


def test_a_row_erased_whole_gives_finite_rows_no_longer_than_it() -> None:
    # |p| ~ rounding: its direction is noise in float32 and float64 alike (outside the tolerance)
    tr = _transforms()[2]  # INLP, alpha 1
    eig, vec = np.linalg.eigh(tr.A)
    x = (5.0 * vec[:, np.argmin(eig)]).astype(np.float32)[None, :]
    got = Rows32(DebiasTransform(tr.method, tr.A, tr.b, 1.0))(x)
    assert np.isfinite(got).all() and np.linalg.norm(got) <= 5.0 * (1 + 1e-6)


def test_alpha_zero_keeps_the_rows_plus_the_compensation() -> None:
    tr = _transforms()[0]
    X = _rows(1)
    got = Rows32(tr)(X)
    want = X.astype(np.float64) + tr.beta * np.linalg.norm(X.astype(np.float64), axis=1)[:, None] * tr.target
    assert np.allclose(got, want, rtol=0, atol=1e-5 * np.abs(X).max())


def test_nearly_opposite_rows_take_the_normalised_linear_path() -> None:
    # A = -I: the erased row points the other way (theta = pi), where SLERP has no geodesic
    tr = DebiasTransform("inlp", -np.eye(D), np.zeros(D), alpha=0.25)
    X = _rows(2, 50)
    got = Rows32(tr)(X)
    assert _max_rel_error(got, tr.apply(X), X) <= 1e-5
    assert np.allclose(got, X, rtol=1e-5)  # ((1 - a) u - a u) / |1 - 2a| * |x| = x


def test_rows_do_not_depend_on_their_neighbours_or_threads() -> None:
    tr = _transforms()[4]  # LEACE, alpha 0.35: every branch of the weights
    X = _rows(5, 700)
    whole = Rows32(tr)(X)
    r = Rows32(tr)
    for m in (1, 2, 3, 5, 15, 16, 17, 64, 129):
        parts = [r(X[i : i + m]) for i in range(0, len(X), m)]
        assert np.concatenate(parts).tobytes() == whole.tobytes(), m
    with ThreadPoolExecutor(3) as pool:
        out = np.empty_like(X)
        assert r(X, out, pool, 3) is out
        assert out.tobytes() == whole.tobytes()
