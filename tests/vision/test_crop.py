"""Tests of the ``crop`` step and its border policies (boxes computed by hand)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from fairsets.core.data import Sample
from fairsets.core.step import build_step
from fairsets.vision.crop import crop_box, crop_pixels


@pytest.mark.parametrize(
    ("box", "size", "border", "expected"),
    [
        # pad = round(0.2 * 50) = 10 px on every side
        ((100, 100, 50, 40), (400, 300), "clamp", (90, 90, 160, 150)),
        ((5, 5, 50, 50), (400, 300), "clamp", (0, 0, 65, 65)),  # clipped at the top-left corner
        ((360, 250, 50, 40), (400, 300), "clamp", (350, 240, 400, 300)),  # clipped at bottom-right
        # square: side 50 + 2*10 = 70 around the centre (125, 120)
        ((100, 100, 50, 40), (400, 300), "square", (90, 85, 160, 155)),
        ((5, 10, 50, 30), (400, 300), "square", (0, 0, 70, 70)),  # shifted right/down, not shrunk
        ((360, 250, 50, 40), (400, 300), "square", (330, 230, 400, 300)),  # shifted left/up
        ((5, 5, 50, 50), (60, 300), "square", (0, 0, 60, 70)),  # image narrower than 70: x clamped
        # constant: the square box never moves
        ((5, 10, 50, 30), (400, 300), "constant", (-5, -10, 65, 60)),
        ((100, 100, 50, 40), (400, 300), "constant", (90, 85, 160, 155)),
        # pad rounds: 0.2 * 33 = 6.6 -> 7
        ((10, 10, 33, 20), (400, 300), "clamp", (3, 3, 50, 37)),
    ],
)
def test_crop_box(box, size, border, expected):
    assert crop_box(box, *size, pad=0.2, border=border) == expected


def test_crop_pixels_constant_fills_black():
    img = np.full((300, 400, 3), 200, np.uint8)
    out = crop_pixels(img, (-5, -10, 65, 60))
    assert out.shape == (70, 70, 3)
    assert (out[:10] == 0).all() and (out[:, :5] == 0).all()
    assert (out[10:, 5:] == 200).all()


def _crop(image, box, ctx, **params) -> Sample:
    s = Sample(key="k", image=image, annotations={"face_box": list(box)})
    return build_step("crop", params).process(s, ctx)


def test_crop_outputs_512_jpeg(astronaut, ctx):
    s = _crop(astronaut, (179, 57, 93, 121), ctx)
    assert s.ok and s.image.shape == (512, 512, 3) and s.image.dtype == np.uint8
    assert s.out[:2] == b"\xff\xd8"
    decoded = cv2.imdecode(np.frombuffer(s.out, np.uint8), cv2.IMREAD_COLOR)
    assert decoded.shape == (512, 512, 3)
    # the JPEG holds the RGB crop (BGR on disk, as cv2 expects)
    assert np.abs(decoded[..., ::-1].astype(int) - s.image).mean() < 3
    p = round(0.2 * 121)
    assert s.annotations["crop_box"] == [179 - p, 57 - p, 179 + 93 + p, 57 + 121 + p]
    assert s.annotations["out_size"] == [512, 512] and s.annotations["out_bytes"] == len(s.out)


def test_crop_content_matches_lanczos(ctx):
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, (300, 400, 3), dtype=np.uint8)
    s = _crop(img, (100, 100, 50, 40), ctx, size=64)
    expected = cv2.resize(img[90:150, 90:160], (64, 64), interpolation=cv2.INTER_LANCZOS4)
    assert np.array_equal(s.image, expected)


def test_crop_antialias_for_large_crops(ctx):
    img = np.zeros((3000, 3000, 3), np.uint8)
    img[:, ::2] = 255  # 1-px stripes: aliasing would show up as strong patterns
    s = _crop(img, (500, 500, 2000, 2000), ctx, size=128)
    assert s.image.shape == (128, 128, 3)
    assert s.image.std() < 10  # averaged to grey, no moiré
    raw = _crop(img, (500, 500, 2000, 2000), ctx, size=128, antialias=False)
    assert raw.image.std() > s.image.std()


def test_crop_constant_border(ctx):
    img = np.full((300, 400, 3), 200, np.uint8)
    s = _crop(img, (5, 10, 50, 30), ctx, border="constant", size=70)
    assert s.annotations["crop_box"] == [-5, -10, 65, 60]
    assert s.image[2, 35].max() < 30 and s.image[40, 40].min() > 170


def test_crop_bad_border():
    with pytest.raises(ValueError, match="border"):
        build_step("crop", {"border": "mirror"})


def test_crop_needs_face_box(astronaut, ctx):
    with pytest.raises(ValueError, match="face_box"):
        build_step("crop", {}).process(Sample(key="k", image=astronaut), ctx)
