"""``annotate classify`` killed with SIGKILL at several points, then run again: the same bytes as an
uninterrupted run, no box lost or repeated; the local and Ray executors write the same bytes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from test_classify import make_ann, make_head

from fairsets.annotate import layout
from fairsets.annotate.heads.classify import classify_boxes, stage

SHARDS = 6


def _outputs(ann: Path) -> dict[str, bytes]:
    """What classify writes: the label tables, its markers, the manifest (no temporary files)."""
    files = [
        *(ann / layout.ATTRIBUTES_DIR).rglob("*"),
        *layout.marker_path(ann, stage("gender"), "x").parent.rglob("*"),
        ann / layout.MANIFEST,
    ]
    return {p.relative_to(ann).as_posix(): p.read_bytes() for p in files if p.is_file()}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory, shard_writer: Any) -> dict[str, Any]:
    """An annotation folder before classify, a head, and the outputs of one uninterrupted run."""
    root = tmp_path_factory.mktemp("resume")
    made = make_ann(root, shard_writer, shards=SHARDS, images=3)
    make_head(root / "head.npz")
    ref = root / "reference"
    shutil.copytree(made["ann"], ref)
    classify_boxes(ref, root / "head.npz", batch=4, workers=0)
    return {"root": root, "ann": made["ann"], "head": root / "head.npz", "reference": _outputs(ref)}


def _classify(ann: Path, head: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "fairsets", "annotate", "classify", str(ann), "--head", str(head)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([*cmd, "--workers", "0", "--batch", "4", "-q"], env=env, stderr=subprocess.PIPE)


def _markers(ann: Path) -> int:
    folder = layout.marker_path(ann, stage("gender"), "x").parent
    return len(list(folder.glob("*.json"))) if folder.is_dir() else 0


@pytest.mark.slow
def test_kill_9_at_several_points_then_rerun_gives_the_same_bytes(
    fresh: dict[str, Any], tmp_path: Path
) -> None:
    ann = tmp_path / "ann"
    shutil.copytree(fresh["ann"], ann)
    kills = 0
    # kill while starting (2 s in: imports, model load), then as soon as 1, 3 and 5 shards are done
    # (so within the next shard's work or its writes)
    for trigger in ("start", 1, 3, 5):
        proc = _classify(ann, fresh["head"])
        started = time.monotonic()
        while proc.poll() is None and time.monotonic() - started < 120:
            due = time.monotonic() - started > 2 if trigger == "start" else _markers(ann) >= trigger
            if due:
                proc.send_signal(signal.SIGKILL)
                kills += 1
                break
            time.sleep(0.01)
        proc.wait(timeout=60)
        proc.stderr.close()  # type: ignore[union-attr]
    assert kills >= 3, "the runs ended before they could be killed"
    final = _classify(ann, fresh["head"])
    _, err = final.communicate(timeout=300)
    assert final.returncode == 0, err.decode()
    assert _outputs(ann) == fresh["reference"]
    # every kept box exactly once
    for s in range(SHARDS):
        name = f"{s:05d}"
        boxes = pq.read_table(layout.boxes_path(ann, name)).to_pylist()
        labels = pq.read_table(layout.attribute_path(ann, "gender", name)).to_pylist()
        assert [(r["key"], r["box_id"]) for r in labels] == [
            (b["key"], b["box_id"]) for b in boxes if b["kept"]
        ]


@pytest.mark.slow
@pytest.mark.ray
def test_local_and_ray_write_the_same_bytes(fresh: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("ray")
    for executor in ("local", "ray"):
        ann = tmp_path / executor
        shutil.copytree(fresh["ann"], ann)
        res = classify_boxes(ann, fresh["head"], batch=4, workers=2, executor=executor)
        assert res["run"]["classified"] == SHARDS
        assert _outputs(ann) == fresh["reference"], executor
