"""``annotate persons`` and ``annotate classify`` through the GPU scheduling: on a Ray cluster that
declares two GPUs it does not have, each shard's task asks for one and its marker records the GPU
Ray gave it, while the detector and the head's encoder compute on the CPU (``--device cpu`` keeps
compute where it is; only the assignment is recorded). Every table is byte for byte the plain CPU
run's, and so is the manifest; the markers differ by ``placement`` alone. The command's own checks
are one line each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import assert_one_line_error, run_cli
from fairsets.annotate import layout
from fairsets.annotate.boxes.persons import annotate_persons


def _shards(shard_writer: Any, yolo_assets: Path, root: Path) -> list[str]:
    images = [("bus", "bus.jpg"), ("zidane", "zidane.jpg")]
    return [
        str(shard_writer(root / f"0000{i}.tar", [(key, {"jpg": (yolo_assets / f).read_bytes(), "txt": key})]))
        for i, (key, f) in enumerate(images)
    ]


def _files(ann: Path) -> dict[str, bytes]:
    return {
        p.relative_to(ann).as_posix(): p.read_bytes()
        for p in sorted(ann.rglob("*"))
        if p.is_file() and layout.WORKDIR not in p.relative_to(ann).parts
    }


def _markers(ann: Path, stage: str = "persons") -> dict[str, dict[str, Any]]:
    folder = layout.marker_path(ann, stage, "x").parent
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


@pytest.mark.ray
@pytest.mark.timeout(600)
def test_persons_on_fake_gpus_records_the_gpus_and_writes_the_cpu_bytes(
    shard_writer: Any, yolo_assets: Path, fall_weights: Path, tmp_path: Path
) -> None:
    ray = pytest.importorskip("ray")
    shards = _shards(shard_writer, yolo_assets, tmp_path / "shards")
    options = {"model": str(fall_weights), "person_classes": ["Normal", "Fall"], "imgsz": 320}
    annotate_persons(shards, tmp_path / "cpu", workers=1, **options)  # one thread, as Ray tasks
    if ray.is_initialized():
        ray.shutdown()
    from test_classify import make_head

    from fairsets.annotate.heads.classify import classify_boxes

    head = tmp_path / "head.npz"
    make_head(head)
    classify_boxes(tmp_path / "cpu", head, workers=1)
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
    try:
        annotate_persons(shards, tmp_path / "gpu", executor="ray", gpus_per_task=1, **options)
        classify_boxes(tmp_path / "gpu", head, executor="ray", gpus_per_task=0.5)
    finally:
        ray.shutdown()
    cpu, gpu = _files(tmp_path / "cpu"), _files(tmp_path / "gpu")
    assert cpu == gpu and "manifest.json" in cpu and len(cpu) == 7  # boxes, images, gender labels
    for stage in ("persons", "classify-gender"):
        plain, placed = _markers(tmp_path / "cpu", stage), _markers(tmp_path / "gpu", stage)
        assert set(plain) == set(placed) == {"00000", "00001"}
        for shard, marker in placed.items():
            placement = marker.pop("placement")
            assert placement["device"] == "cuda:0" and placement["gpu_ids"][0] in {"0", "1"}
            assert marker == plain[shard]
            assert "placement" not in plain[shard]


def test_device_options_are_one_line(
    shard_writer: Any,
    yolo_assets: Path,
    fall_weights: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import torch

    shard = _shards(shard_writer, yolo_assets, tmp_path / "shards")[0]
    base = ["annotate", "persons", shard, "--out", tmp_path / "a", "--model", fall_weights]
    base += ["--person-classes", "Normal"]
    code, _, err = run_cli([*base, "--devices", "0,x"], capsys)
    assert_one_line_error(code, err, "--devices 0,x", "'x' is not a GPU index", "e.g. 0,1")
    code, _, err = run_cli([*base, "--gpus-per-task", "1.5"], capsys)
    assert_one_line_error(code, err, "--gpus-per-task", "whole number")
    if not torch.cuda.is_available():
        code, _, err = run_cli([*base, "--devices", "0,1"], capsys)
        assert_one_line_error(code, err, "--device cuda:0", "CUDA is not available")
