"""The views an annotator is shown: red-box frames to the pixel, crops, JPEG and data URLs."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image

from fairsets.annotate.chat.views import (
    DEFAULT_CAPTION_PROMPT,
    crop_view,
    data_url,
    encode_jpeg,
    image_part,
    line_width,
    redbox,
    render,
)
from fairsets.annotate.images import crop

RED = np.array([255, 0, 0], dtype=np.uint8)


def _image(h: int, w: int, value: int = 128) -> np.ndarray:
    return np.full((h, w, 3), value, dtype=np.uint8)


def _red_mask(img: np.ndarray) -> np.ndarray:
    return np.all(img == RED, axis=2)


def _ring(h: int, w: int, outer: tuple[int, int, int, int], lw: int) -> np.ndarray:
    """The expected mask: the ring of ``lw`` px just inside ``outer`` = (x0, y0, x1, y1)."""
    x0, y0, x1, y1 = outer
    mask = np.zeros((h, w), dtype=bool)
    mask[y0:y1, x0:x1] = True
    mask[y0 + lw : y1 - lw, x0 + lw : x1 - lw] = False
    return mask


def test_frame_lies_just_outside_the_box_to_the_pixel() -> None:
    img = _image(40, 50)
    out = redbox(img, (10, 12, 30, 25))
    np.testing.assert_array_equal(_red_mask(out), _ring(40, 50, (7, 9, 33, 28), 3))
    # the box's own pixels and everything off the frame are untouched
    np.testing.assert_array_equal(out[12:25, 10:30], img[12:25, 10:30])
    assert (out[~_red_mask(out)] == 128).all()


def test_fractional_box_is_rounded_outwards_like_crop() -> None:
    img = _image(40, 50)
    out = redbox(img, (10.2, 12.7, 29.1, 24.01))
    np.testing.assert_array_equal(_red_mask(out), _ring(40, 50, (7, 9, 33, 28), 3))


def test_input_is_never_modified_and_a_new_array_is_returned() -> None:
    img = _image(20, 20)
    before = img.copy()
    out = redbox(img, (5, 5, 15, 15))
    np.testing.assert_array_equal(img, before)
    assert not np.shares_memory(out, img)


def test_box_at_the_image_edge_keeps_a_full_width_frame_inside_the_image() -> None:
    img = _image(30, 40)
    out = redbox(img, (0, 0, 10, 12))
    # grown by 3 and clamped: (0, 0, 13, 15); the ring of 3 px lies inside it
    np.testing.assert_array_equal(_red_mask(out), _ring(30, 40, (0, 0, 13, 15), 3))
    # the left and top lines run along the border over the box's outermost pixels
    assert _red_mask(out)[0:3, 0:13].all() and _red_mask(out)[0:15, 0:3].all()
    # a box reaching past the right/bottom edge is clamped first
    out = redbox(img, (30, 20, 55, 45))
    np.testing.assert_array_equal(_red_mask(out), _ring(30, 40, (27, 17, 40, 30), 3))


def test_whole_image_box_frames_the_border() -> None:
    out = redbox(_image(10, 12), (0, 0, 12, 10))
    np.testing.assert_array_equal(_red_mask(out), _ring(10, 12, (0, 0, 12, 10), 3))


def test_tiny_image_is_filled_rather_than_failing() -> None:
    out = redbox(_image(4, 4), (1, 1, 3, 3))
    assert _red_mask(out).all()


def test_line_width_scales_with_the_longest_side() -> None:
    assert line_width((600, 1000)) == 3
    assert line_width((100, 80)) == 3
    assert line_width((1500, 3000)) == 9
    assert line_width((2000, 1000), width=2) == 4
    assert line_width((1166, 100)) == 3  # 3.498 rounds to 3
    assert line_width((1167, 100)) == 4  # 3.501 rounds to 4
    with pytest.raises(ValueError, match="at least 1"):
        line_width((10, 10), width=0)


def test_large_image_gets_a_wider_frame() -> None:
    img = _image(1000, 3000)
    out = redbox(img, (1000, 400, 1200, 700))
    np.testing.assert_array_equal(_red_mask(out), _ring(1000, 3000, (991, 391, 1209, 709), 9))


def test_grayscale_is_converted_and_other_layouts_are_refused() -> None:
    gray = np.full((20, 20), 77, dtype=np.uint8)
    out = redbox(gray, (5, 5, 15, 15))
    assert out.shape == (20, 20, 3)
    np.testing.assert_array_equal(_red_mask(out), _ring(20, 20, (2, 2, 18, 18), 3))
    assert (out[~_red_mask(out)] == 77).all()
    assert redbox(gray[:, :, None], (5, 5, 15, 15)).shape == (20, 20, 3)
    with pytest.raises(ValueError, match="RGB or"):
        redbox(np.zeros((20, 20, 4), dtype=np.uint8), (5, 5, 15, 15))
    with pytest.raises(ValueError, match="uint8"):
        redbox(np.zeros((20, 20, 3), dtype=np.float32), (5, 5, 15, 15))
    with pytest.raises(ValueError, match="empty"):
        redbox(np.zeros((0, 20, 3), dtype=np.uint8), (5, 5, 15, 15))


@pytest.mark.parametrize(
    ("box", "match"),
    [
        ((50, 50, 60, 60), "outside"),
        ((10, 10, 5, 15), "outside"),
        ((1, 2, 3), "four numbers"),
        (("a", 1, 2, 3), "four numbers"),
        ((float("nan"), 1, 5, 5), "finite"),
        ((0, 0, float("inf"), 5), "finite"),
    ],
)
def test_bad_boxes_are_clear_errors(box: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        redbox(_image(20, 20), box)
    with pytest.raises(ValueError, match=match):
        crop_view(_image(20, 20), box)


def test_crop_view_is_the_crop_and_pads_by_a_share_of_the_box() -> None:
    img = np.arange(30 * 40 * 3, dtype=np.uint32).reshape(30, 40, 3).astype(np.uint8)
    np.testing.assert_array_equal(crop_view(img, (10, 5, 20, 25)), crop(img, (10, 5, 20, 25)))
    padded = crop_view(img, (10, 5, 20, 25), pad=0.1)  # 1 px left/right, 2 px top/bottom
    np.testing.assert_array_equal(padded, img[3:27, 9:21])
    clamped = crop_view(img, (0, 0, 20, 10), pad=0.5)
    np.testing.assert_array_equal(clamped, img[0:15, 0:30])
    assert crop_view(img[:, :, 0], (0, 0, 4, 4)).shape == (4, 4, 3)
    with pytest.raises(ValueError, match="pad"):
        crop_view(img, (0, 0, 4, 4), pad=-0.1)


def _decode(jpeg: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(jpeg)) as im:
        assert im.format == "JPEG"
        return np.asarray(im.convert("RGB"))


def _reddish(img: np.ndarray) -> np.ndarray:
    r, g, b = (img[:, :, i].astype(int) for i in range(3))
    return (r > 180) & (g < 80) & (b < 80)


def test_jpeg_round_trip_keeps_the_red_frame_where_the_box_is() -> None:
    rng = np.random.default_rng(0)
    img = rng.integers(0, 120, size=(120, 160, 3), dtype=np.uint8)  # busy, nothing red
    img[:, :, 0] //= 2
    framed = redbox(img, (40, 30, 100, 90))
    back = _decode(encode_jpeg(framed))
    red = _reddish(back)
    expected = _ring(120, 160, (37, 27, 103, 93), 3)
    # the frame's centre lines are red, and nothing more than 2 px from the frame is
    assert red[28, 38:102].all() and red[91, 38:102].all()
    assert red[28:92, 38].all() and red[28:92, 101].all()
    grown = np.zeros_like(expected)
    for dy in range(-2, 3):
        for dx in range(-2, 3):
            grown |= np.roll(np.roll(expected, dy, axis=0), dx, axis=1)
    assert not (red & ~grown).any()


def test_render_redbox_downscales_first_so_the_frame_stays_wide() -> None:
    img = _image(2000, 4000, value=40)
    back = _decode(render(img, (2000, 800, 2400, 1400), max_side=500))
    assert back.shape == (250, 500, 3)
    red = _reddish(back)
    # box scaled by 1/8 to (250, 100, 300, 175); a full 3 px frame just outside it
    np.testing.assert_array_equal(red, _ring(250, 500, (247, 97, 303, 178), 3))
    # drawing the 12 px frame at full size and then downscaling leaves a 1.5 px, washed-out line
    late = _reddish(_decode(encode_jpeg(redbox(img, (2000, 800, 2400, 1400)), max_side=500)))
    assert late.sum() < red.sum() * 0.7


def test_render_crop_and_unknown_view() -> None:
    img = _image(50, 60, value=10)
    back = _decode(render(img, (10, 10, 30, 40), view="crop"))
    assert back.shape == (30, 20, 3)
    back = _decode(render(_image(400, 300), (0, 0, 300, 400), view="crop", max_side=100))
    assert back.shape == (100, 75, 3)
    with pytest.raises(ValueError, match="crop, redbox"):
        render(img, (10, 10, 30, 40), view="face")


def test_encode_jpeg_does_not_upscale_and_checks_quality() -> None:
    assert _decode(encode_jpeg(_image(30, 40), max_side=1000)).shape == (30, 40, 3)
    assert _decode(encode_jpeg(_image(30, 40), max_side=20)).shape == (15, 20, 3)
    with pytest.raises(ValueError, match="quality"):
        encode_jpeg(_image(30, 40), quality=0)
    with pytest.raises(ValueError, match="max_side"):
        encode_jpeg(_image(30, 40), max_side=0)


def test_data_url_and_image_part() -> None:
    jpeg = encode_jpeg(_image(8, 8))
    url = data_url(jpeg)
    assert url.startswith("data:image/jpeg;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == jpeg
    assert image_part(jpeg) == {"type": "image_url", "image_url": {"url": url}}
    with pytest.raises(ValueError, match="JPEG"):
        data_url(b"\x89PNG\r\n\x1a\n")
    with pytest.raises(ValueError, match="JPEG"):
        data_url("not bytes")  # type: ignore[arg-type]


def test_default_caption_prompt_is_the_papers_wording() -> None:
    assert DEFAULT_CAPTION_PROMPT.startswith("Describe the highlighted person in one continuous paragraph.")
    assert "Only focus on the highlighted person." in DEFAULT_CAPTION_PROMPT
    assert "  " not in DEFAULT_CAPTION_PROMPT
