"""Retries with exponential backoff that honour ``Retry-After``, and the project's User-Agent.

Every client that talks to a public service (Wikidata Query Service, the MediaWiki API, SerpAPI,
image hosts) goes through :func:`call_with_retry` and sends :func:`user_agent`. Wikimedia's
User-Agent policy asks for a client name, version and contact; set ``FAIRSETS_CONTACT`` (an
e-mail address or URL) or pass ``contact=``.

Usage::

    def once():
        resp = session.get(url, headers={"User-Agent": user_agent()})
        if resp.status_code in policy.statuses:
            raise HttpStatusError(resp.status_code, resp.headers.get("Retry-After"), url)
        return resp

    resp = call_with_retry(once, policy, what="commons api")

A client's own timeout bounds one socket operation, so a server that drips a byte at a time
can hold a call forever. Clients on urllib get a wall-clock deadline at the socket
(:func:`fairsets.fetch.guard.metered_handlers`, :func:`~fairsets.fetch.guard.guarded_opener`);
clients whose sockets are out of reach (``requests``, SPARQLWrapper) wrap the blocking call in
:func:`call_with_deadline`.
"""

from __future__ import annotations

import email.utils
import errno
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from fairsets.core.errors import NetworkFailure

__all__ = [
    "HttpStatusError",
    "RetryPolicy",
    "acall_with_retry",
    "call_with_deadline",
    "call_with_retry",
    "parse_retry_after",
    "user_agent",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

PROJECT_URL = "https://github.com/fairsets/fairsets"


def user_agent(contact: str | None = None) -> str:
    """``fairsets/<version> (<project url>; <contact>) python/<x.y>`` (Wikimedia UA policy)."""
    import platform

    from fairsets.core.version import __version__

    contact = contact or os.environ.get("FAIRSETS_CONTACT", "").strip()
    inner = f"{PROJECT_URL}; {contact}" if contact else PROJECT_URL
    return f"fairsets/{__version__} ({inner}) python/{platform.python_version()}"


class HttpStatusError(NetworkFailure):
    """An HTTP answer worth retrying (429, 5xx) or not; carries the status and ``Retry-After``."""

    def __init__(self, status: int, retry_after: str | float | None = None, url: str = "", detail: str = ""):
        self.status = int(status)
        self.retry_after = parse_retry_after(retry_after)
        self.url = url
        msg = f"HTTP {self.status}"
        if url:
            msg += f" from {url}"
        if detail:
            msg += f": {detail}"
        super().__init__(msg)


class RetryPolicy(BaseModel):
    """How often and how long to retry. Statuses not listed fail at once."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    attempts: int = Field(default=5, ge=1, description="total tries, the first included")
    backoff: float = Field(default=1.0, ge=0, description="first wait in seconds; doubles each retry")
    max_wait: float = Field(default=120.0, ge=0, description="cap on one wait (Retry-After included)")
    statuses: tuple[int, ...] = (429, 500, 502, 503, 504)
    jitter: float = Field(default=0.1, ge=0, le=1, description="relative random jitter on backoff waits")


def _seconds(value: float) -> float | None:
    """A delta-seconds value: negative or NaN is not one (None: the backoff applies); huge is
    kept (``call_with_retry`` caps it at ``max_wait``)."""
    return value if value >= 0 else None  # NaN >= 0 is False


def parse_retry_after(value: str | float | int | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or an HTTP date); None if absent/bad."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)):
        return _seconds(float(value))
    text = str(value).strip()
    try:
        return _seconds(float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    now = time.time() if now is None else now
    return max(0.0, when.timestamp() - now)


_UNREACHABLE_ERRNOS = {errno.ECONNREFUSED, errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL}


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) says the host cannot be reached at all: connection
    refused, name not resolvable, network or host unreachable. Retrying does not help there (the
    network is down, or the address is wrong), so such errors fail at once instead of after
    minutes of backoff."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, (ConnectionRefusedError, socket.gaierror)):
            return True
        if isinstance(e, OSError) and e.errno in _UNREACHABLE_ERRNOS:
            return True
        reason = getattr(e, "reason", None)  # urllib.error.URLError
        todo += [e.__cause__, e.__context__, reason if isinstance(reason, BaseException) else None]
    return False


def _retryable(exc: BaseException, policy: RetryPolicy) -> bool:
    if isinstance(exc, HttpStatusError):
        return exc.status in policy.statuses
    if unreachable(exc):
        return False
    # connection resets, timeouts: transient by nature
    return isinstance(exc, (TimeoutError, ConnectionError))


def call_with_retry(
    fn: Callable[[], T],
    policy: RetryPolicy | None = None,
    *,
    what: str = "request",
    sleep: Callable[[float], None] = time.sleep,
    retry_on: Callable[[BaseException], bool] | None = None,
) -> T:
    """Call ``fn`` until it returns, retrying transient failures per ``policy``.

    ``fn`` signals a retryable HTTP answer by raising :class:`HttpStatusError`; ``TimeoutError``
    and ``ConnectionError`` are retried too, except when the host cannot be reached at all
    (:func:`unreachable`: refused, unresolvable), and ``retry_on(exc)`` may widen that. A
    ``Retry-After`` on the error wins over the backoff (capped at ``policy.max_wait``). The last
    exception is re-raised when attempts run out; non-retryable ones are raised at once.
    """
    policy = policy or RetryPolicy()
    backoff = _Backoff(policy)
    for attempt in range(1, policy.attempts + 1):
        try:
            return fn()
        except Exception as exc:
            sleep(backoff.after(exc, attempt, what, retry_on))
    raise AssertionError("unreachable")  # pragma: no cover


class _Backoff:
    """The wait before each retry of one call (re-raises when ``exc`` is not retried or was the last try)."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.wait = policy.backoff

    def after(
        self, exc: Exception, attempt: int, what: str, retry_on: Callable[[BaseException], bool] | None
    ) -> float:
        policy = self.policy
        retryable = _retryable(exc, policy) or (retry_on is not None and retry_on(exc))
        if not retryable or attempt == policy.attempts:
            raise exc
        delay = getattr(exc, "retry_after", None)
        if delay is None:
            delay = self.wait * (1 + random.uniform(-policy.jitter, policy.jitter))
            self.wait *= 2
        delay = min(max(delay, 0.0), policy.max_wait)
        log.warning("%s: %s; retry %d/%d in %.1fs", what, exc, attempt, policy.attempts - 1, delay)
        return delay


async def acall_with_retry(
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy | None = None,
    *,
    what: str = "request",
    sleep: Callable[[float], Awaitable[None]],
    retry_on: Callable[[BaseException], bool] | None = None,
) -> T:
    """:func:`call_with_retry` for a coroutine function; ``sleep`` is awaited between tries."""
    policy = policy or RetryPolicy()
    backoff = _Backoff(policy)
    for attempt in range(1, policy.attempts + 1):
        try:
            return await fn()
        except Exception as exc:
            await sleep(backoff.after(exc, attempt, what, retry_on))
    raise AssertionError("unreachable")  # pragma: no cover


def call_with_deadline(fn: Callable[[], T], seconds: float, *, what: str = "request") -> T:
    """Call ``fn`` in a helper thread and wait for it at most ``seconds``.

    For clients whose sockets cannot be metered (``requests``, SPARQLWrapper): when the deadline
    passes, :class:`fairsets.fetch.guard.TooSlow` (reason ``deadline``, a ``TimeoutError`` that
    :func:`call_with_retry` retries) is raised here and the helper thread is abandoned — a
    daemon that ends when its client gives up and never blocks the caller or the exit.

    Args:
        fn: the blocking call (no arguments).
        seconds: the wall-clock limit (> 0).
        what: names the service in the error (a host, never a URL with a query string).

    Returns:
        What ``fn`` returns; what it raises is raised here.
    """
    from .guard.refusals import TooSlow

    if not seconds > 0:
        raise ValueError(f"deadline must be > 0 seconds, not {seconds!r}")
    box: dict[str, object] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name=f"fairsets-deadline-{what}", daemon=True).start()
    if not done.wait(seconds):
        raise TooSlow("deadline", f"{what}: no complete answer within {seconds:g} s (setting: deadline)")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
