"""Shared fixtures (helpers live in helpers.py, importable as ``helpers``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from egress import no_egress  # noqa: F401  (a fixture for every test: no connection leaves loopback)
from helpers import built_once

#: The order in which pytest-xdist hands out the test modules (longest first).
pytest_plugins = ("xdist_order",)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def example_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The offline example, built once per test run (each xdist worker gets a copy)."""

    def make(base: Path) -> None:
        from fairsets.pipeline.build import build
        from fairsets.pipeline.config import load_recipe

        build(load_recipe(ROOT / "builders" / "example.toml"), base / "out")

    return built_once(tmp_path_factory, "example", make) / "out"


@pytest.fixture(scope="session")
def two_state_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example's candidates with one person per state (Eileen Collins in Kerala, Grace Hopper
    in Assam), built once per test run (each xdist worker gets a copy): two groups in ``train``
    for the audit and debiasing tests.

    With one identity per cell the split is forced to ``train`` (no test split); the example itself
    keeps both people in one cell so that its identity-disjoint split has a ``test`` part.
    """
    return built_once(tmp_path_factory, "two-state", _build_two_state) / "out"


def _build_two_state(base: Path) -> None:
    import csv
    import importlib.util

    from fairsets.pipeline.build import build
    from fairsets.pipeline.config import parse_recipe, tomllib

    spec = importlib.util.spec_from_file_location("fairsets_example_hook", ROOT / "builders" / "example.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    listing = base / "candidates.csv"
    hook.write_candidates(listing)
    with listing.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        if row["identity"] == "grace-hopper":
            row["state"] = "Assam"
    with listing.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    data = tomllib.loads((ROOT / "builders" / "example.toml").read_text(encoding="utf-8"))
    data["source"] = {"type": "local", "path": listing.name}
    build(parse_recipe(data, base_dir=base), base / "out")
