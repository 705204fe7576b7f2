"""Fixtures for the debias tests (helpers live in debias_helpers.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # debias_helpers, also under --import-mode=importlib
    sys.path.insert(0, str(_HERE))

from debias_helpers import Planted, make_planted  # noqa: E402

from fairsets.debias import DebiasTransform, fit_transform  # noqa: E402


@pytest.fixture(scope="session")
def planted() -> Planted:
    """Planted group directions orthogonal to the shared concept; the target leans towards some groups."""
    return make_planted(0)


@pytest.fixture(scope="session")
def planted_tilted() -> Planted:
    """Planted directions partly along the shared concept: erasing them costs similarity to t."""
    return make_planted(0, tilt=np.pi / 3, kappa=0.0)


@pytest.fixture(scope="session")
def fitted(planted_tilted: Planted) -> dict[str, DebiasTransform]:
    """Transforms fitted on the tilted data: "inlp", "leace" (alpha 1, target t, compensation on),
    "inlp-half" (alpha 0.5) and the same without a target ("inlp-plain", "leace-plain")."""
    p = planted_tilted
    meta = {"model_id": "synthetic/clip-64", "attribute": "state", "split": "train"}
    return {
        "inlp": fit_transform(p.X_train, p.y_train, method="inlp", target=p.target, meta=meta),
        "leace": fit_transform(p.X_train, p.y_train, method="leace", target=p.target, meta=meta),
        "inlp-half": fit_transform(p.X_train, p.y_train, method="inlp", alpha=0.5, target=p.target),
        "inlp-plain": fit_transform(p.X_train, p.y_train, method="inlp"),
        "leace-plain": fit_transform(p.X_train, p.y_train, method="leace", alpha=0.7),
    }
