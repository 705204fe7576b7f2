"""More hostile files and listings for the ``local`` source and the ``decode`` step.

Beyond the corpus of ``hostile_corpus.py``: files that are cheap to store but costly to decode
(CPU and memory bombs under ``max_pixels``), folders whose names are not UTF-8, and Parquet
listings whose values are not text. Each is a per-sample rejection with a reason, or one clear
error about the listing, never a crash, a hang or a silently mangled value.
"""

from __future__ import annotations

import io
import time

import numpy as np
import pytest
from PIL import Image

from fairsets.data import Sample, Status
from fairsets.pipeline.step import build_step
from fairsets.vision.imageformat import MAX_JPEG_SCANS, jpeg_scan_count


def _decode(data: bytes, **params: object) -> Sample:
    return build_step("decode", params).process(Sample(key="k", data=data), None)


def _progressive(side: int = 256, *, flat: bool = False) -> bytes:
    rng = np.random.default_rng(0)
    shape = (side, side, 3)
    arr = np.full(shape, 120, np.uint8) if flat else rng.integers(0, 256, shape, dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", progressive=True, quality=80)
    return buf.getvalue()


def _with_extra_scans(jpeg: bytes, n: int) -> bytes:
    """``jpeg`` with its last scan repeated ``n`` more times (each a full pass for the decoder)."""
    sos, eoi = jpeg.rfind(b"\xff\xda"), jpeg.rfind(b"\xff\xd9")
    return jpeg[:eoi] + jpeg[sos:eoi] * n + b"\xff\xd9"


# -- CPU bombs: JPEG scans ------------------------------------------------------------------------


def test_jpeg_scan_count_of_a_real_progressive_jpeg() -> None:
    data = _progressive()
    assert 2 <= jpeg_scan_count(data) <= 20
    assert jpeg_scan_count(_with_extra_scans(data, 500)) == MAX_JPEG_SCANS + 1  # stops counting


def test_jpeg_scan_markers_inside_other_segments_are_not_scans() -> None:
    """``FF DA`` bytes inside an APP segment (an EXIF thumbnail, a comment) are not scans."""
    data = _progressive()
    payload = b"\xff\xda" * 300
    app = b"\xff\xe9" + (len(payload) + 2).to_bytes(2, "big") + payload
    crafted = data[:2] + app + data[2:]
    assert jpeg_scan_count(crafted) == jpeg_scan_count(data)
    assert _decode(crafted, min_side=16).status is Status.OK


@pytest.mark.timeout(60)
def test_jpeg_with_thousands_of_scans_is_rejected_before_decoding() -> None:
    """A 4-megapixel JPEG of 73 kB with 3000 empty scans takes 14 s of CPU to decode (measured;
    at 40 MP and a 20 MB cap, hours); it is refused by counting its scans, in well under a second."""
    data = _with_extra_scans(_progressive(2048, flat=True), 3000)
    assert len(data) < 1_000_000
    t0 = time.perf_counter()
    s = _decode(data)
    took = time.perf_counter() - t0
    assert s.status is Status.REJECTED
    assert "too many JPEG scans" in s.reason and str(MAX_JPEG_SCANS) in s.reason
    assert took < 2.0, took


def test_jpeg_scan_limit_is_a_parameter() -> None:
    data = _with_extra_scans(_progressive(), 20)
    assert _decode(data).status is Status.OK
    s = _decode(data, max_jpeg_scans=10)
    assert s.status is Status.REJECTED and "more than 10" in s.reason
