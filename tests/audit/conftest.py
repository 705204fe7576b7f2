"""Fixtures for the audit tests: a random-weight CLIP built once per session (no download)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # vlm_fixtures
    sys.path.insert(0, str(_HERE))


@pytest.fixture(scope="session")
def clip_vlm():
    """open_clip ViT-B-32 with random weights (``--pretrained none``): real code, no weights needed."""
    import importlib.util

    if importlib.util.find_spec("open_clip") is None:
        pytest.skip("open_clip is not installed (pip install 'fairsets[vlm]')")
    from fairsets.models import load_vlm

    return load_vlm("ViT-B-32", "none")
