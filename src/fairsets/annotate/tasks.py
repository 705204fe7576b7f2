"""Running one task per shard, as ``annotate persons`` and ``annotate classify`` both do.

:func:`check_run_options` refuses bad ``--batch`` / ``--workers`` / ``--executor`` values before any
work (one line each); :func:`run_shard_tasks` runs the tasks on the chosen executor with a progress
bar and returns every task's result by shard name. :func:`prefetched` runs a producer (reading and
decoding images, rendering views) in a background thread a bounded number of items ahead, so it
overlaps a model's forward passes or a chat batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from fairsets.core.progress import Progress

from .layout import AnnotationError

if TYPE_CHECKING:
    from fairsets.pipeline.devices import Resources

__all__ = ["check_run_options", "placement_options", "prefetched", "run_shard_tasks"]


def check_run_options(batch: int, workers: int, executor: str, per_pass: str) -> None:
    """Raise :class:`AnnotationError` for a batch under 1 (``per_pass``: what a forward pass takes,
    e.g. ``image``), negative workers, or an executor other than ``local`` / ``ray``."""
    if batch < 1:
        raise AnnotationError(f"--batch {batch}: use at least 1 {per_pass} per forward pass")
    if workers < 0:
        raise AnnotationError(f"--workers {workers}: use 0 (inline) or more worker processes")
    if executor not in ("local", "ray"):
        raise AnnotationError(f"--executor {executor!r}: use 'local' or 'ray'")


def placement_options(
    device: str, devices: Sequence[str] | None, gpus_per_task: float | None, executor: str
) -> tuple[list[str] | None, Resources | None]:
    """The local pool's ``devices`` and the resources each task asks for, checked (one line each).

    A task asks for ``gpus_per_task`` GPUs (default: 1 when ``device`` is CUDA, else none);
    ``devices`` is for the local executor only (Ray gives each task its GPUs itself)."""
    from fairsets.pipeline.devices import Resources

    if devices and executor != "local":
        raise AnnotationError(
            f"--devices is for --executor local; {executor} gives each task its GPU itself: "
            "use --device cuda (and --gpus-per-task) instead"
        )
    if devices and device.strip() != "cpu" and device.strip() not in devices:
        raise AnnotationError(f"--device {device} and --devices both given: give one of them")
    gpus = gpus_per_task if gpus_per_task is not None else (1.0 if device.startswith("cuda") else 0.0)
    try:
        resources = Resources(num_cpus=1, num_gpus=float(gpus))
    except ValueError as exc:
        raise AnnotationError(f"--gpus-per-task: {exc}") from None
    return (list(devices) if devices else None), (resources if resources.num_gpus else None)


def run_shard_tasks(
    fn: Callable[[dict[str, Any]], dict[str, Any]],
    specs: Sequence[dict[str, Any]],
    *,
    executor: str,
    workers: int,
    ray_address: str | None,
    progress: Progress | None,
    description: str,
    rates: tuple[str, ...],
    counted: Callable[[dict[str, Any]], dict[str, int]],
    devices: Sequence[str] | None = None,
    resources: Resources | None = None,
) -> tuple[dict[str, dict[str, Any]], float]:
    """Run ``fn`` on every spec; return the results by ``task_id`` and the seconds it took.

    ``counted(result)`` gives the counters (named in ``rates``) a finished task adds to the bar.
    ``devices`` (local executor) and ``resources`` (what each task asks Ray for):
    :mod:`fairsets.pipeline.devices`.
    """
    from fairsets.pipeline.executors import get_executor

    results: dict[str, dict[str, Any]] = {}
    start = time.monotonic()
    progress = progress or Progress(False)
    with progress.stage(description, len(specs), rates=rates) as advance:

        def done(spec: dict[str, Any], result: dict[str, Any]) -> None:
            results[spec["task_id"]] = result
            advance(1, **counted(result))

        with get_executor(executor, workers=workers, ray_address=ray_address, devices=devices) as ex:
            ex.map(fn, specs, on_done=done, resources=resources)
    return results, time.monotonic() - start


_END = object()


def prefetched(items: Iterator[Any], depth: int) -> Iterator[Any]:
    """``items`` as produced by a background thread up to ``depth`` ahead, in the same order.

    Reading and decoding images (which release the GIL) then overlap the encoder's forward passes.
    An exception of the producer is raised here; leaving early stops the producer.
    """
    import queue
    import threading

    q: queue.Queue[tuple[object, Any]] = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()

    def put(item: tuple[object, Any]) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((None, item)):
                    return
            put((_END, None))
        except BaseException as exc:  # handed to the consumer, raised there
            put((_END, exc))

    thread = threading.Thread(target=produce, name="fairsets-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            tag, value = q.get()
            if tag is _END:
                if value is not None:
                    raise value
                return
            yield value
    finally:
        stop.set()
        thread.join()
