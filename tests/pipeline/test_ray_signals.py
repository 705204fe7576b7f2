"""The Ray executor gives back the signal handlers ``ray.init`` replaces.

``ray.init`` sets SIGTERM, in the driver, to ``sys.exit``: left installed (and re-armed by any
later save-and-restore of the handler, as every build's signal scope does), a SIGTERM raises
SystemExit wherever the process is, and a caller that catches it goes on — pytest reported the
running test as failed and ran the next one, so ``kill`` no longer stopped a test run.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path
from typing import Any

import pytest

from fairsets.pipeline.executors import RayExecutor


def _fake_ray(monkeypatch: pytest.MonkeyPatch, *, init_fails: bool = False) -> list[str]:
    """A stand-in for the ``ray`` module whose ``init`` does to the handlers what Ray's does."""
    calls: list[str] = []
    state = {"up": False}

    def init(**_: Any) -> None:
        calls.append("init")
        signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(signum))  # as ray.init does
        if init_fails:
            raise ConnectionError("the local cluster did not start")
        state["up"] = True

    def shutdown() -> None:
        calls.append("shutdown")
        state["up"] = False

    fake = types.SimpleNamespace(
        init=init, shutdown=shutdown, is_initialized=lambda: state["up"], remote=lambda **_: lambda fn: fn
    )
    monkeypatch.setitem(sys.modules, "ray", fake)
    return calls


@pytest.fixture
def sigterm_restored() -> Any:
    before = signal.getsignal(signal.SIGTERM)
    yield before
    signal.signal(signal.SIGTERM, before)


def test_closing_the_executor_puts_back_the_sigterm_handler(
    monkeypatch: pytest.MonkeyPatch, sigterm_restored: Any
) -> None:
    calls = _fake_ray(monkeypatch)
    signal.signal(signal.SIGTERM, lambda *_: None)
    mine = signal.getsignal(signal.SIGTERM)
    with RayExecutor(workers=1):
        assert signal.getsignal(signal.SIGTERM) is not mine  # Ray's, while Ray runs
    assert calls == ["init", "shutdown"]
    assert signal.getsignal(signal.SIGTERM) is mine


def test_a_failed_start_puts_back_the_sigterm_handler(
    monkeypatch: pytest.MonkeyPatch, sigterm_restored: Any
) -> None:
    _fake_ray(monkeypatch, init_fails=True)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with pytest.raises(ConnectionError):
        RayExecutor(workers=1)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_handler_set_while_ray_ran_is_left_alone(
    monkeypatch: pytest.MonkeyPatch, sigterm_restored: Any
) -> None:
    _fake_ray(monkeypatch)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    ex = RayExecutor(workers=1)
    signal.signal(signal.SIGTERM, lambda *_: None)
    later = signal.getsignal(signal.SIGTERM)
    ex.close()
    assert signal.getsignal(signal.SIGTERM) is later  # not Ray's any more: not ours to change


_INNER = """
import time

import pytest

from fairsets.pipeline.executors import get_executor
from fairsets.pipeline.signals import _stop_on_signals


def test_a_ray_task(tmp_path):
    with get_executor("ray", workers=1) as ex:
        assert ex.map(dict, [{"task_id": "t", "workdir": str(tmp_path)}])[0]["task_id"] == "t"
    print("ray task done", flush=True)


@pytest.mark.parametrize("n", range(3))
def test_waits(n):
    # what a later build does (its signal scope saves the handler it finds and sets it back),
    # like any code that saves and restores a handler: Ray's C-level handler gives way to Python's
    with _stop_on_signals():
        pass
    print("waiting", flush=True)
    time.sleep(60)
"""


@pytest.mark.ray
@pytest.mark.timeout(180)
def test_sigterm_stops_pytest_after_a_ray_task(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(_INNER))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not this project's options (no xdist)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_inner.py"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    assert proc.stdout is not None
    said = b""
    try:
        deadline = time.monotonic() + 120
        while b"waiting" not in said and time.monotonic() < deadline and proc.poll() is None:
            if select.select([proc.stdout], [], [], 0.5)[0]:
                said += os.read(proc.stdout.fileno(), 65536)
        assert b"ray task done" in said and b"waiting" in said, said.decode(errors="replace")
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            code = None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        said += proc.stdout.read()
        proc.stdout.close()
    assert code == -signal.SIGTERM, f"pytest went on after SIGTERM (exit {code}):\n" + said.decode(
        errors="replace"
    )
