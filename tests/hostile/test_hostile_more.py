"""More hostile files and listings for the ``local`` source and the ``decode`` step.

Beyond the corpus of ``hostile_corpus.py``: files that are cheap to store but costly to decode
(CPU and memory bombs under ``max_pixels``), folders whose names are not UTF-8, and Parquet
listings whose values are not text. Each is a per-sample rejection with a reason, or one clear
error about the listing, never a crash, a hang or a silently mangled value.
"""

from __future__ import annotations

import io
import os
import re
import struct
import subprocess
import sys
import time
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from fairsets.core.data import Sample, Status
from fairsets.core.step import build_step
from fairsets.sources import SourceError, build_source
from fairsets.sources.local import MAX_LISTING_COLUMNS
from fairsets.vision.decode import to_rgb
from fairsets.vision.imageformat import (
    MAX_JPEG_SCANS,
    MAX_PNG_CHUNKS,
    gif_header_blocks,
    jpeg_counts,
    jpeg_scan_count,
    png_chunk_count,
    tiff_strip_count,
)
from helpers import jpeg, portraits


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


# -- folder names that are not UTF-8 ----------------------------------------------------------------

FOLDER_RECIPE = """
name = "names"
seed = 3
groups = ["state", "gender"]
quota = 1
variants = ["imbalanced"]

[source]
type = "local"
path = "images"
layout = "{state}/{gender}"
defaults = {license = "CC0-1.0"}

[[steps]]
name = "license"

[[steps]]
name = "decode"

[executor]
workers = 0
"""


def _build(tmp_path: Path, recipe: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "r.toml").write_text(recipe)
    cmd = [sys.executable, "-m", "fairsets.cli", "build", "r.toml", "--out", "out", "--quiet"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=100, cwd=tmp_path)


@pytest.mark.timeout(120)
def test_folder_names_that_are_not_utf8_are_rejected_not_a_crash(tmp_path: Path) -> None:
    """A file (or a layout folder) whose name is not UTF-8 crashed the scan with
    UnicodeEncodeError and a traceback; now each such file is one rejection naming it (escaped),
    and the rest of the folder builds."""
    root = os.fsencode(tmp_path / "images")
    for folder, name, i in [
        (b"Goa/female", b"ok.jpg", 0),
        (b"Goa/female", b"bad\xff.jpg", 0),
        (b"Go\xe9/male", b"x.jpg", 0),  # a latin-1 folder name: the group value is not text either
        (b"Goa/male", b"line\nbreak.jpg", 1),  # odd but valid UTF-8: built as any other file
    ]:
        os.makedirs(root + b"/" + folder, exist_ok=True)
        with open(root + b"/" + folder + b"/" + name, "wb") as fh:
            fh.write(jpeg(portraits()[i]))
    proc = _build(tmp_path, FOLDER_RECIPE)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    rejects = pq.read_table(tmp_path / "out" / "rejects.parquet").to_pylist()
    by_path = {r["source_path"]: r for r in rejects}
    assert "not UTF-8" in by_path["Goa/female/bad\\xff.jpg"]["reason"]
    assert "not UTF-8" in by_path["Go\\xe9/male/x.jpg"]["reason"]
    assert "Goa/male/line\nbreak.jpg" not in by_path


# -- Parquet listings whose values are not text --------------------------------------------------

_BASE = {"path": ["a.jpg"], "gender": ["female"], "license": ["CC0-1.0"]}

# name → (the column "state" or an extra one, expected: "ok" or the Arrow type the error names)
PARQUET_CASES: dict[str, tuple[dict[str, pa.Array], str]] = {
    "bytes-group": ({"state": pa.array([b"Goa"])}, "binary"),
    "bytes-not-utf8": ({"state": pa.array([b"\xff\x00"])}, "binary"),
    "struct-group": ({"state": pa.array([{"name": "Goa"}])}, "struct"),
    "list-group": ({"state": pa.array([["Goa", "Kerala"]])}, "list"),
    "map-group": ({"state": pa.array([[("k", "v")]], pa.map_(pa.string(), pa.string()))}, "map"),
    "bytes-extra": ({"state": pa.array(["Goa"]), "blob": pa.array([b"\x00" * 64])}, "binary"),
    "nested-extra": ({"state": pa.array(["Goa"]), "meta": pa.array([{"a": [1, 2]}])}, "struct"),
    "dictionary-of-bytes": ({"state": pa.array([b"Goa"]).dictionary_encode()}, "dictionary<values=binary"),
    "dictionary-of-text": ({"state": pa.array(["Goa"]).dictionary_encode()}, "ok"),
    "large-string": ({"state": pa.array(["Goa"], pa.large_string())}, "ok"),
    "float-group": ({"state": pa.array([1.5])}, "ok"),
    "bool-group": ({"state": pa.array([True])}, "ok"),
    "timestamp-extra": ({"state": pa.array(["Goa"]), "taken": pa.array([0], pa.timestamp("s"))}, "ok"),
}


@pytest.mark.parametrize("name", sorted(PARQUET_CASES))
def test_parquet_listing_values_that_are_not_text(name: str, tmp_path: Path) -> None:
    """Binary and nested Parquet columns were published as Python reprs (``state = "b'Goa'"``,
    a path ``"{'p': 'a.jpg'}"``); now the listing is refused naming the column and its type."""
    columns, expected = PARQUET_CASES[name]
    pq.write_table(pa.table({**_BASE, **columns}), tmp_path / "l.parquet")
    source = build_source("local", {"path": "l.parquet"}, tmp_path, ["state", "gender"])
    if expected == "ok":
        (row,) = source.scan()
        assert not any(str(v).startswith(("b'", "{", "[")) for v in row.values() if v is not None), row
        return
    with pytest.raises(SourceError, match=rf"column '\w+' holds {re.escape(expected)}") as err:
        source.scan()
    assert "cast it to string" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.timeout(120)
def test_parquet_listing_with_a_binary_path_column_is_one_line(tmp_path: Path) -> None:
    pq.write_table(
        pa.table({"path": [b"a.jpg"], "state": ["Goa"], "gender": ["female"], "license": ["CC0-1.0"]}),
        tmp_path / "l.parquet",
    )
    proc = _build(
        tmp_path, FOLDER_RECIPE.replace('path = "images"', 'path = "l.parquet"').replace("layout", "#")
    )
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "column 'path' holds binary" in err, err


# -- memory bombs under max_pixels ----------------------------------------------------------------


def _wide_mode_image(mode: str) -> Image.Image:
    """A 5-megapixel image in ``mode`` (2500 × 2000), loaded."""
    n = 5_000_000
    if mode == "F":
        im = Image.fromarray(np.linspace(-5.0, 1000.0, n, dtype=np.float32).reshape(2000, 2500), "F")
    elif mode == "I":
        im = Image.fromarray(np.arange(n, dtype=np.int32).reshape(2000, 2500), "I")
    elif mode == "I;16":
        im = Image.frombytes("I;16", (2500, 2000), (np.arange(n) % 65536).astype("<u2").tobytes())
    else:
        im = Image.fromarray(np.full((2000, 2500, 4), 100, np.uint8), "RGBA")
    im.load()
    return im


@pytest.mark.parametrize("mode", ["F", "I", "I;16", "RGBA"])
def test_converting_a_wide_mode_image_costs_little_more_than_its_pixels(mode: str) -> None:
    """A 250 kB deflated float (or 32-bit, or RGBA) TIFF of 40 MP is allowed by max_pixels; its
    conversion to RGB went through float64 copies of the whole image and peaked at 1.2 GB (per
    worker). Now it is converted a band of rows at a time: at 5 MP the peak was 123-133 MB and is
    47-55 MB (the numpy copy of the pixels, 20 MB, the 15 MB result and small bands)."""
    im = _wide_mode_image(mode)
    tracemalloc.start()
    try:
        rgb = to_rgb(im)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rgb.shape == (2000, 2500, 3) and rgb.dtype == np.uint8 and rgb.flags.c_contiguous
    assert peak < 80 * 2**20, f"{peak / 2**20:.0f} MB"


def test_band_conversion_keeps_the_whole_image_range() -> None:
    """The range used to stretch an image is the whole image's, not each band's."""
    a = np.zeros((3000, 600), np.float32)  # several bands of rows
    a[-1, -1] = 1000.0  # the maximum, in the last band only
    rgb = to_rgb(Image.fromarray(a, "F"))
    assert rgb[0, 0, 0] == 0 and rgb[-1, -1, 0] == 255
    a[:1500] = 500.0
    assert to_rgb(Image.fromarray(a, "F"))[0, 0, 0] == 128  # 500 of 0..1000


# -- CPU bombs: PNG chunks ------------------------------------------------------------------------


def _png_chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def _png_with_chunks(n: int, kind: bytes = b"zzZz") -> bytes:
    """A 128 × 128 PNG with ``n`` empty chunks of ``kind`` before its pixels."""
    w = h = 128
    pixels = zlib.compress(b"".join(b"\x00" + b"\x80" * (w * 3) for _ in range(h)))
    head = b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    return head + _png_chunk(kind, b"") * n + _png_chunk(b"IDAT", pixels) + _png_chunk(b"IEND", b"")


def test_png_chunk_count() -> None:
    assert png_chunk_count(_png_with_chunks(0)) == 3
    assert png_chunk_count(_png_with_chunks(10)) == 13
    assert png_chunk_count(_png_with_chunks(10)[:-12]) == 12  # no IEND: counted to the end
    assert png_chunk_count(_png_with_chunks(500), limit=100) == 101  # stops counting


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", [b"zzZz", b"IDAT"])
def test_png_with_a_million_chunks_is_rejected_before_decoding(kind: bytes) -> None:
    """Pillow parses each chunk in Python: 1.5 million empty private chunks in 18 MB took 10 s
    (empty IDATs 3 s) for a 256 × 256 image; more than MAX_PNG_CHUNKS chunks are refused first."""
    data = _png_with_chunks(1_000_000, kind)
    assert len(data) < 20_000_000  # under the decode step's default byte cap
    t0 = time.perf_counter()
    s = _decode(data, min_side=16)
    took = time.perf_counter() - t0
    assert s.status is Status.REJECTED and "too many PNG chunks" in s.reason, s.reason
    assert took < 1.5, took


def test_png_with_many_ordinary_chunks_still_decodes() -> None:
    s = _decode(_png_with_chunks(MAX_PNG_CHUNKS - 10), min_side=16)
    assert s.status is Status.OK and s.image.shape == (128, 128, 3)


# -- huge listings --------------------------------------------------------------------------------


def _listing_source(tmp_path: Path, name: str, **params: object) -> object:
    return build_source("local", {"path": name, **params}, tmp_path, ["state", "gender"])


def test_parquet_listing_with_too_many_rows_is_refused_by_its_metadata(tmp_path: Path) -> None:
    """A listing was read whole, however large: a million rows (63 MB of CSV) took 1.5 GB and
    84 s to scan. A Parquet file is now refused by the row count in its footer, before reading."""
    n = 6
    table = pa.table(
        {
            "path": [f"{i}.jpg" for i in range(n)],
            "state": ["Goa"] * n,
            "gender": ["f"] * n,
            "license": ["CC0-1.0"] * n,
        }
    )
    pq.write_table(table, tmp_path / "l.parquet")
    assert len(_listing_source(tmp_path, "l.parquet", max_listing_rows=6).scan()) == 6
    with pytest.raises(SourceError, match=r"l\.parquet has 6 rows; a listing may have at most 5 rows") as err:
        _listing_source(tmp_path, "l.parquet", max_listing_rows=5).scan()
    assert "source.max_listing_rows" in str(err.value)


def test_csv_listing_with_too_many_rows_or_bytes_is_refused(tmp_path: Path) -> None:
    rows = "".join(f"{i}.jpg,Goa,f,CC0-1.0\n" for i in range(6))
    (tmp_path / "l.csv").write_text("path,state,gender,license\n" + rows)
    assert len(_listing_source(tmp_path, "l.csv", max_listing_rows=6).scan()) == 6
    with pytest.raises(SourceError, match=r"goes on past line 6; a listing may have at most 5 rows"):
        _listing_source(tmp_path, "l.csv", max_listing_rows=5).scan()
    # Refused by its size before it is read: more than 1 KiB per allowed row.
    (tmp_path / "l.csv").write_text(
        "path,state,gender,license,note\n" + f"a.jpg,Goa,f,CC0-1.0,{'x' * 3000}\n"
    )
    with pytest.raises(SourceError, match=r"is 3,052 bytes, more than 2 rows of 1 KiB"):
        _listing_source(tmp_path, "l.csv", max_listing_rows=2).scan()


@pytest.mark.timeout(120)
def test_a_listing_over_the_row_cap_is_one_line_from_the_cli(tmp_path: Path) -> None:
    (tmp_path / "l.csv").write_text(
        "path,state,gender,license\n" + "".join(f"{i}.jpg,Goa,f,CC0-1.0\n" for i in range(3))
    )
    recipe = FOLDER_RECIPE.replace('path = "images"', 'path = "l.csv"\nmax_listing_rows = 2').replace(
        "layout", "#"
    )
    proc = _build(tmp_path, recipe)
    err = proc.stderr.strip()
    assert proc.returncode == 2 and len(err.splitlines()) == 1, err
    assert "at most 2 rows" in err and "Traceback" not in err


# -- CPU bombs: TIFF strips -----------------------------------------------------------------------


def _tiff_with_strips(width: int, n: int, *, big_endian: bool = False) -> bytes:
    """An uncompressed 1-bit TIFF ``width`` × ``n`` in ``n`` one-row strips that all point to the
    same 64 zero bytes: 8 bytes per strip in the file."""
    e = ">" if big_endian else "<"
    tags = 10
    ifd_size = 2 + 12 * tags + 4
    pixels = 8 + ifd_size
    offsets = pixels + 64
    counts = offsets + 4 * n
    row = (width + 7) // 8

    def entry(tag: int, kind: int, count: int, value: int) -> bytes:
        packed = struct.pack(f"{e}HH", value, 0) if kind == 3 else struct.pack(f"{e}I", value)
        return struct.pack(f"{e}HHI", tag, kind, count) + packed

    entries = [
        entry(256, 4, 1, width),
        entry(257, 4, 1, n),
        entry(258, 3, 1, 1),
        entry(259, 3, 1, 1),
        entry(262, 3, 1, 1),
        entry(273, 4, n, offsets),
        entry(277, 3, 1, 1),
        entry(278, 4, 1, 1),
        entry(279, 4, n, counts),
        entry(284, 3, 1, 1),
    ]
    head = (b"MM\x00*" if big_endian else b"II*\x00") + struct.pack(f"{e}I", 8)
    ifd = struct.pack(f"{e}H", tags) + b"".join(entries) + struct.pack(f"{e}I", 0)
    return (
        head
        + ifd
        + b"\x00" * 64
        + struct.pack(f"{e}{n}I", *[pixels] * n)
        + struct.pack(f"{e}{n}I", *[row] * n)
    )


def test_tiff_strip_count() -> None:
    buf = io.BytesIO()
    Image.fromarray(np.zeros((600, 500, 3), np.uint8)).save(buf, "TIFF")
    assert 1 <= tiff_strip_count(buf.getvalue()) <= 100
    assert tiff_strip_count(_tiff_with_strips(64, 300)) == 300
    assert tiff_strip_count(_tiff_with_strips(64, 300, big_endian=True)) == 300
    assert tiff_strip_count(b"II*\x00\xff\xff\xff\x7f") == 0  # the directory is past the end
    bigtiff = io.BytesIO()
    Image.new("L", (80, 80)).save(bigtiff, "TIFF", big_tiff=True)
    assert 1 <= tiff_strip_count(bigtiff.getvalue()) <= 10
    assert _decode(bigtiff.getvalue()).status is Status.OK


@pytest.mark.timeout(60)
def test_tiff_with_millions_of_strips_is_rejected_before_pillow_opens_it() -> None:
    """600 000 one-row strips of a 38 MP image fit in 4.8 MB and took 18 s to decode (2.4 million in
    19 MB took 12 s and 0.9 GB only to open): Pillow makes each offset a Python object and each
    strip a decoder call. They are counted from the directory first."""
    data = _tiff_with_strips(64, 600_000)  # 38.4 MP, under max_pixels
    assert len(data) < 20_000_000
    t0 = time.perf_counter()
    s = _decode(data)
    assert s.status is Status.REJECTED and "too many TIFF strips" in s.reason, s.reason
    assert time.perf_counter() - t0 < 1.0


def test_tiff_with_ordinary_strips_still_decodes() -> None:
    s = _decode(_tiff_with_strips(64, 1000))
    assert s.status is Status.OK and s.image.shape == (1000, 64, 3)


# -- CPU bombs: RLE bitmaps -----------------------------------------------------------------------


def _bmp_rle8(width: int, height: int) -> bytes:
    """An 8-bit RLE BMP whose every pixel is a run of one (2 bytes per pixel)."""
    pixels = (b"\x01\x07" * width + b"\x00\x00") * height + b"\x00\x01"
    palette = bytes(range(256)) * 4
    offset = 14 + 40 + len(palette)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 8, 1, len(pixels), 2835, 2835, 256, 0)
    return b"BM" + struct.pack("<IHHI", offset + len(pixels), 0, 0, offset) + info + palette + pixels


def test_rle_bmp_is_refused_before_decoding() -> None:
    """Pillow decodes RLE bitmaps in Python: 9.6 MP of one-pixel runs (19 MB) took 11 s. RLE BMP
    is not a format a photo comes in; it is refused by its header, with how to convert it."""
    small = _bmp_rle8(80, 80)
    with Image.open(io.BytesIO(small)) as im:  # a valid file: Pillow reads it
        assert im.size == (80, 80) and im.info.get("compression") == 1
    s = _decode(small)
    assert s.status is Status.REJECTED and "RLE" in s.reason and "PNG" in s.reason, s.reason
    buf = io.BytesIO()
    Image.new("RGB", (80, 80), (10, 20, 30)).save(buf, "BMP")  # uncompressed: decodes
    assert _decode(buf.getvalue()).status is Status.OK


# -- the listing path itself ----------------------------------------------------------------------


@pytest.mark.parametrize("target", ["l.csv", "missing.csv"])
def test_a_listing_that_is_a_dangling_or_looping_link_says_so(target: str, tmp_path: Path) -> None:
    """A listing path that is a link to itself (or to nothing) was reported as 'no such file or
    folder', which the curator, looking at the file in the folder, cannot believe."""
    (tmp_path / "l.csv").symlink_to(tmp_path / target)
    with pytest.raises(SourceError, match="symbolic link that leads nowhere"):
        _listing_source(tmp_path, "l.csv").scan()


def test_a_listing_that_is_a_link_to_a_folder_is_read_as_a_folder(tmp_path: Path) -> None:
    (tmp_path / "real" / "Goa" / "f").mkdir(parents=True)
    (tmp_path / "real" / "Goa" / "f" / "a.jpg").write_bytes(b"x")
    (tmp_path / "images").symlink_to(tmp_path / "real")
    source = _listing_source(tmp_path, "images", layout="{state}/{gender}", defaults={"license": "CC0-1.0"})
    rows = source.scan()
    assert [(r["source_path"], r["state"]) for r in rows] == [("Goa/f/a.jpg", "Goa")]


# -- CPU bombs: JPEG marker segments --------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("segment", [b"\xff\xfe\x00\x02", b"\xff\xe0\x00\x02", b"\xff\xff\xff\xfe\x00\x02"])
def test_jpeg_with_millions_of_header_segments_is_rejected_before_decoding(segment: bytes) -> None:
    """Pillow reads each segment before the first scan in Python: 4 million empty comments (16 MB)
    took 29 s, empty APP0 segments 13 s. More than MAX_JPEG_SEGMENTS segments are refused first."""
    data = _progressive(64)
    bomb = data[:2] + segment * 1_000_000 + data[2:]
    t0 = time.perf_counter()
    s = _decode(bomb, min_side=16)
    assert s.status is Status.REJECTED and "too many JPEG marker segments" in s.reason, s.reason
    assert time.perf_counter() - t0 < 1.0
    scans, segments = jpeg_counts(data)
    assert scans == jpeg_scan_count(data) and scans < segments < 40
    ok = data[:2] + segment * 100 + data[2:]
    assert _decode(ok, min_side=16).status is Status.OK


# -- CPU bombs: GIF extension blocks --------------------------------------------------------------


def _gif(*, palette: bool = True) -> bytes:
    buf = io.BytesIO()
    frames = [Image.new("P", (80, 80), i) for i in range(3)]
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:], loop=0, comment=b"hello")
    data = buf.getvalue()
    if not palette:  # drop the global colour table (each frame then needs its own; not decoded here)
        size = 3 << ((data[10] & 7) + 1)
        data = data[:10] + bytes([data[10] & 0x7F]) + data[11:13] + data[13 + size :]
    return data


def _with_comments(gif: bytes, n: int, sub_blocks: int = 0) -> bytes:
    """``gif`` with ``n`` comment extensions (each of ``sub_blocks`` one-byte sub-blocks) first."""
    table = (3 << ((gif[10] & 7) + 1)) if gif[10] & 0x80 else 0
    at = 13 + table
    comment = b"\x21\xfe" + b"\x01x" * sub_blocks + b"\x00"
    return gif[:at] + comment * n + gif[at:]


def test_gif_header_blocks() -> None:
    data = _gif()
    base = gif_header_blocks(data)
    assert 1 <= base <= 10  # the loop extension, the comment, the frame's control block
    assert gif_header_blocks(_with_comments(data, 7)) == base + 7
    assert gif_header_blocks(_with_comments(data, 2, sub_blocks=3)) == base + 8
    bare = _gif(palette=False)
    assert gif_header_blocks(_with_comments(bare, 5)) == gif_header_blocks(bare) + 5
    assert gif_header_blocks(_with_comments(data, 50), limit=10) == 11  # stops counting


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("n", "sub_blocks"), [(6_000_000, 0), (1, 9_000_000)])
def test_gif_with_millions_of_extension_blocks_is_rejected_before_decoding(n: int, sub_blocks: int) -> None:
    """Pillow reads the blocks before the first image in Python and joins comments as it goes:
    6 million empty comments (18 MB) took 16 s, one comment of 9 million one-byte sub-blocks 21 s."""
    data = _with_comments(_gif(), n, sub_blocks)
    assert len(data) < 20_000_000
    t0 = time.perf_counter()
    s = _decode(data, min_side=16)
    assert s.status is Status.REJECTED and "too many GIF extension blocks" in s.reason, s.reason
    assert time.perf_counter() - t0 < 1.0


def test_gif_with_some_comments_still_decodes() -> None:
    s = _decode(_with_comments(_gif(), 100, sub_blocks=2), min_side=16)
    assert s.status is Status.OK and s.image.shape == (80, 80, 3)


# -- wide listings --------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_listing_with_200k_columns_is_refused_at_once(tmp_path: Path) -> None:
    """The header's repeated-name check was quadratic: 20 000 columns (one row, 200 kB) took 15 s
    to scan, 200 000 would take about 25 minutes. Now a header wider than MAX_LISTING_COLUMNS is
    refused as soon as it is read."""
    n = 200_000
    header = ["path", "state", "gender", "license", *(f"c{i}" for i in range(n))]
    row = ["a.jpg", "Goa", "f", "CC0-1.0", *(["x"] * n)]
    (tmp_path / "l.csv").write_text(",".join(header) + "\n" + ",".join(row) + "\n")
    t0 = time.perf_counter()
    with pytest.raises(SourceError, match=rf"has {n + 4} columns, more than the {MAX_LISTING_COLUMNS}"):
        _listing_source(tmp_path, "l.csv").scan()
    assert time.perf_counter() - t0 < 5.0


def test_listing_width_cap_applies_to_parquet_and_allows_the_cap(tmp_path: Path) -> None:
    base = {"path": ["a.jpg"], "state": ["Goa"], "gender": ["f"], "license": ["CC0-1.0"]}
    extra = MAX_LISTING_COLUMNS - len(base)
    pq.write_table(pa.table({**base, **{f"c{i}": ["x"] for i in range(extra)}}), tmp_path / "ok.parquet")
    (row,) = _listing_source(tmp_path, "ok.parquet").scan()
    assert row["c0"] == "x"
    wide = pa.table({**base, **{f"c{i}": ["x"] for i in range(extra + 1)}})
    pq.write_table(wide, tmp_path / "wide.parquet")
    with pytest.raises(SourceError, match=r"wide\.parquet has 1001 columns"):
        _listing_source(tmp_path, "wide.parquet").scan()
