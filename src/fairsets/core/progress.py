"""Progress bars (rich) that switch off when not on a terminal or when asked to be quiet."""

from __future__ import annotations

import sys
from collections.abc import Iterator
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

    @contextmanager
    def stage(self, description: str, total: int) -> Iterator[Any]:
        if not self.enabled or total == 0:
            yield lambda n=1: None
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

        with RichProgress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        ) as bar:
            task = bar.add_task(description, total=total)
            yield lambda n=1: bar.advance(task, n)
