"""The URL download path against hostile loopback servers: image bombs, truncated bodies, broken
framing, redirect tricks. Every answer must end as a classified row (ok / rejected / failed with
a reason), never as an exception, a hang, a truncated image accepted as ``ok`` or gigabytes of
memory. Only 127.0.0.1 is contacted: the blocked-address cases are refused before any connect.
"""

from __future__ import annotations

import io
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fairsets.fetch.guard import FetchPolicy, fetch_url
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
    pytest.importorskip(
        "img2dataset", reason="img2dataset is not installed: pip install --no-deps img2dataset==1.47.0"
    )
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
    pytest.importorskip(
        "img2dataset", reason="img2dataset is not installed: pip install --no-deps img2dataset==1.47.0"
    )
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


# --------------------------------------------------------------------------- raw HTTP answers


class RawServer:
    """A loopback TCP server that answers every connection with fixed bytes, then hangs up."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def url(self, path: str = "/x") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                try:
                    conn.settimeout(5)
                    conn.recv(65536)
                    conn.sendall(self.answer)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw() -> Iterator[Callable[[bytes], RawServer]]:
    servers: list[RawServer] = []

    def make(answer: bytes) -> RawServer:
        servers.append(RawServer(answer))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\n"


def _redirect(location: bytes, code: int = 302) -> bytes:
    return b"HTTP/1.1 %d Found\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n" % (code, location)


HOSTILE: dict[str, tuple[bytes, str, str]] = {
    # name: (answer, status, start of the error)
    "content-length-too-long": (
        OK_HEAD + b"Content-Length: 1000\r\n\r\nabc",
        "failed",
        "connection: IncompleteRead",
    ),
    "content-length-huge": (
        OK_HEAD + b"Content-Length: 99999999999999999999\r\n\r\nabc",
        "rejected",
        "too_large",
    ),
    "huge-header-line": (
        OK_HEAD + b"X-A: " + b"a" * 100_000 + b"\r\n\r\n",
        "failed",
        "connection: LineTooLong",
    ),
    "thousands-of-headers": (
        OK_HEAD + b"".join(b"X-%d: 1\r\n" % i for i in range(3000)) + b"\r\n",
        "failed",
        "connection: HTTPException: got more than 100 headers",
    ),
    "http-0.9": (b"\xff\xd8\xff\xe0 a body without a status line", "failed", "connection: BadStatusLine"),
    "chunk-size-huge": (
        OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n" + b"a" * 150_000,
        "rejected",
        "too_large",
    ),
    "chunk-size-negative": (
        OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n-5\r\nabc\r\n0\r\n\r\n",
        "failed",
        "connection: HTTPException: malformed response body",
    ),
    "chunk-size-garbage": (
        OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
        "failed",
        "connection: IncompleteRead",
    ),
    "status-100-forever": (b"HTTP/1.1 100 Continue\r\n\r\n" * 20_000, "failed", "connection:"),
    "empty": (b"", "failed", "connection: RemoteDisconnected"),
    "redirect-loop": (_redirect(b"/again"), "rejected", "too_many_redirects: more than 5 redirects"),
    "redirect-to-itself": (_redirect(b"/x"), "rejected", "too_many_redirects: more than 5 redirects"),
    "redirect-file": (
        _redirect(b"file:///etc/passwd"),
        "rejected",
        "blocked_scheme: redirect to scheme 'file'",
    ),
    "redirect-FILE-spaced": (_redirect(b"  FILE:///etc/passwd"), "rejected", "blocked_scheme"),
    "redirect-data": (_redirect(b"data:image/png;base64,AAAA", 301), "rejected", "blocked_scheme"),
    "redirect-ftp": (_redirect(b"ftp://127.0.0.1/x", 307), "rejected", "blocked_scheme"),
    "redirect-javascript": (_redirect(b"javascript:alert(1)", 308), "rejected", "blocked_scheme"),
    "redirect-mapped-metadata": (_redirect(b"http://[::ffff:169.254.169.254]/"), "rejected", "blocked_addr"),
    "redirect-ipv4-mapped": (_redirect(b"http://[::ffff:10.0.0.1]/"), "rejected", "blocked_address"),
    "redirect-nat64": (_redirect(b"http://[64:ff9b::a9fe:a9fe]/"), "rejected", "blocked_address"),
    "redirect-6to4": (_redirect(b"http://[2002:a00:1::]/"), "rejected", "blocked_address"),
    "redirect-decimal": (
        _redirect(b"http://167772161/"),
        "rejected",
        "blocked_address: host 167772161: 10.0.0.1",
    ),
    "redirect-octal": (_redirect(b"http://012.0.0.1/"), "rejected", "blocked_address"),
    "redirect-hex-metadata": (_redirect(b"http://0xa9.0xfe.0xa9.0xfe/latest"), "rejected", "blocked_address"),
    "redirect-link-local-v6": (_redirect(b"http://[fe80::1%25lo]/"), "rejected", "blocked_address"),
    "redirect-unspecified": (_redirect(b"http://0/"), "rejected", "blocked_address"),
    "redirect-unique-local": (_redirect(b"http://[fd00::1]/"), "rejected", "blocked_address"),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_answers_are_classified(name: str, raw: Callable[[bytes], RawServer]) -> None:
    answer, status, error = HOSTILE[name]
    srv = raw(answer)
    started = time.monotonic()
    result = fetch_url(srv.url(), POLICY)
    assert time.monotonic() - started < 5
    assert (result.status, result.data) == (status, None), result.error
    assert result.error is not None and result.error.startswith(error), result.error
    assert "\n" not in result.error


@pytest.mark.timeout(30)
def test_plain_http_server_on_an_https_url_fails_fast(raw: Callable[[bytes], RawServer]) -> None:
    srv = raw(OK_HEAD + b"Content-Length: 1\r\n\r\na")
    started = time.monotonic()
    result = fetch_url(f"https://127.0.0.1:{srv.port}/x", POLICY)
    assert time.monotonic() - started < 5
    assert result.status == "failed" and result.error.startswith("connection:"), result.error


@pytest.mark.timeout(60)
def test_truncated_image_is_failed_not_published(tmp_path: Path, raw: Callable[[bytes], RawServer]) -> None:
    pytest.importorskip(
        "img2dataset", reason="img2dataset is not installed: pip install --no-deps img2dataset==1.47.0"
    )
    from PIL import Image

    from fairsets.fetch.download import download_urls

    buf = io.BytesIO()
    Image.effect_noise((256, 256), 64).convert("RGB").save(buf, "JPEG", quality=90)
    jpeg = buf.getvalue()
    cut = raw(OK_HEAD + b"Content-Length: %d\r\n\r\n" % len(jpeg) + jpeg[: len(jpeg) // 2])
    whole = raw(OK_HEAD + b"Content-Length: %d\r\n\r\n" % len(jpeg) + jpeg)
    rows = [{"key": "cut", "url": cut.url()}, {"key": "whole", "url": whole.url()}]
    got = {r["key"]: r for r in download_urls(rows, tmp_path / "dl", POLICY, processes=0)}
    assert got["whole"]["status"] == "ok"
    assert got["cut"]["status"] == "failed"
    assert got["cut"]["error"].startswith("connection: IncompleteRead"), got["cut"]["error"]


# --------------------------------------------------------------------------- Retry-After


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("7", 7.0),
        ("0", 0.0),
        ("-5", None),  # not delta-seconds: the backoff applies, not an immediate retry
        ("nan", None),
        ("-inf", None),
        (float("nan"), None),
        (-3, None),
        ("1e999", float("inf")),  # capped by call_with_retry
        ("9" * 5000, float("inf")),
        ("\x00", None),
        ("Thu, 99 Foo 2020", None),
        ("Mon, 01 Jan 0001 00:00:00 GMT", 0.0),
    ],
)
def test_parse_retry_after_hostile_values(value: Any, seconds: float | None) -> None:
    from fairsets.fetch.retry import parse_retry_after

    assert parse_retry_after(value) == seconds


@pytest.mark.timeout(30)
@pytest.mark.parametrize("header", ["99999999", "1e999", "Fri, 31 Dec 9999 23:59:59 GMT", "-1", "nan"])
def test_429_forever_ends_with_capped_waits(header: str) -> None:
    from fairsets.fetch.retry import HttpStatusError, RetryPolicy
    from fairsets.sources.commons import file_info

    slept: list[float] = []
    policy = RetryPolicy(attempts=4, backoff=1.0, max_wait=30, jitter=0)
    with LoopbackServer() as srv:
        srv.route("/w/api.php", lambda req: Response(429, {"Retry-After": header}, b"slow down"))
        with pytest.raises(HttpStatusError, match="HTTP 429"):
            file_info(["File:A.jpg"], api_url=srv.url("/w/api.php"), policy=policy, sleep=slept.append)
        assert srv.hits("/w/api.php") == 4
    assert len(slept) == 3 and all(0 < s <= 30 for s in slept), slept


# --------------------------------------------------------------------------- World Bank API (geo reference)


def _worldbank(answer: Response, tmp_path: Path) -> Any:
    from fairsets.fetch.retry import RetryPolicy
    from fairsets.geo.reference import fetch_worldbank

    with LoopbackServer() as srv:
        srv.route("/v2/country/all/indicator/NY.GDP.MKTP.CD", lambda req: answer)
        return fetch_worldbank(
            2022,
            ("NY.GDP.MKTP.CD",),
            base_url=srv.url("/v2"),
            cache_dir=tmp_path,
            policy=RetryPolicy(attempts=1),
            timeout=2,
        )


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'[{"pages": 1000000000}, []]', "announces 1000000000 pages"),
        (b'[{"pages": -1}, []]', "announces -1 pages"),
    ],
    ids=["deep", "endless-pages", "negative-pages"],
)
def test_worldbank_hostile_answers_are_clear_errors(body: bytes, message: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=message):
        _worldbank(Response(200, {"Content-Type": "application/json"}, body), tmp_path)


@pytest.mark.timeout(30)
def test_worldbank_records_of_the_wrong_shape_are_not_numbers(tmp_path: Path) -> None:
    from servers import json_response

    recs = [
        {"countryiso3code": "USA", "value": "lots", "date": "yesterday"},
        {"countryiso3code": "FRA", "value": {"x": 1}, "date": ["2022"]},
        {"countryiso3code": "DEU", "value": "1e999", "date": 2021},
        {"countryiso3code": "", "country": "not an object", "value": 1},
        {"countryiso3code": "XXX", "country": ["x"], "value": 1},
    ]
    table = _worldbank(json_response([{"page": 1, "pages": 1}, recs]), tmp_path)
    gdp = table["gdp"].to_dict()
    assert all(gdp[c] != gdp[c] for c in ("USA", "FRA", "DEU")), gdp  # NaN: not a (finite) number
