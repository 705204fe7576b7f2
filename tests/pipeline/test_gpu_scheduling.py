"""GPU-aware scheduling: tasks declare their resources, Ray grants them and pins each task to its
device; the local pool pins its workers to ``devices`` round-robin; the CPU path is unchanged.

The Ray cluster here declares GPUs it does not have (``ray.init(num_gpus=2)``): Ray still gives
each task GPU ids and sets ``CUDA_VISIBLE_DEVICES``, which is what is checked. Every probe task
waits until all of them run at once (a barrier of files), so the count per device is the
scheduler's, not an accident of timing: N tasks of 2/N GPU each fill 2 devices with N/2 each.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from fairsets.pipeline.devices import Resources, parse_devices
from fairsets.pipeline.executors import LocalExecutor, get_executor


def _probe(spec: dict[str, Any]) -> dict[str, Any]:
    """Record what this task received; wait (up to 60 s) until all ``n`` tasks have started."""
    work = Path(spec["workdir"])
    (work / f"started-{spec['task_id']}").write_text(str(os.getpid()))
    deadline = time.monotonic() + 60
    while len(list(work.glob("started-*"))) < spec["n"] and time.monotonic() < deadline:
        time.sleep(0.05)
    return {
        "together": len(list(work.glob("started-*"))) >= spec["n"],
        "spec": spec,
        "pid": os.getpid(),
        "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


def _specs(tmp_path: Path, n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"task_id": f"t{i}", "workdir": str(tmp_path), "n": n, **extra} for i in range(n)]


@pytest.fixture(scope="module")
def fake_gpu_ray() -> Any:
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=4, num_gpus=2, include_dashboard=False, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the probe is defined here
    yield ray
    ray.shutdown()


@pytest.mark.ray
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("n", "gpus"), [(2, 1.0), (4, 0.5)])
def test_ray_tasks_get_the_gpus_they_ask_for_half_per_device(
    fake_gpu_ray: Any, tmp_path: Path, n: int, gpus: float
) -> None:
    with get_executor("ray", workers=4) as ex:
        results = ex.map(_probe, _specs(tmp_path, n, device="cuda"), resources=Resources(1, gpus))
    assert all(r["together"] for r in results)  # all held their GPUs at the same time
    placements = [r["spec"]["placement"] for r in results]
    assert all(len(p["gpu_ids"]) == 1 for p in placements)
    # each task sees only its GPU, as cuda:0, and computes there
    assert [r["cuda_visible"] for r in results] == [p["gpu_ids"][0] for p in placements]
    assert {r["spec"]["device"] for r in results} == {"cuda:0"}
    assert Counter(p["gpu_ids"][0] for p in placements) == {"0": n // 2, "1": n // 2}


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_a_cpu_task_asking_for_a_gpu_is_recorded_but_stays_on_the_cpu(
    fake_gpu_ray: Any, tmp_path: Path
) -> None:
    with get_executor("ray", workers=4) as ex:
        results = ex.map(_probe, _specs(tmp_path, 2, device="cpu"), resources=Resources(1, 1))
    assert [r["spec"]["device"] for r in results] == ["cpu", "cpu"]
    assert sorted(r["spec"]["placement"]["gpu_ids"][0] for r in results) == ["0", "1"]


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_ray_without_gpus_asked_hands_the_spec_over_unchanged(fake_gpu_ray: Any, tmp_path: Path) -> None:
    specs = _specs(tmp_path, 2, device="cpu")
    with get_executor("ray", workers=4) as ex:
        results = ex.map(_probe, specs)
    assert [r["spec"] for r in results] == specs  # no placement, same device
    assert {r["cuda_visible"] for r in results} <= {None, ""}  # no GPU handed out


@pytest.mark.timeout(300)
def test_the_local_pool_pins_its_workers_to_the_devices_round_robin(tmp_path: Path) -> None:
    devices = ["cuda:0", "cuda:1"]
    with LocalExecutor(workers=4, devices=devices) as ex:
        results = ex.map(_probe, _specs(tmp_path, 4, device="cuda"))
    assert all(r["together"] for r in results)  # one task per worker: four workers at once
    assert len({r["pid"] for r in results}) == 4
    got = [r["spec"]["device"] for r in results]
    assert Counter(got) == {"cuda:0": 2, "cuda:1": 2}
    assert [r["spec"]["placement"] for r in results] == [{"device": d} for d in got]


def test_the_local_pool_without_devices_hands_the_spec_over_unchanged(tmp_path: Path) -> None:
    for workers in (0, 2):
        for f in tmp_path.glob("started-*"):
            f.unlink()
        # inline tasks run one after another: no barrier for them to wait on
        specs = [{**s, "n": 1 if workers == 0 else s["n"]} for s in _specs(tmp_path, 2, device="cpu")]
        with LocalExecutor(workers=workers) as ex:
            assert [r["spec"] for r in ex.map(_probe, specs)] == specs


def test_inline_tasks_use_the_first_device(tmp_path: Path) -> None:
    specs = [{**s, "n": 1} for s in _specs(tmp_path, 2, device="cuda")]  # one after another: no barrier
    with LocalExecutor(workers=0, devices=["cuda:1", "cuda:0"]) as ex:
        results = ex.map(_probe, specs)
    assert [r["spec"]["device"] for r in results] == ["cuda:1", "cuda:1"]


def test_resources_and_device_lists_are_checked() -> None:
    assert Resources(num_cpus=1, num_gpus=0.25).ray_options() == {"num_cpus": 1, "num_gpus": 0.25}
    for bad in ({"num_gpus": -1}, {"num_gpus": 1.5}, {"num_cpus": 0}):
        with pytest.raises(ValueError):
            Resources(**bad)
    assert parse_devices("0, 1") == ["cuda:0", "cuda:1"]
    assert parse_devices("cuda:3") == ["cuda:3"]
    for bad in ("0,0", "a", "0,,1", "-1"):
        with pytest.raises(ValueError):
            parse_devices(bad)
    with pytest.raises(ValueError, match="local executor only"):
        get_executor("ray", devices=["cuda:0"])
