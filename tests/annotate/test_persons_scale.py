"""``annotate persons`` over a few hundred generated scenes: Ray equals the local pool byte for byte, and
a run killed with SIGKILL at several points resumes to the same bytes, no box lost or duplicated.

Scenes: people cut from ultralytics' bundled images pasted at seeded positions and scales on
seeded backgrounds (:func:`bench_annotate.person_scenes`, shared with the benchmark), so there are
boxes of every size, kept and not. Detection at a small inference size keeps the runs short.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from fairsets.annotate import layout
from fairsets.annotate.boxes.persons import annotate_persons
from helpers import tree_digest

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_annotate.py"
SHARDS, PER_SHARD, SIZE, IMGSZ = 8, 30, (224, 160), 224


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_annotate", BENCH)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _options(fall_weights: Path) -> dict[str, Any]:
    return {"model": str(fall_weights), "person_classes": ["Normal", "Fall"], "imgsz": IMGSZ, "batch": 8}


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory, fall_weights: Path) -> tuple[list[str], Path]:
    root = tmp_path_factory.mktemp("scenes")
    shards = _bench().write_scene_shards(root / "shards", SHARDS * PER_SHARD, SHARDS, seed=7, size=SIZE)
    reference = root / "reference"
    annotate_persons([str(p) for p in shards], reference, workers=2, **_options(fall_weights))
    return [str(p) for p in shards], reference


def test_the_scenes_have_people_of_every_size(scenes: tuple[list[str], Path]) -> None:
    _, reference = scenes
    counts = layout.read_manifest(reference)["counts"]
    assert counts["images"] == counts["ok"] == SHARDS * PER_SHARD
    assert counts["boxes"] > SHARDS * PER_SHARD and 0 < counts["kept"] < counts["boxes"], counts


@pytest.mark.ray
@pytest.mark.timeout(600)
def test_ray_equals_the_local_pool_byte_for_byte(
    scenes: tuple[list[str], Path], fall_weights: Path, tmp_path: Path
) -> None:
    pytest.importorskip("ray")
    shards, reference = scenes
    annotate_persons(shards, tmp_path / "ray", workers=2, executor="ray", **_options(fall_weights))
    assert tree_digest(tmp_path / "ray") == tree_digest(reference)


def _box_keys(ann: Path) -> list[tuple[str, str, int]]:
    rows = pq.read_table(
        sorted((ann / layout.BOXES_DIR).glob("*.parquet")), columns=["shard", "key", "box_id"]
    )
    return sorted(zip(*(rows.column(c).to_pylist() for c in ("shard", "key", "box_id")), strict=True))


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="kills a process group (Linux)")
@pytest.mark.timeout(900)
def test_sigkill_at_several_points_resumes_byte_identical(
    scenes: tuple[list[str], Path], fall_weights: Path, tmp_path: Path
) -> None:
    shards, reference = scenes
    want = tree_digest(reference)
    boxes = _box_keys(reference)
    assert len(set(boxes)) == len(boxes)

    def count(ann: Path, folder: str) -> int:
        d = ann / folder
        return len([p for p in d.glob("*") if not p.name.startswith(".")]) if d.is_dir() else 0

    markers = f"{layout.WORKDIR}/markers/persons"
    points = [  # (what is killed, when); shards finished at other points: tests/pipeline/test_interrupts.py
        ("driver", lambda a: count(a, layout.BOXES_DIR) >= 1),  # mid-shard; workers die with it
        ("group", lambda a: count(a, markers) >= SHARDS - 1),  # the driver and its workers, near the end
    ]
    for n, (who, ready) in enumerate(points):
        ann = tmp_path / f"ann{n}"
        cmd = [sys.executable, "-m", "fairsets.cli", "annotate", "persons", *shards, "--out", str(ann)]
        cmd += ["--model", str(fall_weights), "--person-classes", "Normal,Fall", "--imgsz", str(IMGSZ)]
        cmd += ["--batch", "8", "--workers", "2", "--quiet"]
        proc = subprocess.Popen(
            cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline and not ready(ann):
            time.sleep(0.005)
        assert proc.poll() is None, f"finished before the kill point: {proc.stderr.read().decode()}"  # type: ignore[union-attr]
        if who == "driver":
            os.kill(proc.pid, signal.SIGKILL)
        else:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        assert not (ann / layout.MANIFEST).exists()
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        assert tree_digest(ann) == want, who
        assert _box_keys(ann) == boxes
        assert [p for p in ann.rglob("*") if ".tmp-" in p.name and layout.WORKDIR not in p.parts] == []
