"""Shared fixtures (helpers live in helpers.py, importable as ``helpers``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from egress import no_egress  # noqa: F401  (a fixture for every test: no connection leaves loopback)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def example_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The offline example, built once per session."""
    from fairsets.config import load_recipe
    from fairsets.pipeline.build import build

    out = tmp_path_factory.mktemp("example") / "out"
    build(load_recipe(ROOT / "builders" / "example.toml"), out)
    return out
