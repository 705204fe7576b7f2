"""The chat cache's writer: answers are written to disk in a thread of their own, in arrival order.

Creating a file costs a few hundred microseconds on some file systems; on the event loop that holds
hundreds of requests in flight, every write would delay every answer behind it. The loop hands
each entry to :class:`CacheWriter` and goes on; the writer renames it into place (no fsync: a
killed process leaves no partial entry, a power loss at worst an empty one, which reads as a miss
and is asked again). :meth:`CacheWriter.close` waits until every entry handed over is on disk and
raises the first error a write met (a full disk), so a batch never reports answers it could not keep.
"""

from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..cache import DiskCache

__all__ = ["CacheWriter"]

_DONE = object()


class CacheWriter:
    """Writes ``(key, value)`` pairs into one :class:`~fairsets.fetch.cache.DiskCache`, in order."""

    def __init__(self, cache: DiskCache) -> None:
        self.cache = cache
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="fairsets-chat-cache", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._queue.get()) is not _DONE:
            if self.error is None:  # after a failed write, the rest are dropped (close raises)
                try:
                    self.cache.put(*item)
                except BaseException as exc:
                    self.error = exc

    def put(self, key: Any, value: bytes) -> None:
        """Hand an entry over (returns at once)."""
        self._queue.put((key, value))

    def close(self) -> None:
        """Wait until every entry handed over is written; raise the first write's error."""
        if self._thread.is_alive():
            self._queue.put(_DONE)
            self._thread.join()
        if self.error is not None:
            raise self.error
