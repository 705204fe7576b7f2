"""INLP (fairsets.debias.inlp) and the planted-subspace acceptance test for INLP and LEACE."""

from __future__ import annotations

import numpy as np
import pytest
from debias_helpers import Planted, group_similarity_std, make_planted, probe_accuracy

from fairsets.debias import DebiasTransform, InlpResult, fit_inlp, fit_transform

CHANCE = 1 / 6


@pytest.fixture(scope="module")
def original(planted: Planted) -> dict[str, float]:
    p = planted
    return {
        "probe": probe_accuracy(p.X_train, p.y_train, p.X_test, p.y_test),
        "std": group_similarity_std(p.X_test, p.y_test, p.target),
    }


def _debiased(p: Planted, tf: DebiasTransform) -> dict[str, float]:
    tr, te = tf.apply(p.X_train), tf.apply(p.X_test)
    return {
        "probe": probe_accuracy(tr, p.y_train, te, p.y_test),
        "std": group_similarity_std(te, p.y_test, p.target),
    }


def test_planted_data_is_biased(original: dict[str, float]) -> None:
    assert original["probe"] > 0.9
    assert original["std"] > 0.05


@pytest.mark.parametrize(("method", "kwargs"), [("inlp", {"dev_fraction": 0.3}), ("leace", {})])
def test_erasure_removes_planted_groups(
    planted: Planted, original: dict[str, float], method: str, kwargs: dict
) -> None:
    """Probe at chance on held-out rows, and the groups' mean similarity to t equalised."""
    full = fit_transform(
        planted.X_train, planted.y_train, method=method, alpha=1.0, compensate=False, **kwargs
    )
    after = _debiased(planted, full)
    assert after["probe"] <= CHANCE + 0.05, after
    assert after["std"] < 0.3 * original["std"], (original, after)

    half = fit_transform(
        planted.X_train, planted.y_train, method=method, alpha=0.5, compensate=False, **kwargs
    )
    mid = _debiased(planted, half)
    # SLERP at alpha=0.5 shrinks the removed-subspace component (signal and noise alike), so the
    # group similarities move half-way, while a linear probe still reads the groups almost as well.
    assert after["probe"] < mid["probe"] <= original["probe"] + 0.02, (after, mid, original)
    assert after["std"] < mid["std"] < original["std"], (after, mid, original)


def test_inlp_result_structure(planted: Planted) -> None:
    res = fit_inlp(planted.X_train, planted.y_train, dev_fraction=0.3)
    assert isinstance(res, InlpResult)
    d = planted.X_train.shape[1]
    P, Q = res.projection, res.directions
    assert P.shape == (d, d) and P.dtype == np.float64
    assert Q.shape[1] == d and Q.dtype == np.float64
    assert res.iterations >= 1 and len(res.accuracies) == res.iterations
    assert res.accuracies[0] > 0.9  # the first classifier sees the planted groups
    assert res.final_accuracy <= res.chance + 0.02
    assert res.chance == pytest.approx(CHANCE, abs=0.02)
    # Orthonormal removed directions, P = I - Q^T Q, a symmetric idempotent projection of rank d - r.
    np.testing.assert_allclose(Q @ Q.T, np.eye(Q.shape[0]), atol=1e-10)
    np.testing.assert_allclose(P, np.eye(d) - Q.T @ Q, atol=1e-12)
    np.testing.assert_allclose(P, P.T, atol=1e-12)
    np.testing.assert_allclose(P @ P, P, atol=1e-10)
    assert round(float(np.trace(P))) == d - Q.shape[0]
    # Multi-class: at most C - 1 = 5 directions per round (centred weight rows).
    assert Q.shape[0] <= 5 * res.iterations
    # The planted subspace is (almost) inside the removed one.
    assert np.linalg.norm(planted.subspace @ P, axis=1).max() < 0.35


def test_inlp_is_deterministic(planted: Planted) -> None:
    a = fit_inlp(planted.X_train, planted.y_train, seed=3)
    b = fit_inlp(planted.X_train, planted.y_train, seed=3)
    assert a.projection.tobytes() == b.projection.tobytes()
    assert a.accuracies == b.accuracies


def test_inlp_without_refit_keeps_the_paper_loop(planted: Planted) -> None:
    res = fit_inlp(planted.X_train, planted.y_train, dev_fraction=0.3, refit=False)
    ref = fit_inlp(planted.X_train, planted.y_train, dev_fraction=0.3)
    assert res.iterations == ref.iterations and res.accuracies == ref.accuracies
    assert not np.allclose(res.projection, ref.projection)


def test_binary() -> None:
    p = make_planted(1, groups=2, per_group=200)
    assert probe_accuracy(p.X_train, p.y_train, p.X_test, p.y_test) > 0.9
    res = fit_inlp(p.X_train, p.y_train)
    assert res.iterations >= 1
    assert res.chance == pytest.approx(0.5, abs=0.05)
    for method in ("inlp", "leace"):
        tf = fit_transform(p.X_train, p.y_train, method=method, target=p.target)
        acc = probe_accuracy(tf.apply(p.X_train), p.y_train, tf.apply(p.X_test), p.y_test)
        assert acc <= 0.5 + 0.08, (method, acc)
        assert tf.meta["groups"] == ["state-00", "state-01"]


def test_max_iter_and_rank_limits(planted: Planted) -> None:
    none = fit_inlp(planted.X_train, planted.y_train, max_iter=0)
    assert none.iterations == 0 and none.directions.shape == (0, 64)
    np.testing.assert_array_equal(none.projection, np.eye(64))
    assert none.final_accuracy > 0.9
    one = fit_inlp(planted.X_train, planted.y_train, max_iter=1)
    assert one.iterations == 1 and one.directions.shape[0] == 5
    # Random labels with d=3: stops at chance or when the whole space is removed, never beyond d.
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 3))
    y = (X[:, 0] > 0).astype(int) + 2 * (X[:, 1] > 0) + 4 * (X[:, 2] > 0)  # 8 classes, nonlinear
    res = fit_inlp(X, y, tol=0.0)
    assert res.directions.shape[0] <= 3


def test_small_and_unstratifiable_data() -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((9, 5))
    y = ["a"] * 4 + ["b"] * 4 + ["c"]  # "c" has a single sample: no stratified split
    res = fit_inlp(X, y)
    assert np.isfinite(res.final_accuracy)
    with pytest.warns(RuntimeWarning, match="too few"):
        tiny = fit_inlp(rng.standard_normal((2, 4)), ["a", "b"])
    assert tiny.projection.shape == (4, 4)


def test_progress_bar_runs(planted: Planted) -> None:
    res = fit_inlp(planted.X_train, planted.y_train, progress=True, max_iter=2)
    assert res.iterations <= 2


@pytest.mark.parametrize(
    ("X", "y", "match"),
    [
        (np.zeros((4, 3)), [0, 0, 0, 0], "at least 2 classes"),
        (np.zeros((4, 3)), [0, 1, 0], "4 rows but y has 3"),
        (np.zeros(4), [0, 1, 0, 1], "2-D"),
        (np.array([[0.0, np.nan], [1.0, 2.0]]), [0, 1], "non-finite"),
        (np.array([[0.0, np.inf], [1.0, 2.0]]), [0, 1], "non-finite"),
        (np.array([["a", "b"], ["c", "d"]]), [0, 1], "real numbers"),
    ],
)
def test_input_validation(X: np.ndarray, y: list, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        fit_inlp(X, y)


@pytest.mark.parametrize(
    "kwargs", [{"max_iter": -1}, {"dev_fraction": 0.0}, {"dev_fraction": 1.0}, {"tol": -0.1}, {"C": 0.0}]
)
def test_parameter_validation(kwargs: dict) -> None:
    X = np.random.default_rng(0).standard_normal((20, 3))
    with pytest.raises(ValueError):
        fit_inlp(X, [0, 1] * 10, **kwargs)
