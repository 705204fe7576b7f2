"""Run batches of chat requests against one :class:`~fairsets.fetch.chat.ChatEndpoint`.

:class:`ChatClient` sends at most ``max_concurrency`` requests at a time, retries 429 and 5xx
answers, timeouts and dropped connections a bounded number of times (``Retry-After`` honoured,
in seconds or as an HTTP date; otherwise exponential backoff with jitter), and caches every
answer on disk as it arrives, so an interrupted batch resumes and a re-run sends no request::

    client = ChatClient(endpoint, cache_dir="cache/chat")
    batch = client.run([ChatRequest([user("Describe the person.", images=[jpeg])])])
    batch.results[0].text, batch.prompt_tokens, batch.requests_sent

Errors:

* **per request** (``ChatResult.error``, the batch goes on), one text per kind:

  - ``"http 503 after 3 retries"``: a 429 or 5xx still failing after the retries (``"http 503"``
    when ``max_retries`` is 0); the server's text for those is only logged (often an HTML page);
  - ``"http 400: <the server's message>"``: another 4xx (e.g. a prompt beyond the context window),
    not retried;
  - ``"invalid response: <what is wrong>"``: a 200 whose body is not a chat completion (not JSON,
    JSON nested too deeply to decode, no ``choices[0].message``…; read by
    :mod:`fairsets.fetch.chat.answer`). Token counts that are no counts (``NaN``, ``Infinity``,
    negative, fractional) are ``None``, the answer kept;
  - ``"refused: <the model's text>"`` (``refusal`` holds it): the model declined;
  - no HTTP response at all (``no_response`` is true): ``"no answer from <host:port> within
    <timeout>s"`` and ``"connection to <host:port> failed: <error>"`` are retried (``" after N
    retries"`` is appended); ``"cannot connect to <host:port>: <reason>"`` for a refused
    connection or an unknown host is not retried (the server is down or the address wrong:
    backing off would only add minutes).

* **whole batch** (:class:`ChatServiceError`, queued requests are dropped, waiting retries wake
  and stop, answers already in stay cached): 401/403 (bad or missing key), 404/405 (unknown
  model, or ``base_url`` not the API root), a redirect (not followed: it would carry the key
  elsewhere). The error raised is always the first such answer, whatever order the requests
  complete in; the requests it stops are abandoned, never reported as failures.

``stream(requests)`` is the one way requests are sent: it reads an iterable lazily (each request
when a slot is free, so memory holds at most ``max_concurrency`` of them), answers cache hits at
once and yields ``(index, result)`` in completion order, refilling a freed slot before handing its
answer over, so ``max_concurrency`` requests stay in flight without rounds; the returned
:class:`ChatStream` holds the counters. ``run(requests, on_result=...)`` collects a stream in
request order into a :class:`ChatBatch`, calling ``on_result`` as each result arrives; what
``on_result`` raises (or a stream closed early) stops the batch the same way: queued requests are
dropped, waiting retries wake, workers are joined, what is on the wire finishes and is cached.
Nothing is reported for a request abandoned because the batch is stopping.

``lookup(request)`` only reads the cache. A request may name its image by digest
(:func:`~fairsets.fetch.chat.messages.image_digest_part`): it has the cache key of the request with
the image's bytes, so a caller that recorded a view's SHA-256 finds its answers without rendering
it again; such a request is refused (``ValueError``) by ``stream`` and ``run``: it cannot be sent.

The key is read from the variable ``api_key_env`` names when a batch starts and sent only as
``Authorization: Bearer`` to ``base_url``'s host; it is never in cache keys or files, logs,
results or error texts: every text the server sends back — answers, refusals, finish reasons,
error messages, the quoted start of a broken body — has the key, and every piece of it of 8
characters or more (:class:`~fairsets.fetch.redact.Redactor`), masked as ``***`` *before* it is
clipped, cached or returned (a cache entry written before is masked when read).

Cache: the key is (base_url, model, messages with images replaced by their SHA-256,
temperature, max_tokens, seed) — without base_url when ``key_by_endpoint=False``, so the same
model served elsewhere answers from the cache; the value holds the text, finish reason, refusal
and usage. Answers are cached, refusals included (the model's answer to that request); errors
are not, so a re-run asks those requests again. An answer the request's ``accept`` refuses
(:class:`ChatRequest`: a vote that is no letter, a verdict that is none) is cached but never final:
each batch asks it again, caches the new answer, and returns the cached one (``cached`` true) only
when asking fails — a fixed server mends it, a server gone loses nothing; :meth:`lookup` does not
return it.
A caller with an on-disk layout of its own (:mod:`fairsets.geo.methods.llm` keeps its raw-answer
files) overrides :meth:`ChatClient.question_key`, :meth:`ChatClient.encode_answer` and
:meth:`ChatClient.decode_answer`.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..answers import loads_json
from ..cache import DiskCache
from ..guard import TooSlow, metered_handlers, trusted_policy
from ..redact import Redactor
from ..retry import HttpStatusError, RetryPolicy, call_with_retry, unreachable, user_agent
from .answer import BadCompletion as _Bad
from .answer import error_detail, parse_completion, token_count
from .endpoint import ChatEndpoint
from .messages import Message, cache_form, has_digest_image

__all__ = ["ChatBatch", "ChatClient", "ChatRequest", "ChatResult", "ChatServiceError", "ChatStream"]

log = logging.getLogger(__name__)
#: The largest response body read (a chat answer is a few kB; more is a broken or hostile server).
MAX_RESPONSE = 16_000_000
_FATAL = frozenset({401, 403, 404, 405})
_STORED = ("text", "finish_reason", "prompt_tokens", "completion_tokens", "error", "refusal")
_TEXTS = ("text", "finish_reason", "error", "refusal")


class ChatServiceError(RuntimeError):
    """The endpoint is unusable for every request: bad key, unknown model, wrong base_url, redirect."""


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion to ask for (``seed`` is sent only when set).

    ``accept``: whether an answer's text is usable by the caller (a vote reads a letter, a judge a
    verdict). An answer it refuses is returned and cached, but never final: a later batch asks the
    request again and keeps the cached answer only when asking fails (no answer, an error), so a
    re-run can mend it without losing it. Not part of the request sent or of its cache key.
    """

    messages: list[Message]
    temperature: float = 0.0
    max_tokens: int = 512
    seed: int | None = None
    accept: Callable[[str], bool] | None = field(default=None, compare=False, repr=False)


@dataclass
class ChatResult:
    """The outcome of one request: ``text`` or an ``error``, never both.

    ``no_response`` tells a request that never got an HTTP answer (refused, unknown host,
    timeout, dropped connection) from one the server answered with an error.
    """

    text: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None
    refusal: str | None = None
    cached: bool = False
    attempts: int = 0
    no_response: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class ChatBatch:
    """Results in request order, with the batch's totals."""

    results: list[ChatResult]
    requests_sent: int = 0
    retries: int = 0
    cache_hits: int = 0
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens summed over the results whose server reported them (cached ones too)."""
        return sum(r.prompt_tokens or 0 for r in self.results)

    @property
    def completion_tokens(self) -> int:
        """Completion tokens summed like :attr:`prompt_tokens`."""
        return sum(r.completion_tokens or 0 for r in self.results)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.results if r.error is not None)


class _NoResponse(ConnectionError):
    """No HTTP answer (a timeout, a dropped connection): retried."""


class _Unreachable(Exception):
    """The host cannot be reached at all (refused, unknown): not retried."""


class _Status(HttpStatusError):
    def __init__(self, status: int, retry_after: str | None, where: str, detail: str) -> None:
        super().__init__(status, retry_after, url=where, detail=detail)
        self.detail = detail


class _Stopped(Exception):
    """The batch is being abandoned (a fatal answer elsewhere, or the stream closed early)."""


def _secret(endpoint: ChatEndpoint) -> str:
    """The key, read from the variable ``endpoint.api_key_env`` names (``""``: none)."""
    return os.environ.get(endpoint.api_key_env, "").strip() if endpoint.api_key_env else ""


def _redactor(endpoint: ChatEndpoint) -> Redactor:
    return Redactor(_secret(endpoint))


def _final(request: ChatRequest, result: ChatResult) -> bool:
    """Whether a cached ``result`` is a final answer to ``request``: not when the request's
    ``accept`` refuses its text (then it is asked again, see :class:`ChatRequest`)."""
    return result.text is None or request.accept is None or bool(request.accept(result.text))


def _retried_status(status: int) -> bool:
    return status == 429 or status >= 500


@dataclass
class _Counts:
    requests_sent: int = 0
    retries: int = 0


@dataclass
class _Run:
    """One batch's shared state: the key and its mask, the stop flag, the fatal answers in arrival order."""

    key: str
    redact: Redactor
    counts: _Counts = field(default_factory=_Counts)
    stop: threading.Event = field(default_factory=threading.Event)
    fatal: list[ChatServiceError] = field(default_factory=list)
    written: set[str] = field(default_factory=set)  # cache entries this batch wrote (digests)


def _refuse_digest(request: ChatRequest) -> None:
    """``ValueError`` when ``request`` carries an image as its digest: it can be looked up, not sent."""
    if has_digest_image(request.messages):
        raise ValueError(
            "a chat request with an image given as its digest (sha256:…) is only for ChatClient.lookup; "
            "send the image's bytes (image_part) instead"
        )


_PLAIN_JSON = re.compile(r'[\x00-\x1f"\\]')


def _body(payload: dict[str, Any]) -> bytes:
    """``json.dumps(payload).encode("ascii")``, with inline images spliced in rather than scanned
    by the encoder (a data URL of plain ASCII is its own JSON text): the same bytes, sooner."""
    import secrets

    urls: list[str] = []
    token = f"fairsets-image-{secrets.token_hex(8)}-"

    def swap(value: Any) -> Any:
        if isinstance(value, dict):
            url = value.get("url")
            if (
                isinstance(url, str)
                and url.startswith("data:")
                and url.isascii()
                and not _PLAIN_JSON.search(url)
            ):
                urls.append(url)
                return {**value, "url": f"{token}{len(urls) - 1}"}
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    text = json.dumps({**payload, "messages": swap(payload["messages"])})
    for i, url in enumerate(urls):
        text = text.replace(f'"{token}{i}"', f'"{url}"', 1)
    return text.encode("ascii")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects become errors: a redirected request would carry the key to another address. The
    standard handler is never entered (it parses the Location first, and a hostile one such as
    ``http://[::1`` raises ValueError there): the 3xx reaches :meth:`ChatClient._post` as it came."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None

    def http_error_302(self, *args: Any, **kwargs: Any) -> None:
        return None

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


class ChatClient:
    """Batches of chat completions against one endpoint, cached and retried.

    Args:
        endpoint: where to send requests.
        cache_dir: folder of the answer cache (``None``: no cache).
        max_retries: retries after the first try for 429, 5xx, timeouts and dropped connections.
        backoff: first wait in seconds without ``Retry-After``; doubles each retry.
        max_wait: cap on one wait, ``Retry-After`` included.
        key_by_endpoint: whether ``base_url`` is part of the cache key (default). ``False``: the
            same model asked the same question elsewhere (a mirror, a moved server) is answered
            from the cache.
    """

    def __init__(
        self,
        endpoint: ChatEndpoint,
        *,
        cache_dir: str | Path | None = None,
        max_retries: int = 3,
        backoff: float = 1.0,
        max_wait: float = 60.0,
        key_by_endpoint: bool = True,
    ) -> None:
        self.endpoint = endpoint
        self.cache = DiskCache(cache_dir)
        self.key_by_endpoint = bool(key_by_endpoint)
        self.policy = RetryPolicy(attempts=int(max_retries) + 1, backoff=backoff, max_wait=max_wait)
        handlers: list[Any] = [
            _NoRedirect(),
            urllib.request.ProxyHandler({}) if self._is_loopback() else urllib.request.ProxyHandler(),
            *metered_handlers(trusted_policy(timeout=endpoint.timeout, deadline=2 * endpoint.timeout)),
        ]
        self._opener = urllib.request.build_opener(*handlers)
        self._lock = threading.Lock()

    def _is_loopback(self) -> bool:
        import ipaddress

        host = urllib.parse.urlsplit(self.endpoint.base_url).hostname or ""
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    # -- the cache format (a subclass with its own on-disk layout overrides these three)

    def question_key(self, request: ChatRequest) -> dict[str, Any]:
        """What was asked: model, messages (images as their SHA-256) and sampling settings."""
        return {
            "model": self.endpoint.model,
            "messages": cache_form(request.messages),
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "seed": request.seed,
        }

    def cache_key(self, request: ChatRequest) -> dict[str, Any]:
        """:meth:`question_key`, plus ``base_url`` when ``key_by_endpoint``; never the API key."""
        key = self.question_key(request)
        if self.key_by_endpoint:
            key["base_url"] = self.endpoint.base_url
        return key

    def encode_answer(self, result: ChatResult) -> bytes | None:
        """The bytes cached for an answer (``None``: do not cache it)."""
        stored = {name: getattr(result, name) for name in _STORED}
        return json.dumps(stored, ensure_ascii=False).encode("utf-8")

    def decode_answer(self, raw: bytes) -> ChatResult:
        """The answer :meth:`encode_answer` cached; ``ValueError`` for an unreadable entry."""
        data = loads_json(raw, "the chat cache")
        if not isinstance(data, dict) or set(data) - set(_STORED):
            raise ValueError("not a cached chat answer")
        if any(data.get(n) is not None and not isinstance(data[n], str) for n in _TEXTS):
            raise ValueError("not a cached chat answer")
        counts = {n: token_count(data.get(n)) for n in ("prompt_tokens", "completion_tokens")}
        return ChatResult(**{**data, **counts})

    # -- batches

    def lookup(self, request: ChatRequest) -> ChatResult | None:
        """The cached answer to ``request`` (``cached`` set), or ``None``; never sends anything.

        The request's images may be given by their digest (:func:`~fairsets.fetch.chat.messages.
        image_digest_part`): a caller that knows the SHA-256 of the JPEG it would send can find the
        answer without the image's bytes.
        """
        hit = self._cached(self.cache_key(request), _redactor(self.endpoint))
        return hit if hit is not None and _final(request, hit) else None

    def stream(self, requests: Iterable[ChatRequest]) -> ChatStream:
        """Answer ``requests`` as they come: ``(index, result)`` pairs in completion order.

        ``requests`` is read lazily, one request ahead of each free slot, so a producer (rendering
        views) runs alongside and memory holds at most ``max_concurrency`` requests. A cached answer
        is yielded at once; the others are sent with ``max_concurrency`` in flight continuously
        (a freed slot is refilled before its answer is handed over). The cache is read as it was
        when the stream began: a request equal to one answered earlier in the same stream is
        asked too, as :meth:`run` asks every request of its list. Retries, per-request errors and
        :class:`ChatServiceError` are as for :meth:`run`; the counters are on the returned
        :class:`ChatStream`. Closing it early (``close()``, leaving a ``with`` block, a ``break``
        in a ``for`` over it, an exception) stops queued requests and waiting retries and joins the
        worker threads; requests already on the wire finish and are cached.

        Raises (from the iteration):
            ChatServiceError: a fatal answer; answers already received are cached.
            ValueError: a request carries an image as a digest (those are only for :meth:`lookup`).
        """
        return ChatStream(self, requests)

    def run(
        self, requests: Sequence[ChatRequest], on_result: Callable[[int, ChatResult], None] | None = None
    ) -> ChatBatch:
        """Answer ``requests`` (cache first), at most ``max_concurrency`` in flight: :meth:`stream`
        collected in request order.

        Args:
            requests: the requests; results come back in the same order.
            on_result: called as ``on_result(index, result)`` as each one finishes, in the calling
                thread, one call at a time (so it need not be thread-safe; keep it quick: a slot is
                refilled before the call, but the next answer waits for it). What it raises stops
                the batch and is raised here; answers already in stay cached, so a re-run resumes.

        Raises:
            ChatServiceError: a fatal answer (401/403/404/405, redirect); answers in are cached.
            ValueError: a request carries an image as a digest (nothing is sent).
        """
        requests = list(requests)
        for req in requests:
            _refuse_digest(req)
        results = [ChatResult() for _ in requests]
        with self.stream(requests) as answers:
            for i, result in answers:
                results[i] = result
                if on_result is not None:
                    on_result(i, result)
        return answers.batch(results)

    def _cached(self, key: dict[str, Any], redact: Redactor) -> ChatResult | None:
        """The answer cached under ``key``; an unreadable entry counts as none (it is asked again).
        Its texts are masked (an entry written before answers were masked may hold the key)."""
        raw = self.cache.get(key)
        if raw is None:
            return None
        try:
            result = self.decode_answer(raw)
        except (UnicodeDecodeError, ValueError, TypeError):
            log.warning("chat: an unreadable cache entry is asked again")
            return None
        for name in _TEXTS:
            value = getattr(result, name)
            if isinstance(value, str):
                setattr(result, name, redact(value))
        result.cached = True
        return result

    def _ask(
        self, request: ChatRequest, run: _Run, key: dict[str, Any], kept: ChatResult | None = None
    ) -> ChatResult:
        """One request with its retries; a fatal answer is recorded in ``run`` (first one first,
        under the lock, with the stop flag) before it is raised. ``kept``: the cached answer that
        was not final, returned instead when no answer comes."""
        payload: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": request.messages,
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
        }
        if request.seed is not None:
            payload["seed"] = request.seed
        body = _body(payload)  # escaped ASCII: a lone surrogate cannot fail
        attempts = 0

        def once() -> ChatResult:
            nonlocal attempts
            if run.stop.is_set():
                raise _Stopped()
            attempts += 1
            with self._lock:
                run.counts.requests_sent += 1
            return self._post(body, run.key, run.redact)

        def sleep(seconds: float) -> None:
            if run.stop.wait(seconds):
                raise _Stopped()

        def retry_on(exc: BaseException) -> bool:  # every 5xx, not only the listed ones
            return isinstance(exc, _Status) and exc.status >= 500

        retried = False  # the error is of a kind that was retried: say how often
        try:
            result = call_with_retry(
                once, self.policy, what=f"chat {self.endpoint.where}", sleep=sleep, retry_on=retry_on
            )
        except ChatServiceError as exc:
            with self._lock:
                run.fatal.append(exc)
                run.stop.set()
            raise
        except _Status as exc:
            retried = _retried_status(exc.status)
            said = f": {exc.detail}" if exc.detail and not retried else ""
            result = ChatResult(error=f"http {exc.status}{said}")
        except _NoResponse as exc:
            retried = True
            result = ChatResult(error=str(exc), no_response=True)
        except _Unreachable as exc:
            result = ChatResult(error=str(exc), no_response=True)
        except _Bad as exc:
            result = ChatResult(error=f"invalid response: {exc}")
        else:
            value = self.encode_answer(result)
            if value is not None:
                with self._lock:  # before the entry exists, so the stream never takes it for a hit
                    run.written.add(DiskCache.digest(key))
                self.cache.put(key, value)
        if result.error is not None and retried and attempts > 1:
            result.error += f" after {attempts - 1} retries"
        if kept is not None and result.error is not None and not result.error.startswith("refused"):
            log.info("chat: asking again failed (%s); the answer cached before is kept", result.error)
            result = kept
        result.attempts = attempts
        with self._lock:
            run.counts.retries += max(0, attempts - 1)
        return result

    def _fatal(self, status: int, detail: str, key: bool) -> ChatServiceError:
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

    def _post(self, body: bytes, key: str, redact: Redactor) -> ChatResult:
        """POST one chat completion: the parsed answer (its texts masked), or a classified exception
        (every server text in it masked before it is clipped)."""
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
                raise self._fatal(exc.code, detail, bool(key)) from None
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
        return ChatResult(**parse_completion(raw, redact))


class ChatStream:
    """The answers of :meth:`ChatClient.stream`: iterate it for ``(index, result)`` pairs.

    ``index`` counts the requests read from the iterable (from 0). The counters grow as answers
    come and are final once the iteration ends: ``requests_sent`` (retries included), ``retries``,
    ``cache_hits`` (answers from the cache: final ones, and those kept because asking again
    failed), ``answered`` (pairs yielded), ``failed`` (of those, with an error), token sums and
    ``seconds``. Iterate it once; use it as a context manager (or call :meth:`close`) so that
    leaving early stops it at once::

        with client.stream(requests) as answers:
            for i, result in answers:
                ...
        answers.requests_sent, answers.cache_hits
    """

    def __init__(self, client: ChatClient, requests: Iterable[ChatRequest]) -> None:
        self.client = client
        self._requests = requests
        self._run: _Run | None = None
        self._gen: Iterator[tuple[int, ChatResult]] | None = None
        self.cache_hits = 0
        self.answered = 0
        self.failed = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.seconds = 0.0

    @property
    def requests_sent(self) -> int:
        """HTTP requests sent so far, each retry counted."""
        return self._run.counts.requests_sent if self._run is not None else 0

    @property
    def retries(self) -> int:
        """Retries so far (sent requests beyond the first of each answer)."""
        return self._run.counts.retries if self._run is not None else 0

    def __iter__(self) -> Iterator[tuple[int, ChatResult]]:
        if self._gen is None:
            self._gen = self._answers()
        return self._gen

    def __enter__(self) -> ChatStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop: queued requests are dropped, waiting retries wake and stop, workers are joined."""
        if self._gen is not None:
            self._gen.close()  # type: ignore[attr-defined]

    def batch(self, results: list[ChatResult]) -> ChatBatch:
        """A :class:`ChatBatch` of ``results`` with this stream's counters."""
        return ChatBatch(
            results=results,
            requests_sent=self.requests_sent,
            retries=self.retries,
            cache_hits=self.cache_hits,
            seconds=self.seconds,
        )

    def _counted(self, i: int, result: ChatResult) -> tuple[int, ChatResult]:
        self.answered += 1
        self.failed += result.error is not None
        self.prompt_tokens += result.prompt_tokens or 0
        self.completion_tokens += result.completion_tokens or 0
        return i, result

    def _answers(self) -> Iterator[tuple[int, ChatResult]]:
        import queue

        client, ep = self.client, self.client.endpoint
        start = time.monotonic()
        key = _secret(ep)
        run = self._run = _Run(key=key, redact=Redactor(key))
        done: queue.SimpleQueue[tuple[int, ChatResult | None]] = queue.SimpleQueue()
        failure: list[BaseException] = []  # an unexpected error in a worker: raised here
        source = iter(self._requests)
        cap = max(1, int(ep.max_concurrency))
        pool: ThreadPoolExecutor | None = None
        state = {"in_flight": 0, "next": 0, "exhausted": False}

        def work(i: int, request: ChatRequest, key: dict[str, Any], kept: ChatResult | None) -> None:
            result: ChatResult | None = None
            try:
                result = client._ask(request, run, key, kept)
            except (ChatServiceError, _Stopped):  # recorded by _ask / abandoned: not a failure
                pass
            except BaseException as exc:  # handed to the consumer
                failure.append(exc)
                run.stop.set()
            done.put((i, result))

        def fill() -> Iterator[tuple[int, ChatResult]]:
            """Read requests until ``cap`` are in flight; cached answers are yielded at once."""
            nonlocal pool
            while not state["exhausted"] and state["in_flight"] < cap and not run.stop.is_set():
                try:
                    request = next(source)
                except StopIteration:
                    state["exhausted"] = True
                    return
                i = state["next"]
                state["next"] += 1
                _refuse_digest(request)
                key = client.cache_key(request)
                # the cache as it was when the stream began: each request of a stream is asked,
                # even the same as one answered earlier in it (as a list given to run() would be)
                hit = None if DiskCache.digest(key) in run.written else client._cached(key, run.redact)
                if hit is not None and _final(request, hit):
                    self.cache_hits += 1
                    yield self._counted(i, hit)
                    continue
                if pool is None:
                    log.info("chat: sending to %s at %s (%d at a time)", ep.label, ep.where, cap)
                    pool = ThreadPoolExecutor(max_workers=cap, thread_name_prefix="fairsets-chat")
                pool.submit(work, i, request, key, hit)  # a hit here is not final: asked again
                state["in_flight"] += 1

        try:
            while True:
                yield from fill()
                if not state["in_flight"]:
                    break
                i, result = done.get()
                state["in_flight"] -= 1
                if run.stop.is_set():  # a fatal answer: let the rest finish (they stay cached)
                    continue
                yield from fill()  # the freed slot first, then the answer
                if result is not None:
                    self.cache_hits += result.cached  # a cached answer kept when asking again failed
                    yield self._counted(i, result)
            if failure:
                raise failure[0]
            if run.fatal:
                raise run.fatal[0]
        finally:
            run.stop.set()
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
            self.seconds = time.monotonic() - start
