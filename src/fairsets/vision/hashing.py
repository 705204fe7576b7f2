"""Content hashes of decoded images: exact (pixel SHA-256) and perceptual (64-bit DCT pHash).

Both hashes are computed from the decoded RGB pixels, so two files that encode the same pixels
differently (PNG with and without metadata, a different zlib level) get the same
``pixel_sha256``, and a resized or re-encoded copy gets a ``phash`` a few bits away.
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["hamming", "phash", "phash_to_int", "pixel_sha256"]


def pixel_sha256(image: np.ndarray) -> str:
    """SHA-256 hex digest of an image's pixels, with its shape and dtype prefixed.

    Args:
        image: pixel array, e.g. ``uint8`` RGB of shape (H, W, 3).

    Returns:
        64 hex characters. The prefix (``"480x640x3:uint8:"``) makes arrays with the same bytes
        but different shapes hash differently.
    """
    arr = np.ascontiguousarray(image)
    h = hashlib.sha256(("x".join(map(str, arr.shape)) + f":{arr.dtype.str}:").encode())
    h.update(memoryview(arr).cast("B"))
    return h.hexdigest()


def phash(image: np.ndarray) -> str:
    """64-bit DCT perceptual hash of an RGB (or grayscale) ``uint8`` image, as 16 hex characters.

    The classic pHash: grayscale → 32×32 (``INTER_AREA``) → 2-D DCT → the top-left 8×8 block of
    low frequencies → one bit per coefficient, set where it is above the block's median. Bits are
    read row-major, most significant first.
    """
    import cv2

    gray = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY) if image.ndim == 3 else image
    small = cv2.resize(gray, (32, 32), interpolation=cv2.INTER_AREA).astype(np.float32)
    low = cv2.dct(small)[:8, :8]
    bits = (low > np.median(low)).ravel()
    return f"{int(np.packbits(bits).view('>u8')[0]):016x}"


def phash_to_int(value: str) -> int:
    """Parse a 16-hex-character pHash into an unsigned 64-bit integer."""
    return int(value, 16)


def hamming(a: str, b: str) -> int:
    """Hamming distance between two hex pHashes."""
    return (phash_to_int(a) ^ phash_to_int(b)).bit_count()
