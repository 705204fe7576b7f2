"""Signals during a build: SIGINT, SIGTERM and SIGHUP become :class:`BuildStopped`.

Raised in the main thread, the exception unwinds every ``with`` block of the build (workers
terminated, Ray shut down, locks released); finished tasks are kept, so the next build resumes.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["BuildStopped"]


class BuildStopped(SystemExit):
    """A signal (SIGINT, SIGTERM, SIGHUP) stopped the build; its code is 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signal = signal.Signals(signum).name

    def __str__(self) -> str:
        return f"stopped by {self.signal}; finished tasks are kept: build again to resume"


_SIGNALS = {"depth": 0, "stopping": False}


@contextmanager
def _stop_on_signals() -> Iterator[None]:
    """Turn SIGINT/SIGTERM/SIGHUP into :class:`BuildStopped`, so that every ``with`` block unwinds
    (workers terminated, Ray shut down, locks released). Only the main thread can set handlers;
    elsewhere this does nothing. Further signals while unwinding are ignored (it is bounded)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    names = ("SIGINT", "SIGTERM", "SIGHUP")
    sigs = [getattr(signal, n) for n in names if hasattr(signal, n)]
    if not _SIGNALS["depth"]:
        _SIGNALS["stopping"] = False
    _SIGNALS["depth"] += 1

    def handler(signum: int, _frame: object) -> None:
        if _SIGNALS["stopping"]:  # shared by nested uses: one stop per build
            return
        _SIGNALS["stopping"] = True
        raise BuildStopped(signum)

    # a signal ignored on entry (``nohup``, a background job's SIGINT) stays ignored
    previous = {s: signal.signal(s, handler) for s in sigs if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield
    finally:
        _SIGNALS["depth"] -= 1
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
