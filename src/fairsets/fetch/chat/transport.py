"""The HTTP side of the chat client: the request body, the POST of one chat completion, and how what
the server answers is classified.

* :class:`Transport`: the opener (redirects refused, no proxy for a loopback server, the guard's
  deadline and minimum rate) and :meth:`Transport.post`, which returns the parsed answer or raises a
  classified error: :class:`~fairsets.fetch.chat.ChatServiceError` (fatal for the batch: 401/403,
  404/405, a redirect), ``_Status`` (another HTTP error, retried when 429 or 5xx), ``_NoResponse``
  (a timeout, a dropped connection: retried), ``_Unreachable`` (refused, unknown host: not
  retried) or an invalid answer (:class:`~fairsets.fetch.chat.answer.BadCompletion`);
* :func:`_secret`: the API key, read from the variable the endpoint names.

Every server text in an answer or an error is masked (``redact``) before it is clipped.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ..guard import TooSlow, metered_handlers, trusted_policy
from ..redact import Redactor
from ..retry import HttpStatusError, unreachable, user_agent
from .answer import BadCompletion as _Bad
from .answer import error_detail, parse_completion
from .endpoint import ChatEndpoint
from .exchange import ChatRequest, ChatResult, ChatServiceError

__all__ = ["MAX_RESPONSE", "Transport"]

#: The largest response body read (a chat answer is a few kB; more is a broken or hostile server).
MAX_RESPONSE = 16_000_000
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


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects become errors: a redirected request would carry the key to another address. The
    standard handler is never entered (it parses the Location first, and a hostile one such as
    ``http://[::1`` raises ValueError there): the 3xx reaches :meth:`Transport.post` as it came."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None

    def http_error_302(self, *args: Any, **kwargs: Any) -> None:
        return None

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


class Transport:
    """POSTs chat completions to one endpoint: its opener, and the classification of what comes back."""

    def __init__(self, endpoint: ChatEndpoint) -> None:
        self.endpoint = endpoint
        handlers: list[Any] = [
            _NoRedirect(),
            urllib.request.ProxyHandler({}) if self._is_loopback() else urllib.request.ProxyHandler(),
            *metered_handlers(trusted_policy(timeout=endpoint.timeout, deadline=2 * endpoint.timeout)),
        ]
        self._opener = urllib.request.build_opener(*handlers)

    def _is_loopback(self) -> bool:
        import ipaddress

        host = urllib.parse.urlsplit(self.endpoint.base_url).hostname or ""
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

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

    def post(
        self, body: bytes, key: str, redact: Redactor, choices: tuple[str, ...] | None = None
    ) -> ChatResult:
        """POST one chat completion: the parsed answer (its texts masked), or a classified exception
        (every server text in it masked before it is clipped). ``choices``: the request's
        (``ChatRequest.choices``), for reading the answer as the endpoint's shaping asks."""
        where = self.endpoint.where
        req = urllib.request.Request(self.endpoint.chat_url, data=body, method="POST")
        req.add_header("Content-Type", "application/json")
        req.add_header("Accept", "application/json")
        req.add_header("User-Agent", user_agent())
        if key:
            req.add_unredirected_header("Authorization", f"Bearer {key}")
        try:
            with self._opener.open(req, timeout=self.endpoint.timeout) as resp:
                raw = resp.read(MAX_RESPONSE + 1)  # bounded: a server streaming without end
        except urllib.error.HTTPError as exc:
            try:
                detail = error_detail(exc.read(), redact)
            except (OSError, http.client.HTTPException):
                detail = ""
            finally:
                exc.close()
            if 300 <= exc.code < 400:
                try:  # a hostile Location can be no URL at all ("http://[::1"); its case is kept
                    target = urllib.parse.urlsplit(exc.headers.get("Location", "") or "").netloc
                except ValueError:
                    target = ""
                target = redact(target.rpartition("@")[2])[:100]  # masked, then clipped
                raise ChatServiceError(
                    f"chat endpoint {self.endpoint.label} at {where} redirects (HTTP {exc.code} to "
                    f"{target or 'elsewhere'}); set base_url to the final address (redirects are not "
                    "followed: the key would go elsewhere)"
                ) from None
            if exc.code in _FATAL:
                raise self.fatal(exc.code, detail, bool(key)) from None
            raise _Status(exc.code, exc.headers.get("Retry-After"), where, detail) from None
        except TooSlow as exc:  # the deadline or the minimum rate: a server that drips
            raise _NoResponse(f"{where}: {exc}") from None
        except TimeoutError:
            raise _NoResponse(f"no answer from {where} within {self.endpoint.timeout:g}s") from None
        except urllib.error.URLError as exc:  # before the request got out
            if isinstance(exc.reason, TimeoutError):
                raise _NoResponse(f"no answer from {where} within {self.endpoint.timeout:g}s") from None
            text = f"cannot connect to {where}: {redact(str(exc.reason))}"
            raise (_Unreachable(text) if unreachable(exc) else _NoResponse(text)) from None
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            if unreachable(exc):
                raise _Unreachable(f"cannot connect to {where}: {type(exc).__name__}") from None
            raise _NoResponse(f"connection to {where} failed: {type(exc).__name__}") from None
        if len(raw) > MAX_RESPONSE:
            raise _Bad(f"response larger than {MAX_RESPONSE} bytes (no chat answer is); not read further")
        return ChatResult(**parse_completion(raw, redact, self.endpoint, choices))
