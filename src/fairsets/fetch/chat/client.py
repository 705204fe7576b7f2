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

Modules, one idea each: :mod:`.exchange` (requests, results, batches and the fatal error),
:mod:`.transport` (the request body, the POST and the classification of what comes back),
:mod:`.answer_cache` (cache keys and the stored answers), :mod:`.stream` (the lazy, bounded stream of
a batch) and this one (:class:`ChatClient`: retries per request, :meth:`~ChatClient.lookup`,
:meth:`~ChatClient.stream`, :meth:`~ChatClient.run`). Every log line goes to this module's logger.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..cache import DiskCache
from ..redact import Redactor
from ..retry import RetryPolicy, acall_with_retry
from .answer import BadCompletion as _Bad
from .answer_cache import CachedAnswers, _final
from .endpoint import ChatEndpoint
from .exchange import ChatBatch, ChatRequest, ChatResult, ChatServiceError
from .ratelimit import estimate_tokens
from .shaping import request_body, token_budget
from .stream import ChatStream, _refuse_digest, _Run, _Stopped
from .transport import Transport, _NoResponse, _secret, _Status, _Unreachable

__all__ = ["ChatBatch", "ChatClient", "ChatRequest", "ChatResult", "ChatServiceError", "ChatStream"]

log = logging.getLogger(__name__)


def _redactor(endpoint: ChatEndpoint) -> Redactor:
    return Redactor(_secret(endpoint))


def _retried_status(status: int) -> bool:
    return status == 429 or status >= 500


class ChatClient(CachedAnswers):
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
        self.cache = DiskCache(cache_dir, synced=False)  # a torn entry reads as a miss
        self.key_by_endpoint = bool(key_by_endpoint)
        self.policy = RetryPolicy(attempts=int(max_retries) + 1, backoff=backoff, max_wait=max_wait)
        self._transport = Transport(endpoint)

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

    async def _ask(
        self, request: ChatRequest, run: _Run, key: dict[str, Any], kept: ChatResult | None = None
    ) -> ChatResult:
        """One request with its retries, on the batch's event loop; a fatal answer is recorded in
        ``run`` (first one first, with the stop flag) before it is raised. ``kept``: the cached
        answer that was not final, returned instead when no answer comes."""
        body = request_body(self.endpoint, request)  # escaped ASCII: a lone surrogate cannot fail
        tokens = (
            estimate_tokens(request, token_budget(self.endpoint, request)) if run.limits is not None else 0
        )
        attempts = 0

        async def once() -> ChatResult:
            nonlocal attempts
            if run.stop.is_set():
                raise _Stopped()
            if run.limits is not None and not await run.limits.acquire(tokens, run.wake):
                raise _Stopped()
            attempts += 1
            run.counts.requests_sent += 1
            return await self._transport.post(run.session, body, run.key, run.redact, request.choices)

        async def sleep(seconds: float) -> None:
            try:
                await asyncio.wait_for(run.wake.wait(), seconds)
            except asyncio.TimeoutError:
                return
            raise _Stopped()

        def retry_on(exc: BaseException) -> bool:  # every 5xx, not only the listed ones
            return isinstance(exc, _Status) and exc.status >= 500

        retried = False  # the error is of a kind that was retried: say how often
        try:
            result = await acall_with_retry(
                once, self.policy, what=f"chat {self.endpoint.where}", sleep=sleep, retry_on=retry_on
            )
        except ChatServiceError as exc:
            run.fatal.append(exc)
            run.halt()
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
                run.written.add(DiskCache.digest(key))  # before the entry exists: never taken for a hit
                run.save(self.cache, key, value)
        if result.error is not None and retried and attempts > 1:
            result.error += f" after {attempts - 1} retries"
        if kept is not None and result.error is not None and not result.error.startswith("refused"):
            log.info("chat: asking again failed (%s); the answer cached before is kept", result.error)
            result = kept
        result.attempts = attempts
        run.counts.retries += max(0, attempts - 1)
        return result
