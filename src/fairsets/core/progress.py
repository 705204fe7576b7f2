"""Progress bars (rich) that switch off when not on a terminal or when asked to be quiet.

A stage's counters can also grow from another thread while its bar runs (:meth:`Progress.add`):
:class:`fairsets.core.progress_live.LiveCounts` adds the counts that tasks running in other
processes report from inside their shard, so the bar shows images per second within a shard, not
only when a shard ends.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["Progress"]


class Progress:
    """A thin wrapper: ``with progress.stage("samples", total) as advance: ... advance(n)``."""

    def __init__(self, enabled: bool | None = None) -> None:
        if enabled is None:
            enabled = sys.stderr.isatty()
        self.enabled = enabled
        self._rich: Any = None
        self._advance: Any = None  # the running stage's advance, for add()
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()  # the driver's results and a LiveCounts thread both add

    def add(self, **counts: int) -> None:
        """Add ``counts`` to the running stage's counters (any thread); the bar does not advance."""
        advance = self._advance
        if advance is not None:
            advance(0, **counts)

    def counts(self) -> dict[str, int]:
        """The running (or last) stage's counters as shown: ``{"images": 120, "boxes": 310}``."""
        with self._lock:
            return dict(self._counts)

    @contextmanager
    def stage(self, description: str, total: int, *, rates: Sequence[str] = ()) -> Iterator[Any]:
        """A bar of ``total`` steps; yields ``advance(n=1, **counts)``.

        ``rates`` names counters shown after the bar with their totals and rates per second
        (``rates=("images", "boxes")``, then ``advance(1, images=120, boxes=310)`` shows
        ``120 images (35.2/s) · 310 boxes (90.7/s)``).
        """
        if not self.enabled or total == 0:
            yield lambda n=1, **_: None
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as RichProgress

        from .console import visible

        with RichProgress(
            TextColumn("{task.description}", style="bold", markup=False),  # names data: never markup
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[rates]}", markup=False),
            console=Console(stderr=True),
            transient=False,
        ) as bar:
            task = bar.add_task(visible(description), total=total, rates="")
            counts = self._counts = dict.fromkeys(rates, 0)
            start = time.monotonic()

            def advance(n: int = 1, **more: int) -> None:
                with self._lock:
                    for name, value in more.items():
                        counts[name] = counts.get(name, 0) + value
                    elapsed = max(time.monotonic() - start, 1e-9)
                    text = " · ".join(f"{v} {k} ({v / elapsed:.1f}/s)" for k, v in counts.items())
                    bar.update(task, advance=n, rates=text)

            self._advance = advance
            try:
                yield advance
            finally:
                self._advance = None
