"""One URL through the guard: :func:`fetch_url` and the classification of its outcome
(:class:`FetchResult`, :func:`classify_http_status`).
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import socket
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Literal

from .opener import guarded_opener
from .policy import FetchPolicy
from .refusals import (
    FetchRefused,
    TooSlow,
)
from .urls import url_problem

log = logging.getLogger(__package__)  # one logger for the whole guard, as before the split


@dataclass
class FetchResult:
    """The outcome of :func:`fetch_url`.

    Attributes:
        url: the URL asked for.
        final_url: the URL answered after redirects (None if no answer).
        status: ``ok``; ``rejected`` (a decision: refused address/scheme, opt-out, too large,
            HTTP 3xx/4xx other than 408/429, invalid URL — not worth retrying); ``failed``
            (transient: timeouts, the deadline or minimum rate passed, connection errors, 5xx,
            408, 429).
        http_status: the HTTP status of the final answer, if any.
        data: the body when ``ok``.
        content_type: the ``Content-Type`` of the final answer, if any.
        error: ``"<reason>: <detail>"`` when not ok (no URL in it).
    """

    url: str
    final_url: str | None
    status: Literal["ok", "failed", "rejected"]
    http_status: int | None = None
    data: bytes | None = None
    content_type: str | None = None
    error: str | None = None


def classify_http_status(code: int) -> Literal["failed", "rejected"]:
    """``failed`` for HTTP answers worth retrying later (408, 429, 5xx), else ``rejected``."""
    return "failed" if code in (408, 429) or code >= 500 else "rejected"


def _is_timeout(exc: BaseException | None) -> bool:
    return isinstance(exc, (TimeoutError, socket.timeout))


def _shown_host(url: str) -> str:
    """The host of ``url`` for a log line; ``?`` when there is none or the URL does not parse."""
    try:
        return urllib.parse.urlsplit(url).hostname or "?"
    except ValueError:
        return "?"


def fetch_url(url: str, policy: FetchPolicy, *, user_agent: str | None = None) -> FetchResult:
    """Download one (small) URL through :func:`guarded_opener`, classifying the outcome.

    No retries here; wrap with :func:`fairsets.fetch.retry.call_with_retry` for that.

    Args:
        url: an http(s) URL.
        policy: the fetch policy.
        user_agent: the User-Agent; default :func:`fairsets.fetch.retry.user_agent`.

    Returns:
        A :class:`FetchResult`; this function does not raise for network or HTTP errors.
    """
    host = _shown_host(url)
    problem = url_problem(url)
    if problem is not None:  # urllib would fail it in many ways, some of them looking transient
        return FetchResult(url, None, "rejected", error=f"invalid_url: {problem}")
    opener = guarded_opener(policy, user_agent)
    try:
        req = urllib.request.Request(url)
        with opener.open(req, timeout=policy.timeout) as r:
            try:
                data = r.read()
            except ValueError as e:  # broken framing (a negative chunk size): the server's fault
                raise http.client.HTTPException(f"malformed response body: {type(e).__name__}: {e}") from None
            return FetchResult(
                url=url,
                final_url=r.geturl(),
                status="ok",
                http_status=r.status,
                data=data,
                content_type=r.headers.get("Content-Type"),
            )
    except FetchRefused as e:
        log.debug("%s: %s", host, e)
        return FetchResult(url, None, "rejected", error=f"{e.reason}: {e.detail}")
    except urllib.error.HTTPError as e:
        with contextlib.suppress(Exception):
            e.close()
        return FetchResult(
            url,
            None,
            classify_http_status(e.code),
            http_status=e.code,
            content_type=e.headers.get("Content-Type") if e.headers else None,
            error=f"http_{e.code}: {e.reason}",
        )
    except TooSlow as e:
        return FetchResult(url, None, "failed", error=f"{e.reason}: {e.detail}")
    except urllib.error.URLError as e:
        if isinstance(e.reason, TooSlow):
            return FetchResult(url, None, "failed", error=f"{e.reason.reason}: {e.reason.detail}")
        kind = "timeout" if _is_timeout(e.reason) else "connection"
        return FetchResult(url, None, "failed", error=f"{kind}: {e.reason}")
    except ValueError as e:  # malformed URL; the message would repeat the URL
        return FetchResult(url, None, "rejected", error=f"invalid_url: {type(e).__name__}")
    except (OSError, http.client.HTTPException) as e:
        kind = "timeout" if _is_timeout(e) else "connection"
        return FetchResult(url, None, "failed", error=f"{kind}: {type(e).__name__}: {e}")
