"""What a multimodal annotator is shown for one person box: the crop, or the whole image with a red box.

Two views, one per ``--view`` of the voting and captioning commands:

* :func:`crop_view` — the box's pixels (optionally padded), cut with :func:`fairsets.annotate.images.crop`.
* :func:`redbox` — the whole image with a pure red ``(255, 0, 0)`` frame around the box, the visual
  prompt of the LAION person-centric captions: the model is asked to describe "the highlighted
  person" (:data:`DEFAULT_CAPTION_PROMPT`).

Where the frame goes: the box is rounded outwards to whole pixels and clamped to the image, exactly
as :func:`~fairsets.annotate.images.crop` does; that rectangle is grown by the line width on every
side and clamped to the image; the frame is the ring of line-width pixels just inside the grown
rectangle. So the frame lies entirely outside the box (the person's pixels are untouched) wherever
there is room, and where the box reaches the image border the frame runs along the border over the
box's outermost pixels, always keeping its full width so the model sees all four sides.

Line width: ``width`` is the width for an image whose longest side is 1000 px (or less); larger
images get ``max(width, round(width * longest_side / 1000))`` (:func:`line_width`), so the frame
keeps the same share of the picture. :func:`render` downscales a large image to ``max_side`` first
and draws the frame afterwards, on the pixels the model receives, so a downscale never thins the
line below ``width``.

:func:`encode_jpeg`, :func:`data_url` and :func:`image_part` turn a view into the image content
part of an OpenAI-compatible chat request. Input arrays are ``(H, W, 3)`` uint8 RGB as
:func:`fairsets.annotate.images.decode` returns them; a grayscale ``(H, W)`` or ``(H, W, 1)`` array is
converted to RGB (the frame must be red); anything else is a ``ValueError``. No input is modified.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fairsets.annotate.images import crop

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DEFAULT_CAPTION_PROMPT",
    "RED",
    "VIEWS",
    "crop_view",
    "data_url",
    "encode_jpeg",
    "fit",
    "image_part",
    "line_width",
    "redbox",
    "render",
]

#: The caption prompt of the LAION person-centric annotations (InternVL3-8B on the red-box view),
#: verbatim from the authors' published captioning code: a fact of the method, kept word for word.
DEFAULT_CAPTION_PROMPT = (
    "Describe the highlighted person in one continuous paragraph. Describe the context, how the "
    "person looks and what the person is doing. Focus on objective details and avoid any subjective "
    "or emotional descriptions. Only focus on the highlighted person. Be as detailed and precise as "
    "possible. Write in plain, objective and scientific language."
)

#: The frame colour (pure red).
RED = (255, 0, 0)
#: The views an annotator can be shown (``--view``).
VIEWS = ("crop", "redbox")
#: The longest side (px) up to which the frame is ``width`` pixels wide.
REFERENCE_SIDE = 1000

_JPEG_MAGIC = b"\xff\xd8\xff"


def _rgb(image: Any) -> np.ndarray:
    """``image`` as an ``(H, W, 3)`` uint8 array (grayscale converted); a clear error otherwise."""
    import numpy as np

    if not isinstance(image, np.ndarray):
        raise ValueError(f"expected an image array, got {type(image).__name__}")
    if image.dtype != np.uint8:
        raise ValueError(f"expected a uint8 image, got {image.dtype}; decode it with annotate.images.decode")
    if image.ndim == 3 and image.shape[2] == 1:
        image = image[:, :, 0]
    if image.ndim == 2:
        image = np.repeat(image[:, :, None], 3, axis=2)
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(
            f"expected an (H, W, 3) RGB or (H, W) grayscale image, got shape {image.shape}; "
            "decode it with annotate.images.decode"
        )
    if image.shape[0] == 0 or image.shape[1] == 0:
        raise ValueError(f"the image is empty (shape {image.shape})")
    return image


def _box(box: Sequence[float]) -> tuple[float, float, float, float]:
    try:
        x1, y1, x2, y2 = (float(v) for v in box)
    except (TypeError, ValueError):
        raise ValueError(f"a box is four numbers x1, y1, x2, y2; got {box!r}") from None
    if not all(math.isfinite(v) for v in (x1, y1, x2, y2)):
        raise ValueError(f"box {tuple(box)} has a coordinate that is not a finite number")
    return x1, y1, x2, y2


def line_width(shape: Sequence[int], width: int = 3) -> int:
    """The frame width in pixels for an image of ``shape`` (``(H, W, ...)``).

    ``width`` up to a longest side of 1000 px, then ``round(width * longest_side / 1000)``.
    """
    if int(width) < 1:
        raise ValueError(f"the line width must be at least 1 pixel, got {width}")
    longest = max(int(shape[0]), int(shape[1]))
    return max(int(width), round(int(width) * longest / REFERENCE_SIDE))


def redbox(image: np.ndarray, box: Sequence[float], *, width: int = 3) -> np.ndarray:
    """A copy of the whole image with a pure red frame around ``box`` (see the module for where).

    Args:
        image: ``(H, W, 3)`` uint8 RGB (or grayscale, converted); not modified.
        box: ``x1, y1, x2, y2`` in pixels (x2/y2 exclusive), the convention of the annotation folder.
        width: the line width for images up to 1000 px; larger images scale it (:func:`line_width`).

    Returns:
        A new ``(H, W, 3)`` uint8 array.

    Raises:
        ValueError: the box lies outside the image or is not four finite numbers; the image is not
            an RGB or grayscale uint8 array.
    """
    img = _rgb(image)
    h, w = img.shape[:2]
    x_1, y_1, x_2, y_2 = _box(box)
    inner = crop(img, (x_1, y_1, x_2, y_2))  # crop's rounding and clamping; refuses a box outside
    left, top = max(0, math.floor(x_1)), max(0, math.floor(y_1))
    right, bottom = left + inner.shape[1], top + inner.shape[0]
    lw = line_width(img.shape, width)
    x0, y0 = max(0, left - lw), max(0, top - lw)
    x1, y1 = min(w, right + lw), min(h, bottom + lw)
    out = img.copy()
    out[y0 : min(y1, y0 + lw), x0:x1] = RED
    out[max(y0, y1 - lw) : y1, x0:x1] = RED
    out[y0:y1, x0 : min(x1, x0 + lw)] = RED
    out[y0:y1, max(x0, x1 - lw) : x1] = RED
    return out


def crop_view(image: np.ndarray, box: Sequence[float], *, pad: float = 0.0) -> np.ndarray:
    """The crop an annotator sees with ``--view crop``: the box, grown by ``pad`` on every side.

    Args:
        image: ``(H, W, 3)`` uint8 RGB (or grayscale, converted); not modified.
        box: ``x1, y1, x2, y2`` in pixels.
        pad: the share of the box's width (left and right) and height (top and bottom) added on
            each side before cropping, e.g. ``0.1`` for a 10 % margin; ``0`` (the default) is the
            box itself, as the LAION voting used. The padded box is clamped to the image.

    Returns:
        A new contiguous ``(h, w, 3)`` uint8 array.
    """
    pad = float(pad)
    if not math.isfinite(pad) or pad < 0:
        raise ValueError(f"pad must be a non-negative share of the box size, got {pad}")
    x1, y1, x2, y2 = _box(box)
    dx, dy = pad * max(0.0, x2 - x1), pad * max(0.0, y2 - y1)
    import numpy as np

    return np.ascontiguousarray(crop(_rgb(image), (x1 - dx, y1 - dy, x2 + dx, y2 + dy)))


def fit(image: np.ndarray, max_side: int | None) -> tuple[np.ndarray, float, float]:
    """Downscale ``image`` so its longest side is at most ``max_side`` (never upscale).

    Returns:
        ``(image, sx, sy)``: the (possibly unchanged) RGB image and the factors that map an input
        x / y coordinate to the output (``1.0`` when not resized). Resampling is Lanczos.
    """
    img = _rgb(image)
    h, w = img.shape[:2]
    if max_side is None or max(h, w) <= int(max_side):
        return img, 1.0, 1.0
    if int(max_side) < 1:
        raise ValueError(f"max_side must be at least 1 pixel, got {max_side}")
    import numpy as np
    from PIL import Image

    scale = int(max_side) / max(h, w)
    nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
    small = Image.fromarray(img).resize((nw, nh), Image.Resampling.LANCZOS, reducing_gap=3.0)
    return np.asarray(small), nw / w, nh / h


def encode_jpeg(image: np.ndarray, *, max_side: int | None = None, quality: int = 90) -> bytes:
    """JPEG bytes of ``image``, downscaled first to ``max_side`` when it is larger (see :func:`fit`).

    Chroma is not subsampled (4:4:4), so a thin red frame keeps its colour in the JPEG. To send a
    red-box view of a large image, use :func:`render`, which downscales before drawing the frame.
    """
    if not 1 <= int(quality) <= 95:
        raise ValueError(f"JPEG quality must be 1..95, got {quality}")
    from PIL import Image

    img, _, _ = fit(image, max_side)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=int(quality), subsampling=0)
    return buf.getvalue()


def data_url(jpeg: bytes) -> str:
    """``data:image/jpeg;base64,…`` for JPEG bytes (an image URL OpenAI-compatible servers accept)."""
    if not isinstance(jpeg, bytes | bytearray) or not bytes(jpeg[:3]) == _JPEG_MAGIC:
        raise ValueError("data_url expects JPEG bytes (from encode_jpeg or render)")
    return "data:image/jpeg;base64," + base64.b64encode(bytes(jpeg)).decode("ascii")


def image_part(jpeg: bytes) -> dict[str, Any]:
    """The ``{"type": "image_url", "image_url": {"url": …}}`` content part of a chat message."""
    return {"type": "image_url", "image_url": {"url": data_url(jpeg)}}


def render(
    image: np.ndarray,
    box: Sequence[float],
    *,
    view: str = "redbox",
    max_side: int | None = None,
    quality: int = 90,
    pad: float = 0.0,
    width: int = 3,
) -> bytes:
    """The JPEG an annotator is sent for one box: ``view`` is ``"crop"`` or ``"redbox"``.

    For ``redbox`` the image is downscaled to ``max_side`` first, the box scaled with it, and the
    frame drawn on the downscaled pixels, so it is never thinner than ``width`` in the JPEG. For
    ``crop`` the crop is cut at full resolution and then downscaled if larger than ``max_side``.
    """
    if view == "crop":
        return encode_jpeg(crop_view(image, box, pad=pad), max_side=max_side, quality=quality)
    if view != "redbox":
        raise ValueError(f"unknown view {view!r}; choose one of {', '.join(VIEWS)}")
    x1, y1, x2, y2 = _box(box)
    small, sx, sy = fit(image, max_side)
    framed = redbox(small, (x1 * sx, y1 * sy, x2 * sx, y2 * sy), width=width)
    return encode_jpeg(framed, quality=quality)
