"""Streaming a batch: :class:`ChatStream` reads requests lazily, answers cache hits at once and keeps
``max_concurrency`` requests in flight as coroutines on one event loop in a thread of its own
(:class:`~fairsets.fetch.chat.loop.LoopThread`), over one pool of keep-alive connections, yielding
``(index, result)`` in completion order; the state one batch shares (:class:`_Run`: the key, the
session, the rate limits, the stop flags, the fatal answers, the counters) and :class:`_Stopped`,
raised in a request abandoned because the batch is stopping.

The client the stream asks through (:class:`~fairsets.fetch.chat.ChatClient`, which sends one
request with its retries) is described by :class:`_Client`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..cache import DiskCache
from ..redact import Redactor
from .answer_cache import _final
from .endpoint import ChatEndpoint
from .exchange import ChatBatch, ChatRequest, ChatResult, ChatServiceError
from .loop import LoopThread
from .messages import has_digest_image
from .ratelimit import RateLimits
from .transport import Transport, _secret
from .writer import CacheWriter

if TYPE_CHECKING:
    import aiohttp

__all__ = ["ChatStream"]

log = logging.getLogger("fairsets.fetch.chat.client")  # the chat client's one logger


#: Requests handed to the loop in one call at most, and the longest one waits for the others.
_HANDOFF = 16
_HANDOFF_SECONDS = 0.005


class _Stopped(Exception):
    """The batch is being abandoned (a fatal answer elsewhere, or the stream closed early)."""


@dataclass
class _Counts:
    requests_sent: int = 0
    retries: int = 0


@dataclass
class _Run:
    """One batch's shared state: the key and its mask, the stop flags, the fatal answers in arrival
    order. Its requests run on ``loop`` (counters, ``fatal`` and ``written`` change only there)."""

    key: str
    redact: Redactor
    limits: RateLimits | None = None
    counts: _Counts = field(default_factory=_Counts)
    stop: threading.Event = field(default_factory=threading.Event)  # read from any thread
    fatal: list[ChatServiceError] = field(default_factory=list)
    written: set[str] = field(default_factory=set)  # cache entries this batch wrote (digests)
    loop: LoopThread | None = None
    session: aiohttp.ClientSession | None = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # set with stop, on the loop
    writer: CacheWriter | None = None

    def save(self, cache: DiskCache, key: Any, value: bytes) -> None:
        """Cache an answer: handed to the batch's writer thread (the loop does not wait for the disk)."""
        if cache.folder is None:
            return
        if self.writer is None:
            self.writer = CacheWriter(cache)
        self.writer.put(key, value)

    def halt(self) -> None:
        """Stop the batch: queued requests are dropped, waiting retries and rate limits wake."""
        self.stop.set()
        if self.loop is not None and not self.loop.loop.is_closed():
            self.loop.loop.call_soon_threadsafe(self.wake.set)

    def start(self, transport: Transport, connections: int) -> None:
        """Start the loop and open the session (on the loop: aiohttp binds it there)."""
        self.loop = LoopThread()

        async def open_session() -> aiohttp.ClientSession:
            return transport.session(connections)

        self.session = self.loop.call(open_session())

    def finish(self) -> None:
        """Wait for the requests still on the loop (on the wire: they finish and are cached), close
        the session and the loop."""
        if self.loop is None:
            return
        try:
            self.loop.close(last=self.session.close if self.session is not None else None)
        finally:
            if self.writer is not None:
                self.writer.close()  # every answer on disk before the batch returns


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
    _transport: Transport

    def cache_key(self, request: ChatRequest) -> dict[str, Any]: ...

    def _cached(self, key: dict[str, Any], redact: Redactor) -> ChatResult | None: ...

    async def _ask(
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
        run = self._run = _Run(key=key, redact=Redactor(key), limits=RateLimits.of(ep))
        done: queue.SimpleQueue[tuple[int, ChatResult | None]] = queue.SimpleQueue()
        failure: list[BaseException] = []  # an unexpected error in a request: raised here
        source = iter(self._requests)
        cap = max(1, int(ep.max_concurrency))
        state = {"in_flight": 0, "next": 0, "exhausted": False}

        def landed(i: int, task: asyncio.Task[ChatResult]) -> None:  # on the loop
            result: ChatResult | None = None
            exc = task.exception() if not task.cancelled() else _Stopped()
            if exc is None:
                result = task.result()
            elif not isinstance(exc, (ChatServiceError, _Stopped)):  # recorded / abandoned: no failure
                failure.append(exc)
                run.halt()
            done.put((i, result))

        outbox: list[tuple[int, Coroutine[Any, Any, ChatResult]]] = []
        outbox_since = [0.0]  # when the oldest request in the outbox was read
        tasks: set[asyncio.Task[ChatResult]] = set()

        def launch(sends: list[tuple[int, Coroutine[Any, Any, ChatResult]]]) -> None:  # on the loop
            for i, coro in sends:
                task = asyncio.get_running_loop().create_task(coro)
                tasks.add(task)  # the loop keeps only weak references to its tasks
                task.add_done_callback(tasks.discard)
                task.add_done_callback(lambda t, i=i: landed(i, t))

        def send() -> None:
            """Hand the requests read so far to the loop, all in one call (one wake-up of the loop,
            not one per request: the two threads would take turns on the interpreter lock)."""
            if outbox:
                assert run.loop is not None
                run.loop.loop.call_soon_threadsafe(launch, outbox[:])
                outbox.clear()

        def fill() -> Iterator[tuple[int, ChatResult]]:
            """Read requests until ``cap`` are in flight; cached answers are yielded at once."""
            while not state["exhausted"] and state["in_flight"] < cap and not run.stop.is_set():
                try:
                    request = next(source)
                except StopIteration:
                    state["exhausted"] = True
                    break
                i = state["next"]
                state["next"] += 1
                _refuse_digest(request)
                key = client.cache_key(request)
                # the cache as it was when the stream began: each request of a stream is asked,
                # even the same as one answered earlier in it (as a list given to run() would be)
                hit = None if DiskCache.digest(key) in run.written else client._cached(key, run.redact)
                if hit is not None and _final(request, hit):
                    self.cache_hits += 1
                    send()
                    yield self._counted(i, hit)
                    continue
                if run.loop is None:
                    log.info("chat: sending to %s at %s (%d at a time)", ep.label, ep.where, cap)
                    run.start(client._transport, cap)
                outbox.append((i, client._ask(request, run, key, hit)))  # a non-final hit: asked again
                state["in_flight"] += 1
                now = time.monotonic()
                if len(outbox) == 1:
                    outbox_since[0] = now
                if len(outbox) >= _HANDOFF or now - outbox_since[0] > _HANDOFF_SECONDS:
                    send()  # a slow producer (views being rendered) does not hold back the first ones
            send()

        try:
            while True:
                yield from fill()
                if not state["in_flight"]:
                    break
                landed_now = [done.get()]  # every answer in by now: their slots refilled at once
                while True:
                    try:
                        landed_now.append(done.get_nowait())
                    except queue.Empty:
                        break
                state["in_flight"] -= len(landed_now)
                if run.stop.is_set():  # a fatal answer: let the rest finish (they stay cached)
                    continue
                yield from fill()  # the freed slots first, then the answers
                for i, result in landed_now:
                    if result is not None:
                        self.cache_hits += result.cached  # a cached answer kept when asking again failed
                        yield self._counted(i, result)
            if failure:
                raise failure[0]
            if run.fatal:
                raise run.fatal[0]
        finally:
            run.halt()
            run.finish()
            self.seconds = time.monotonic() - start
