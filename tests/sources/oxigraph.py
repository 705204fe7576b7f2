"""A real Oxigraph SPARQL server on loopback for tests (the ``oxigraph`` CLI from PyPI).

    with oxigraph_server(Path("graph.ttl")) as endpoint:   # http://127.0.0.1:<port>/query
        ...

The server runs in memory (``oxigraph serve --bind 127.0.0.1:<port>``); the Turtle file is
POSTed to its graph store (``/store?default``) once it answers. The process is always
terminated (then killed) on exit. The test is skipped, with the reason, only when the
``oxigraph`` executable cannot be found.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["find_oxigraph", "oxigraph_server"]

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def find_oxigraph() -> str | None:
    """Path of the ``oxigraph`` executable: on PATH or next to the running Python (a venv)."""
    found = shutil.which("oxigraph")
    if found:
        return found
    beside = Path(sys.executable).parent / ("oxigraph.exe" if os.name == "nt" else "oxigraph")
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _wait_ready(proc: subprocess.Popen, base: str, deadline: float) -> bool:
    """True once ``ASK {}`` answers; False if the process exited (e.g. the port was taken)."""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with _NO_PROXY.open(f"{base}/query?query=ASK%7B%7D", timeout=2) as resp:
                if resp.status == 200:
                    return True
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.05)
    raise TimeoutError(f"oxigraph at {base} did not answer within the start-up time")


def _load(base: str, turtle: Path, data: bytes) -> None:
    req = urllib.request.Request(
        f"{base}/store?default", data=data, method="POST", headers={"Content-Type": "text/turtle"}
    )
    try:
        with _NO_PROXY.open(req, timeout=30):
            pass
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:500]
        raise RuntimeError(f"oxigraph refused {turtle}: HTTP {exc.code}: {detail}") from None


@contextlib.contextmanager
def oxigraph_server(turtle: Path, *, startup_timeout: float = 20.0) -> Iterator[str]:
    """Serve ``turtle`` with Oxigraph on 127.0.0.1 and yield the SPARQL query endpoint URL."""
    exe = find_oxigraph()
    if exe is None:
        pytest.skip("the `oxigraph` executable is not installed (pip install oxigraph)")
    data = Path(turtle).read_bytes()
    last_log = ""
    for _ in range(3):  # another process may grab the free port between bind and serve
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        with tempfile.TemporaryFile() as log:
            proc = subprocess.Popen(
                [exe, "serve", "--bind", f"127.0.0.1:{port}"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            try:
                if not _wait_ready(proc, base, time.monotonic() + startup_timeout):
                    log.seek(0)
                    last_log = log.read().decode("utf-8", "replace")[-500:]
                    continue
                _load(base, turtle, data)
                yield f"{base}/query"
                return
            finally:
                _stop(proc)
    raise RuntimeError(f"could not start oxigraph on a free loopback port (3 tries); it said: {last_log}")
