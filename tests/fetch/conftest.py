"""Fixtures for the fetch tests: a loopback image server (``no_egress`` comes from tests/egress.py)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from servers import LoopbackServer, Request, Response


def jpeg_bytes(color: tuple[int, int, int] = (200, 30, 40), size: tuple[int, int] = (32, 24)) -> bytes:
    """A real JPEG made with Pillow."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "JPEG", quality=90)
    return buf.getvalue()


@dataclass
class ImageServer:
    """The loopback server with the fetch test routes, and switches to change them between runs."""

    srv: LoopbackServer
    jpeg: bytes
    big: bytes
    slow_delay: float = 2.0
    flaky_status: int = 500
    ua_seen: list[str] = field(default_factory=list)

    def url(self, path: str) -> str:
        return self.srv.url(path)

    def hits(self, path: str) -> int:
        return self.srv.hits(path)


def _image_server(srv: LoopbackServer) -> ImageServer:
    jpeg = jpeg_bytes()
    state = ImageServer(srv, jpeg, big=jpeg + b"\0" * 20_000)
    img = {"Content-Type": "image/jpeg"}

    def ok(req: Request) -> Response:
        state.ua_seen.append(req.headers.get("User-Agent", ""))
        return Response(200, img, jpeg)

    srv.route("/ok.jpg", ok)
    srv.route("/ok2.jpg", lambda req: Response(200, img, jpeg_bytes((10, 200, 30))))
    srv.route("/optout.jpg", lambda req: Response(200, {**img, "X-Robots-Tag": "noai"}, jpeg))
    srv.route(
        "/optout-ua.jpg", lambda req: Response(200, {**img, "X-Robots-Tag": "fairsets: noimageai"}, jpeg)
    )
    srv.route("/optout-other.jpg", lambda req: Response(200, {**img, "X-Robots-Tag": "otherbot: noai"}, jpeg))
    srv.route("/redirect-private", lambda req: Response(302, {"Location": "http://10.0.0.1/x.jpg"}))
    srv.route("/redirect-ok", lambda req: Response(302, {"Location": "/ok.jpg"}))
    srv.route("/big.jpg", lambda req: Response(200, img, state.big))
    srv.route("/slow.jpg", lambda req: Response(200, img, jpeg, delay=state.slow_delay))
    srv.route("/missing.jpg", lambda req: Response(404, {"Content-Type": "text/plain"}, b"no such image"))
    srv.route(
        "/flaky.jpg",
        lambda req: Response(state.flaky_status, img, jpeg if state.flaky_status == 200 else b"oops"),
    )
    srv.route("/not-an-image.jpg", lambda req: Response(200, img, b"<html>surprise</html>"))
    return state


@pytest.fixture(scope="session")
def _loopback() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:  # stopping one takes ~0.5 s: share it
        yield srv


@pytest.fixture
def images(_loopback: LoopbackServer) -> ImageServer:
    """The loopback image server with fresh routes, switches and hit counts for each test."""
    with _loopback._lock:
        _loopback.requests.clear()
    _loopback.routes.clear()
    return _image_server(_loopback)
