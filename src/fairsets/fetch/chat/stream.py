"""Streaming a batch: :class:`ChatStream` reads requests lazily, answers cache hits at once and keeps
``max_concurrency`` requests in flight in a thread pool, yielding ``(index, result)`` in completion
order; the state one batch shares (:class:`_Run`: the key, the stop flag, the fatal answers, the
counters) and :class:`_Stopped`, raised in a request abandoned because the batch is stopping.

The client the stream asks through (:class:`~fairsets.fetch.chat.ChatClient`, which sends one
request with its retries) is described by :class:`_Client`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..cache import DiskCache
from ..redact import Redactor
from .answer_cache import _final
from .endpoint import ChatEndpoint
from .exchange import ChatBatch, ChatRequest, ChatResult, ChatServiceError
from .messages import has_digest_image
from .transport import _secret

__all__ = ["ChatStream"]

log = logging.getLogger("fairsets.fetch.chat.client")  # the chat client's one logger


class _Stopped(Exception):
    """The batch is being abandoned (a fatal answer elsewhere, or the stream closed early)."""


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


class _Client(Protocol):
    """What a stream needs of its client: the endpoint, the cache and one request with its retries."""

    endpoint: ChatEndpoint

    def cache_key(self, request: ChatRequest) -> dict[str, Any]: ...

    def _cached(self, key: dict[str, Any], redact: Redactor) -> ChatResult | None: ...

    def _ask(
        self, request: ChatRequest, run: _Run, key: dict[str, Any], kept: ChatResult | None = None
    ) -> ChatResult: ...


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

    def __init__(self, client: _Client, requests: Iterable[ChatRequest]) -> None:
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
