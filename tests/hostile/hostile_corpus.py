"""A generated corpus of hostile candidate files and listing rows, for one build over all of them.

Every kind is made here from bytes or from the two real portraits that ship in packages; nothing is
downloaded. Each file kind is a function ``(folder) -> path`` that writes its file (or the special
file system object) and returns its path *relative to the listing's folder* (or absolute, for
objects outside it such as ``/dev/zero``). The build must end every candidate as published,
rejected or failed with a reason; what a kind should end as is not fixed here, only that it ends.
"""

from __future__ import annotations

import io
import os
import socket
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from helpers import jpeg, portraits

FileKind = Callable[[Path], str]


def _pil(arr: np.ndarray, fmt: str, **kw: object) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format=fmt, **kw)
    return buf.getvalue()


def _face() -> np.ndarray:
    return portraits()[0]


def _small(arr: np.ndarray, side: int = 256) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.fromarray(arr).resize((side, side)))


def _rand(n: int, seed: int) -> bytes:
    """``n`` seeded random bytes (the corpus is the same on every run)."""
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def _png_header(width: int, height: int, depth: int = 8, colour: int = 2) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr)


def _write(folder: Path, name: str, data: bytes) -> str:
    (folder / name).write_bytes(data)
    return name


def _bytes_kind(name: str, make: Callable[[], bytes]) -> FileKind:
    def kind(folder: Path) -> str:
        return _write(folder, name, make())

    kind.__name__ = name
    return kind


def _bitflip(data: bytes, seed: int, n: int = 40) -> bytes:
    rng = np.random.default_rng(seed)
    buf = bytearray(data)
    for pos in rng.integers(2, len(buf), n):
        buf[pos] ^= 1 << int(rng.integers(0, 8))
    return bytes(buf)


def _jpeg_with_segment(marker: int, payload: bytes) -> bytes:
    """A real JPEG with an extra APPn/COM segment inserted after SOI."""
    base = jpeg(_small(_face()))
    seg = struct.pack(">BBH", 0xFF, marker, len(payload) + 2) + payload
    return base[:2] + seg + base[2:]


def _exif_orientation(value: int) -> bytes:
    from PIL import Image

    im = Image.fromarray(_small(_face()))
    exif = Image.Exif()
    exif[0x0112] = value
    buf = io.BytesIO()
    im.save(buf, format="JPEG", exif=exif.tobytes())
    return buf.getvalue()


def _png_bomb_header() -> bytes:
    """A PNG claiming 60000 × 60000 pixels (3.6 G) with a tiny compressed body."""
    body = zlib.compress(b"\x00" * 1024)
    return _png_header(60000, 60000) + _png_chunk(b"IDAT", body) + _png_chunk(b"IEND", b"")


def _png_ztxt_bomb() -> bytes:
    """A valid small PNG with a zTXt chunk that inflates to 64 MiB."""
    good = _pil(_small(_face(), 128), "PNG")
    text = b"Comment\x00\x00" + zlib.compress(b"A" * (64 << 20), 9)
    return good[:33] + _png_chunk(b"zTXt", text) + good[33:]


def _jpeg_huge_dims() -> bytes:
    """A JPEG whose SOF says 65500 × 65500."""
    data = bytearray(jpeg(_small(_face())))
    i = data.find(b"\xff\xc0")
    struct.pack_into(">HH", data, i + 5, 65500, 65500)
    return bytes(data)


def _tiff_bad_offsets() -> bytes:
    data = bytearray(_pil(_small(_face(), 64), "TIFF"))
    struct.pack_into("<I", data, 4, 0xFFFFFF00)  # first IFD offset points far beyond the file
    return bytes(data)


def _gif_animated() -> bytes:
    from PIL import Image

    frames = [Image.fromarray(_small(_face())), Image.fromarray(np.zeros((256, 256, 3), np.uint8))]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    return buf.getvalue()


def _apng() -> bytes:
    from PIL import Image

    frames = [Image.fromarray(_small(_face())), Image.fromarray(np.full((256, 256, 3), 200, np.uint8))]
    buf = io.BytesIO()
    frames[0].save(buf, format="PNG", save_all=True, append_images=frames[1:])
    return buf.getvalue()


def _mode(mode: str, fmt: str = "PNG") -> Callable[[], bytes]:
    def make() -> bytes:
        from PIL import Image

        im = Image.fromarray(_small(_face()))
        if mode == "I;16":
            arr = (np.asarray(im.convert("L")).astype(np.uint16) * 257).astype(np.uint16)
            im = Image.fromarray(arr)  # uint16 → I;16
        elif mode == "P+transparency":
            im = im.convert("P")
            im.info["transparency"] = 0
        else:
            im = im.convert(mode)
        buf = io.BytesIO()
        im.save(buf, format=fmt, **({"transparency": 0} if mode == "P+transparency" else {}))
        return buf.getvalue()

    return make


def _transparent_rgba() -> bytes:
    arr = np.zeros((256, 256, 4), np.uint8)
    return _pil(arr, "PNG")


def _eps() -> bytes:
    return (
        b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 100 100\n"
        b"(%pipe%id > /tmp/fairsets-hostile-eps) (w) file closefile\nshowpage\n%%EOF\n"
    )


def _dds() -> bytes:
    header = bytearray(128)
    header[:4] = b"DDS "
    struct.pack_into("<IIIII", header, 4, 124, 0x1007, 64, 64, 0)
    struct.pack_into("<II4s", header, 76, 32, 0x4, b"ZZZZ")  # unknown FourCC
    return bytes(header) + b"\x00" * 64


def _avif_corrupt() -> bytes:
    try:
        good = _pil(_small(_face()), "AVIF")
    except Exception:  # no AVIF encoder: a hand-made ftyp box with garbage after it
        good = struct.pack(">I4s4sI4s", 20, b"ftyp", b"avif", 0, b"mif1") + _rand(64, 1)
    return good[:200] + bytes(range(256)) * 4


def _heic_bogus() -> bytes:
    return struct.pack(">I4s4sI4s4s", 24, b"ftyp", b"heic", 0, b"mif1", b"heic") + b"\x00" * 512


def _ico() -> bytes:
    return _pil(_small(_face(), 64), "ICO")


def _elf() -> bytes:
    return b"\x7fELF\x02\x01\x01" + b"\x00" * 200


def _zip_as_jpg() -> bytes:
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("a.txt", "x" * 1000)
    return buf.getvalue()


def _jpeg_zip_polyglot() -> bytes:
    return jpeg(_small(_face())) + _zip_as_jpg()


def _svg_script() -> bytes:
    return b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'


def _html() -> bytes:
    return b"<!doctype html><html><body><script>alert(1)</script></body></html>"


def _pdf() -> bytes:
    return b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


def _psd() -> bytes:
    return b"8BPS\x00\x01" + b"\x00" * 6 + struct.pack(">HIIHH", 3, 64, 64, 8, 3) + b"\x00" * 64


def _xbm() -> bytes:
    return b"#define x_width 8\n#define x_height 8\nstatic char x_bits[] = {0,0,0,0,0,0,0,0};\n"


def _ppm() -> bytes:
    return _pil(_small(_face()), "PPM")


def _jpeg2000() -> bytes:
    try:
        return _pil(_small(_face()), "JPEG2000")
    except Exception:
        return b"\x00\x00\x00\x0cjP  \r\n\x87\n" + b"\x00" * 64


def _tga() -> bytes:
    return _pil(_small(_face()), "TGA")


def _pcx() -> bytes:
    return _pil(_small(_face()), "PCX")


def _wmf() -> bytes:
    return b"\xd7\xcd\xc6\x9a" + b"\x00" * 60


def _fits() -> bytes:
    card = b"SIMPLE  =                    T".ljust(80)
    return card + b"BITPIX  =                    8".ljust(80) + b"END".ljust(80) + b"\x00" * 2880


def _qoi() -> bytes:
    return b"qoif" + struct.pack(">IIBB", 64, 64, 3, 0) + b"\x00" * 64


def _webp_truncated() -> bytes:
    data = _pil(_small(_face()), "WEBP")
    return data[: len(data) // 2]


def _webp_riff_lies() -> bytes:
    data = bytearray(_pil(_small(_face()), "WEBP"))
    struct.pack_into("<I", data, 4, 0x7FFFFFF0)  # RIFF size far beyond the file
    return bytes(data)


def _bmp_bad() -> bytes:
    data = bytearray(_pil(_small(_face()), "BMP"))
    struct.pack_into("<i", data, 18, 1 << 30)  # width
    return bytes(data)


def _cmyk_jpeg() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(_small(_face())).convert("CMYK").save(buf, format="JPEG")
    return buf.getvalue()


def _progressive() -> bytes:
    return _pil(_small(_face()), "JPEG", progressive=True, quality=80)


def _noise() -> bytes:
    return jpeg(np.random.default_rng(7).integers(0, 256, (256, 256, 3), dtype=np.uint8))


def _gray_portrait() -> bytes:
    g = np.asarray(_face()).mean(axis=2).astype(np.uint8)
    return jpeg(np.repeat(g[..., None], 3, axis=2))


def _blurred() -> bytes:
    from PIL import Image, ImageFilter

    return _pil(np.asarray(Image.fromarray(_face()).filter(ImageFilter.GaussianBlur(12))), "JPEG")


def _cat() -> bytes:
    from skimage import data

    return jpeg(data.chelsea())


def _tiny() -> bytes:
    return _pil(np.full((8, 8, 3), 128, np.uint8), "PNG")


def _long_strip() -> bytes:
    return _pil(np.full((1, 20000, 3), 128, np.uint8), "PNG")


def _good() -> bytes:
    return jpeg(_face())


def _hopper() -> bytes:
    return jpeg(portraits()[1])


def _special(name: str, make: Callable[[Path], str]) -> FileKind:
    make.__name__ = name
    return make


def _fifo(folder: Path) -> str:
    os.mkfifo(folder / "fifo.jpg")
    return "fifo.jpg"


def _socket(folder: Path) -> str:
    path = folder / "sock.jpg"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()
    return "sock.jpg"


def _symlink(name: str, target: str) -> Callable[[Path], str]:
    def make(folder: Path) -> str:
        os.symlink(target, folder / name)
        return name

    return make


def _symlink_loop(folder: Path) -> str:
    os.symlink("loop-b.jpg", folder / "loop-a.jpg")
    os.symlink("loop-a.jpg", folder / "loop-b.jpg")
    return "loop-a.jpg"


def _directory(folder: Path) -> str:
    (folder / "dir.jpg").mkdir()
    return "dir.jpg"


def _oversize(folder: Path) -> str:
    """A sparse file of 1 GiB: its size comes from stat, so reading it whole would cost 1 GiB."""
    with open(folder / "huge.jpg", "wb") as fh:
        fh.write(jpeg(_small(_face())))
        fh.truncate(1 << 30)
    return "huge.jpg"


def _unreadable(folder: Path) -> str:
    path = folder / "noperm.jpg"
    path.write_bytes(_good())
    path.chmod(0)
    return "noperm.jpg"


def _odd_name(folder: Path) -> str:
    name = "we\u202eird 'name' \"x\" ..é.jpg"
    (folder / name).write_bytes(_hopper())
    return name


def _dup_bytes(folder: Path) -> str:
    return _write(folder, "dup-of-good.jpg", _good())


def _outside(folder: Path) -> str:
    """A real image outside the listing's folder, listed by absolute path."""
    other = folder.parent / "elsewhere"
    other.mkdir(exist_ok=True)
    (other / "outside.jpg").write_bytes(_hopper())
    return str(other / "outside.jpg")


def _traversal(folder: Path) -> str:
    other = folder.parent / "up"
    other.mkdir(exist_ok=True)
    (other / "up.jpg").write_bytes(jpeg(_small(portraits()[1], 300)))
    return "../up/up.jpg"


FILE_KINDS: list[FileKind] = [
    _bytes_kind("good.jpg", _good),
    _bytes_kind("hopper.jpg", _hopper),
    _bytes_kind("empty.jpg", lambda: b""),
    _bytes_kind("one-byte.jpg", lambda: b"\xff"),
    _bytes_kind("soi-only.jpg", lambda: b"\xff\xd8"),
    _bytes_kind("jpeg-half.jpg", lambda: _good()[: len(_good()) // 2]),
    _bytes_kind("jpeg-header-garbage.jpg", lambda: b"\xff\xd8\xff\xe0" + _rand(4096, 2)),
    _bytes_kind("jpeg-bitflip.jpg", lambda: _bitflip(_good(), 1)),
    _bytes_kind("jpeg-bitflip-heavy.jpg", lambda: _bitflip(_good(), 2, 2000)),
    _bytes_kind("jpeg-huge-dims.jpg", _jpeg_huge_dims),
    _bytes_kind("jpeg-exif-orient-99.jpg", lambda: _exif_orientation(99)),
    _bytes_kind("jpeg-exif-orient-6.jpg", lambda: _exif_orientation(6)),
    _bytes_kind("jpeg-big-com.jpg", lambda: _jpeg_with_segment(0xFE, b"C" * 65000)),
    _bytes_kind(
        "jpeg-bad-icc.jpg", lambda: _jpeg_with_segment(0xE2, b"ICC_PROFILE\x00\x01\x01" + _rand(900, 3))
    ),
    _bytes_kind(
        "jpeg-bad-exif.jpg", lambda: _jpeg_with_segment(0xE1, b"Exif\x00\x00MM\x00*" + b"\xff" * 500)
    ),
    _bytes_kind("jpeg-cmyk.jpg", _cmyk_jpeg),
    _bytes_kind("jpeg-progressive.jpg", _progressive),
    _bytes_kind("jpeg-zip-polyglot.jpg", _jpeg_zip_polyglot),
    _bytes_kind("png-truncated.png", lambda: _pil(_small(_face()), "PNG")[:300]),
    _bytes_kind("png-bad-crc.png", lambda: _bitflip(_pil(_small(_face()), "PNG"), 3, 5)),
    _bytes_kind("png-bomb-header.png", _png_bomb_header),
    _bytes_kind("png-ztxt-bomb.png", _png_ztxt_bomb),
    _bytes_kind("png-16bit.png", _mode("I;16")),
    _bytes_kind("png-palette-alpha.png", _mode("P+transparency")),
    _bytes_kind("png-la.png", _mode("LA")),
    _bytes_kind("png-transparent.png", _transparent_rgba),
    _bytes_kind("png-tiny.png", _tiny),
    _bytes_kind("png-strip.png", _long_strip),
    _bytes_kind("apng.png", _apng),
    _bytes_kind("gif-animated.gif", _gif_animated),
    _bytes_kind("gif-truncated.gif", lambda: _gif_animated()[:100]),
    _bytes_kind("webp-truncated.webp", _webp_truncated),
    _bytes_kind("webp-riff-lies.webp", _webp_riff_lies),
    _bytes_kind("webp-ok.webp", lambda: _pil(_face(), "WEBP")),
    _bytes_kind("tiff-16bit.tif", _mode("I;16", "TIFF")),
    _bytes_kind("tiff-bad-offsets.tif", _tiff_bad_offsets),
    _bytes_kind("bmp-bad-width.bmp", _bmp_bad),
    _bytes_kind("bmp-ok.bmp", lambda: _pil(_small(_face()), "BMP")),
    _bytes_kind("avif-corrupt.avif", _avif_corrupt),
    _bytes_kind("heic-bogus.jpg", _heic_bogus),
    _bytes_kind("eps-ghostscript.jpg", _eps),
    _bytes_kind("ps-file.png", lambda: b"%!PS\n/x 1 def showpage\n"),
    _bytes_kind("pdf.jpg", _pdf),
    _bytes_kind("dds-unknown.jpg", _dds),
    _bytes_kind("ico.png", _ico),
    _bytes_kind("icns.png", lambda: b"icns" + struct.pack(">I", 64) + b"\x00" * 56),
    _bytes_kind("psd.jpg", _psd),
    _bytes_kind("svg-script.png", _svg_script),
    _bytes_kind("xbm.jpg", _xbm),
    _bytes_kind("ppm.jpg", _ppm),
    _bytes_kind("jpeg2000.jpg", _jpeg2000),
    _bytes_kind("tga.jpg", _tga),
    _bytes_kind("pcx.jpg", _pcx),
    _bytes_kind("wmf.jpg", _wmf),
    _bytes_kind("fits.jpg", _fits),
    _bytes_kind("qoi.png", _qoi),
    _bytes_kind("html.jpg", _html),
    _bytes_kind("text.jpg", lambda: b"just some text\n" * 20),
    _bytes_kind("elf.jpg", _elf),
    _bytes_kind("zip.jpg", _zip_as_jpg),
    _bytes_kind("noise.jpg", _noise),
    _bytes_kind("black.png", lambda: _pil(np.zeros((256, 256, 3), np.uint8), "PNG")),
    _bytes_kind("gray-portrait.jpg", _gray_portrait),
    _bytes_kind("blurred-portrait.jpg", _blurred),
    _bytes_kind("cat.jpg", _cat),
    _special("fifo", _fifo),
    _special("socket", _socket),
    _special("dev-zero", lambda folder: "/dev/zero"),
    _special("dev-urandom", lambda folder: "/dev/urandom"),
    _special("proc-file", lambda folder: "/proc/self/status"),
    _special("link-dev-zero", _symlink("zero-link.jpg", "/dev/zero")),
    _special("link-dangling", _symlink("dangling.jpg", "does-not-exist.jpg")),
    _special("link-loop", _symlink_loop),
    _special("directory", _directory),
    _special("oversize-sparse", _oversize),
    _special("unreadable", _unreadable),
    _special("odd-name", _odd_name),
    _special("duplicate-bytes", _dup_bytes),
    _special("outside-absolute", _outside),
    _special("traversal", _traversal),
    _special("missing", lambda folder: "not-there.jpg"),
]


# -- hostile listing rows: each is a row of the same listing, over a real (varied) portrait --------

ROW_KINDS: dict[str, dict[str, str]] = {
    "license-nc": {"license": "CC BY-NC 4.0"},
    "license-but-nc": {"license": "https://creativecommons.org/licenses/by/4.0/ but NonCommercial"},
    "license-nc-suffix": {"license": "CC-BY-4.0-NC"},
    "license-not-pd": {"license": "Not public domain"},
    "license-empty": {"license": ""},
    "license-html": {"license": '<a href="javascript:alert(1)">CC0</a>'},
    "license-huge": {"license": "CC BY 4.0 " + "x" * 100_000},
    "license-homoglyph": {"license": "СС BY 4.0"},  # Cyrillic С
    "state-script": {"state": "<script>alert(1)</script>"},
    "state-yaml": {"state": "a: b\n---\nc: [d"},
    "state-table": {"state": "x | y | `z`"},
    "gender-newline": {"gender": "fe\nmale"},
    "state-zero-width": {"state": "Go\u200ba\u202e"},
    "author-md-link": {"author": "[click](javascript:alert(1))"},
    "author-html": {"author": "<img src=x onerror=alert(1)>"},
    "author-formula": {"author": '=HYPERLINK("http://127.0.0.1/x","y")'},
    "url-javascript": {"source_url": "javascript:alert(document.cookie)"},
    "url-data": {"source_url": "data:text/html,<script>alert(1)</script>"},
    "url-credentials": {"source_url": "http://user:secret@127.0.0.1/x.jpg"},
    "url-newline": {"source_url": "https://example.org/a\n[x](javascript:alert(1))"},
    "title-markdown": {"title": "# Title\n\n| a | b |\n```\n<script>x</script>"},
    "identity-traversal": {"identity": "../../etc/passwd"},
    "identity-huge": {"identity": "p" * 50_000},
    "extra-unicode-column": {"列": "値"},
    "extra-huge-value": {"notes": "n" * 120_000},
}
"""Row kinds: the listing's values for a row that is otherwise ordinary (licence CC-BY-4.0 etc.)."""
