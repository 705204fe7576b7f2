"""The annotate commands in a row, offline: ``persons`` (a real YOLO) → ``classify`` → ``verify``,
then the boxes read back with their labels."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from sklearn.metrics import cohen_kappa_score
from test_classify import make_head

from cli_helpers import run_cli
from fairsets.annotate import layout, read


@pytest.mark.slow
def test_persons_then_classify_then_verify(
    tmp_path: Path,
    shard_writer: Any,
    yolo_assets: Path,
    fall_weights: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    images = [("bus", yolo_assets / "bus.jpg"), ("zidane", yolo_assets / "zidane.jpg")]
    shard = shard_writer(
        tmp_path / "shards" / "00000.tar", [(k, {"jpg": p.read_bytes(), "txt": k}) for k, p in images]
    )
    ann = tmp_path / "ann"
    persons = ["annotate", "persons", shard, "--out", ann, "--model", fall_weights]
    code, _, err = run_cli([*persons, "--person-classes", "Normal,Fall", "--workers", "0", "-q"], capsys)
    assert code == 0, err
    head = make_head(tmp_path / "head.npz", classes=["female", "male"])
    code, out, err = run_cli(
        ["annotate", "classify", ann, "--head", tmp_path / "head.npz", "--workers", "0"], capsys
    )
    assert code == 0, err
    boxes = pq.read_table(layout.boxes_path(ann, "00000")).to_pylist()
    kept = [b for b in boxes if b["kept"]]
    labels = pq.read_table(layout.attribute_path(ann, "gender", "00000")).to_pylist()
    assert [(r["key"], r["box_id"]) for r in labels] == [(b["key"], b["box_id"]) for b in kept]
    assert len(kept) >= 5 and all(r["perceived_gender"] in ("female", "male") for r in labels)
    assert f"{len(kept)} boxes labelled" in out + err
    manifest = layout.read_manifest(ann)
    assert manifest["attributes"]["gender"]["head_sha256"] == head.sha256
    assert manifest["detector"]  # what persons wrote is kept
    # two humans: one agrees with the classifier except on one box, the other leaves a box out
    rows = []
    for i, r in enumerate(labels):
        other = "male" if r["perceived_gender"] == "female" else "female"
        rows.append(
            {
                "shard": "00000",
                "key": r["key"],
                "box_id": r["box_id"],
                "a": other if i == 0 else r["perceived_gender"],
                "b": "unclear" if i == 1 else r["perceived_gender"],
            }
        )
    with open(tmp_path / "labels.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    verify = ["annotate", "verify", ann, "--human", tmp_path / "labels.csv", "--attribute", "gender"]
    code, out, err = run_cli(
        [*verify, "--drop-labels", "unclear", "--out", tmp_path / "v", "--no-plot"], capsys
    )
    assert code == 0, err
    rep = json.loads((tmp_path / "v" / "verify_gender.json").read_text())
    a = rep["human_vs_classifier"]["a"]
    assert a["n"] == len(labels) and a["accuracy"] == pytest.approx((len(labels) - 1) / len(labels))
    hum = [r["a"] for r in rows]
    clf = [r["perceived_gender"] for r in labels]
    if len(set(hum) | set(clf)) > 1:
        assert a["kappa"] == pytest.approx(cohen_kappa_score(hum, clf), abs=1e-12)
    assert rep["human_vs_human"]["n"] == len(labels) - 1
    assert rep["rows"]["per_column"]["b"]["dropped"] == 1
    headline = layout.read_manifest(ann)["attributes"]["gender"]["verification"]
    assert headline["human_vs_classifier"]["a"]["accuracy"] == a["accuracy"]
    # the reader: every box, the labels on the kept ones
    rel = read.boxes(ann)
    got = {(r[1], r[2]): r[rel.columns.index("perceived_gender")] for r in rel.fetchall()}
    assert got == {(b["key"], b["box_id"]): None for b in boxes if not b["kept"]} | {
        (r["key"], r["box_id"]): r["perceived_gender"] for r in labels
    }
    images = read.images(ann)
    status = images.columns.index("status")
    assert [(r[0], r[1], r[status]) for r in images.fetchall()] == [
        ("00000", "bus", "ok"),
        ("00000", "zidane", "ok"),
    ]
