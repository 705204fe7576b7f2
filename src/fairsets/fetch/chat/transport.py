"""The HTTP side of the chat client: the POST of one chat completion over a pooled asynchronous
connection, and how what the server answers is classified.

* :class:`Transport`: :meth:`Transport.session` opens the batch's
  :class:`aiohttp.ClientSession` (keep-alive connections, at most ``max_concurrency`` of them,
  redirects never followed, no proxy for a loopback server, every socket operation held to the
  endpoint's ``timeout`` and the whole request to twice that) and :meth:`Transport.post` sends one
  request and returns the parsed answer or raises a classified error:
  :class:`~fairsets.fetch.chat.ChatServiceError` (fatal for the batch: 401/403, 404/405, a
  redirect), ``_Status`` (another HTTP error, retried when 429 or 5xx), ``_NoResponse`` (a timeout,
  a dropped connection, a reply that is not HTTP: retried), ``_Unreachable`` (refused, unknown host:
  not retried) or an invalid answer (:class:`~fairsets.fetch.chat.answer.BadCompletion`);
* :func:`_secret`: the API key, read from the variable the endpoint names.

The body read is bounded (:data:`MAX_RESPONSE`); compressed bodies are not asked for (``Accept-
Encoding: identity``) nor decoded. Every server text in an answer or an error is masked
(``redact``) before it is clipped.

aiohttp was chosen by measurement (``benchmarks/bench_chat.py``, 256 requests in flight on 2
cores): about 0.3 ms of client CPU per request against 0.5 ms for urllib with a thread per
request, 2 ms for httpx2 and 20 ms for httpx 0.28, whose pool scans its connections per request.
"""

from __future__ import annotations

import asyncio
import os
import urllib.parse
from typing import TYPE_CHECKING, Any

from ..guard.hosts import is_loopback_name
from ..redact import Redactor
from ..retry import HttpStatusError, unreachable, user_agent
from .answer import BadCompletion as _Bad
from .answer import error_detail, parse_completion
from .endpoint import ChatEndpoint
from .exchange import ChatResult, ChatServiceError

if TYPE_CHECKING:
    import aiohttp

__all__ = ["MAX_RESPONSE", "Transport"]

#: The largest response body read (a chat answer is a few kB; more is a broken or hostile server).
MAX_RESPONSE = 16_000_000
#: The most of an error body read for its message.
_MAX_ERROR_BODY = 65_536
_FATAL = frozenset({401, 403, 404, 405})


class _NoResponse(ConnectionError):
    """No HTTP answer (a timeout, a dropped connection): retried."""


class _Unreachable(Exception):
    """The host cannot be reached at all (refused, unknown): not retried."""


class _Status(HttpStatusError):
    def __init__(self, status: int, retry_after: str | None, where: str, detail: str) -> None:
        super().__init__(status, retry_after, url=where, detail=detail)
        self.detail = detail


def _secret(endpoint: ChatEndpoint) -> str:
    """The key, read from the variable ``endpoint.api_key_env`` names (``""``: none)."""
    return os.environ.get(endpoint.api_key_env, "").strip() if endpoint.api_key_env else ""


async def _read(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the body (one more than allowed tells an oversized one)."""
    parts: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = await resp.content.read(limit + 1 - size)
        if not chunk:
            break
        parts.append(chunk)
        size += len(chunk)
    return b"".join(parts)


class Transport:
    """POSTs chat completions to one endpoint: its session, and the classification of what comes back."""

    def __init__(self, endpoint: ChatEndpoint) -> None:
        self.endpoint = endpoint

    def _is_loopback(self) -> bool:
        return is_loopback_name(urllib.parse.urlsplit(self.endpoint.base_url).hostname or "")

    def session(self, connections: int) -> aiohttp.ClientSession:
        """A session for one batch (open it on the loop that will use it; close it when done):
        at most ``connections`` open, kept alive between requests."""
        import aiohttp

        t = self.endpoint.timeout
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=connections, limit_per_host=connections),
            timeout=aiohttp.ClientTimeout(total=2 * t, sock_connect=t, sock_read=t),
            trust_env=not self._is_loopback(),  # HTTP(S)_PROXY as urllib would, never for loopback
            auto_decompress=False,
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json",
                "Accept-Encoding": "identity",
                "User-Agent": user_agent(),
            },
        )

    def fatal(self, status: int, detail: str, key: bool) -> ChatServiceError:
        ep = self.endpoint
        said = f"; server says: {detail}" if detail else ""
        if status in (401, 403):
            sent = (
                f"the key from ${ep.api_key_env} was refused"
                if key
                else f"no key was sent (${ep.api_key_env} is unset)"
            )
            return ChatServiceError(
                f"chat endpoint {ep.label} at {ep.where} refused the request (HTTP {status}): {sent}{said}"
            )
        path = urllib.parse.urlsplit(ep.chat_url).path
        return ChatServiceError(
            f"chat endpoint {ep.label} at {ep.where} answered HTTP {status} for {path}{said}; check the "
            f"model name {ep.model!r} and that base_url is the API root (e.g. ending in /v1)"
        )

    async def post(
        self,
        session: aiohttp.ClientSession,
        body: bytes,
        key: str,
        redact: Redactor,
        choices: tuple[str, ...] | None = None,
    ) -> ChatResult:
        """POST one chat completion: the parsed answer (its texts masked), or a classified exception
        (every server text in it masked before it is clipped)."""
        import aiohttp

        where = self.endpoint.where
        headers = {"Authorization": f"Bearer {key}"} if key else None
        try:
            async with session.post(
                self.endpoint.chat_url, data=body, headers=headers, allow_redirects=False
            ) as resp:
                status = resp.status
                if status >= 300:
                    raw = await _read(resp, _MAX_ERROR_BODY)
                    self._refuse(status, resp.headers, raw, key, redact)
                raw = await _read(resp, MAX_RESPONSE)
        except (ChatServiceError, _Status):
            raise
        except aiohttp.ServerTimeoutError:  # one socket operation (connect, a read) took too long
            raise _NoResponse(f"no answer from {where} within {self.endpoint.timeout:g}s") from None
        except asyncio.TimeoutError:  # the whole request's deadline: a server that drips
            deadline = 2 * self.endpoint.timeout
            raise _NoResponse(
                f"{where}: too slow (deadline): no complete answer within {deadline:g} s"
            ) from None
        except aiohttp.ClientConnectorError as exc:  # before the request got out
            text = f"cannot connect to {where}: {redact(str(exc.os_error))}"
            raise (_Unreachable(text) if unreachable(exc.os_error) else _NoResponse(text)) from None
        except (aiohttp.ClientError, OSError, ValueError) as exc:  # dropped, reset, not HTTP
            if unreachable(exc):
                raise _Unreachable(f"cannot connect to {where}: {type(exc).__name__}") from None
            raise _NoResponse(f"connection to {where} failed: {type(exc).__name__}") from None
        if len(raw) > MAX_RESPONSE:
            raise _Bad(f"response larger than {MAX_RESPONSE} bytes (no chat answer is); not read further")
        return ChatResult(**parse_completion(raw, redact, self.endpoint, choices))

    def _refuse(self, status: int, headers: Any, raw: bytes, key: str, redact: Redactor) -> None:
        """Raise what an answer of ``status`` ≥ 300 means."""
        where = self.endpoint.where
        if 300 <= status < 400:
            try:  # a hostile Location can be no URL at all ("http://[::1"); its case is kept
                target = urllib.parse.urlsplit(headers.get("Location", "") or "").netloc
            except ValueError:
                target = ""
            target = redact(target.rpartition("@")[2])[:100]  # masked, then clipped
            raise ChatServiceError(
                f"chat endpoint {self.endpoint.label} at {where} redirects (HTTP {status} to "
                f"{target or 'elsewhere'}); set base_url to the final address (redirects are not "
                "followed: the key would go elsewhere)"
            )
        detail = error_detail(raw, redact) if raw else ""
        if status in _FATAL:
            raise self.fatal(status, detail, bool(key))
        raise _Status(status, headers.get("Retry-After"), where, detail)
