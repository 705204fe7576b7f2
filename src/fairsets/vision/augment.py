"""Deterministic image augmentation for dataset balancing (IndicFairFace §3.3).

Two kinds of augmentation are offered:

``"mild"``
    The paper's "mild transformations such as random horizontal flips, rotations, hue jitter, and
    random crops", used to fill a (cell, split) that has fewer real images than its quota:
    ``HorizontalFlip(p=0.5)``, ``Rotate(±10°, reflected border, p=0.75)``,
    ``HueSaturationValue(hue ±8, p=0.75)`` (OpenCV hue units, 2° each; saturation and value untouched)
    and ``RandomResizedCrop`` back to the input size with ``scale=(0.85, 1.0)`` and an aspect ratio
    within 5% of the input's (p=1, so every mild augmentation differs from its source).

``"colour"``
    The "controlled colour-based augmentation" of the ``augmented`` variant: mild changes in hue
    and brightness only, no geometry: ``HueSaturationValue(hue ±5, p=1)`` and
    ``RandomBrightnessContrast(brightness ±0.1, contrast 0, p=1)``.

The result depends only on ``(image, kind, seed)``: albumentations' ``Compose(seed=...)`` owns its
random generators (global ``random``/``numpy`` state is neither read nor changed), and seeds are
derived with :func:`derive_seed` (SHA-256, never Python's salted ``hash()``), so a build gives the
same pixels in every process and on every run.

OpenCV and albumentations are imported lazily, inside :func:`augment`, so that only a process that
augments pays for them. albumentations 2.x imports PyTorch whenever it is installed (its package
``__init__`` runs ``from .pytorch import *``): about 2 s of CPU and 330 MB per process, two thirds
of it PyTorch's, in every worker that writes augmented shards. The transforms used here need none
of it, so :func:`_albumentations` loads ``albumentations.augmentations`` and
``albumentations.core.composition`` (the same code) without the package ``__init__``, through
:mod:`fairsets.core.light_import`; where albumentations was already imported, or the light load
fails, it is imported as usual.
"""

from __future__ import annotations

import functools
import math
import os
from typing import Any

import numpy as np

from fairsets.core.data import derive_seed

__all__ = ["KINDS", "augment", "derive_seed", "jsonable"]

#: The augmentation kinds understood by :func:`augment`.
KINDS: tuple[str, ...] = ("mild", "colour")


def jsonable(value: Any) -> Any:
    """Convert ``value`` (numpy scalars/arrays, tuples, nested dicts) to JSON-friendly Python types.

    Non-finite floats become ``None``; dict keys become strings; anything unknown becomes ``str``.
    """
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


@functools.cache
def _albumentations() -> Any:
    """albumentations' transforms, ``Compose`` and ``__version__``, without PyTorch (module docstring).

    Loaded once per process: ``augment`` asks for it twice per image."""
    import importlib.metadata
    import sys
    import types

    from fairsets.core import light_import

    os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")  # no network check if __init__ runs after all
    light_import.light_packages("albumentations")
    # what albumentations' __init__ sets, read as it reads it; its submodules import it from the package
    light_import.preset(
        "albumentations", __version__=lambda: importlib.metadata.metadata("albumentations")["Version"]
    )
    transforms = light_import.light_module("albumentations.augmentations")
    composition = light_import.light_module("albumentations.core.composition")
    return types.SimpleNamespace(
        HorizontalFlip=transforms.HorizontalFlip,
        Rotate=transforms.Rotate,
        HueSaturationValue=transforms.HueSaturationValue,
        RandomResizedCrop=transforms.RandomResizedCrop,
        RandomBrightnessContrast=transforms.RandomBrightnessContrast,
        Compose=composition.Compose,
        __version__=sys.modules["albumentations"].__version__,
    )


def _pipeline(kind: str, height: int, width: int) -> list[Any]:
    """The albumentations transforms for ``kind`` and an input of ``height`` x ``width``."""
    import cv2

    A = _albumentations()

    if kind == "mild":
        aspect = width / height
        return [
            A.HorizontalFlip(p=0.5),
            A.Rotate(limit=(-10, 10), border_mode=cv2.BORDER_REFLECT_101, p=0.75),
            A.HueSaturationValue(
                hue_shift_limit=(-8, 8), sat_shift_limit=(0, 0), val_shift_limit=(0, 0), p=0.75
            ),
            A.RandomResizedCrop(
                size=(height, width), scale=(0.85, 1.0), ratio=(aspect * 0.95, aspect / 0.95), p=1.0
            ),
        ]
    if kind == "colour":
        return [
            A.HueSaturationValue(
                hue_shift_limit=(-5, 5), sat_shift_limit=(0, 0), val_shift_limit=(0, 0), p=1.0
            ),
            A.RandomBrightnessContrast(brightness_limit=(-0.1, 0.1), contrast_limit=(0.0, 0.0), p=1.0),
        ]
    raise ValueError(f"unknown augmentation kind {kind!r}: use one of {', '.join(KINDS)}")


def augment(image: np.ndarray, kind: str, seed: int) -> tuple[np.ndarray, dict[str, Any]]:
    """Augment an RGB image deterministically.

    Args:
        image: ``uint8`` RGB array of shape (H, W, 3). It is not modified.
        kind: ``"mild"`` (flip, rotation, hue jitter, random resized crop) or ``"colour"`` (hue and
            brightness only); see the module docstring for the exact parameters.
        seed: a non-negative integer, typically from :func:`derive_seed`.

    Returns:
        ``(out, record)``: ``out`` is a new ``uint8`` RGB array of the input's shape; ``record`` is a
        JSON-serialisable dict ``{"kind", "seed", "library", "version", "size": [H, W],
        "transforms": [{"name": ..., "params": {...}}, ...]}`` listing, in order, only the transforms
        that were actually applied, with the parameters they were applied with.

    Raises:
        ValueError: unknown ``kind``, a negative seed, or an image that is not uint8 (H, W, 3).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown augmentation kind {kind!r}: use one of {', '.join(KINDS)}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        shape = getattr(image, "shape", None)
        dtype = getattr(image, "dtype", type(image).__name__)
        raise ValueError(
            f"augment needs a uint8 RGB array of shape (H, W, 3), got shape {shape} dtype {dtype}"
        )
    height, width = int(image.shape[0]), int(image.shape[1])
    if height < 1 or width < 1:
        raise ValueError(f"augment needs a non-empty image, got shape {image.shape}")

    A = _albumentations()
    compose = A.Compose(_pipeline(kind, height, width), seed=int(seed), save_applied_params=True)
    result = compose(image=np.ascontiguousarray(image))
    out = np.ascontiguousarray(result["image"], dtype=np.uint8)
    if out.shape != image.shape:  # pragma: no cover - guarded by the pipelines above
        raise RuntimeError(f"augmentation changed the image shape {image.shape} -> {out.shape}")
    applied = []
    for name, params in result.get("applied_transforms", []):
        clean = jsonable({k: v for k, v in params.items() if k != "shape"})
        if name == "Rotate" and "angle" not in clean and "matrix" in params:
            # albumentations records only the affine matrix; add the angle (degrees, counter-clockwise)
            m = np.asarray(params["matrix"], dtype=float)
            clean["angle"] = math.degrees(math.atan2(m[0, 1], m[0, 0]))
        applied.append({"name": name, "params": clean})
    record = {
        "kind": kind,
        "seed": int(seed),
        "library": "albumentations",
        "version": A.__version__,
        "size": [height, width],
        "transforms": applied,
    }
    return out, record
