"""Worker processes that end with their driver and ignore Ctrl-C while they start."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

__all__ = ["die_with_parent", "sigint_ignored_by_children"]

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with(parent: int) -> None:
    """End this process when ``parent`` ends (re-parenting changes ``getppid``)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
                log.debug("prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())
        except (OSError, AttributeError) as exc:  # no libc (unusual builds): the watch below remains
            log.debug("prctl unavailable: %s", exc)
    if os.getppid() != parent:  # the driver died before the line above took effect
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="fairsets-parent-watch", daemon=True).start()


def die_with_parent(parent: int, ignore_sigint: bool = True) -> None:
    """Initializer of a worker process: end with ``parent`` (the driver, ``initargs=(os.getpid(),)``).

    Use it for every process pool (``ProcessPoolExecutor(initializer=...)``, ``multiprocessing.Pool``),
    so that no worker outlives a killed driver. With ``ignore_sigint`` the worker ignores Ctrl-C,
    which reaches the whole process group: for drivers that stop their workers themselves.
    """
    if ignore_sigint:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with(parent)


@contextlib.contextmanager
def sigint_ignored_by_children() -> Iterator[None]:
    """Start worker processes inside this block: they ignore Ctrl-C from their first instruction.

    A spawned worker imports for a while before its initializer runs; a Ctrl-C (sent to the whole
    process group) in that window printed the worker's ``KeyboardInterrupt`` traceback. Inside the
    block SIGINT is ignored (children inherit that across fork and exec, and Python keeps an
    ignored SIGINT ignored at start-up) and blocked in this thread, so a Ctrl-C meanwhile stays
    pending and reaches this process once the block restores its handler when no other thread
    takes it. Keep the block to the workers' starts (each a vfork and exec: milliseconds). Off the
    main thread (where handlers cannot change) it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # Only this thread blocks: with other threads running, a Ctrl-C in the block (the milliseconds
    # the workers' forks take) may be dropped; the next one is not.
    block = hasattr(signal, "pthread_sigmask")
    if block:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
        if block:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
