"""``crop``: padded face crop → ``size × size`` RGB (Lanczos) → JPEG (IndicFairFace §8.3).

Border policies (what to do when the padded box leaves the image):

* ``clamp`` (default, the paper): clip the padded box to the image, then resize. A face near an
  edge gives a non-square crop, so its aspect ratio changes in the output.
* ``square``: a square box of side ``max(w, h) + 2·pad`` centred on the face, shifted (not shrunk)
  to stay inside the image; only an axis where the image is smaller than the side is clamped.
  Keeps the aspect ratio whenever the image is large enough; the face may be off-centre.
* ``constant``: the same square box centred on the face, never moved; pixels outside the image
  are black. Keeps aspect ratio and centring, at the cost of black bars.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from fairsets.core.data import Sample
from fairsets.core.registry import STEPS
from fairsets.core.step import Step, StepContext, StepParams

__all__ = ["Crop", "crop_box", "crop_pixels"]

Border = Literal["clamp", "square", "constant"]


def _fit(start: int, side: int, limit: int) -> tuple[int, int]:
    """Shift ``[start, start + side)`` inside ``[0, limit)``; clamp to it if ``side > limit``."""
    if side >= limit:
        return 0, limit
    start = min(max(start, 0), limit - side)
    return start, start + side


def crop_box(
    box: tuple[int, int, int, int] | list[int],
    width: int,
    height: int,
    pad: float = 0.2,
    border: Border = "clamp",
) -> tuple[int, int, int, int]:
    """The crop rectangle ``(x0, y0, x1, y1)`` (end-exclusive) for a face ``box = (x, y, w, h)``.

    The padding is ``p = round(pad · max(w, h))`` pixels on every side. With ``constant`` the
    rectangle may extend beyond the image (negative or too-large coordinates); with ``clamp`` and
    ``square`` it lies inside ``width × height``.
    """
    x, y, w, h = (int(v) for v in box)
    p = round(pad * max(w, h))
    if border == "clamp":
        return max(0, x - p), max(0, y - p), min(width, x + w + p), min(height, y + h + p)
    side = max(w, h) + 2 * p
    x0 = (2 * x + w - side) // 2  # floor(centre - side / 2)
    y0 = (2 * y + h - side) // 2
    if border == "constant":
        return x0, y0, x0 + side, y0 + side
    if border == "square":
        x0, x1 = _fit(x0, side, width)
        y0, y1 = _fit(y0, side, height)
        return x0, y0, x1, y1
    raise ValueError(f"unknown border policy {border!r} (use clamp, square or constant)")


def crop_pixels(image: np.ndarray, rect: tuple[int, int, int, int]) -> np.ndarray:
    """Cut ``rect`` out of ``image``; parts outside the image are black (zero)."""
    import cv2

    h, w = image.shape[:2]
    x0, y0, x1, y1 = rect
    ix0, iy0, ix1, iy1 = max(x0, 0), max(y0, 0), min(x1, w), min(y1, h)
    inner = image[iy0:iy1, ix0:ix1]
    if (ix0, iy0, ix1, iy1) == (x0, y0, x1, y1):
        return inner
    if ix1 <= ix0 or iy1 <= iy0:
        return np.zeros((y1 - y0, x1 - x0, *image.shape[2:]), image.dtype)
    return cv2.copyMakeBorder(
        inner, iy0 - y0, y1 - iy1, ix0 - x0, x1 - ix1, cv2.BORDER_CONSTANT, value=(0, 0, 0)
    )


class CropParams(StepParams):
    """Parameters of :class:`Crop`."""

    size: int = Field(512, ge=8, description="output side in pixels (paper: 512)")
    pad: float = Field(
        0.2, ge=0, le=2, description="padding on every side, fraction of max(w, h) (paper: 0.2)"
    )
    border: Border = Field("clamp", description="clamp (paper) | square | constant; see module docs")
    quality: int = Field(95, ge=1, le=100, description="JPEG quality of sample.out")
    antialias: bool = Field(
        True, description="shrink crops larger than 2·size with INTER_AREA before the Lanczos resize"
    )


@STEPS.register("crop")
class Crop(Step):
    """Crop the padded ``face_box``, resize to ``size × size`` (Lanczos), JPEG-encode into ``sample.out``.

    ``sample.image`` becomes the ``size × size`` RGB crop. Annotations: ``crop_box``
    ``[x0, y0, x1, y1]`` (end-exclusive, may leave the image with ``border='constant'``),
    ``out_size`` ``[width, height]`` and ``out_bytes``.

    ``cv2.INTER_LANCZOS4`` has a fixed 8×8 kernel, so it aliases when it shrinks more than about
    2×; with ``antialias`` (default) larger crops are first reduced to at most ``2·size`` per axis
    with ``INTER_AREA``.
    """

    Params = CropParams
    requires: ClassVar[tuple[tuple[str, str], ...]] = (("cv2", "vision"),)
    params: CropParams

    def process(self, sample: Sample, ctx: StepContext) -> Sample:
        import cv2

        p = self.params
        image = sample.image
        if image is None:
            raise ValueError(f"step {self.name!r} needs sample.image: put 'decode' before it")
        box = sample.annotations.get("face_box")
        if box is None:
            raise ValueError(
                f"step {self.name!r} needs the 'face_box' annotation: put 'detect_face' before it"
            )
        h, w = image.shape[:2]
        rect = crop_box(box, w, h, p.pad, p.border)
        x0, y0, x1, y1 = rect
        if x1 <= x0 or y1 <= y0:
            return sample.reject(self.name, f"empty crop box {list(rect)}")
        crop = crop_pixels(image, rect)
        ch, cw = crop.shape[:2]
        limit = 2 * p.size
        if p.antialias and (cw > limit or ch > limit):
            crop = cv2.resize(crop, (min(cw, limit), min(ch, limit)), interpolation=cv2.INTER_AREA)
        out = cv2.resize(crop, (p.size, p.size), interpolation=cv2.INTER_LANCZOS4)
        ok, buf = cv2.imencode(
            ".jpg", cv2.cvtColor(out, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, p.quality]
        )
        if not ok:  # pragma: no cover - cv2 only fails on invalid input
            raise RuntimeError("cv2.imencode failed to encode the crop as JPEG")
        sample.image = out
        sample.out = buf.tobytes()
        sample.annotations.update(
            crop_box=[int(v) for v in rect], out_size=[p.size, p.size], out_bytes=len(sample.out)
        )
        return sample
