"""Tests of the ``grayscale``, ``blur`` and ``skin`` filters."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from fairsets.core.data import Sample, Status
from fairsets.core.step import build_step
from fairsets.vision.quality import delta_color, laplacian_variance, skin_ratio


def _sample(image: np.ndarray, **annotations) -> Sample:
    return Sample(key="k", image=np.ascontiguousarray(image), annotations=dict(annotations))


def test_delta_color_matches_formula():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)
    r, g, b = (img[..., i].astype(np.int32) for i in range(3))
    expected = (np.abs(b - g) + np.abs(g - r) + np.abs(r - b)).mean() / 3
    assert delta_color(img) == pytest.approx(expected, rel=1e-9)


def test_grayscale_rejects_camera(camera_rgb, ctx):
    s = build_step("grayscale", {}).process(_sample(camera_rgb), ctx)
    assert s.status is Status.REJECTED and s.step == "grayscale"
    assert s.reason == "grayscale: delta_color 0.0 < 5"
    assert s.annotations["delta_color"] == 0.0


def test_grayscale_rejects_faintly_tinted(camera_rgb, ctx):
    tinted = camera_rgb.copy()
    tinted[..., 0] = np.clip(tinted[..., 0].astype(int) + 3, 0, 255)  # sepia-ish: just below 5
    s = build_step("grayscale", {}).process(_sample(tinted), ctx)
    assert s.status is Status.REJECTED and s.reason.startswith("grayscale: delta_color ")


def test_grayscale_keeps_colour_photo(astronaut, ctx):
    s = build_step("grayscale", {}).process(_sample(astronaut), ctx)
    assert s.ok and s.annotations["delta_color"] > 5


def test_blur_rejects_blurred_photo(astronaut, ctx):
    blurred = cv2.GaussianBlur(astronaut, (0, 0), 3)
    s = build_step("blur", {}).process(_sample(blurred), ctx)
    assert s.status is Status.REJECTED and s.step == "blur"
    assert s.reason.startswith("blurry: laplacian variance ") and s.reason.endswith(" < 30")
    assert s.annotations["laplacian_var"] < 30


def test_blur_keeps_sharp_photos(astronaut, grace_hopper, ctx):
    for img in (astronaut, grace_hopper):
        s = build_step("blur", {}).process(_sample(img), ctx)
        assert s.ok and s.annotations["laplacian_var"] > 300


def test_blur_measured_at_max_side(astronaut):
    big = cv2.resize(astronaut, (2048, 2048), interpolation=cv2.INTER_CUBIC)
    gray = cv2.cvtColor(big, cv2.COLOR_RGB2GRAY)
    direct = laplacian_variance(cv2.resize(gray, (512, 512), interpolation=cv2.INTER_AREA), max_side=10_000)
    assert laplacian_variance(big, max_side=512) == pytest.approx(direct)
    # a pixel-duplicated (nearest) 4x upscale measures like the original
    nearest = cv2.resize(astronaut, (2048, 2048), interpolation=cv2.INTER_NEAREST)
    assert laplacian_variance(nearest) == pytest.approx(laplacian_variance(astronaut), rel=0.01)


def test_skin_keeps_real_face(astronaut, ctx):
    s = build_step("skin", {}).process(_sample(astronaut, face_box=[179, 57, 93, 121]), ctx)
    assert s.ok and s.annotations["skin_ratio"] > 0.5


def test_skin_rejects_recoloured_face(astronaut, ctx):
    blue = np.ascontiguousarray(astronaut[..., ::-1])  # RGB -> BGR: skin turns blue
    s = build_step("skin", {}).process(_sample(blue, face_box=[179, 57, 93, 121]), ctx)
    assert s.status is Status.REJECTED and s.step == "skin"
    assert s.reason == "skin ratio 0.00 <= 0.15"


def _skin_patch(n_skin: int) -> np.ndarray:
    """A 10×20 RGB patch (200 px) with exactly ``n_skin`` skin-coloured pixels, the rest blue."""
    hsv = np.zeros((200, 3), np.uint8)
    hsv[:] = (110, 200, 200)  # blue
    hsv[:n_skin] = (10, 120, 200)  # skin
    return cv2.cvtColor(hsv.reshape(10, 20, 3), cv2.COLOR_HSV2RGB)


def test_skin_threshold_is_strict(ctx):
    assert skin_ratio(_skin_patch(30)) == pytest.approx(0.15)
    at = build_step("skin", {}).process(_sample(_skin_patch(30), face_box=[0, 0, 20, 10]), ctx)
    assert at.status is Status.REJECTED and at.reason == "skin ratio 0.15 <= 0.15"
    above = build_step("skin", {}).process(_sample(_skin_patch(31), face_box=[0, 0, 20, 10]), ctx)
    assert above.ok and above.annotations["skin_ratio"] == 0.155


def test_skin_bounds_inclusive():
    edges = np.array([[[0, 40, 60], [25, 255, 255], [26, 200, 200], [10, 39, 200], [10, 200, 59]]], np.uint8)
    rgb = cv2.cvtColor(edges, cv2.COLOR_HSV2RGB)
    hsv_back = cv2.cvtColor(rgb, cv2.COLOR_RGB2HSV)
    inside = [bool(0 <= h <= 25 and s >= 40 and v >= 60) for h, s, v in hsv_back[0]]
    assert skin_ratio(rgb) == pytest.approx(sum(inside) / 5)


def test_skin_needs_face_box(astronaut, ctx):
    with pytest.raises(ValueError, match="face_box"):
        build_step("skin", {}).process(_sample(astronaut), ctx)


def test_skin_params_validated():
    with pytest.raises(ValueError):
        build_step("skin", {"lower": [30, 0, 0], "upper": [20, 255, 255]})
