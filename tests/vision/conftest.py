"""Fixtures for the vision tests: real photographs that ship inside installed packages."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path

import numpy as np
import pytest

if importlib.util.find_spec("fairsets") is None:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

pytest.importorskip("cv2")
pytest.importorskip("skimage")

import fairsets.vision  # noqa: F401  (registers the steps and detectors)


def _encode(image: np.ndarray, fmt: str = "JPEG", **kwargs) -> bytes:
    """Encode an array with PIL (``fmt`` as PIL names it)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(image).save(buf, fmt, **kwargs)
    return buf.getvalue()


@pytest.fixture(scope="session")
def astronaut() -> np.ndarray:
    from skimage import data

    return np.ascontiguousarray(data.astronaut())


@pytest.fixture(scope="session")
def grace_hopper() -> np.ndarray:
    from matplotlib import cbook
    from PIL import Image

    with cbook.get_sample_data("grace_hopper.jpg") as f:
        return np.asarray(Image.open(f).convert("RGB")).copy()


@pytest.fixture(scope="session")
def coffee() -> np.ndarray:
    from skimage import data

    return np.ascontiguousarray(data.coffee())


@pytest.fixture(scope="session")
def camera_rgb() -> np.ndarray:
    from skimage import data

    return np.ascontiguousarray(np.repeat(data.camera()[..., None], 3, axis=2))


@pytest.fixture(scope="session")
def astronaut_jpeg(astronaut: np.ndarray) -> bytes:
    return _encode(astronaut, "JPEG", quality=92)


@pytest.fixture()
def ctx():
    from fairsets.core.step import StepContext

    return StepContext()


def _run_steps(data: bytes, names: list[str], ctx, params: dict[str, dict] | None = None):
    """Run the named steps on a sample made of ``data``; return the sample."""
    from fairsets.core.data import Sample
    from fairsets.core.step import build_step

    params = params or {}
    sample = Sample(key="k", data=data)
    for name in names:
        if not sample.ok:
            break
        sample = build_step(name, params.get(name, {})).process(sample, ctx)
    return sample


@pytest.fixture(scope="session")
def encode():
    """``encode(array, fmt="JPEG", **save_kwargs) -> bytes`` with PIL."""
    return _encode


@pytest.fixture(scope="session")
def run_steps():
    """``run_steps(data, step_names, ctx, params=None) -> Sample``."""
    return _run_steps
