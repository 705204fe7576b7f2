"""Asking the endpoint: one batch of chat requests, in parallel, under the error policy.

:class:`_Requests` holds the request half of :class:`~fairsets.geo.methods.llm.LLMMethod` (which
inherits it): running a batch, one caption's request with its retries, and the HTTP POST whose
answers are classified as per caption or fatal. The error policy itself is described in
:mod:`fairsets.geo.methods.llm`.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import logging
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from ....fetch.cache import DiskCache
from ....fetch.guard import TooSlow
from ....fetch.retry import HttpStatusError, RetryPolicy, call_with_retry, user_agent
from .answers import _clip

__all__ = ["LLMServiceError"]

log = logging.getLogger(__package__)  # the package's logger, as before the split

_PROGRESS_MIN = 50  # requests in a batch before a progress bar is worth drawing
_FATAL_STATUSES = frozenset({401, 403, 404, 405})


class LLMServiceError(RuntimeError):
    """The endpoint is misconfigured or unusable (bad key, unknown model, unreachable, failing)."""


@dataclass
class _Outcome:
    """One caption's request: the raw answer, or why there is none."""

    answer: str | None = None
    error: str | None = None
    no_response: bool = False  # never got an HTTP response (refused, unresolvable, timed out)
    abandoned: bool = False  # stopped because the batch is being abandoned: not a failure


class _NoResponse(ConnectionError):
    """No HTTP response: retried by :func:`call_with_retry` like any ``ConnectionError``."""


class _StatusError(HttpStatusError):
    """An HTTP error answer; keeps the server's (masked) message apart for per-caption reasons."""

    def __init__(self, status: int, retry_after: str | None, url: str, detail: str) -> None:
        super().__init__(status, retry_after, url=url, detail=detail)
        self.detail = detail


class _BadResponse(Exception):
    """A 200 whose body is not a chat completion (not retried)."""


class _Aborted(Exception):
    """The batch is being abandoned: stop retrying."""


def _error_detail(body: bytes) -> str:
    """The message of an OpenAI-style error body (``{"error": {"message": …}}``), else its text."""
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        return _clip(text, 200)
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            for field in ("message", "detail", "error"):
                if isinstance(err.get(field), str):
                    return _clip(err[field], 200)
        if isinstance(err, str):
            return _clip(err, 200)
        if isinstance(data.get("detail"), str):
            return _clip(data["detail"], 200)
    return _clip(text, 200)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects become errors: a redirected request would carry the key to another address."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Requests:
    """The requests of :class:`~fairsets.geo.methods.llm.LLMMethod`, which sets the attributes below
    and provides ``messages`` and ``_cache_key``."""

    model: str
    options: dict[str, Any]
    api_key_env: str
    concurrency: int
    abort_after: int
    timeout: float
    temperature: float
    max_tokens: int
    retry_policy: RetryPolicy
    cache: DiskCache
    _where: str
    _endpoint: str
    _opener: urllib.request.OpenerDirector
    _lock: threading.Lock
    _counts: dict[str, int]

    def _run(self, todo: list[str], answers: dict[str, str], errors: dict[str, str]) -> None:
        """Ask the endpoint about ``todo``, at most ``concurrency`` at a time, applying the error policy."""
        from fairsets.core.progress import Progress

        key = os.environ.get(self.api_key_env, "").strip() or None
        stop = threading.Event()
        log.info("llm geotagging: %d captions to ask %s at %s", len(todo), self.model, self._where)
        bar = Progress(self.options.get("progress")) if len(todo) >= _PROGRESS_MIN else Progress(False)
        in_a_row = 0
        got_response = False
        last_error = ""
        # The first fatal answer (401, 404, redirect, ...), recorded by the worker that got it before it
        # sets ``stop``: the batch's error must be that one, whatever order the futures complete in.
        fatal: list[LLMServiceError] = []
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(todo)), thread_name_prefix="geo-llm")
        futures: dict[Future[_Outcome], str] = {}
        try:
            with bar.stage(f"llm geotagging ({self.model})", len(todo)) as advance:
                futures = {pool.submit(self._ask, c, key, stop, fatal): c for c in todo}
                for fut in as_completed(futures):
                    caption = futures[fut]
                    try:
                        outcome = fut.result()
                    except LLMServiceError as exc:  # a misconfiguration: abort with the first one
                        raise (fatal[0] if fatal else exc) from None
                    advance()
                    if outcome.abandoned:
                        # Only a fatal answer (or this loop giving up) stops the workers; an abandoned
                        # request says nothing about the server and is never counted as a failure.
                        if fatal:
                            raise fatal[0]
                        errors[caption] = "abandoned"
                        continue
                    if outcome.answer is not None:
                        answers[caption] = outcome.answer
                        in_a_row = 0
                        got_response = True
                        continue
                    errors[caption] = last_error = outcome.error or "failed"
                    got_response = got_response or not outcome.no_response
                    in_a_row += 1
                    if self.abort_after and in_a_row >= self.abort_after:
                        if fatal:
                            raise fatal[0]
                        if not got_response:
                            raise self._unreachable(last_error)
                        raise LLMServiceError(
                            f"llm endpoint {self._where} failed {in_a_row} captions in a row "
                            f"(last: {last_error}); stopping the batch — check that the server is up "
                            f"and serves model {self.model!r}"
                        )
            if fatal:
                raise fatal[0]
            if not got_response and len(errors) == len(todo):
                raise self._unreachable(last_error)
        except BaseException:
            stop.set()
            for fut in futures:
                fut.cancel()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _unreachable(self, last_error: str) -> LLMServiceError:
        return LLMServiceError(
            f"could not reach the llm endpoint {self._where} ({last_error}); is the server running "
            "and base_url right?"
        )

    def _sleep(self, stop: threading.Event) -> Callable[[float], None]:
        def sleep(seconds: float) -> None:
            if stop.wait(seconds):
                raise _Aborted()

        return sleep

    def _ask(
        self,
        caption: str,
        key: str | None,
        stop: threading.Event,
        fatal: list[LLMServiceError] | None = None,
    ) -> _Outcome:
        """One caption, with retries; caches the raw answer. Raises :class:`LLMServiceError` when fatal.

        A fatal error is appended to ``fatal`` *before* ``stop`` is set, so that whoever sees the other
        workers' requests abandoned can already read the reason.
        """
        payload = {
            "model": self.model,
            "messages": self.messages(caption),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        attempts = 0

        def once() -> str:
            nonlocal attempts
            if stop.is_set():
                raise _Aborted()
            attempts += 1
            with self._lock:
                self._counts["requests"] += 1
            return self._post(body, key)

        outcome: _Outcome
        try:
            answer = call_with_retry(
                once, self.retry_policy, what=f"llm {self._where}", sleep=self._sleep(stop)
            )
        except LLMServiceError as exc:
            if fatal is not None:
                with self._lock:
                    fatal.append(exc)
            stop.set()  # no other worker starts a request once a fatal answer is in
            raise
        except _Aborted:
            outcome = _Outcome(error="abandoned", abandoned=True)
        except _StatusError as exc:
            detail = f"http {exc.status}"
            if attempts > 1:
                detail += f" after {attempts - 1} retries"
            elif exc.status not in self.retry_policy.statuses and exc.detail:
                detail += f": {exc.detail}"
            outcome = _Outcome(error=detail)
        except _NoResponse as exc:
            detail = str(exc) + (f" after {attempts - 1} retries" if attempts > 1 else "")
            outcome = _Outcome(error=detail, no_response=True)
        except _BadResponse as exc:
            outcome = _Outcome(error=f"invalid response: {exc}")
        else:
            self.cache.put(self._cache_key(caption), answer.encode("utf-8"))
            outcome = _Outcome(answer=answer)
        with self._lock:
            self._counts["retries"] += max(0, attempts - 1)
            if outcome.answer is not None:
                self._counts["answered"] += 1
        return outcome

    def _post(self, body: bytes, key: str | None) -> str:
        """POST one chat completion; the answer text, or a classified exception."""

        def mask(text: str) -> str:
            return text.replace(key, "***") if key else text

        req = urllib.request.Request(self._endpoint, data=body, method="POST")
        req.add_header("Content-Type", "application/json")
        req.add_header("Accept", "application/json")
        req.add_header("User-Agent", user_agent())
        if key:
            req.add_unredirected_header("Authorization", f"Bearer {key}")
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            status = exc.code
            try:
                detail = mask(_error_detail(exc.read()))
            except (OSError, http.client.HTTPException):
                detail = ""
            finally:
                exc.close()
            if 300 <= status < 400:
                target = urllib.parse.urlsplit(exc.headers.get("Location", "") or "").hostname or "elsewhere"
                raise LLMServiceError(
                    f"llm endpoint {self._where} redirects (HTTP {status} to {target}); set base_url to the "
                    "final address (redirects are not followed so the key is never sent elsewhere)"
                ) from None
            if status in (401, 403):
                sent = (
                    f"the key from ${self.api_key_env} was refused"
                    if key
                    else f"no key was sent (${self.api_key_env} is unset)"
                )
                raise LLMServiceError(
                    f"llm endpoint {self._where} refused the request (HTTP {status}): {sent}"
                    + (f"; server says: {detail}" if detail else "")
                ) from None
            if status in _FATAL_STATUSES:
                raise LLMServiceError(
                    f"llm endpoint {self._where} answered HTTP {status} for "
                    f"{urllib.parse.urlsplit(self._endpoint).path}"
                    + (f" ({detail})" if detail else "")
                    + f"; check the model name {self.model!r} and that base_url is the API root "
                    "(e.g. ending in /v1)"
                ) from None
            raise _StatusError(status, exc.headers.get("Retry-After"), self._where, detail) from None
        except urllib.error.URLError as exc:
            raise _NoResponse(f"cannot connect to {self._where}: {mask(str(exc.reason))}") from None
        except TooSlow as exc:  # the deadline or the minimum rate (a server that drips)
            raise _NoResponse(f"{self._where}: {exc}") from None
        except TimeoutError:
            raise _NoResponse(f"no answer from {self._where} within {self.timeout:g}s") from None
        except (ConnectionError, http.client.HTTPException) as exc:
            raise _NoResponse(f"connection to {self._where} failed: {type(exc).__name__}") from None
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise _BadResponse(f"not JSON: {mask(_clip(raw.decode('utf-8', 'replace'), 60))!r}") from None
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise _BadResponse("no choices[0].message.content") from None
        if not isinstance(content, str):
            raise _BadResponse(f"choices[0].message.content is {type(content).__name__}, not text")
        return content
