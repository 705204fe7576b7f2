"""Fixtures for the fetch tests: a no-egress socket guard and a loopback image server.

``no_egress`` makes it impossible for a packet to leave for a non-loopback address during a test,
whatever the code under test does: ``socket.socket.connect``/``connect_ex``,
``socket.create_connection`` and ``socket.getaddrinfo`` (for names, so no DNS query leaves
either) raise for anything but loopback, and every such attempt is recorded; the fixture fails
the test at teardown if an attempt was recorded and not consumed with ``take()``. It patches
this process only, so tests using it run downloads in-process.
"""

from __future__ import annotations

import io
import ipaddress
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from servers import LoopbackServer, Request, Response


def jpeg_bytes(color: tuple[int, int, int] = (200, 30, 40), size: tuple[int, int] = (32, 24)) -> bytes:
    """A real JPEG made with Pillow."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def _is_loopback_host(host: Any) -> bool:
    if not isinstance(host, str):
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


@dataclass
class EgressRecorder:
    """Attempts to reach a non-loopback address (kind, address), in order."""

    attempts: list[tuple[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: str, address: Any) -> None:
        with self.lock:
            self.attempts.append((kind, address))

    def take(self) -> list[tuple[str, Any]]:
        """Return and clear the recorded attempts (for tests that expect one)."""
        with self.lock:
            out, self.attempts = self.attempts, []
        return out


class EgressBlocked(OSError):
    """Raised by the patched socket functions instead of connecting anywhere but loopback."""


@pytest.fixture
def no_egress(monkeypatch: pytest.MonkeyPatch) -> Iterator[EgressRecorder]:
    rec = EgressRecorder()
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def allowed(sock: socket.socket, address: Any) -> bool:
        if sock.family == getattr(socket, "AF_UNIX", None):
            return True
        return isinstance(address, tuple) and _is_loopback_host(address[0])

    def connect(self: socket.socket, address: Any) -> None:
        if not allowed(self, address):
            rec.record("connect", address)
            raise EgressBlocked(f"test blocked a connection to {address!r}")
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if not allowed(self, address):
            rec.record("connect_ex", address)
            raise EgressBlocked(f"test blocked a connection to {address!r}")
        return real_connect_ex(self, address)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        if not _is_loopback_host(address[0]):
            rec.record("create_connection", address)
            raise EgressBlocked(f"test blocked a connection to {address!r}")
        host, port = address[0], address[1]
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        timeout = args[0] if args else kwargs.get("timeout", socket.getdefaulttimeout())
        if timeout is not None:
            sock.settimeout(timeout)
        try:
            sock.connect((host, port))  # the patched connect: checked again
        except BaseException:
            sock.close()
            raise
        return sock

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is None or _is_loopback_host(host):
            return real_getaddrinfo(host, *args, **kwargs)
        try:
            ipaddress.ip_address(str(host).split("%", 1)[0])  # a literal: no DNS query is sent
        except ValueError:
            rec.record("getaddrinfo", host)
            raise socket.gaierror(socket.EAI_NONAME, f"test blocked a DNS lookup of {host!r}") from None
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield rec
    leftover = rec.take()
    assert not leftover, f"non-loopback network attempts: {leftover}"


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
