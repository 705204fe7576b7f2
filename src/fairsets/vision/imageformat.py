"""One safe way to open image bytes that came from data: an allow-list of formats, sniffed first.

Image bytes from listings, downloads, published shards or user folders are untrusted. Pillow
knows ~40 formats, some of which hand the file to external programs (EPS/PS → Ghostscript) or
are rarely exercised parsers (DDS, ICNS, PSD, FITS, ...). A face dataset needs only JPEG, PNG,
WebP, GIF, BMP and TIFF, plus AVIF/HEIF where a plugin for them is installed. So:

* :func:`sniff_format` reads the magic bytes and names the format *before* Pillow sees the data;
* :func:`open_image` refuses anything outside :func:`allowed_formats` ("unsupported format EPS",
  "not an image") and opens the rest with ``Image.open(fp, formats=[that one])``, so no other
  plugin is ever tried;
* a JPEG with more than :data:`MAX_JPEG_SCANS` scans is refused before it is decoded: the
  decoder walks the whole image once per scan, so a 73 kB file of 3000 empty progressive
  scans takes 14 s at 4 MP (hours at 40 MP and 20 MB); a real encoder writes about ten; a
  JPEG with more than :data:`MAX_JPEG_SEGMENTS` marker segments, a PNG
  with more than :data:`MAX_PNG_CHUNKS` chunks, a TIFF with more than :data:`MAX_TIFF_STRIPS`
  strips or tiles, a GIF with more than :data:`MAX_GIF_BLOCKS` extension blocks before its
  image, or an RLE-compressed BMP, likewise (Pillow handles each one, or each run,
  in Python);
* :func:`image_errors` turns *any* exception raised by the image library while it identifies,
  opens, loads, transposes or converts the image (``RuntimeError`` from a corrupt AVIF,
  ``MemoryError``, ``struct.error``, ``ZeroDivisionError``, ...) into :class:`ImageDecodeError`,
  whose message names the exception type: undecodable bytes are per-sample data, not a crash.

Pillow is imported lazily.
"""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "MAX_GIF_BLOCKS",
    "MAX_JPEG_SCANS",
    "MAX_JPEG_SEGMENTS",
    "MAX_PNG_CHUNKS",
    "MAX_TIFF_STRIPS",
    "ImageDecodeError",
    "allowed_formats",
    "decode_failure",
    "decode_rgb_image",
    "gif_header_blocks",
    "image_errors",
    "jpeg_counts",
    "jpeg_scan_count",
    "open_image",
    "png_chunk_count",
    "sniff_format",
    "tiff_strip_count",
]

# Formats a face dataset needs, always allowed (Pillow names).
_CORE = ("JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF")
# Allowed only where Pillow (or a plugin such as pillow-heif) has registered an opener for them.
_OPTIONAL = ("AVIF", "HEIF")

_TIFF_PREFIXES = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")
_AVIF_BRANDS = {b"avif", b"avis"}
_HEIF_BRANDS = {b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis"}
_MIAF_BRANDS = {b"mif1", b"msf1"}  # generic HEIF container: AVIF or HEIC inside

# Formats that are recognised only to be refused by name (the first match wins).
_REFUSED: tuple[tuple[str, tuple[bytes, ...]], ...] = (
    ("EPS", (b"%!PS", b"\xc5\xd0\xd3\xc6")),
    ("PDF", (b"%PDF",)),
    ("PSD", (b"8BPS",)),
    ("DDS", (b"DDS ",)),
    ("ICNS", (b"icns",)),
    ("ICO", (b"\x00\x00\x01\x00",)),
    ("CUR", (b"\x00\x00\x02\x00",)),
    ("JPEG2000", (b"\x00\x00\x00\x0cjP  \r\n\x87\n", b"\xff\x4f\xff\x51")),
    ("QOI", (b"qoif",)),
    ("FITS", (b"SIMPLE  =",)),
    ("XPM", (b"/* XPM */",)),
    ("SGI", (b"\x01\xda",)),
    ("BLP", (b"BLP1", b"BLP2")),
    ("FLI", (b"\x11\xaf", b"\x12\xaf")),
    ("GBR", (b"GIMP",)),
    ("WMF", (b"\xd7\xcd\xc6\x9a", b"\x01\x00\x00\x00")),
    ("HDF5", (b"\x89HDF\r\n\x1a\n",)),
    ("MPEG", (b"\x00\x00\x01\xb3",)),
    ("SUN", (b"\x59\xa6\x6a\x95",)),
    ("GRIB", (b"GRIB",)),
    ("BUFR", (b"BUFR",)),
    ("DCX", (b"\xb1\x68\xde\x3a",)),
)
_SVG = re.compile(rb"^\s*(<\?xml[^>]*>\s*)?(<!--.*?-->\s*)*(<!DOCTYPE\s+svg|<svg)", re.I | re.S)
_XBM = re.compile(rb"^\s*#define[ \t]+\S*_width")
_PPM = re.compile(rb"^P[1-7fF]\s")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
# The next JPEG marker after entropy-coded data: 0xFF not followed by a stuffed 0x00, a restart
# marker (RST0-7) or a fill 0xFF.
_JPEG_NEXT_MARKER = re.compile(rb"\xff(?=[^\x00\xd0-\xd7\xff])")
_NOT_FILL = re.compile(rb"[^\xff]")

MAX_JPEG_SCANS = 100
"""Most scans a JPEG may have (each costs a pass over the whole image; encoders write ≤ ~20)."""

MAX_JPEG_SEGMENTS = 5_000
"""Most marker segments a JPEG may have: Pillow reads each header segment in Python (4 million
empty comments in 16 MB took 29 s); a camera file has a few dozen, a progressive one ~2 per scan."""

MAX_GIF_BLOCKS = 10_000
"""Most extension blocks (and sub-blocks) a GIF may have before its first image: Pillow reads
each in Python and joins comments byte by byte (6 million empty comments in 18 MB took 16 s)."""

MAX_TIFF_STRIPS = 65_536
"""Most strips or tiles the first image of a TIFF may have: Pillow reads their offsets into Python
and decodes each in a call of its own (2.4 million one-row strips in 19 MB took 12 s and 0.9 GB
just to open); a 40 MP image in 8 kB strips has about 15 000."""

MAX_PNG_CHUNKS = 100_000
"""Most chunks a PNG may have: Pillow handles each in Python (1.5 million empty chunks in 18 MB
took 10 s and kept a list entry each); encoders write one per 8-64 kB of pixels."""


class ImageDecodeError(ValueError):
    """Image bytes that cannot (or may not) be decoded; ``str()`` is the per-sample reason.

    ``kind`` is ``"not_image"`` (unrecognised bytes), ``"unsupported"`` (a known format outside
    the allow-list), ``"too_large"`` (Pillow's decompression-bomb guard), ``"too_costly"``
    (a JPEG with more scans, a PNG with more chunks, a TIFF with more strips than allowed) or
    ``"corrupt"`` (the image library raised while decoding).
    """

    def __init__(self, reason: str, kind: str = "corrupt") -> None:
        super().__init__(reason)
        self.kind = kind

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def allowed_formats() -> tuple[str, ...]:
    """The Pillow formats :func:`open_image` opens: the core ones plus AVIF/HEIF if registered."""
    from PIL import Image

    Image.init()
    return _CORE + tuple(f for f in _OPTIONAL if f in Image.OPEN)


def _ftyp_brands(data: bytes) -> set[bytes]:
    """Major and compatible brands of an ISO-BMFF ``ftyp`` box at the start of ``data``."""
    size = int.from_bytes(data[:4], "big")
    end = min(max(size, 16), len(data), 4096)
    brands = {data[8:12]}
    brands.update(data[i : i + 4] for i in range(16, end - 3, 4))
    return brands


def sniff_format(data: bytes) -> str | None:
    """The format ``data`` is in, by its magic bytes (Pillow's name), or None if unrecognised.

    Recognises the allowed formats and, to name them in refusals, common other ones (EPS, PDF,
    PSD, DDS, ICNS, ICO, SVG, XBM, JPEG2000, ...).
    """
    head = bytes(data[:64])
    if head.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "GIF"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "WEBP"
    if head.startswith(b"BM"):
        return "BMP"
    if head.startswith(_TIFF_PREFIXES):
        return "TIFF"
    if head[4:8] == b"ftyp":
        brands = _ftyp_brands(bytes(data[:4096]))
        if brands & _AVIF_BRANDS:
            return "AVIF"
        if brands & _HEIF_BRANDS:
            return "HEIF"
        if brands & _MIAF_BRANDS:
            return "HEIF"
        return None
    for name, prefixes in _REFUSED:
        if head.startswith(prefixes):
            return name
    if _SVG.match(bytes(data[:4096])):
        return "SVG"
    if _XBM.match(head):
        return "XBM"
    if _PPM.match(head):
        return "PPM"
    return None


def jpeg_counts(
    data: bytes, max_scans: int = MAX_JPEG_SCANS, max_segments: int = MAX_JPEG_SEGMENTS
) -> tuple[int, int]:
    """``(scans, segments)`` of the JPEG ``data``; counting stops once either is past its limit.

    Walks the markers as a decoder does (a segment's length, then the entropy-coded data of a
    scan up to the next marker) up to the end-of-image marker or the end of the data, so
    ``0xFF 0xDA`` bytes inside other segments (an EXIF thumbnail, an ICC profile) are not scans.
    Every marker counts as a segment (scans and markers without a length too). A truncated or
    malformed stream is counted as far as it goes (the decoder reports it).
    """
    view = bytes(data)
    scans = segments = 0
    i, size = 2, len(view)
    while i < size and scans <= max_scans and segments <= max_segments:
        if view[i] != 0xFF:  # stray bytes between segments: decoders skip to the next marker
            m = _JPEG_NEXT_MARKER.search(view, i)
            if m is None:
                break
            i = m.start()
        m = _NOT_FILL.search(view, i + 1)  # fill bytes (0xFF) may pad a marker
        if m is None:
            break
        j = m.start()
        marker = view[j]
        if marker == 0xD9:  # EOI
            break
        segments += 1
        if marker in (0x00, 0x01, 0xD8) or 0xD0 <= marker <= 0xD7:  # no length field
            i = j + 1
            continue
        end = j + 1 + int.from_bytes(view[j + 1 : j + 3], "big")
        if marker != 0xDA:
            i = end
            continue
        scans += 1
        m = _JPEG_NEXT_MARKER.search(view, end)
        if m is None:
            break
        i = m.start()
    return scans, segments


def jpeg_scan_count(data: bytes, limit: int = MAX_JPEG_SCANS) -> int:
    """The number of scans (SOS markers) of the JPEG ``data``, counting stops once past ``limit``
    (see :func:`jpeg_counts`)."""
    return jpeg_counts(data, limit, max_segments=len(data))[0]


def gif_header_blocks(data: bytes, limit: int = MAX_GIF_BLOCKS) -> int:
    """The number of blocks (extensions and their data sub-blocks) before the first image of the
    GIF ``data``; counting stops once past ``limit``."""
    view = memoryview(data)
    size = len(view)
    if size < 13:
        return 0
    i = 13 + ((3 << ((view[10] & 7) + 1)) if view[10] & 0x80 else 0)  # after the global colour table
    n = 0
    while i < size and n <= limit and view[i] == 0x21:  # an extension: introducer, label, sub-blocks
        i += 2
        while i < size and n <= limit:
            n += 1
            length = view[i]
            i += 1 + length
            if length == 0:
                break
    return n


def png_chunk_count(data: bytes, limit: int = MAX_PNG_CHUNKS) -> int:
    """The number of chunks of the PNG ``data`` up to ``IEND`` (or the end of the data), counting
    stops once past ``limit``. Each chunk is its 4-byte length, type, payload and CRC."""
    view = memoryview(data)
    n, i, size = 0, 8, len(view)
    while i + 8 <= size and n <= limit:
        n += 1
        if view[i + 4 : i + 8] == b"IEND":
            break
        i += 12 + int.from_bytes(view[i : i + 4], "big")
    return n


def tiff_strip_count(data: bytes) -> int:
    """The number of strips (or tiles) of the first image of the TIFF ``data``: the largest count
    of its StripOffsets/TileOffsets/StripByteCounts/TileByteCounts tags, 0 if none can be read.
    Read from the first directory's entries alone (classic and BigTIFF), without the arrays."""
    view = bytes(data[:16])
    if len(view) < 8:
        return 0
    order = "little" if view[:2] == b"II" else "big"
    big = int.from_bytes(view[2:4], order) == 43
    if big:
        if len(view) < 16:
            return 0
        ifd, count_size, entry_size, value_size = int.from_bytes(view[8:16], order), 8, 20, 8
    else:
        ifd, count_size, entry_size, value_size = int.from_bytes(view[4:8], order), 2, 12, 4
    head = bytes(data[ifd : ifd + count_size])
    if len(head) < count_size:
        return 0
    entries = int.from_bytes(head, order)
    table = bytes(data[ifd + count_size : ifd + count_size + entries * entry_size])
    most = 0
    for at in range(0, len(table) - entry_size + 1, entry_size):
        if int.from_bytes(table[at : at + 2], order) in (273, 279, 324, 325):
            most = max(most, int.from_bytes(table[at + 4 : at + 4 + value_size], order))
    return most


def _bmp_compression(data: bytes) -> int | None:
    """The compression field of a BMP's info header (0 none, 1 RLE8, 2 RLE4, ...), None if absent."""
    if len(data) < 34 or int.from_bytes(data[14:18], "little") < 40:  # OS/2 headers have none
        return None
    return int.from_bytes(data[30:34], "little")


def _library_reason(exc: BaseException) -> str:
    """``Type: message`` of an image-library exception, without object addresses."""
    msg = _ADDRESS.sub("", str(exc)).strip()
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def decode_failure(exc: BaseException) -> str:
    """Why image bytes did not decode: the reason of an :class:`ImageDecodeError`, else
    ``Type: message`` (without object addresses, so reports stay reproducible)."""
    return str(exc) if isinstance(exc, ImageDecodeError) else _library_reason(exc)


@contextmanager
def image_errors() -> Iterator[None]:
    """Turn any exception of the image library inside the block into :class:`ImageDecodeError`.

    Pillow's decompression-bomb warning is raised as an error inside the block and reported as
    ``kind="too_large"``. Wrap only calls into the image library: a bug in fairsets' own code
    must still fail loudly.
    """
    from PIL import Image, UnidentifiedImageError

    with warnings.catch_warnings():
        # Warnings about the bytes (corrupt EXIF, odd TIFF tags) are not ours to print per sample.
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            yield
        except ImageDecodeError:
            raise
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise ImageDecodeError(str(exc), kind="too_large") from exc
        except UnidentifiedImageError as exc:
            raise ImageDecodeError("not an image", kind="not_image") from exc
        except Exception as exc:  # any library failure on hostile bytes is data
            raise ImageDecodeError(f"truncated or corrupt image: {_library_reason(exc)}") from exc


def open_image(data: bytes, *, max_jpeg_scans: int = MAX_JPEG_SCANS) -> Any:
    """Open ``data`` lazily (header only) as a PIL image, if its format is allowed.

    Raises:
        ImageDecodeError: ``"not an image"`` (unrecognised or empty bytes), ``"unsupported
            format NAME"`` (a format outside :func:`allowed_formats`), ``"too many JPEG scans"``
            (more than ``max_jpeg_scans``, see :func:`jpeg_scan_count`), ``"too many PNG
            chunks"`` (more than :data:`MAX_PNG_CHUNKS`), or the library's
            failure to read the header.
    """
    from PIL import Image

    if not data:
        raise ImageDecodeError("not an image: no bytes", kind="not_image")
    fmt = sniff_format(data)
    if fmt is None:
        raise ImageDecodeError("not an image", kind="not_image")
    allowed = allowed_formats()
    if fmt not in allowed:
        why = f" (no {fmt} plugin installed)" if fmt in _OPTIONAL else ""
        raise ImageDecodeError(f"unsupported format {fmt}{why}", kind="unsupported")
    if fmt == "JPEG":
        scans, segments = jpeg_counts(data, max_jpeg_scans, MAX_JPEG_SEGMENTS)
        if scans > max_jpeg_scans:
            raise ImageDecodeError(
                f"too many JPEG scans: more than {max_jpeg_scans}; each is a pass over the whole image",
                kind="too_costly",
            )
        if segments > MAX_JPEG_SEGMENTS:
            raise ImageDecodeError(
                f"too many JPEG marker segments: more than {MAX_JPEG_SEGMENTS}; "
                "Pillow reads each one in Python",
                kind="too_costly",
            )
    if fmt == "GIF" and gif_header_blocks(data) > MAX_GIF_BLOCKS:
        raise ImageDecodeError(
            f"too many GIF extension blocks before the image: more than {MAX_GIF_BLOCKS}; "
            "Pillow reads each one in Python",
            kind="too_costly",
        )
    if fmt == "TIFF" and (strips := tiff_strip_count(data)) > MAX_TIFF_STRIPS:
        raise ImageDecodeError(
            f"too many TIFF strips or tiles: {strips} > {MAX_TIFF_STRIPS}; Pillow handles each one in Python",
            kind="too_costly",
        )
    if fmt == "BMP" and _bmp_compression(data) in (1, 2):
        raise ImageDecodeError(
            "unsupported BMP compression RLE (Pillow decodes it in Python: 19 MB took 11 s); "
            "convert the file to PNG",
            kind="too_costly",
        )
    if fmt == "PNG" and png_chunk_count(data) > MAX_PNG_CHUNKS:
        raise ImageDecodeError(
            f"too many PNG chunks: more than {MAX_PNG_CHUNKS}; Pillow parses each one in Python",
            kind="too_costly",
        )
    try:
        with image_errors():
            return Image.open(io.BytesIO(data), formats=[fmt])
    except ImageDecodeError as exc:
        if exc.kind != "not_image":
            raise
        # The magic bytes say ``fmt`` but its plugin could not parse the header (Pillow hides why).
        raise ImageDecodeError(f"truncated or corrupt image: {fmt} header does not parse") from exc


def decode_rgb_image(data: bytes) -> Any:
    """Decode ``data`` fully into an RGB PIL image (first frame; EXIF orientation not applied).

    Raises:
        ImageDecodeError: the bytes are refused or do not decode (see :func:`open_image`).
    """
    im = open_image(data)
    with image_errors():
        try:
            im.load()
            return im.convert("RGB")
        finally:
            im.close()
