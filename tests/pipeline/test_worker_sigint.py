"""Pool workers ignore Ctrl-C from the moment they exist, not only once their initializer ran."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# A driver that survives Ctrl-C (a no-op handler) and sends SIGINT to its whole process group as
# soon as its pool's workers exist, i.e. while they still import (long before their initializer).
_DRIVER = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    from fairsets.pipeline.executors import LocalExecutor


    def main():
        got = []
        signal.signal(signal.SIGINT, lambda *_: got.append(1))
        ex = LocalExecutor(workers=2)

        def interrupt():
            while not (ex._pool is not None and getattr(ex._pool, "_processes", None)):
                time.sleep(0.001)
            os.killpg(os.getpgid(0), signal.SIGINT)

        threading.Thread(target=interrupt, daemon=True).start()
        with ex:
            specs = [{"task_id": str(i), "workdir": sys.argv[1]} for i in range(4)]
            print(len(ex.map(os.path.basename, specs)))


    if __name__ == "__main__":
        main()
    """
)

# The block is short (the workers' vforks) and the driver handles Ctrl-C again after it.
_AFTER = textwrap.dedent(
    """
    import os, signal, time
    from fairsets.pipeline.executors import sigint_ignored_by_children

    got = []
    handler = lambda *_: got.append(1)
    signal.signal(signal.SIGINT, handler)
    with sigint_ignored_by_children():
        inside = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(500):  # Python runs the handler at its next check
        if got:
            break
        time.sleep(0.002)
    print(inside, signal.getsignal(signal.SIGINT) is handler, bool(got))
    """
)


@pytest.mark.timeout(60)
@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups (POSIX)")
def test_ctrl_c_while_workers_start_reaches_only_the_driver(tmp_path: Path) -> None:
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER)
    # basename of a dict fails (TypeError) in every task: a clean, fast task; what matters is
    # that the workers live through the Ctrl-C and report it, not a KeyboardInterrupt
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "work")],
        capture_output=True,
        text=True,
        timeout=50,
        start_new_session=True,  # its own process group: the SIGINT reaches no test runner
    )
    assert "KeyboardInterrupt" not in proc.stderr, proc.stderr
    assert "BrokenProcessPool" not in proc.stderr, proc.stderr
    assert "4 task(s) failed" in proc.stderr and "TypeError" in proc.stderr, proc.stderr


@pytest.mark.timeout(60)
@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="signal masks (POSIX)")
def test_the_driver_gets_ctrl_c_again_once_its_workers_started(tmp_path: Path) -> None:
    script = tmp_path / "after.py"
    script.write_text(_AFTER)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=50)
    assert proc.stdout.split() == ["True", "True", "True"], proc.stderr
