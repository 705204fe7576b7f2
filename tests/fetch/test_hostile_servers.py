"""The URL download path against hostile loopback servers: image bombs, truncated bodies, broken
framing, redirect tricks. Every answer must end as a classified row (ok / rejected / failed with
a reason), never as an exception, a hang, a truncated image accepted as ``ok`` or gigabytes of
memory. Only 127.0.0.1 is contacted: the blocked-address cases are refused before any connect.
"""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from fairsets.fetch.guard import FetchPolicy
from servers import LoopbackServer, Response

POLICY = FetchPolicy(allow_loopback=True, timeout=2, deadline=5, max_bytes=100_000)


def _png(width: int, height: int, idat: bytes) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def png_bomb(width: int, height: int) -> bytes:
    """A valid greyscale PNG of ``width`` x ``height`` zero pixels, compressed row by row (tiny)."""
    z = zlib.compressobj(9)
    row = b"\x00" * (width + 1)  # filter byte + one byte per pixel
    return _png(width, height, b"".join(z.compress(row) for _ in range(height)) + z.flush())


# --------------------------------------------------------------------------- image bombs


@pytest.mark.timeout(60)
def test_pixel_bomb_is_refused_from_its_header_before_decoding(tmp_path: Path) -> None:
    pytest.importorskip("img2dataset", reason="img2dataset is installed separately")
    from fairsets.fetch.download import download_urls

    bomb = png_bomb(3000, 3000)  # 9 MP in 9 kB
    assert len(bomb) < 20_000
    small = png_bomb(64, 48)
    with LoopbackServer() as srv:
        srv.route("/bomb.png", lambda req: Response(200, {"Content-Type": "image/png"}, bomb))
        srv.route("/small.png", lambda req: Response(200, {"Content-Type": "image/png"}, small))
        srv.route("/page.html", lambda req: Response(200, {"Content-Type": "image/jpeg"}, b"<html>hi</html>"))
        rows = [
            {"key": "bomb", "url": srv.url("/bomb.png")},
            {"key": "small", "url": srv.url("/small.png")},
            {"key": "html", "url": srv.url("/page.html")},
        ]
        policy = FetchPolicy(allow_loopback=True, timeout=2, max_pixels=1_000_000)
        got = {r["key"]: r for r in download_urls(rows, tmp_path / "dl", policy, processes=0)}
    assert got["bomb"]["status"] == "rejected"
    assert got["bomb"]["error"] == ("too_large: image of 3000x3000 pixels, more than 1000000 (max_pixels)")
    assert got["small"]["status"] == "ok"
    assert got["html"]["status"] == "rejected"
    assert got["html"]["error"].startswith("undecodable: not an image Pillow can identify")


def test_pixel_capped_resizer_reads_only_the_header() -> None:
    pytest.importorskip("img2dataset", reason="img2dataset is installed separately")
    from fairsets.fetch.download import PixelCappedResizer

    def never(*args: Any) -> Any:
        raise AssertionError("the image must not reach the decoder")

    huge = _png(100_000, 100_000, b"not even compressed")  # 10^10 pixels announced
    out = PixelCappedResizer(never, 40_000_000)(io.BytesIO(huge))
    assert out[:5] == (None,) * 5 and out[5].startswith("refused (too_large): ")
    called: list[Any] = []
    stream = io.BytesIO(png_bomb(10, 10))
    PixelCappedResizer(lambda s, b=None: called.append(s.read(8)) or (b"x", 1, 1, 1, 1, None), 100)(stream)
    assert called == [b"\x89PNG\r\n\x1a\n"]  # handed on rewound
