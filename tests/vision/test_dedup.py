"""Tests of the hashes and of driver-side duplicate detection."""

from __future__ import annotations

import io
import random
import time

import cv2
import numpy as np
import pytest
from PIL import Image, PngImagePlugin

from fairsets.core.data import Sample
from fairsets.core.step import build_step
from fairsets.vision.dedup import _LUT, find_duplicates, popcount64
from fairsets.vision.hashing import hamming, phash, pixel_sha256


def _row(key: str, data: bytes, ctx, **extra) -> dict:
    s = build_step("decode", {}).process(Sample(key=key, data=data), ctx)
    assert s.ok, s.reason
    return {
        "key": key,
        "pixel_sha256": s.annotations["pixel_sha256"],
        "phash": s.annotations["phash"],
        **extra,
    }


def _png(image: np.ndarray, text: str | None = None) -> bytes:
    buf = io.BytesIO()
    info = None
    if text is not None:
        info = PngImagePlugin.PngInfo()
        info.add_text("Comment", text)
    Image.fromarray(image).save(buf, "PNG", pnginfo=info, compress_level=1 if text else 6)
    return buf.getvalue()


def test_pixel_hash_depends_on_shape():
    a = np.zeros((4, 6, 3), np.uint8)
    assert pixel_sha256(a) != pixel_sha256(a.reshape(6, 4, 3))
    assert pixel_sha256(a) == pixel_sha256(a.copy())


def test_phash_format_and_stability(astronaut):
    h = phash(astronaut)
    assert len(h) == 16 and int(h, 16) >= 0
    assert hamming(h, phash(cv2.resize(astronaut, (300, 300), interpolation=cv2.INTER_AREA))) <= 4


def test_exact_duplicate(astronaut, ctx):
    a, b = _png(astronaut), _png(astronaut, text="copied from elsewhere")
    assert a != b
    dups = find_duplicates([_row("a", a, ctx), _row("b", b, ctx)])
    assert dups == [{"key": "b", "kept_key": "a", "kind": "exact", "distance": 0}]


def test_near_duplicate(astronaut, encode, ctx):
    small = cv2.resize(astronaut, (384, 384), interpolation=cv2.INTER_AREA)
    rows = [_row("a_orig", _png(astronaut), ctx), _row("b_copy", encode(small, "JPEG", quality=80), ctx)]
    dups = find_duplicates(rows)
    assert len(dups) == 1
    d = dups[0]
    assert (d["key"], d["kept_key"], d["kind"]) == ("b_copy", "a_orig", "near") and d["distance"] <= 6


def test_different_photos_not_duplicates(astronaut, grace_hopper, coffee, camera_rgb, encode, ctx):
    from skimage import data

    rows = [
        _row(name, encode(np.ascontiguousarray(img)), ctx)
        for name, img in [
            ("astronaut", astronaut),
            ("grace", grace_hopper),
            ("coffee", coffee),
            ("camera", camera_rgb),
            ("chelsea", data.chelsea()),
            ("rocket", data.rocket()),
        ]
    ]
    assert find_duplicates(rows) == []


def test_order_and_priority():
    rows = [
        {"key": "b", "pixel_sha256": "s1", "phash": "0000000000000000"},
        {"key": "a", "pixel_sha256": "s1", "phash": "0000000000000000"},
        {"key": "c", "pixel_sha256": "s2", "phash": "0000000000000007"},  # 3 bits from a
        {"key": "d", "pixel_sha256": "s3", "phash": "ffffffffffffffff"},
    ]
    expected = [
        {"key": "b", "kept_key": "a", "kind": "exact", "distance": 0},
        {"key": "c", "kept_key": "a", "kind": "near", "distance": 3},
    ]
    assert find_duplicates(rows) == expected
    assert find_duplicates(list(reversed(rows))) == expected
    prio = [dict(r, priority=0 if r["key"] == "c" else 1) for r in rows]
    assert find_duplicates(prio) == [
        {"key": "a", "kept_key": "c", "kind": "near", "distance": 3},
        {"key": "b", "kept_key": "c", "kind": "near", "distance": 3},
    ]
    assert find_duplicates(rows, hamming=2) == expected[:1]


def test_popcount_fallback_matches():
    x = np.random.default_rng(0).integers(0, 2**63, 1000, dtype=np.uint64) * np.uint64(2)
    lut = _LUT[x.view(np.uint8)].reshape(-1, 8).sum(axis=1)
    assert np.array_equal(popcount64(x).astype(int), lut.astype(int))
    assert [bin(int(v)).count("1") for v in x[:20]] == lut[:20].tolist()


@pytest.mark.timeout(60)
def test_20k_rows_fast():
    rng = random.Random(0)
    rows = [
        {"key": f"k{i:05d}", "pixel_sha256": f"{i}", "phash": f"{rng.getrandbits(64):016x}"}
        for i in range(20_000)
    ]
    rows += [dict(rows[i], key=f"zdup{i}") for i in range(0, 20_000, 100)]
    start = time.perf_counter()
    dups = find_duplicates(rows)
    assert time.perf_counter() - start < 15
    assert {d["key"] for d in dups} >= {f"zdup{i}" for i in range(0, 20_000, 100)}
