"""Workers die with their driver; a build refuses to start while an old worker still writes in OUT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fairsets.cli import app
from fairsets.pipeline.build import build
from fairsets.pipeline.config import load_recipe
from fairsets.pipeline.executors import LocalExecutor, workers_busy
from helpers import write_candidates, write_recipe

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="scans /proc (Linux)")


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of a process, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1])


def _alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")  # a zombie has exited (nobody reaped it yet)


def _workers_of(driver: int) -> list[int]:
    """The pool workers (``spawn_main``) whose parent is ``driver``."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        st = _stat(int(d.name))
        if st is None or st[1] != driver:
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in cmd:
            found.append(int(d.name))
    return found


def _start_build(tmp_path: Path, n: int = 40) -> tuple[subprocess.Popen[bytes], Path, list[int]]:
    """A 2-worker build in a subprocess, returned once both workers run tasks."""
    listing = write_candidates(tmp_path / "c", n)
    recipe = write_recipe(tmp_path / "r.toml", listing, quota=4, workers=2, task_size=1)
    out = tmp_path / "o"
    markers = out / ".fairsets" / "markers" / "samples"
    cmd = [sys.executable, "-m", "fairsets.cli", "build", str(recipe), "--out", str(out), "--quiet"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 150
    workers: list[int] = []
    while time.monotonic() < deadline and proc.poll() is None:
        workers = _workers_of(proc.pid)
        if len(workers) == 2 and markers.is_dir() and any(markers.glob("*.json")):
            break
        time.sleep(0.05)
    if proc.poll() is not None or len(workers) != 2:
        proc.kill()
        err = proc.stderr.read().decode() if proc.stderr else ""
        pytest.fail(f"the build did not reach 2 busy workers (rc {proc.poll()}): {err}")
    return proc, out, workers


def _reap(proc: subprocess.Popen[bytes], workers: list[int]) -> None:
    """Clean up after a failed assertion: only the processes this test started."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pid in workers:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_sigkill_of_the_driver_alone_kills_its_workers(tmp_path: Path) -> None:
    proc, out, workers = _start_build(tmp_path)
    try:
        os.kill(proc.pid, signal.SIGKILL)  # the driver only, not its process group
        proc.wait()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(_alive(p) for p in workers):
            time.sleep(0.05)
        assert not [p for p in workers if _alive(p)], "pool workers outlived their driver"
        markers = out / ".fairsets" / "markers" / "samples"
        n = len(list(markers.glob("*.json")))
        time.sleep(1.5)
        assert len(list(markers.glob("*.json"))) == n  # nobody writes any more
        assert not workers_busy(out / ".fairsets")
    finally:
        _reap(proc, workers)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_sigterm_stops_the_build_its_workers_and_releases_the_lock(tmp_path: Path) -> None:
    proc, out, workers = _start_build(tmp_path)
    try:
        os.kill(proc.pid, signal.SIGTERM)
        rc = proc.wait(timeout=30)
        err = proc.stderr.read().decode() if proc.stderr else ""
        assert rc == 128 + signal.SIGTERM, err
        assert err.strip().splitlines() == [
            "error: stopped by SIGTERM; finished tasks are kept: build again to resume"
        ]
        assert not [p for p in workers if _alive(p)]
        import fcntl

        with open(out / ".fairsets" / "lock", "a") as fh:  # the lock is free again
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        _reap(proc, workers)


_FAKE_WORKER = """
import sys, time
from fairsets.pipeline.executors import task_lock
with task_lock(sys.argv[1]):
    print("writing", flush=True)
    time.sleep(120)
"""


@pytest.mark.timeout(120)
def test_a_build_refuses_while_an_old_worker_still_writes(tmp_path: Path) -> None:
    listing = write_candidates(tmp_path / "c", 4)
    recipe = write_recipe(tmp_path / "r.toml", listing, quota=1, workers=0)
    out = tmp_path / "o"
    build(load_recipe(recipe), out)
    # a worker of an earlier build whose driver died: it still holds its task's lock
    old = subprocess.Popen(
        [sys.executable, "-c", _FAKE_WORKER, str(out / ".fairsets")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert old.stdout is not None and old.stdout.readline().strip() == "writing"
        assert workers_busy(out / ".fairsets")
        res = CliRunner().invoke(app, ["build", str(recipe), "--out", str(out), "--quiet"])
        assert res.exit_code == 2, res.output
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and "a worker of an earlier build" in lines[0] and str(out) in lines[0]
    finally:
        old.kill()
        old.wait()
    res = CliRunner().invoke(app, ["build", str(recipe), "--out", str(out), "--quiet"])
    assert res.exit_code == 0, res.output


@pytest.mark.timeout(120)
def test_pool_workers_hold_the_task_lock_and_leave_with_the_pool(tmp_path: Path) -> None:
    work = tmp_path / ".fairsets"
    ex = LocalExecutor(workers=2)
    with ex:
        res = ex.map(_busy_probe, [{"task_id": "a", "workdir": str(work)}])
    assert res == [{"busy": True, "pid_differs": True}]
    assert not workers_busy(work)


def _busy_probe(spec: dict) -> dict:
    # inside a task: the shared lock is held, so an exclusive probe from here fails
    return {"busy": workers_busy(spec["workdir"]), "pid_differs": os.getpid() != os.getppid()}


@pytest.mark.timeout(60)
def test_an_executor_left_by_an_exception_terminates_its_workers_at_once() -> None:
    ex = LocalExecutor(workers=1)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt), ex:
        pool = ex._get_pool()
        fut = pool.submit(time.sleep, 60)
        while not (pool._processes and fut.running()):
            time.sleep(0.05)
        procs = list(pool._processes.values())
        raise KeyboardInterrupt
    assert time.monotonic() - started < 30
    assert not any(p.is_alive() for p in procs)


@pytest.mark.timeout(30)
def test_signals_become_build_stopped_and_ignored_ones_stay_ignored() -> None:
    from fairsets.pipeline.build import BuildStopped, _stop_on_signals

    before_term = signal.getsignal(signal.SIGTERM)
    old_hup = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    try:
        with pytest.raises(BuildStopped) as info, _stop_on_signals(), _stop_on_signals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises before this ends
        assert info.value.code == 128 + signal.SIGTERM and "SIGTERM" in str(info.value)
        assert signal.getsignal(signal.SIGTERM) == before_term
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, old_hup)


_POOL_DRIVER = """
import multiprocessing, os, time
from fairsets.pipeline.executors import die_with_parent
if __name__ == "__main__":
    ctx = multiprocessing.get_context("spawn")
    pool = ctx.Pool(1, initializer=die_with_parent, initargs=(os.getpid(),))  # as the downloaders
    print(pool.apply(os.getpid), flush=True)
    pool.apply_async(time.sleep, (120,))  # busy when the driver dies
    time.sleep(120)
"""


@pytest.mark.timeout(90)
def test_a_multiprocessing_pool_with_the_initializer_dies_with_its_driver(tmp_path: Path) -> None:
    script = tmp_path / "driver.py"
    script.write_text(_POOL_DRIVER)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    worker = 0
    try:
        assert proc.stdout is not None
        worker = int(proc.stdout.readline())
        assert _alive(worker)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _alive(worker):
            time.sleep(0.05)
        assert not _alive(worker)
    finally:
        _reap(proc, [worker] if worker else [])
