"""Fixtures for the publish tests: an offline environment and a small published layout."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Offline caches, set before datasets / huggingface_hub / mlcroissant are imported (they read
# these variables at import time).
_CACHE = Path(tempfile.mkdtemp(prefix="fairsets-publish-tests-"))
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HOME"] = str(_CACHE / "hf")
os.environ["HF_DATASETS_CACHE"] = str(_CACHE / "hf" / "datasets")
os.environ["CROISSANT_CACHE"] = str(_CACHE / "croissant")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # publish_fixtures, also under --import-mode=importlib
    sys.path.insert(0, str(_HERE))
try:  # a checkout without `pip install -e .`
    import fairsets.core.data  # noqa: F401
except ModuleNotFoundError:  # pragma: no cover
    sys.path.insert(0, str(_HERE.parents[1] / "src"))

import pytest  # noqa: E402
from publish_fixtures import build_layout  # noqa: E402


@pytest.fixture(scope="session")
def hf_cache() -> Path:
    """The temporary HF cache directory used by every test of this package."""
    return _CACHE / "hf" / "datasets"


@pytest.fixture(scope="session")
def make_layout() -> Callable[[Path], dict[str, Any]]:
    """The layout builder, for tests that build their own copy (determinism, corruption)."""
    return build_layout


@pytest.fixture(scope="session")
def layout(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A shared, read-only published layout: ``(out_dir, info)``."""
    out = tmp_path_factory.mktemp("layout") / "OUT"
    return out, build_layout(out)
