"""``fairsets publish`` on what ``fairsets annotate persons`` and ``annotate classify`` really wrote
(offline YOLO test weights; a head over a small torchvision encoder with seeded random weights)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from test_classify import CLASSES, make_head

from cli_helpers import run_cli
from fairsets.annotate import layout, read
from fairsets.annotate.publish.dataset import prepared_dir, verify_prepared


@pytest.mark.slow
def test_publishing_a_real_persons_run(
    tmp_path: Path,
    shard_writer: Any,
    yolo_assets: Path,
    fall_weights: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shard = shard_writer(
        tmp_path / "shards" / "00000.tar",
        [
            ("bus", {"jpg": (yolo_assets / "bus.jpg").read_bytes(), "txt": "people by a bus"}),
            ("zidane", {"jpg": (yolo_assets / "zidane.jpg").read_bytes(), "txt": "two men"}),
        ],
    )
    ann = tmp_path / "ann"
    args = ["annotate", "persons", shard, "--out", ann, "--model", fall_weights]
    code, _, err = run_cli([*args, "--person-classes", "Normal,Fall", "--workers", "0"], capsys)
    assert code == 0, err

    head = tmp_path / "gender.npz"
    make_head(head)  # a gender head over a small torchvision encoder with seeded random weights
    code, _, err = run_cli(["annotate", "classify", ann, "--head", head, "--workers", "0", "-q"], capsys)
    assert code == 0, err

    code, out, err = run_cli(["publish", ann, "--repo-id", "org/real-persons", "--dry-run"], capsys)
    assert code == 0, err
    plan = [ln.split()[0] for ln in out.strip().splitlines()[2:-1]]
    assert plan == [
        "README.md",
        "croissant.json",
        "data/boxes/00000.parquet",
        "data/images/00000.parquet",
        "manifest.json",
    ]
    folder = prepared_dir(ann)
    assert verify_prepared(folder) == []
    published = pq.read_table(folder / "data/boxes/00000.parquet")
    # the same rows as the annotate package's own reader of boxes joined with their labels
    assert published.to_pylist() == read.boxes(ann).arrow().read_all().to_pylist()
    assert [c for c in published.column_names if "gender" in c] == [
        "perceived_gender",
        *(f"p_gender_{c}" for c in CLASSES),
        "gender_reason",
    ]
    assert all(g in CLASSES for g in published.column("perceived_gender").to_pylist())
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["inputs"] == [{"file": "00000.tar", "kind": "tar", "name": "00000"}]
    assert manifest["counts"]["boxes"]["kept"] == 6 and manifest["counts"]["images"]["ok"] == 2
    assert manifest["detector"]["weights_sha256"] == layout.read_manifest(ann)["detector"]["weights_sha256"]
    card = (folder / "README.md").read_text()
    assert "Person boxes: 6 detected, 6 kept" in card and "perceived `gender`" in card
    assert manifest["attributes"]["gender"]["head_sha256"] == hashlib.sha256(head.read_bytes()).hexdigest()
    assert sum(manifest["counts"]["attributes"]["gender"]["classes"].values()) == 6
    for p in folder.rglob("*"):
        if p.is_file() and not p.name.startswith("."):
            assert str(tmp_path).encode() not in p.read_bytes(), p
