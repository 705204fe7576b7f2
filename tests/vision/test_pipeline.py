"""End-to-end: decode → grayscale → blur → detect_face (res10) → skin → crop, plus packaging checks."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from fairsets.core.data import Status
from fairsets.core.registry import DETECTORS, STEPS
from fairsets.core.step import MissingDependency, build_step

CHAIN = ["decode", "grayscale", "blur", "detect_face", "skin", "crop"]


@pytest.mark.parametrize("photo", ["astronaut", "grace_hopper"])
def test_portraits_pass_the_chain(photo, request, encode, run_steps, ctx):
    image = request.getfixturevalue(photo)
    s = run_steps(encode(image, "JPEG", quality=92), CHAIN, ctx)
    assert s.status is Status.OK, (s.step, s.reason)
    assert s.image.shape == (512, 512, 3)
    out = cv2.imdecode(np.frombuffer(s.out, np.uint8), cv2.IMREAD_UNCHANGED)
    assert out.shape == (512, 512, 3)
    a = s.annotations
    for key in (
        "width",
        "height",
        "format",
        "mode",
        "pixel_sha256",
        "phash",
        "delta_color",
        "laplacian_var",
        "face_box",
        "face_confidence",
        "faces_detected",
        "skin_ratio",
        "crop_box",
        "out_size",
    ):
        assert key in a, key
    assert s.meta == {}


def test_chain_rejections(astronaut, camera_rgb, coffee, encode, run_steps, ctx):
    cases = {
        "grayscale": camera_rgb,
        "blur": cv2.GaussianBlur(astronaut, (0, 0), 4),
        "detect_face": coffee,
        "skin": np.ascontiguousarray(astronaut[..., ::-1]),  # face still found, but blue
    }
    for step, image in cases.items():
        s = run_steps(encode(image, "PNG"), CHAIN, ctx)
        assert (s.status, s.step) == (Status.REJECTED, step), (step, s.reason)
        assert s.image is None and s.out is None


def test_registered():
    assert {"decode", "grayscale", "blur", "detect_face", "skin", "crop"} <= set(STEPS.names())
    assert {"res10", "blazeface", "blazeface_full"} <= set(DETECTORS.names())


def test_import_is_lazy():
    src = Path(__file__).resolve().parents[2] / "src"
    code = (
        f"import sys; sys.path.insert(0, {str(src)!r}); import fairsets.vision; "
        "heavy = [m for m in ('cv2', 'PIL', 'mediapipe', 'albumentations') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_cv2_names_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "cv2" else real(name, *a)
    )
    for name in CHAIN:
        with pytest.raises(MissingDependency, match=r"pip install 'fairsets\[vision\]'"):
            build_step(name, {})
