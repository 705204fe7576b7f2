"""An asyncio event loop in a thread of its own, for the chat client's requests.

The chat client is called from ordinary (synchronous) code: a vote, a caption run or the geo
``llm`` method iterate a :class:`~fairsets.fetch.chat.ChatStream`. Its requests are coroutines on
one event loop, in one thread, sharing one pool of keep-alive connections, so hundreds in flight
cost a socket and a coroutine each instead of a thread each.

:class:`LoopThread` starts the loop, runs coroutines on it (:meth:`~LoopThread.submit` gives a
:class:`concurrent.futures.Future`; :meth:`~LoopThread.call` waits for the result) and stops it:
:meth:`~LoopThread.close` waits for the coroutines still running (then awaits what closes what they
used), then ends the thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """One event loop running in a daemon thread until :meth:`close`."""

    def __init__(self, name: str = "fairsets-chat") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; its future completes in the loop's thread."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its result (raised here when it raises)."""
        return self.submit(coro).result()

    def close(self, last: Callable[[], Awaitable[Any]] | None = None) -> None:
        """Wait for every task still on the loop, then await ``last()`` (closing what the tasks
        used), stop the loop and join its thread."""
        if self.loop.is_closed():
            return

        async def drain() -> None:
            me = asyncio.current_task()
            others = [t for t in asyncio.all_tasks() if t is not me]
            if others:
                await asyncio.gather(*others, return_exceptions=True)
            if last is not None:
                await last()

        try:
            self.call(drain())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join()
            self.loop.close()
