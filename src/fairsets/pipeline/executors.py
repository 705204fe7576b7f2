"""Executors run tasks: ``local`` (a process pool, the default) and ``ray``.

Both call the same top-level task functions with the same JSON-friendly specs, and tasks are
deterministic functions of their specs, so both executors produce byte-identical outputs.
A task that raises is a bug: the executor finishes the other tasks, then raises
:class:`TaskFailed` naming the failed tasks (completed ones are kept, a re-run resumes).

Workers die with their driver. Pool workers ask the kernel for SIGKILL when the driver dies
(Linux ``PR_SET_PDEATHSIG``) and also watch their parent's pid (every platform); they ignore
Ctrl-C from the moment they exist (:func:`sigint_ignored_by_children`), and the driver handles it
by stopping them. Leaving the executor's ``with`` block by an
exception (a signal the build turned into one included) terminates the workers at once instead of
waiting for their tasks. Every task holds a shared lock on ``OUT/.fairsets/workers.lock`` while it
runs (:func:`task_lock`), so a new build can tell that a worker of an old one still writes there
(:func:`workers_busy`).

Resources and devices (:mod:`fairsets.pipeline.devices`): ``map`` takes the task type's
:class:`~fairsets.pipeline.devices.Resources`; Ray asks for them and pins each GPU task to the GPU it
was given; the local pool pins its workers to ``devices`` round-robin. Without either, specs reach
the tasks unchanged.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import multiprocessing
import os
import re
import signal
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

from fairsets.core.processes import die_with_parent, sigint_ignored_by_children
from fairsets.core.registry import EXECUTORS
from fairsets.core.step import MissingDependency

from .devices import Resources, placed, ray_placement

__all__ = [
    "WORKERS_LOCK",
    "Executor",
    "LocalExecutor",
    "RayExecutor",
    "TaskFailed",
    "die_with_parent",
    "get_executor",
    "sigint_ignored_by_children",
    "task_lock",
    "workers_busy",
]

log = logging.getLogger(__name__)

TaskFn = Callable[[dict[str, Any]], dict[str, Any]]
OnDone = Callable[[dict[str, Any], dict[str, Any]], None]


class TaskFailed(RuntimeError):
    """One or more tasks raised; the message lists them with their errors."""


#: A task error that no retry of the same build can fix: the output's disk is full or read-only.
_NO_ROOM = re.compile(
    r"\[Errno (28|122|30)\]|No space left on device|Disk quota exceeded|Read-only file system"
)


def _no_room(error: object) -> bool:
    """Whether a task's error says the output cannot be written (full, over quota, read-only)."""
    return bool(_NO_ROOM.search(str(error)))


#: Taken shared by every running task, exclusive by a build that checks for an old one's workers.
WORKERS_LOCK = "workers.lock"


@contextlib.contextmanager
def task_lock(workdir: str | os.PathLike[str]) -> Iterator[None]:
    """Hold a shared lock on ``workdir/workers.lock`` while a task writes into ``workdir``."""
    path = Path(workdir) / WORKERS_LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_SH)  # blocks only while a build checks (an instant)
        yield


def workers_busy(workdir: str | os.PathLike[str]) -> bool:
    """Whether a task (of any build, e.g. a killed driver's orphan) is writing into ``workdir``."""
    path = Path(workdir) / WORKERS_LOCK
    if not path.exists():
        return False
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


#: The device this pool worker is pinned to (``LocalExecutor(devices=...)``), else None.
_WORKER_DEVICE: str | None = None


def _worker_init(parent: int | None = None, devices: Sequence[str] = (), started: Any = None) -> None:
    """Keep one thread per worker process so ``workers`` means cores; die with the driver; pin
    the ``k``-th worker started (``started``: a shared counter) to ``devices[k % len(devices)]``."""
    global _WORKER_DEVICE
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if parent is not None:
        die_with_parent(parent)
    if devices and started is not None:
        with started.get_lock():
            k = started.value
            started.value += 1
        _WORKER_DEVICE = devices[k % len(devices)]
    try:
        import cv2

        cv2.setNumThreads(1)
    except ImportError:
        pass


def _locked(fn: TaskFn, spec: dict[str, Any]) -> dict[str, Any]:
    if _WORKER_DEVICE is not None:
        spec = placed(spec, {"device": _WORKER_DEVICE})
    with task_lock(spec["workdir"]):
        return fn(spec)


def _call(fn: TaskFn, spec: dict[str, Any], on_gpu: bool = False) -> dict[str, Any]:
    _worker_init()
    if on_gpu:  # Ray gave this task GPUs: compute on the first (CUDA specs) and record them
        spec = placed(spec, ray_placement())
    return _locked(fn, spec)


class Executor:
    """Runs ``fn(spec)`` for every spec; calls ``on_done(spec, result)`` as each finishes."""

    name = "executor"

    def map(
        self,
        fn: TaskFn,
        specs: Sequence[dict[str, Any]],
        on_done: OnDone | None = None,
        resources: Resources | None = None,
    ) -> list[dict[str, Any]]:
        """``resources``: what each task asks for (the Ray executor requests it; the local pool
        runs one task per worker and pins workers to its ``devices`` instead)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release resources (pools, clusters)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is None:
            self.close()
        else:  # a failure or a signal: stop the workers now, do not wait for their tasks
            self.abort()

    def abort(self) -> None:
        """Stop at once (running tasks are killed; a re-run resumes)."""
        self.close()

    @staticmethod
    def _raise_failures(failures: list[tuple[str, str]]) -> None:
        full = [err for _, err in failures if _no_room(err)]
        if full:  # every task hit the same wall: one line with the fix, not a list of task ids
            raise TaskFailed(
                f"cannot write the output ({len(full)} of {len(failures)} failed task(s): {full[0]}); free "
                "space on its disk (or make it writable, or choose another --out), then build again: "
                "finished tasks are kept"
            )
        if failures:
            head = "; ".join(f"{tid}: {err}" for tid, err in failures[:3])
            more = f" (+{len(failures) - 3} more)" if len(failures) > 3 else ""
            raise TaskFailed(f"{len(failures)} task(s) failed: {head}{more}")


@EXECUTORS.register("local")
class LocalExecutor(Executor):
    """A process pool (spawned workers). ``workers=0`` runs tasks inline in this process.

    ``devices`` (e.g. ``["cuda:0", "cuda:1"]``): worker ``k`` runs its tasks on
    ``devices[k % len(devices)]`` (inline: the first), recorded in each spec's ``placement``."""

    name = "local"

    def __init__(self, workers: int = 1, devices: Sequence[str] | None = None, **_: Any) -> None:
        self.workers = max(0, int(workers))
        self.devices = list(devices or ())
        self._pool: ProcessPoolExecutor | None = None

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            ctx = multiprocessing.get_context("spawn")
            initargs: tuple[Any, ...] = (os.getpid(),)
            if self.devices:
                initargs += (tuple(self.devices), ctx.Value("i", 0))
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=ctx, initializer=_worker_init, initargs=initargs
            )
        return self._pool

    def map(
        self,
        fn: TaskFn,
        specs: Sequence[dict[str, Any]],
        on_done: OnDone | None = None,
        resources: Resources | None = None,
    ) -> list[dict[str, Any]]:
        results: list[dict[str, Any] | None] = [None] * len(specs)
        failures: list[tuple[str, str]] = []
        if not specs:
            return []
        if self.workers == 0:
            if self.devices:
                specs = [placed(spec, {"device": self.devices[0]}) for spec in specs]
            for i, spec in enumerate(specs):
                try:
                    results[i] = _locked(fn, spec)
                except Exception as exc:  # a bug in a step: record, finish the rest, then raise
                    if not _no_room(exc):  # a full disk is said once, in the TaskFailed
                        log.error("task %s failed:\n%s", spec.get("task_id"), traceback.format_exc())
                    failures.append((spec.get("task_id", str(i)), f"{type(exc).__name__}: {exc}"))
                    continue
                if on_done:
                    on_done(spec, results[i])  # type: ignore[arg-type]
        else:
            first = specs[: self.workers]  # each of the first submits starts a worker
            with sigint_ignored_by_children():
                pool = self._get_pool()
                pending = {pool.submit(_locked, fn, spec): i for i, spec in enumerate(first)}
            pending |= {pool.submit(_locked, fn, spec): i for i, spec in enumerate(specs) if i >= len(first)}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    i = pending.pop(fut)
                    exc = fut.exception()
                    if exc is not None:
                        if not _no_room(exc):  # a full disk is said once, in the TaskFailed
                            log.error("task %s failed: %s", specs[i].get("task_id"), exc)
                        failures.append((specs[i].get("task_id", str(i)), f"{type(exc).__name__}: {exc}"))
                        continue
                    results[i] = fut.result()
                    if on_done:
                        on_done(specs[i], results[i])  # type: ignore[arg-type]
        self._raise_failures(failures)
        return results  # type: ignore[return-value]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def abort(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        procs = list((getattr(pool, "_processes", None) or {}).values())
        for p in procs:
            with contextlib.suppress(OSError, ValueError):
                p.terminate()
        for p in procs:
            with contextlib.suppress(OSError, ValueError, AssertionError):
                p.join(timeout=5)
                if p.is_alive():
                    p.kill()
                    p.join(timeout=5)
        # the pool sees its workers gone (broken) and its manager thread ends: nothing is leaked
        pool.shutdown(wait=True, cancel_futures=True)


@EXECUTORS.register("ray")
class RayExecutor(Executor):
    """Ray tasks. Starts a local cluster unless ``ray_address`` names an existing one."""

    name = "ray"

    def __init__(self, workers: int = 1, ray_address: str | None = None, **_: Any) -> None:
        try:
            import ray
        except ImportError:
            raise MissingDependency("the ray executor needs Ray: pip install 'fairsets[ray]'") from None
        self._ray = ray
        self._started = False
        self._replaced: dict[int, tuple[Any, Any]] = {}  # signal -> (Ray's handler, the one before)
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False}
            if ray_address:
                kwargs["address"] = ray_address
            else:
                kwargs.update(num_cpus=max(1, int(workers)), include_dashboard=False)
            before = _handlers()  # ray.init sets SIGTERM to sys.exit: the ones before come back in close
            try:
                ray.init(**kwargs)
            finally:
                self._replaced = {s: (h, before[s]) for s, h in _handlers().items() if h is not before[s]}
                if not ray.is_initialized():
                    self._restore_signals()
            self._started = True
        self._remote = ray.remote(num_cpus=1, max_retries=0)(_call)

    def map(
        self,
        fn: TaskFn,
        specs: Sequence[dict[str, Any]],
        on_done: OnDone | None = None,
        resources: Resources | None = None,
    ) -> list[dict[str, Any]]:
        ray = self._ray
        results: list[dict[str, Any] | None] = [None] * len(specs)
        failures: list[tuple[str, str]] = []
        remote, on_gpu = self._remote, False
        if resources is not None and resources != Resources():
            remote, on_gpu = remote.options(**resources.ray_options()), resources.num_gpus > 0
        refs = {remote.remote(fn, spec, on_gpu): i for i, spec in enumerate(specs)}
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                i = refs.pop(ref)
                try:
                    results[i] = ray.get(ref)
                except Exception as exc:  # the task raised: record, finish the rest, then raise
                    cause = getattr(exc, "cause", None) or exc
                    failures.append((specs[i].get("task_id", str(i)), f"{type(cause).__name__}: {cause}"))
                    continue
                if on_done:
                    on_done(specs[i], results[i])  # type: ignore[arg-type]
        self._raise_failures(failures)
        return results  # type: ignore[return-value]

    def close(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
            self._started = False
        self._restore_signals()

    def _restore_signals(self) -> None:
        """Put back the handlers ray.init replaced (a SIGTERM would otherwise raise SystemExit
        wherever this process is, and a caller that catches it, like pytest, would go on)."""
        replaced, self._replaced = self._replaced, {}
        for signum, (ray_handler, before) in replaced.items():
            if signal.getsignal(signum) is ray_handler and before is not None:  # still Ray's
                signal.signal(signum, before)


def _handlers() -> dict[int, Any]:
    """SIGTERM's and SIGINT's handlers, where this thread can set them (the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}


def get_executor(
    kind: str, workers: int = 1, ray_address: str | None = None, devices: Sequence[str] | None = None
) -> Executor:
    """The executor ``kind`` (``devices``: the local pool's round-robin; Ray assigns GPUs itself)."""
    try:
        cls = EXECUTORS.get(kind)
    except KeyError as exc:
        raise ValueError(str(exc.args[0])) from None
    if devices and kind != "local":
        raise ValueError(f"devices are assigned by the local executor only; {kind} assigns GPUs itself")
    if devices:
        return cls(workers=workers, ray_address=ray_address, devices=devices)
    return cls(workers=workers, ray_address=ray_address)
