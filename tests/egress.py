"""No egress in a test: a fixture that makes leaving loopback impossible (and recorded).

``no_egress`` makes it impossible for a packet to leave for a non-loopback address during a test,
whatever the code under test does: ``socket.socket.connect``/``connect_ex``,
``socket.create_connection`` and ``socket.getaddrinfo`` (for names, so no DNS query leaves
either) raise for anything but loopback, and every such attempt is recorded; the fixture fails
the test at teardown if an attempt was recorded and not consumed with ``take()``. It patches
this process only, so tests using it run downloads in-process. ``tests/conftest.py`` makes it
available to every test.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest


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
