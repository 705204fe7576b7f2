"""Counts from inside running tasks, shown live on the driver's progress bar.

A task of an executor runs in a worker process (or on a Ray node that shares the output folder, as
the tasks' own tables do), so it cannot touch the driver's bar. It writes its running counts
(``{"images": 1200, "boxes": 3100}``) to a small JSON file of its own in a folder the driver names
(:class:`TaskCounts`: at most every half second, replaced whole); the driver's :class:`LiveCounts`
thread reads that folder four times a second and adds what grew to the running stage
(:meth:`fairsets.core.progress.Progress.add`). When a task's result arrives, :meth:`LiveCounts.finish`
turns its final counts into what the bar has not shown yet, and its file is read no more, so every
count is shown once. The folder is work state (under ``.fairsets/``): emptied when the driver
starts, removed when it ends; nothing published depends on it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .progress import Progress

__all__ = ["LiveCounts", "TaskCounts", "live_for_tasks"]


def _file(folder: Path, task_id: str) -> Path:
    return folder / f"{hashlib.sha256(task_id.encode('utf-8')).hexdigest()[:24]}.json"


class TaskCounts:
    """The worker side: ``counts.add(images=1, boxes=3)`` as a task goes; written at most every
    ``every`` seconds (and by :meth:`flush`). With ``folder`` None (no bar to feed) it does nothing."""

    def __init__(self, folder: str | os.PathLike[str] | None, task_id: str, every: float = 0.5) -> None:
        self.path = _file(Path(folder), task_id) if folder else None
        self.task_id = task_id
        self.every = every
        self.counts: dict[str, int] = {}
        self._written = time.monotonic()

    def add(self, **counts: int) -> None:
        if self.path is None:
            return
        for name, value in counts.items():
            self.counts[name] = self.counts.get(name, 0) + int(value)
        if time.monotonic() - self._written >= self.every:
            self.flush()

    def flush(self) -> None:
        """Write the counts now (a progress file is never worth failing a task for)."""
        if self.path is None:
            return
        self._written = time.monotonic()
        part = self.path.with_name(f"{self.path.name}.{os.getpid()}.part")
        try:
            part.parent.mkdir(parents=True, exist_ok=True)
            part.write_text(json.dumps({"task": self.task_id, "counts": self.counts}), encoding="utf-8")
            os.replace(part, self.path)
        except OSError:
            part.unlink(missing_ok=True)


class LiveCounts:
    """The driver side, around the run of a stage's tasks::

    with LiveCounts(folder, progress.add) as live:
        ...  # tasks get `folder`; each finished task's counts go through live.finish(task_id, counts)
    """

    def __init__(
        self, folder: str | os.PathLike[str], add: Callable[..., Any], interval: float = 0.25
    ) -> None:
        self.folder = Path(folder)
        self._add = add
        self.interval = interval
        self._shown: dict[str, dict[str, int]] = {}
        self._done: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> LiveCounts:
        shutil.rmtree(self.folder, ignore_errors=True)  # a killed run's counts are not this run's
        self.folder.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._watch, name="fairsets-live-counts", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        shutil.rmtree(self.folder, ignore_errors=True)
        with contextlib.suppress(OSError):  # the folder of progress folders, once none is left
            self.folder.parent.rmdir()

    def finish(self, task_id: str, counts: dict[str, int]) -> dict[str, int]:
        """What of a finished task's ``counts`` the bar has not shown yet; its file is read no more."""
        with self._lock:
            self._done.add(task_id)
            shown = self._shown.pop(task_id, {})
        return {name: value - shown.get(name, 0) for name, value in counts.items()}

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def poll(self) -> None:
        """Read every task's file once and add what grew (called by the thread; tests call it too)."""
        try:
            files = sorted(self.folder.glob("*.json"))
        except OSError:
            return
        for path in files:
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                task, counts = str(data["task"]), {str(k): int(v) for k, v in data["counts"].items()}
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue  # being replaced, or not ours
            with self._lock:
                if task in self._done:
                    continue
                shown = self._shown.setdefault(task, {})
                grew = {k: v - shown.get(k, 0) for k, v in counts.items() if v > shown.get(k, 0)}
                if grew:
                    shown.update({k: counts[k] for k in grew})
                    self._add(**grew)


def live_for_tasks(
    specs: list[dict[str, Any]], folder: str | os.PathLike[str], progress: Progress | None
) -> LiveCounts | None:
    """Have the tasks of ``specs`` report their counts to ``folder`` (``spec["progress"]``) and
    return the reader that feeds ``progress``; None (and nothing asked of the tasks) without a bar."""
    if progress is None or not progress.enabled or not specs:
        return None
    for spec in specs:
        spec["progress"] = str(folder)
    return LiveCounts(folder, progress.add)
