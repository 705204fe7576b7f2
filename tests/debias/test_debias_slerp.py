"""SLERP (eq. 8-10)."""

from __future__ import annotations

import numpy as np
import pytest

from fairsets.debias import slerp


def _angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    cos = np.einsum("ij,ij->i", a, b) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    return np.arccos(np.clip(cos, -1, 1))


@pytest.fixture(scope="module")
def pair() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 16)) * rng.uniform(0.5, 3.0, (50, 1))
    w = np.linalg.qr(rng.standard_normal((16, 3)))[0]
    P = np.eye(16) - w @ w.T
    return x, x @ P


def test_alpha_zero_is_the_original(pair: tuple[np.ndarray, np.ndarray]) -> None:
    x, p = pair
    np.testing.assert_allclose(slerp(x, p, 0.0), x, rtol=1e-12, atol=1e-12)


def test_alpha_one_is_the_projection_at_the_original_norm(pair: tuple[np.ndarray, np.ndarray]) -> None:
    x, p = pair
    out = slerp(x, p, 1.0)
    nx = np.linalg.norm(x, axis=1, keepdims=True)
    np.testing.assert_allclose(out, p / np.linalg.norm(p, axis=1, keepdims=True) * nx, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), nx[:, 0], rtol=1e-12)


@pytest.mark.parametrize("alpha", [0.1, 0.25, 0.5, 0.9])
def test_intermediate_angle_is_alpha_theta(pair: tuple[np.ndarray, np.ndarray], alpha: float) -> None:
    x, p = pair
    out = slerp(x, p, alpha)
    theta = _angle(x, p)
    np.testing.assert_allclose(_angle(x, out), alpha * theta, atol=1e-7)
    np.testing.assert_allclose(_angle(out, p), (1 - alpha) * theta, atol=1e-7)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), np.linalg.norm(x, axis=1), rtol=1e-12)
    # On the great circle: out lies in span(x, p).
    for i in range(0, 50, 7):
        basis = np.linalg.qr(np.stack([x[i], p[i]], axis=1))[0]
        np.testing.assert_allclose(basis @ (basis.T @ out[i]), out[i], atol=1e-10)


def test_degenerate_rows_give_no_nan() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 8))
    p = x.copy()
    p[1] = 2.5 * x[1]  # same direction, other length: theta = 0
    p[2] = x[2] + 1e-12  # theta ~ 1e-12
    p[3] = 0.0  # projected to nothing
    x[4] = 0.0  # zero original
    p[5] = -x[5]  # opposite (only an affine eraser can do this)
    for alpha in (0.0, 0.3, 1.0):
        out = slerp(x, p, alpha)
        assert np.isfinite(out).all()
        np.testing.assert_allclose(out[0], x[0], rtol=1e-12)
        np.testing.assert_allclose(out[1], x[1], rtol=1e-12)
        np.testing.assert_allclose(out[2], x[2], rtol=1e-9)
        np.testing.assert_allclose(out[3], np.cos(alpha * np.pi / 2) * x[3], atol=1e-12)
        np.testing.assert_array_equal(out[4], 0.0)
        np.testing.assert_allclose(np.linalg.norm(out[5]), np.linalg.norm(x[5]) * (alpha != 0.5), rtol=1e-9)


def test_one_dimensional_input() -> None:
    x = np.array([1.0, 0.0, 0.0])
    p = np.array([0.0, 2.0, 0.0])
    out = slerp(x, p, 0.5)
    assert out.shape == (3,)
    np.testing.assert_allclose(out, [np.sqrt(0.5), np.sqrt(0.5), 0.0], atol=1e-12)


@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("nan"), "x"])
def test_alpha_out_of_range(alpha: object) -> None:
    with pytest.raises(ValueError, match="alpha"):
        slerp(np.ones((2, 3)), np.ones((2, 3)), alpha)  # type: ignore[arg-type]


def test_shape_mismatch() -> None:
    with pytest.raises(ValueError, match="same shape"):
        slerp(np.ones((2, 3)), np.ones((2, 4)), 0.5)


@pytest.mark.parametrize("alpha", [0.0, 0.4, 1.0])
@pytest.mark.parametrize("shape", [(7,), (5, 7)])
def test_slerp_leaves_its_inputs_alone(alpha, shape):
    """slerp computes in a scratch copy: a caller's float64 arrays (and views of them) are not written."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=shape)
    p = rng.normal(size=shape)
    x0, p0 = x.copy(), p.copy()
    slerp(x, p, alpha)
    assert np.array_equal(x, x0) and np.array_equal(p, p0)


def test_transform_apply_is_the_formula_bit_for_bit():
    """apply's fused passes give exactly slerp(x, x A^T + b, alpha) + beta |x| t, cast to float32."""
    from fairsets.debias.transform import fit_transform

    rng = np.random.default_rng(4)
    X = rng.normal(size=(240, 16)).astype(np.float32)
    y = [f"g{i % 3}" for i in range(len(X))]
    for g in range(3):
        X[g::3] += rng.normal(scale=0.5, size=16).astype(np.float32)
    for alpha in (1.0, 0.5):
        tr = fit_transform(X, y, method="inlp", target=rng.normal(size=16), alpha=alpha)
        x64 = X.astype(np.float64)
        ref = slerp(x64, x64 @ tr.A.T + tr.b, tr.alpha)
        if tr.target is not None and tr.beta != 0.0:
            ref = ref + (tr.beta * np.linalg.norm(x64, axis=1, keepdims=True)) * tr.target[None, :]
        assert tr.apply(X).tobytes() == ref.astype(np.float32).tobytes()
