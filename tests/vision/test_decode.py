"""Tests of the ``decode`` step: guards, rejections, mode conversion, EXIF orientation, hashes."""

from __future__ import annotations

import io
import resource
import struct
import tracemalloc
import zlib

import numpy as np
import pytest
from PIL import Image

from fairsets.core.data import Sample, Status
from fairsets.core.step import build_step


def _decode(data: bytes, ctx, **params) -> Sample:
    return build_step("decode", params).process(Sample(key="k", data=data), ctx)


def _png_header_only(width: int, height: int) -> bytes:
    """A tiny, valid-looking PNG that declares ``width × height`` RGB pixels (a decompression bomb)."""

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return (
            struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 1024)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def test_ok_jpeg(astronaut_jpeg, ctx):
    s = _decode(astronaut_jpeg, ctx)
    assert s.status is Status.OK
    assert s.image.shape == (512, 512, 3) and s.image.dtype == np.uint8 and s.image.flags.c_contiguous
    assert s.data is None
    a = s.annotations
    assert (a["width"], a["height"], a["format"], a["mode"]) == (512, 512, "JPEG", "RGB")
    assert len(a["pixel_sha256"]) == 64 and len(a["phash"]) == 16
    assert s.meta == {}


def test_keep_bytes_option(astronaut_jpeg, ctx):
    s = _decode(astronaut_jpeg, ctx, drop_bytes=False, hashes=False)
    assert s.data == astronaut_jpeg and "phash" not in s.annotations


def test_too_many_bytes(ctx):
    s = _decode(b"\xff" * 20_000_001, ctx)
    assert s.status is Status.REJECTED and s.step == "decode"
    assert s.reason == "too many bytes: 20000001 > 20000000"


@pytest.mark.parametrize(
    ("size", "reason"),
    [
        (8000, "image too large: 8000x8000 px > 40000000"),  # our header check (64 MP)
        (30000, "image too large: 900000000 px > 40000000"),  # PIL's guard inside Image.open (900 MP)
    ],
)
def test_decompression_bomb_rejected_without_allocating(size, reason, ctx):
    bomb = _png_header_only(size, size)  # 192 MB / 2.7 GB of RGB if decoded
    assert len(bomb) < 200
    step = build_step("decode", {})
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    tracemalloc.start()
    try:
        s = step.process(Sample(key="k", data=bomb), ctx)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert s.status is Status.REJECTED and s.reason == reason
    assert peak < 20_000_000  # Python-side allocations
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before < 100_000  # C-side: < 100 MB


def test_small_pixel_cap(astronaut_jpeg, ctx):
    s = _decode(astronaut_jpeg, ctx, max_pixels=100_000)
    assert s.reason == "image too large: 512x512 px > 100000"


def test_truncated_jpeg(astronaut_jpeg, ctx):
    s = _decode(astronaut_jpeg[: len(astronaut_jpeg) // 2], ctx)
    assert s.status is Status.REJECTED and s.reason.startswith("truncated or corrupt image: ")
    assert s.image is None and s.data is None


def test_not_an_image(ctx):
    s = _decode(b"<html><body>404 not found</body></html>" * 10, ctx)
    assert s.reason == "not an image"


def test_too_small(encode, ctx):
    s = _decode(encode(np.zeros((40, 100, 3), np.uint8), "PNG"), ctx)
    assert s.reason == "image too small: 100x40 px, side < 64"


def test_exif_orientation_applied(ctx):
    h, w = 80, 120
    img = np.zeros((h, w, 3), np.uint8)
    img[:, : w // 2] = (255, 0, 0)  # left half red
    img[:, w // 2 :] = (0, 0, 255)  # right half blue
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90° clockwise to display
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, "JPEG", quality=95, exif=exif)
    s = _decode(buf.getvalue(), ctx)
    assert s.image.shape == (w, h, 3)
    expected = np.rot90(img, k=-1)  # clockwise: the left (red) half ends on top
    assert np.abs(s.image.astype(int) - expected).mean() < 6
    assert s.image[5, h // 2, 0] > 200 and s.image[-5, h // 2, 2] > 200
    assert (s.annotations["width"], s.annotations["height"]) == (h, w)


def _save(im: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def test_cmyk_to_rgb(astronaut, ctx):
    data = _save(Image.fromarray(astronaut).convert("CMYK"), "JPEG", quality=95)
    s = _decode(data, ctx)
    assert s.annotations["mode"] == "CMYK" and s.image.shape == (512, 512, 3)
    assert np.abs(s.image.astype(int) - astronaut).mean() < 8


def test_palette_to_rgb(astronaut, ctx):
    im = Image.fromarray(astronaut).convert("P", palette=Image.Palette.ADAPTIVE, colors=64)
    s = _decode(_save(im, "PNG"), ctx)
    assert s.annotations["mode"] == "P"
    assert np.array_equal(s.image, np.asarray(im.convert("RGB")))


def test_palette_with_transparency_on_white(ctx):
    im = Image.new("P", (80, 80), 0)
    im.putpalette([10, 20, 30, 200, 100, 50] + [0] * 762)
    im.paste(1, (0, 0, 40, 80))
    s = _decode(_save(im, "PNG", transparency=0), ctx)
    assert s.image[10, 10].tolist() == [200, 100, 50]
    assert s.image[10, 70].tolist() == [255, 255, 255]


def test_rgba_composited_on_white(ctx):
    rgba = np.zeros((80, 80, 4), np.uint8)
    rgba[..., 0] = 200
    rgba[:, :40, 3] = 255  # left opaque red, right fully transparent, one column half
    rgba[:, 40, 3] = 128
    s = _decode(_save(Image.fromarray(rgba, "RGBA"), "PNG"), ctx)
    assert s.annotations["mode"] == "RGBA"
    assert s.image[0, 0].tolist() == [200, 0, 0]
    assert s.image[0, 79].tolist() == [255, 255, 255]
    assert s.image[0, 40].tolist() == [round((200 * 128 + 255 * 127) / 255), 127, 127]


def test_la_to_rgb(ctx):
    la = Image.merge("LA", (Image.new("L", (70, 70), 50), Image.new("L", (70, 70), 255)))
    s = _decode(_save(la, "PNG"), ctx)
    assert s.image[0, 0].tolist() == [50, 50, 50]


def test_16bit_png_scaled(ctx):
    ramp = np.tile(np.linspace(0, 65535, 256).astype(np.uint16), (70, 1))
    data = _save(Image.fromarray(ramp), "PNG")
    s = _decode(data, ctx)
    assert s.annotations["mode"].startswith("I")
    assert s.image.dtype == np.uint8 and s.image.shape == (70, 256, 3)
    assert s.image[0, 0].tolist() == [0, 0, 0] and s.image[0, -1].tolist() == [255, 255, 255]
    assert np.all(np.diff(s.image[0, :, 0].astype(int)) >= 0)


def test_float_tiff_scaled(ctx):
    f = np.tile(np.linspace(0, 1, 100, dtype=np.float32), (70, 1))
    s = _decode(_save(Image.fromarray(f, "F"), "TIFF"), ctx)
    assert s.image[0, 0, 0] == 0 and s.image[0, -1, 0] == 255


def test_bilevel_and_gray_to_rgb(ctx):
    g = np.zeros((70, 70), np.uint8)
    g[:, 35:] = 255
    for mode in ("1", "L"):
        s = _decode(_save(Image.fromarray(g).convert(mode), "PNG"), ctx)
        assert s.annotations["mode"] == mode
        assert s.image[0, 0].tolist() == [0, 0, 0] and s.image[0, 69].tolist() == [255, 255, 255]


def test_unknown_param_is_an_error():
    with pytest.raises(ValueError, match="max_byte"):
        build_step("decode", {"max_byte": 3})


# ------------------------------------------------------------------ hostile bytes are sample data


def _corrupt_avif(astronaut) -> bytes:
    """AVIF bytes on which plain Pillow raises ``RuntimeError`` while loading (seeded search)."""
    import random

    good = _save(Image.fromarray(astronaut[:128, :128]), "AVIF", quality=50)
    rng = random.Random(0)
    for _ in range(200):
        bad = bytearray(good)
        bad[rng.randrange(64, len(bad))] = rng.randrange(256)
        try:
            with Image.open(io.BytesIO(bytes(bad))) as im:
                im.load()
        except RuntimeError:
            return bytes(bad)
        except Exception:  # another failure: keep looking for a RuntimeError
            continue
    raise AssertionError("no mutation of the AVIF raises RuntimeError")


@pytest.mark.skipif("AVIF" not in Image.registered_extensions().values(), reason="no AVIF plugin")
def test_corrupt_avif_is_a_rejection_naming_the_error(astronaut, ctx):
    data = _corrupt_avif(astronaut)
    s = _decode(data, ctx, min_side=8)
    assert s.status is Status.REJECTED and s.step == "decode"
    assert s.reason.startswith("truncated or corrupt image: RuntimeError: "), s.reason
    assert s.image is None


@pytest.mark.skipif("AVIF" not in Image.registered_extensions().values(), reason="no AVIF plugin")
def test_avif_decodes_where_the_plugin_exists(astronaut, ctx):
    s = _decode(_save(Image.fromarray(astronaut), "AVIF", quality=90), ctx)
    assert s.status is Status.OK and s.annotations["format"] == "AVIF"
    assert np.abs(s.image.astype(int) - astronaut).mean() < 8


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF"])
def test_allowed_formats_decode(fmt, astronaut, ctx):
    s = _decode(_save(Image.fromarray(astronaut), fmt), ctx)
    assert s.status is Status.OK, s.reason
    assert s.annotations["format"] == fmt and s.image.shape == (512, 512, 3)


def _dds_unknown_fourcc() -> bytes:
    """A DDS header with an unknown pixel format (Pillow: ``NotImplementedError``)."""
    header = bytearray(124)
    struct.pack_into("<7I", header, 0, 124, 0x1007, 128, 128, 0, 0, 0)
    struct.pack_into("<2I4s", header, 72, 32, 0x4, b"ZZZZ")  # pixel format: FOURCC "ZZZZ"
    return b"DDS " + bytes(header) + b"\x00" * 4096


def _eps() -> bytes:
    return (
        b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 100 100\n%%EndComments\n"
        b"newpath 0 0 moveto 100 100 lineto stroke\nshowpage\n%%EOF\n"
    )


class _Called(BaseException):
    """Raised by the patched process launchers: nothing may start an external program."""


@pytest.fixture()
def no_subprocess(monkeypatch):
    import os
    import subprocess

    from PIL import EpsImagePlugin

    def refuse(*args, **kwargs):
        raise _Called(f"an external program was started: {args!r}")

    for name in ("Popen", "run", "call", "check_call", "check_output"):
        monkeypatch.setattr(subprocess, name, refuse)
    for name in ("system", "posix_spawn", "posix_spawnp", "execv", "execvp"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, refuse)
    monkeypatch.setattr(EpsImagePlugin, "gs_binary", "gs", raising=False)
    monkeypatch.setattr(EpsImagePlugin, "gs_windows_binary", "gs", raising=False)
    monkeypatch.setattr(EpsImagePlugin, "has_ghostscript", lambda: True)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (_eps(), "unsupported format EPS"),
        (b"\xc5\xd0\xd3\xc6" + b"\x00" * 28 + _eps(), "unsupported format EPS"),  # binary EPS
        (b"%PDF-1.4\n1 0 obj\n<<>>\nendobj\n" * 4, "unsupported format PDF"),
        (_dds_unknown_fourcc(), "unsupported format DDS"),
        (b"icns\x00\x00\x10\x00" + b"\x00" * 4096, "unsupported format ICNS"),
        (b"\x00\x00\x01\x00\x01\x00" + b"\x00" * 256, "unsupported format ICO"),
        (b"8BPS\x00\x01" + b"\x00" * 256, "unsupported format PSD"),
        (b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"/>', "unsupported format SVG"),
        (b"#define im_width 8\n#define im_height 8\nstatic char im_bits[] = {0};", "unsupported format XBM"),
        (b"P6\n100 100\n255\n" + b"\x00" * 30000, "unsupported format PPM"),
        (b"qoif\x00\x00\x00\x64\x00\x00\x00\x64\x03\x00" + b"\x00" * 64, "unsupported format QOI"),
        (b"", "not an image: no bytes"),
        (b"\x00" * 1000, "not an image"),
    ],
    ids=[
        "eps",
        "eps-binary",
        "pdf",
        "dds",
        "icns",
        "ico",
        "psd",
        "svg",
        "xbm",
        "ppm",
        "qoi",
        "empty",
        "zeros",
    ],
)
def test_formats_outside_the_allow_list_never_reach_pillow(data, reason, ctx, no_subprocess, monkeypatch):
    from PIL import ImageFile

    def no_plugin(self, *args, **kwargs):
        raise _Called(f"Pillow's {type(self).__name__} plugin was handed the bytes")

    monkeypatch.setattr(ImageFile.ImageFile, "__init__", no_plugin)
    s = _decode(data, ctx)
    assert s.status is Status.REJECTED and s.step == "decode"
    assert s.reason == reason


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError("Decoding of color planes failed"),
        NotImplementedError("Unimplemented pixel format"),
        MemoryError(),
        OSError("broken data stream"),
        ValueError("tile cannot extend outside image"),
        SyntaxError("not a TIFF file"),
        struct.error("unpack requires a buffer of 4 bytes"),
        ZeroDivisionError("division by zero"),
        IndexError("list index out of range"),
        KeyError(0x0112),
        TypeError("bad operand"),
        EOFError(),
        RecursionError("maximum recursion depth exceeded"),
    ],
    ids=lambda e: type(e).__name__,
)
@pytest.mark.parametrize("where", ["open", "load", "exif_transpose", "convert"])
def test_any_library_exception_is_a_rejection(exc, where, astronaut, ctx, monkeypatch):
    from PIL import ImageOps, JpegImagePlugin

    def boom(*args, **kwargs):
        raise exc.with_traceback(None)

    # "convert" is only reached for a mode other than RGB
    data = _save(
        Image.fromarray(astronaut).convert("L") if where == "convert" else Image.fromarray(astronaut), "JPEG"
    )
    target = {
        "open": (JpegImagePlugin.JpegImageFile, "_open"),
        "load": (JpegImagePlugin.JpegImageFile, "load"),
        "exif_transpose": (ImageOps, "exif_transpose"),
        "convert": (Image.Image, "convert"),
    }[where]
    monkeypatch.setattr(*target, boom)
    s = _decode(data, ctx)
    assert s.status is Status.REJECTED and s.step == "decode"
    if where == "open" and isinstance(
        exc, (SyntaxError, IndexError, TypeError, KeyError, EOFError, struct.error)
    ):
        # Pillow itself catches these from a plugin's header parser ("cannot identify")
        assert s.reason == "truncated or corrupt image: JPEG header does not parse"
        return
    assert s.reason.startswith(f"truncated or corrupt image: {type(exc).__name__}"), s.reason
    assert " at 0x" not in s.reason


def test_a_bug_in_our_own_code_still_fails_loudly(astronaut_jpeg, ctx, monkeypatch):
    import fairsets.vision.decode as decode_mod

    def broken(*args):
        raise RuntimeError("bug in phash")

    monkeypatch.setattr(decode_mod, "phash", broken)
    with pytest.raises(RuntimeError, match="bug in phash"):
        _decode(astronaut_jpeg, ctx)


def test_pillow_bomb_guard_inside_load_is_a_rejection(astronaut, ctx, monkeypatch):
    from PIL import JpegImagePlugin

    def bomb(self, *args, **kwargs):
        raise Image.DecompressionBombError("Image size (999999999 pixels) exceeds limit")

    monkeypatch.setattr(JpegImagePlugin.JpegImageFile, "load", bomb)
    s = _decode(_save(Image.fromarray(astronaut), "JPEG"), ctx)
    assert s.reason == "image too large: 999999999 px > 40000000"


def test_one_safe_opener_for_every_image_reader(no_subprocess):
    """Every other place that decodes untrusted image bytes refuses EPS through the same opener."""
    from fairsets.audit.embeddings import decode_image
    from fairsets.pipeline.review import _thumbnail_uri
    from fairsets.vision.imageformat import ImageDecodeError

    with pytest.raises(ImageDecodeError, match="unsupported format EPS"):
        decode_image(_eps())
    assert _thumbnail_uri(_eps()) is None


def test_heif_without_a_plugin_is_refused_by_name(ctx):
    from fairsets.vision.imageformat import allowed_formats, sniff_format

    heic = b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic" + b"\x00" * 256
    assert sniff_format(heic) == "HEIF"
    s = _decode(heic, ctx)
    assert s.status is Status.REJECTED
    if "HEIF" in allowed_formats():  # pillow-heif installed: its own plugin reads (and refuses) it
        assert s.reason.startswith("truncated or corrupt image: ")
    else:
        assert s.reason == "unsupported format HEIF (no HEIF plugin installed)"
