"""Image steps of the face pipeline (IndicFairFace §3.2, §8).

Importing this package registers the steps ``decode``, ``grayscale``, ``blur``, ``detect_face``,
``skin`` and ``crop`` and the face detectors ``res10``, ``blazeface`` and ``blazeface_full``. OpenCV,
Pillow and MediaPipe are imported only when a step runs, so this import works without them.
"""

from __future__ import annotations

from . import crop, decode, detect, quality  # noqa: F401  (imports register the steps)
from .dedup import find_duplicates
from .hashing import hamming, phash, pixel_sha256

__all__ = ["find_duplicates", "hamming", "phash", "pixel_sha256"]
