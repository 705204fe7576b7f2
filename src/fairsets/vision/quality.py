"""Quality filters: ``grayscale`` (colour check), ``blur`` (Laplacian texture) and ``skin`` (HSV mask).

The three filters follow IndicFairFace §3.2/§8.1. Each puts its measured value into
``sample.annotations`` (``delta_color``, ``laplacian_var``, ``skin_ratio``) whether or not the
sample passes, so thresholds can be re-tuned from the annotations alone.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field, model_validator

from fairsets.core.data import Sample
from fairsets.core.registry import STEPS
from fairsets.core.step import Step, StepContext, StepParams

__all__ = ["Blur", "Grayscale", "Skin", "delta_color", "laplacian_variance", "skin_ratio"]

_CV2: tuple[tuple[str, str], ...] = (("cv2", "vision"),)


def delta_color(image: np.ndarray) -> float:
    """Mean inter-channel difference ``mean(|B−G| + |G−R| + |R−B|) / 3`` of a uint8 RGB image.

    Computed with ``cv2.split`` and three ``cv2.norm(a, b, NORM_L1)`` calls (a fused
    ``absdiff`` + sum, no temporary arrays beyond the three planes).
    """
    import cv2

    r, g, b = cv2.split(image)
    total = cv2.norm(b, g, cv2.NORM_L1) + cv2.norm(g, r, cv2.NORM_L1) + cv2.norm(r, b, cv2.NORM_L1)
    return float(total) / (3.0 * r.size)


def laplacian_variance(image: np.ndarray, max_side: int = 512) -> float:
    """Variance of the Laplacian of the grayscale image, at most ``max_side`` px on its longer side.

    The image is converted to grayscale, then shrunk with ``INTER_AREA`` (never enlarged) so the
    value does not grow with resolution; the 3×3 Laplacian (``ksize=1``) is exact in int16.
    """
    import cv2

    gray = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY) if image.ndim == 3 else image
    h, w = gray.shape[:2]
    scale = max_side / max(h, w)
    if scale < 1.0:
        size = (max(1, round(w * scale)), max(1, round(h * scale)))
        gray = cv2.resize(gray, size, interpolation=cv2.INTER_AREA)
    lap = cv2.Laplacian(gray, cv2.CV_16S)
    _, std = cv2.meanStdDev(lap)
    return float(std[0, 0]) ** 2


def skin_ratio(
    image: np.ndarray, lower: tuple[int, int, int] = (0, 40, 60), upper: tuple[int, int, int] = (25, 255, 255)
) -> float:
    """Fraction of pixels of a uint8 RGB image inside the HSV box ``lower..upper`` (OpenCV HSV, H 0-179)."""
    import cv2

    if image.size == 0:
        return 0.0
    hsv = cv2.cvtColor(image, cv2.COLOR_RGB2HSV)
    mask = cv2.inRange(hsv, np.array(lower, np.uint8), np.array(upper, np.uint8))
    return cv2.countNonZero(mask) / float(mask.size)


def _need_image(step: Step, sample: Sample) -> np.ndarray:
    if sample.image is None:
        raise ValueError(f"step {step.name!r} needs sample.image: put 'decode' before it")
    return sample.image


class GrayscaleParams(StepParams):
    """Parameters of :class:`Grayscale`."""

    threshold: float = Field(5.0, ge=0, description="reject if delta_color is below this (paper: 5)")


@STEPS.register("grayscale")
class Grayscale(Step):
    """Reject grayscale / black-and-white images: ``delta_color < threshold`` (annotation ``delta_color``)."""

    Params = GrayscaleParams
    requires: ClassVar[tuple[tuple[str, str], ...]] = _CV2
    params: GrayscaleParams

    def process(self, sample: Sample, ctx: StepContext) -> Sample:
        value = delta_color(_need_image(self, sample))
        sample.annotations["delta_color"] = round(value, 4)
        if value < self.params.threshold:
            return sample.reject(self.name, f"grayscale: delta_color {value:.1f} < {self.params.threshold:g}")
        return sample


class BlurParams(StepParams):
    """Parameters of :class:`Blur`."""

    threshold: float = Field(30.0, ge=0, description="reject if the Laplacian variance is below this")
    max_side: int = Field(512, ge=16, description="measure on the image shrunk to this longer side")


@STEPS.register("blur")
class Blur(Step):
    """Reject blurred or flat, cartoon-like images by Laplacian variance (annotation ``laplacian_var``).

    The default threshold (30 at ``max_side`` 512) was chosen by measurement, see ``docs/steps.md``.
    """

    Params = BlurParams
    requires: ClassVar[tuple[tuple[str, str], ...]] = _CV2
    params: BlurParams

    def process(self, sample: Sample, ctx: StepContext) -> Sample:
        value = laplacian_variance(_need_image(self, sample), self.params.max_side)
        sample.annotations["laplacian_var"] = round(value, 3)
        if value < self.params.threshold:
            return sample.reject(
                self.name, f"blurry: laplacian variance {value:.1f} < {self.params.threshold:g}"
            )
        return sample


class SkinParams(StepParams):
    """Parameters of :class:`Skin`."""

    lower: tuple[int, int, int] = Field((0, 40, 60), description="HSV lower bound (OpenCV, H 0-179)")
    upper: tuple[int, int, int] = Field((25, 255, 255), description="HSV upper bound (inclusive)")
    min_ratio: float = Field(0.15, ge=0, le=1, description="keep only if the skin ratio is above this")

    @model_validator(mode="after")
    def _check_bounds(self) -> SkinParams:
        for lo, hi, top in zip(self.lower, self.upper, (179, 255, 255), strict=True):
            if not 0 <= lo <= hi <= top:
                raise ValueError(
                    f"need 0 <= lower <= upper <= (179, 255, 255), got {self.lower}..{self.upper}"
                )
        return self


@STEPS.register("skin")
class Skin(Step):
    """Reject faces with too few skin-coloured pixels inside the detected ``face_box``.

    Needs the ``face_box`` annotation from ``detect_face``. Keeps the sample only if the ratio
    is strictly above ``min_ratio`` (annotation ``skin_ratio``).
    """

    Params = SkinParams
    requires: ClassVar[tuple[tuple[str, str], ...]] = _CV2
    params: SkinParams

    def process(self, sample: Sample, ctx: StepContext) -> Sample:
        image = _need_image(self, sample)
        box = sample.annotations.get("face_box")
        if box is None:
            raise ValueError(
                f"step {self.name!r} needs the 'face_box' annotation: put 'detect_face' before it"
            )
        x, y, w, h = (int(v) for v in box)
        crop = image[max(y, 0) : y + h, max(x, 0) : x + w]
        value = skin_ratio(crop, self.params.lower, self.params.upper)
        sample.annotations["skin_ratio"] = round(value, 4)
        if value <= self.params.min_ratio:
            return sample.reject(self.name, f"skin ratio {value:.2f} <= {self.params.min_ratio:g}")
        return sample
