"""What a task asks of the executor (CPUs, GPUs) and which device it was given.

A task type declares its :class:`Resources`: ``num_cpus`` and ``num_gpus`` (fractional allowed:
``0.5`` lets two tasks share one GPU, as Ray counts it; more than one GPU must be a whole number).
The executors honour them:

- **ray** asks Ray for them (``.options(num_cpus=…, num_gpus=…)``); Ray gives the task GPU ids
  (``ray.get_gpu_ids()``) and sets ``CUDA_VISIBLE_DEVICES`` to them, so inside the task the first
  GPU it was given is ``cuda:0``. A task whose spec says ``device: cuda…`` computes there; the
  assignment is recorded in the spec's ``placement`` either way (:func:`ray_placement`). Ray runs
  each GPU task in a fresh worker process (its default for GPU tasks), so a model is loaded once per
  task, and freed with its process.
- **local** (a process pool) pins worker ``k`` to ``devices[k % len(devices)]`` when the user gives
  ``--devices 0,1`` (round-robin over the workers: each worker loads its model on one device);
  tasks run inline (``workers=0``) use the first device.

With no GPUs asked for and no devices given, specs reach the task unchanged: the CPU path writes
the same bytes as before (no ``placement`` anywhere).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

__all__ = ["Resources", "parse_devices", "placed", "ray_placement"]


@dataclass(frozen=True)
class Resources:
    """What one task of a type asks the executor for (Ray's units: CPUs and GPUs, fractions allowed)."""

    num_cpus: float = 1.0
    num_gpus: float = 0.0

    def __post_init__(self) -> None:
        if not self.num_cpus > 0:
            raise ValueError(f"num_cpus {self.num_cpus}: a task needs more than 0 CPUs, e.g. 1")
        if self.num_gpus < 0:
            raise ValueError(f"num_gpus {self.num_gpus}: use 0 (no GPU), a fraction such as 0.5, or 1")
        if self.num_gpus > 1 and self.num_gpus != int(self.num_gpus):
            raise ValueError(f"num_gpus {self.num_gpus}: more than one GPU must be a whole number (Ray)")

    def ray_options(self) -> dict[str, float]:
        """The keyword arguments of Ray's ``.options`` for these resources."""
        return {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}


def parse_devices(text: str) -> list[str]:
    """``"0,1"`` → ``["cuda:0", "cuda:1"]`` (``cuda:N`` entries are kept as they are).

    Raises ``ValueError`` naming the bad entry (the command turns it into one line)."""
    devices = []
    for part in (p.strip() for p in text.split(",")):
        index = part.removeprefix("cuda:")
        if not index.isdigit():
            raise ValueError(f"{part!r} is not a GPU index: give indices separated by commas, e.g. 0,1")
        device = f"cuda:{int(index)}"
        if device in devices:
            raise ValueError(f"{device} is named twice: name each GPU once")
        devices.append(device)
    return devices


def placed(spec: dict[str, Any], placement: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with its ``placement`` recorded; its ``device`` becomes the placement's device when
    the spec computes on CUDA (or names no device). A CPU spec keeps computing on the CPU."""
    out = {**spec, "placement": placement}
    if str(spec.get("device", "cuda")).startswith("cuda"):
        out["device"] = placement["device"]
    return out


def ray_placement() -> dict[str, Any]:
    """Inside a Ray task that asked for GPUs: ``{"device": "cuda:0", "gpu_ids": [...]}``.

    ``gpu_ids`` are the cluster's ids Ray gave this task (``ray.get_gpu_ids()``, as strings);
    ``device`` is the torch device of the first of them as this process sees it (Ray sets
    ``CUDA_VISIBLE_DEVICES`` to the ids, so it is ``cuda:0``)."""
    import ray

    ids = [str(i) for i in ray.get_gpu_ids()]
    visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v]
    local = visible.index(ids[0]) if ids and ids[0] in visible else 0
    return {"device": f"cuda:{local}", "gpu_ids": ids}
