"""How downloaded images are stored: the encode format, the resize modes, :class:`ImageSpec` and the
pixel-capped resizer it builds.

* :data:`ENCODE_FORMAT` is the format (and member suffix) of every stored image;
* :class:`ImageSpec` says how the images are stored (img2dataset's resize mode and size) and
  builds the resizer;
* :class:`PixelCappedResizer` refuses images over ``policy.max_pixels`` from their header, before
  img2dataset decodes them.

img2dataset's ``Resizer`` is loaded only when :meth:`ImageSpec.resizer` is called
(:mod:`fairsets.fetch._img2dataset`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .. import _img2dataset

# albumentations (imported by img2dataset's resizer) checks PyPI for updates on import unless told not to.
os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")

ENCODE_FORMAT = "jpg"

#: The hash img2dataset computes of every downloaded image: of the bytes the URL served, before any
#: resizing or re-encoding (its ``compute_hash``); written as ``sha256`` into each sample's json.
ORIGINAL_HASH = "sha256"


class PixelCappedResizer:
    """img2dataset's resizer behind a header check: at most ``max_pixels`` pixels, known formats only.

    img2dataset decodes every download with ``cv2.imdecode`` before it looks at the size (OpenCV
    allows 2^30 pixels): a 650 kB PNG of 15000 x 15000 pixels takes 1.3 GB and 9 s per thread.
    The width and height are read from the header with Pillow (no pixel is decoded) and an
    image over ``max_pixels`` is refused (``refused (too_large): ...``); a file Pillow cannot
    identify is refused as ``undecodable`` instead of going to OpenCV's other decoders (EXR,
    HDR, JPEG 2000, ...). The ``(img, w, h, ow, oh, error)`` contract of the resizer is kept.
    """

    def __init__(self, resizer: Any, max_pixels: int) -> None:
        self.resizer = resizer
        self.max_pixels = max_pixels

    def __call__(self, img_stream: Any, blurring_bbox_list: Any = None) -> tuple[Any, ...]:
        import warnings

        from PIL import Image

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                img_stream.seek(0)
                with Image.open(img_stream) as im:
                    width, height = im.size
        except Image.DecompressionBombError as exc:
            return None, None, None, None, None, f"refused (too_large): {exc}"
        except Exception as exc:  # per sample: whatever Pillow raises on a broken header
            return None, None, None, None, None, f"not an image Pillow can identify ({type(exc).__name__})"
        finally:
            img_stream.seek(0)
        if width * height > self.max_pixels:
            return (
                None,
                None,
                None,
                None,
                None,
                f"refused (too_large): image of {width}x{height} pixels, more than {self.max_pixels} "
                "(max_pixels)",
            )
        return self.resizer(img_stream, blurring_bbox_list)


#: img2dataset's resize modes that fairsets offers.
RESIZE_MODES = ("no", "keep_ratio", "center_crop")


@dataclass(frozen=True)
class ImageSpec:
    """How downloaded images are stored: img2dataset's ``resize_mode`` and ``image_size``.

    * ``"no"``: as downloaded: JPEG bytes unchanged, other formats re-encoded to JPEG
      (``skip_reencode=True``);
    * ``"keep_ratio"``: the smaller side resized to ``image_size``, aspect ratio kept;
    * ``"center_crop"``: as ``keep_ratio``, then the centre ``image_size`` x ``image_size`` square.

    The resizing modes use img2dataset's own ``Resizer`` with its defaults: images are resized
    whether larger or smaller (``resize_only_if_bigger=False``), with ``area`` interpolation down
    and ``lanczos`` up, and re-encoded to JPEG at quality 95 — the pixels plain img2dataset gives.
    """

    resize_mode: str = "no"
    image_size: int = 256

    def __post_init__(self) -> None:
        if self.resize_mode not in RESIZE_MODES:
            raise ValueError(
                f"resize mode must be one of {', '.join(RESIZE_MODES)}, not {self.resize_mode!r}"
            )
        if not isinstance(self.image_size, int) or self.image_size < 1:
            raise ValueError(f"image size must be a positive integer, not {self.image_size!r}")

    def resizer(self, max_pixels: int) -> PixelCappedResizer:
        """img2dataset's ``Resizer`` for this spec behind the pixel cap (see :class:`PixelCappedResizer`)."""
        Resizer = _img2dataset.load("resizer").Resizer
        return PixelCappedResizer(
            Resizer(
                image_size=self.image_size,  # unused with resize_mode="no"
                resize_mode=self.resize_mode,
                resize_only_if_bigger=False,
                encode_format=ENCODE_FORMAT,
                skip_reencode=self.resize_mode == "no",
            ),
            max_pixels,
        )


def originals_record() -> dict[str, Any]:
    """What a download records about its images and their originals (``.fairsets/listing.json``).

    The resize mode and size are in the record already (``resize_mode``, ``image_size``: the
    settings a resumed download must repeat); this adds ``original_hash`` (the hash in each
    sample's json: of the served bytes, before resizing; :data:`ORIGINAL_HASH`) and ``resizer``:
    the libraries whose geometry made the stored pixels (img2dataset's ``Resizer`` with
    albumentations' ``SmallestMaxSize`` and ``CenterCrop``), so a box can be mapped back to the
    original image (:mod:`fairsets.annotate.publish.originals`).
    """
    from fairsets.core.version import package_versions

    return {
        "original_hash": ORIGINAL_HASH,
        "resizer": {
            "library": "img2dataset",
            "resize_only_if_bigger": False,
            "versions": package_versions(["img2dataset", "albumentations"]),
        },
    }
