"""``decode``: bytes → uint8 RGB pixels, with size guards, EXIF orientation and content hashes."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from fairsets.core.data import Sample
from fairsets.core.registry import STEPS
from fairsets.core.step import Step, StepContext, StepParams

from ..fetch.localfile import DEFAULT_MAX_BYTES
from .hashing import phash, pixel_sha256
from .imageformat import MAX_JPEG_SCANS, ImageDecodeError, image_errors, open_image

__all__ = ["Decode", "to_rgb"]

_BOMB_PIXELS = re.compile(r"\((\d+) pixels\)")


_CHUNK_PIXELS = 1 << 20
"""Pixels converted at a time: the float/uint16 temporaries of a conversion stay a few MB each
(converting a 40 MP float or RGBA image whole peaked at 1.2 GB for a 250 kB file)."""


def _row_chunks(arr: np.ndarray) -> Iterator[slice]:
    """Slices of ``arr``'s rows holding about :data:`_CHUNK_PIXELS` pixels each."""
    h, w = arr.shape[:2]
    step = max(1, _CHUNK_PIXELS // max(w, 1))
    return (slice(r, min(r + step, h)) for r in range(0, h, step))


def _scale_to_uint8(arr: np.ndarray, mode: str) -> np.ndarray:
    """Map a one-channel integer/float image to ``uint8`` (see :func:`to_rgb` for the rules),
    a band of rows at a time (the range is that of the whole image)."""
    if mode.startswith("I;16"):

        def scale(a: np.ndarray) -> np.ndarray:
            return (a.astype(np.uint32) + 128) // 257

    else:
        lo, hi = (float(arr.min()), float(arr.max())) if arr.size else (0.0, 0.0)

        def scale(a: np.ndarray) -> np.ndarray:
            a = a.astype(np.float64)
            if mode == "F" and lo >= 0.0 and hi <= 1.0:
                a *= 255.0
            elif lo >= 0.0 and hi <= 255.0:
                pass
            elif mode == "I" and lo >= 0.0 and hi <= 65535.0:
                a /= 257.0
            else:  # arbitrary range: stretch min..max to 0..255
                a = (a - lo) * (255.0 / (hi - lo)) if hi > lo else np.zeros_like(a)
            return np.clip(np.rint(a), 0, 255)

    out = np.empty(arr.shape, np.uint8)
    for rows in _row_chunks(arr):
        out[rows] = scale(arr[rows])
    return out


def _composite_on_white(rgba: np.ndarray) -> np.ndarray:
    out = np.empty((*rgba.shape[:2], 3), np.uint8)
    for rows in _row_chunks(rgba):
        band = rgba[rows]
        rgb = band[..., :3].astype(np.uint16)
        alpha = band[..., 3:4].astype(np.uint16)
        out[rows] = (rgb * alpha + 255 * (255 - alpha) + 127) // 255
    return out


def to_rgb(im: Any) -> np.ndarray:
    """Convert a loaded PIL image of any common mode to a contiguous ``uint8`` RGB array.

    Rules: ``RGB`` as is; ``L``/``1``/``CMYK``/``YCbCr``/``LAB``/``HSV``/``RGBX``/``P`` without
    transparency through PIL's ``convert("RGB")``; modes with alpha (``RGBA``, ``LA``, ``PA``,
    ``RGBa``, ``La``, ``P`` with transparency) are composited on white; 16-bit (``I;16*``) is
    scaled by 1/257; ``I`` and ``F`` are used as is when already in 0..255, ``F`` in 0..1 is
    scaled by 255, ``I`` in 0..65535 by 1/257, anything else is stretched min..max to 0..255.
    """
    mode = im.mode
    if mode == "RGB":
        arr = np.asarray(im)
    elif mode in ("I", "F") or mode.startswith("I;16"):
        gray = _scale_to_uint8(np.asarray(im), mode)
        arr = np.repeat(gray[..., None], 3, axis=2)
    elif mode in ("RGBA", "LA", "PA", "RGBa", "La") or (mode == "P" and "transparency" in im.info):
        arr = _composite_on_white(np.asarray(im if mode == "RGBA" else im.convert("RGBA")))
    else:
        arr = np.asarray(im.convert("RGB"))
    if arr.ndim != 3 or arr.shape[2] != 3 or arr.dtype != np.uint8:  # pragma: no cover - defensive
        raise ValueError(f"unexpected pixel array {arr.shape} {arr.dtype} from mode {mode}")
    if not (arr.flags.c_contiguous and arr.flags.writeable):
        arr = np.array(arr, order="C")
    return arr


class DecodeParams(StepParams):
    """Parameters of :class:`Decode`."""

    max_bytes: int = Field(DEFAULT_MAX_BYTES, gt=0, description="reject encoded files larger than this")
    max_pixels: int = Field(40_000_000, gt=0, description="reject images with more pixels (header check)")
    min_side: int = Field(64, ge=1, description="reject images whose shorter side is smaller")
    max_jpeg_scans: int = Field(
        MAX_JPEG_SCANS, gt=0, description="reject JPEGs with more scans (each is a pass over the image)"
    )
    hashes: bool = Field(True, description="compute pixel_sha256 and phash annotations")
    drop_bytes: bool = Field(True, description="set sample.data to None once decoded")


@STEPS.register("decode")
class Decode(Step):
    """Decode ``sample.data`` into ``sample.image`` (uint8 RGB, EXIF orientation applied).

    The byte cap is checked first, then the format is sniffed from the magic bytes: only JPEG,
    PNG, WebP, GIF, BMP, TIFF (and AVIF/HEIF where a plugin is installed) reach Pillow, each
    with only its own plugin (:mod:`fairsets.vision.imageformat`); anything else is rejected
    ("unsupported format EPS", "not an image"). The header is read lazily and ``width ×
    height`` is checked against ``max_pixels`` *before* any pixel is decoded, so decompression
    bombs are rejected without allocating them; a JPEG with more than ``max_jpeg_scans`` scans
    (a CPU bomb: each scan is a pass over the whole image) is rejected before decoding. PIL's
    own bomb guard is turned into a rejection too (its warning is raised as an error here). Any
    exception the image library raises on the bytes is a rejection naming the exception
    ("truncated or corrupt image: RuntimeError: ...").

    Annotations: ``width``, ``height`` (after orientation), ``format``, ``mode`` (the file's
    original mode) and, with ``hashes``, ``pixel_sha256`` and ``phash``.
    """

    Params = DecodeParams
    requires: ClassVar[tuple[tuple[str, str], ...]] = (("cv2", "vision"), ("PIL", "vision"))
    params: DecodeParams

    def __init__(self, params: StepParams | dict[str, Any] | None = None) -> None:
        super().__init__(params)
        from PIL import Image

        # PIL raises DecompressionBombError above 2 × MAX_IMAGE_PIXELS while opening; make sure
        # that guard never rejects an image our own (stricter, explicit) limit allows.
        if Image.MAX_IMAGE_PIXELS is not None and self.params.max_pixels > Image.MAX_IMAGE_PIXELS:
            Image.MAX_IMAGE_PIXELS = self.params.max_pixels

    def _reason(self, exc: ImageDecodeError) -> str:
        """The rejection reason for bytes the image library refused or could not decode."""
        if exc.kind != "too_large":
            return str(exc)
        # PIL's own bomb guard (it checks the size inside ``Image.open``).
        m = _BOMB_PIXELS.search(str(exc))
        found = f"{m.group(1)} px" if m else "PIL decompression bomb guard"
        return f"image too large: {found} > {self.params.max_pixels}"

    def process(self, sample: Sample, ctx: StepContext) -> Sample:
        from PIL import ImageOps

        p = self.params
        data = sample.data
        if data is None:
            return sample.reject(self.name, "no image bytes")
        if len(data) > p.max_bytes:
            return sample.reject(self.name, f"too many bytes: {len(data)} > {p.max_bytes}")
        # Every call into the image library is wrapped: whatever it raises on these bytes
        # (RuntimeError, MemoryError, struct.error, ...) is this sample's rejection.
        try:
            im = open_image(data, max_jpeg_scans=p.max_jpeg_scans)
        except ImageDecodeError as exc:
            return sample.reject(self.name, self._reason(exc))
        try:
            with image_errors():
                fmt, mode = im.format or "", im.mode
                w, h = im.size
            if w * h > p.max_pixels:
                return sample.reject(self.name, f"image too large: {w}x{h} px > {p.max_pixels}")
            if min(w, h) < p.min_side:
                return sample.reject(self.name, f"image too small: {w}x{h} px, side < {p.min_side}")
            with image_errors():
                im.load()
                ImageOps.exif_transpose(im, in_place=True)
                rgb = to_rgb(im)
        except ImageDecodeError as exc:
            return sample.reject(self.name, self._reason(exc))
        finally:
            with contextlib.suppress(Exception):
                im.close()
        ann = sample.annotations
        ann.update(width=int(rgb.shape[1]), height=int(rgb.shape[0]), format=fmt, mode=mode)
        if p.hashes:
            ann["pixel_sha256"] = pixel_sha256(rgb)
            ann["phash"] = phash(rgb)
        sample.image = rgb
        if p.drop_bytes:
            sample.data = None
        return sample
