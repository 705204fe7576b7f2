"""Decode fuzzing: seeded mutations of real JPEG/PNG/WebP/GIF/TIFF/BMP/AVIF bytes through ``decode``.

Every mutated file must end as a decoded image or as a rejection with a reason: no exception
may escape the decode step, whatever the image library raises on the bytes. The mutations are
the classic ones: bit flips, byte overwrites with boundary values, truncation, splicing in
chunks of another file, header corruption, and edits of length/offset fields (PNG chunk
lengths, JPEG segment lengths, TIFF entry counts and offsets, GIF/BMP dimensions). Seeded, so
a failure names a reproducible case.
"""

from __future__ import annotations

import io
import random
import struct
import time
from collections import Counter

import numpy as np
import pytest
from PIL import Image

from fairsets.core.data import Sample, Status
from fairsets.core.step import build_step

CASES_PER_SEED = 400
BOUNDARY = (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF)
BIG_VALUES = (0, 1, 0x7F, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF)


def _seeds(astronaut: np.ndarray, coffee: np.ndarray) -> dict[str, bytes]:
    """Small real photographs in every allowed format (and a few encoder options)."""
    face = Image.fromarray(astronaut[20:180, 150:310]).resize((80, 80))
    cup = Image.fromarray(coffee).resize((96, 64))

    def enc(im: Image.Image, fmt: str, **kw) -> bytes:
        buf = io.BytesIO()
        im.save(buf, fmt, **kw)
        return buf.getvalue()

    exif = Image.Exif()
    exif[0x0112] = 6
    Image.init()
    optional = {"avif": enc(face, "AVIF", quality=60)} if "AVIF" in Image.SAVE else {}
    return optional | {
        "jpeg": enc(face, "JPEG", quality=85, exif=exif),
        "jpeg-progressive": enc(cup, "JPEG", quality=70, progressive=True),
        "png": enc(face, "PNG"),
        "png-palette": enc(cup.quantize(32), "PNG", transparency=0),
        "webp": enc(face, "WEBP", quality=80),
        "webp-lossless": enc(cup, "WEBP", lossless=True),
        "gif": enc(face.convert("P", palette=Image.Palette.ADAPTIVE), "GIF"),
        "gif-animated": enc(
            face.convert("P"), "GIF", save_all=True, append_images=[cup.resize((80, 80)).convert("P")]
        ),
        "tiff": enc(face, "TIFF"),
        "tiff-lzw": enc(cup, "TIFF", compression="tiff_lzw"),
        "tiff-deflate": enc(face, "TIFF", compression="tiff_adobe_deflate"),
        "bmp": enc(cup, "BMP"),
    }


def _length_fields(data: bytes) -> list[tuple[int, str]]:
    """Offsets and struct formats of length/offset/dimension fields of ``data``'s format."""
    fields: list[tuple[int, str]] = []
    if data.startswith(b"\x89PNG"):
        pos = 8
        while pos + 8 <= len(data):
            (n,) = struct.unpack(">I", data[pos : pos + 4])
            fields.append((pos, ">I"))
            if data[pos + 4 : pos + 8] == b"IHDR":
                fields += [(pos + 8, ">I"), (pos + 12, ">I")]  # width, height
            pos += 12 + n
    elif data.startswith(b"\xff\xd8"):
        pos = 2
        while pos + 4 <= len(data) and data[pos] == 0xFF:
            marker = data[pos + 1]
            (n,) = struct.unpack(">H", data[pos + 2 : pos + 4])
            fields.append((pos + 2, ">H"))
            if marker in (0xC0, 0xC2):  # frame header: height, width
                fields += [(pos + 5, ">H"), (pos + 7, ">H")]
            if marker == 0xDA:
                break
            pos += 2 + n
    elif data[:4] in (b"II*\x00", b"MM\x00*"):
        e = "<" if data[:2] == b"II" else ">"
        (ifd,) = struct.unpack(e + "I", data[4:8])
        fields.append((4, e + "I"))
        if ifd + 2 <= len(data):
            (count,) = struct.unpack(e + "H", data[ifd : ifd + 2])
            fields.append((ifd, e + "H"))
            for i in range(min(count, 64)):
                entry = ifd + 2 + 12 * i
                if entry + 12 <= len(data):
                    fields += [(entry + 4, e + "I"), (entry + 8, e + "I")]  # count, value/offset
    elif data.startswith(b"GIF"):
        fields += [(6, "<H"), (8, "<H")]  # logical screen
        pos = data.find(b"\x2c", 13)
        if pos > 0:
            fields += [(pos + 5, "<H"), (pos + 7, "<H")]  # image width, height
    elif data.startswith(b"RIFF"):
        fields += [(4, "<I"), (16, "<I")]
    elif data.startswith(b"BM"):
        fields += [(2, "<I"), (10, "<I"), (14, "<I"), (18, "<i"), (22, "<i"), (28, "<H"), (34, "<I")]
    return [(o, f) for o, f in fields if o + struct.calcsize(f) <= len(data)]


def _mutate(data: bytes, other: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One seeded mutation of ``data`` (``other``: another file to splice from)."""
    b = bytearray(data)
    kind = rng.choice(["bitflip", "bytes", "truncate", "splice", "header", "length", "length", "delete"])
    if kind == "bitflip":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif kind == "bytes":
        for _ in range(rng.randint(1, 6)):
            b[rng.randrange(len(b))] = rng.choice((*BOUNDARY, rng.randrange(256)))
    elif kind == "truncate":
        b = b[: rng.randrange(len(b))]
    elif kind == "splice":
        n = rng.randint(1, 256)
        start = rng.randrange(max(1, len(other) - n))
        at = rng.randrange(len(b))
        piece = other[start : start + n]
        b = b[:at] + piece + b[at + (len(piece) if rng.random() < 0.5 else 0) :]
    elif kind == "header":
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(min(len(b), 64))] = rng.randrange(256)
    elif kind == "length":
        fields = _length_fields(data)
        if not fields:
            return _mutate(data, other, rng)
        for _ in range(rng.randint(1, 2)):
            off, fmt = rng.choice(fields)
            size = struct.calcsize(fmt)
            value = rng.choice(BIG_VALUES) & ((1 << (8 * size)) - 1)
            if fmt.endswith("i"):
                value = value - (1 << 32) if value >= 1 << 31 else value
            struct.pack_into(fmt, b, off, value)
    else:  # delete a region
        i = rng.randrange(len(b))
        del b[i : i + rng.randint(1, 64)]
    return kind, bytes(b)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_no_exception_escapes_decode_on_mutated_images(astronaut, coffee, ctx):
    seeds = _seeds(astronaut, coffee)
    names = sorted(seeds)
    # A small pixel cap keeps each case cheap (mutated headers declare huge images).
    step = build_step("decode", {"min_side": 8, "max_pixels": 1_000_000, "hashes": False})
    rng = random.Random(20261124)
    cases: list[tuple[str, str, bytes]] = []
    for name in names:
        for _ in range(CASES_PER_SEED):
            kind, data = _mutate(seeds[name], seeds[rng.choice(names)], rng)
            cases.append((name, kind, data))
    samples = [Sample(key=f"c{i}", data=data) for i, (_, _, data) in enumerate(cases)]

    started = time.perf_counter()
    out = list(step.run(iter(samples), ctx))  # raises if any exception escapes
    elapsed = time.perf_counter() - started

    assert len(out) == len(cases) >= 4000
    outcome: Counter[tuple[str, str]] = Counter()
    reasons: Counter[str] = Counter()
    for (name, kind, _), s in zip(cases, out, strict=True):
        if s.status is Status.OK:
            assert s.image is not None and s.image.dtype == np.uint8 and s.image.ndim == 3, (name, kind)
            outcome[(name, "ok")] += 1
        else:
            assert s.status is Status.REJECTED and s.step == "decode", (name, kind, s.status)
            assert s.reason, (name, kind)
            outcome[(name, "rejected")] += 1
            reasons[s.reason.split(":")[0] if ":" in s.reason else s.reason] += 1
    # The mutations exercise both outcomes for every format (the fuzzing is not vacuous).
    for name in names:
        assert outcome[(name, "ok")] > 0 and outcome[(name, "rejected")] > 0, (name, outcome)
    assert reasons["truncated or corrupt image"] > 100, reasons
    print(f"{len(cases)} cases in {elapsed:.1f}s; outcomes {dict(outcome)}; reasons {dict(reasons)}")
