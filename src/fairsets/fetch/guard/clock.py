"""Deadlines and the minimum rate: the wall-clock budget of one download and the metered socket
whose every connect, read and write gets at most the time left.
"""

from __future__ import annotations

import http.client
import io
import socket
import time
from typing import Any

from .policy import FetchPolicy
from .refusals import (
    TooSlow,
)


class _Clock:
    """The wall-clock budget of one download (shared by its redirect hops)."""

    def __init__(self, policy: FetchPolicy) -> None:
        self.start = time.monotonic()
        self.policy = policy
        self.received = 0
        self.host = "?"

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def expired(self) -> bool:
        return self.elapsed() >= self.policy.deadline

    def check(self) -> None:
        """Raise :class:`TooSlow` if the deadline has passed or the average rate is too low."""
        p = self.policy
        elapsed = self.elapsed()
        if elapsed >= p.deadline:
            raise TooSlow(
                "deadline",
                f"no complete answer from {self.host} within {p.deadline:g} s "
                f"({self.received} bytes received; setting: deadline)",
            )
        if p.min_rate > 0 and elapsed >= p.rate_grace and self.received < p.min_rate * elapsed:
            raise TooSlow(
                "min_rate",
                f"{self.host} sent {self.received} bytes in {elapsed:.1f} s, "
                f"{self.received / elapsed:.0f} bytes/s, less than min_rate {p.min_rate:g} bytes/s",
            )

    def op_timeout(self) -> float:
        """Seconds one socket operation may block: the per-operation timeout, cut to what is left.

        Raises:
            TooSlow: if no time is left.
        """
        self.check()
        p = self.policy
        left = min(p.timeout, p.deadline - self.elapsed())
        if p.min_rate > 0:  # when the average rate would fall below min_rate if nothing more came
            left = min(left, max(p.rate_grace, self.received / p.min_rate) - self.elapsed())
        return max(left, 0.001)

    def timed_out(self, exc: BaseException) -> BaseException:
        """The exception to raise for ``exc``: :class:`TooSlow` if a limit has passed, else ``exc``."""
        try:
            self.check()
        except TooSlow as slow:
            return slow
        return exc


class _MeteredReader(io.RawIOBase):
    """The raw stream under an HTTP response: every read gets the time left, and is counted."""

    def __init__(self, sock: socket.socket, clock: _Clock) -> None:
        super().__init__()
        self._sock = sock
        self._inner = sock.makefile("rb", buffering=0)  # holds a reference: closes with us
        self._clock = clock

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._inner.fileno()

    def readinto(self, b: Any) -> int | None:
        self._sock.settimeout(self._clock.op_timeout())
        try:
            n = self._inner.readinto(b)
        except OSError as e:  # a timeout cut short by the clock
            raise self._clock.timed_out(e) from None
        if n:
            self._clock.received += n
            self._clock.check()
        return n

    def close(self) -> None:
        if not self.closed:
            self._inner.close()
        super().close()


class _MeteredSocket:
    """A connected (possibly TLS) socket whose reads and writes keep to the download's clock."""

    def __init__(self, sock: socket.socket, clock: _Clock) -> None:
        self._sock = sock
        self._clock = clock

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def makefile(self, mode: str = "r", buffering: int | None = None, **kwargs: Any) -> Any:
        if mode != "rb" or kwargs:
            raise ValueError(f"a guarded connection is read as 'rb', not {mode!r}")
        raw = _MeteredReader(self._sock, self._clock)
        return raw if buffering == 0 else io.BufferedReader(raw, buffering or io.DEFAULT_BUFFER_SIZE)

    def sendall(self, data: Any, *args: Any) -> None:
        self._sock.settimeout(self._clock.op_timeout())
        try:
            self._sock.sendall(data, *args)
        except OSError as e:
            raise self._clock.timed_out(e) from None

    def close(self) -> None:
        self._sock.close()


def _metered_connect(conn: http.client.HTTPConnection, clock: _Clock, connect: Any) -> None:
    """Run ``connect()`` of ``conn`` within the clock, then meter its socket."""
    clock.host = conn.host
    conn.timeout = clock.op_timeout()
    try:
        connect()
    except OSError as e:
        raise clock.timed_out(e) from None
    conn.sock = _MeteredSocket(conn.sock, clock)  # type: ignore[assignment]
