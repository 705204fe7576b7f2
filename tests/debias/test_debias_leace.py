"""LEACE as an affine (A, b) map equals concept-erasure's eraser."""

from __future__ import annotations

import numpy as np
import pytest
from debias_helpers import Planted

from fairsets.debias import fit_leace


def _reference(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    import torch
    from concept_erasure import LeaceEraser, LeaceFitter

    classes, codes = np.unique(y, return_inverse=True)
    z = np.eye(classes.shape[0])[codes]
    eraser = LeaceFitter.fit(torch.from_numpy(X), torch.from_numpy(z)).eraser
    assert isinstance(eraser, LeaceEraser)
    return eraser(torch.from_numpy(X)).numpy()


@pytest.mark.parametrize("binary", [False, True])
def test_affine_form_equals_eraser(planted: Planted, binary: bool) -> None:
    X, y = planted.X_train, planted.y_train
    if binary:
        keep = np.isin(y, ["state-00", "state-03"])
        X, y = X[keep], y[keep]
    A, b = fit_leace(X, y)
    d = X.shape[1]
    assert A.shape == (d, d) and b.shape == (d,)
    assert A.dtype == np.float64 and b.dtype == np.float64
    expected = _reference(X.astype(np.float64), y)
    np.testing.assert_allclose(X @ A.T + b, expected, rtol=1e-9, atol=1e-10)
    # Also on rows it was not fitted on.
    np.testing.assert_allclose(planted.X_test @ A.T + b, _apply_reference(X, y, planted.X_test), atol=1e-10)


def _apply_reference(X: np.ndarray, y: np.ndarray, X_new: np.ndarray) -> np.ndarray:
    import torch
    from concept_erasure import LeaceFitter

    classes, codes = np.unique(y, return_inverse=True)
    eraser = LeaceFitter.fit(torch.from_numpy(X), torch.from_numpy(np.eye(classes.shape[0])[codes])).eraser
    return eraser(torch.from_numpy(X_new)).numpy()


def test_class_means_equal_after_erasure(planted: Planted) -> None:
    A, b = fit_leace(planted.X_train, planted.y_train)
    out = planted.X_train @ A.T + b
    means = np.stack([out[planted.y_train == g].mean(0) for g in np.unique(planted.y_train)])
    np.testing.assert_allclose(means, np.broadcast_to(out.mean(0), means.shape), atol=1e-8)


def test_validation() -> None:
    with pytest.raises(ValueError, match="at least 2 classes"):
        fit_leace(np.ones((3, 2)), ["a", "a", "a"])
    with pytest.raises(ValueError, match="non-finite"):
        fit_leace(np.array([[1.0, np.nan], [0.0, 1.0]]), ["a", "b"])
