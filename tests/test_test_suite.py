"""The suite itself: spread over pytest-xdist workers with the longest modules first, and a
session build shared by the workers (built once under a lock, each worker with its own copy)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from xdist_order import UNKNOWN, UNKNOWN_SLOW, module_order

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def _item(nodeid: str, slow: bool = False) -> SimpleNamespace:
    return SimpleNamespace(
        nodeid=nodeid, get_closest_marker=lambda name: object() if slow and name == "slow" else None
    )


def test_modules_go_out_longest_first_by_the_recorded_seconds() -> None:
    items = [
        _item("a.py::x"),
        _item("a.py::y"),
        _item("b.py::x"),
        _item("c.py::x"),
        _item("d.py::x", slow=True),
    ]
    recorded = {"a.py::x": 3.0, "a.py::y": 4.0, "b.py::x": 12.0, "c.py::x": 0.1}
    assert module_order(items, recorded) == ["d.py", "b.py", "a.py", "c.py"]  # d: not recorded, slow
    assert module_order(items, {}) == ["d.py", "a.py", "b.py", "c.py"]  # ties keep the files' order
    assert UNKNOWN_SLOW > 10 * UNKNOWN
    # only the tests collected now count: a module filtered down to a short test is short
    assert module_order([_item("a.py::x"), _item("b.py::y")], recorded) == ["a.py", "b.py"]


def test_the_readme_command_runs_the_suite_on_every_core() -> None:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    addopts = options["addopts"].split()
    assert addopts[addopts.index("-n") + 1] == "auto" and "--no-loadscope-reorder" in addopts
    assert addopts[addopts.index("--dist") + 1] == "loadfile"  # module fixtures stay on one worker
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    assert any(d.startswith("pytest-xdist") for d in dev)


_BUILDERS = """
import json
import os
import sys
import time

import pytest

sys.path.insert(0, {tests!r})
from helpers import built_once


def _make(folder):
    (folder / "built-by").write_text(str(os.getpid()))
    with open({log!r}, "a") as fh:
        fh.write("built\\n")


@pytest.fixture(scope="session")
def thing(tmp_path_factory):
    return built_once(tmp_path_factory, "thing", _make)


@pytest.mark.parametrize("n", range(8))
def test_a(thing, n):
    assert (thing / "built-by").is_file()
    (thing / "scribble").write_text("mine")  # a copy of its own: nobody else sees this
    time.sleep(0.2)
"""


@pytest.mark.timeout(120)
def test_a_session_build_is_made_once_for_all_workers(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    log = tmp_path / "log"
    inner = _BUILDERS.format(tests=str(ROOT / "tests"), log=str(log))
    (tmp_path / "test_b.py").write_text(textwrap.dedent(inner))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    path = os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "load",
         "--basetemp", str(tmp_path / "base"), "test_b.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=100, check=False,
        env={**os.environ, "PYTHONPATH": path},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert log.read_text() == "built\n"
    copies = sorted((tmp_path / "base").glob("popen-gw*/thing[0-9]*"))
    assert len(copies) == 2 and all((c / "built-by").is_file() for c in copies)
    assert len({(c / "built-by").read_text() for c in copies}) == 1  # both copies of one build
    assert not (tmp_path / "base" / "built-thing" / "scribble").exists()


@pytest.mark.timeout(120)
def test_a_run_records_each_tests_seconds_for_the_next_order(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    (tmp_path / "conftest.py").write_text('pytest_plugins = ("xdist_order",)\n')
    (tmp_path / "test_quick.py").write_text("def test_quick():\n    pass\n")
    (tmp_path / "test_long.py").write_text("import time\n\n\ndef test_long():\n    time.sleep(0.5)\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    path = os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile", "--no-loadscope-reorder"],
        cwd=tmp_path, capture_output=True, text=True, timeout=100, check=False,
        env={**os.environ, "PYTHONPATH": path},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recorded = json.loads((tmp_path / ".pytest_cache" / "v" / "fairsets" / "test-seconds").read_text())
    assert set(recorded) == {"test_quick.py::test_quick", "test_long.py::test_long"}
    assert recorded["test_long.py::test_long"] >= 0.5 > recorded["test_quick.py::test_quick"]
    items = [_item("test_quick.py::test_quick"), _item("test_long.py::test_long")]
    assert module_order(items, recorded) == ["test_long.py", "test_quick.py"]
