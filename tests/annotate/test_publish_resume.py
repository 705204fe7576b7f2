"""Preparing an annotation folder killed with SIGKILL, then run again, ends with the same bytes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from publish_ann import make_ann

from fairsets.annotate import layout
from fairsets.annotate.publish.dataset import prepare, prepared_dir

SCRIPT = (
    "import sys; from fairsets.annotate.publish.dataset import prepare; "
    "prepare(sys.argv[1], repo_id='org/resume')"
)


def _published(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.relative_to(folder).as_posix().startswith(".")
    }


@pytest.mark.slow
def test_sigkill_while_preparing_then_rerun_gives_the_same_bytes(tmp_path: Path) -> None:
    source = tmp_path / "source"
    make_ann(source, n_images=15_000)
    reference = _published(prepare(source, repo_id="org/resume").folder)

    interrupted = 0
    for attempt in range(3):
        ann = tmp_path / f"ann{attempt}"
        shutil.copytree(source, ann, ignore=shutil.ignore_patterns("publish"))
        shutil.rmtree(ann / layout.WORKDIR / "markers" / "publish", ignore_errors=True)
        first_done = layout.marker_path(ann, "publish", "00000")
        proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(ann)], start_new_session=True)
        deadline = time.monotonic() + 120
        while not first_done.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(0.05 * attempt)  # kill at a few points of the second shard
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if not (prepared_dir(ann) / "manifest.json").exists():
            interrupted += 1
        again = prepare(ann, repo_id="org/resume")
        assert "00000" in again.reused
        assert _published(again.folder) == reference
    assert interrupted >= 1  # at least one kill landed before the end
