"""LABELS rows that cannot be used get reasons; whole-run problems are one-line CLI errors (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from train_data import png, write_labels

from cli_helpers import assert_one_line_error, run_cli
from fairsets.annotate import layout
from fairsets.annotate.heads.embed import CropSource, iter_crops
from fairsets.annotate.heads.labels import LabelsError, read_labels
from fairsets.annotate.heads.store import load_head
from fairsets.annotate.images import decode
from fairsets.annotate.shards import resolve_shards


def _shard(root: Path, shard_writer: Any, n: int = 8) -> Path:
    rng = np.random.default_rng(5)
    samples = []
    for i in range(n):
        colour = np.array([200, 30, 30] if i % 2 else [30, 30, 200], np.uint8)
        img = np.clip(colour + rng.integers(-20, 20, (48, 64, 3)), 0, 255).astype(np.uint8)
        samples.append((f"k{i:02d}", {"png": png(img), "txt": "caption"}))
    samples.append(("broken", {"png": b"\x89PNG\r\n\x1a\n not really", "txt": "x"}))
    return shard_writer(root / "s.tar", samples)


def _good_rows(n: int = 8) -> list[dict[str, Any]]:
    return [{"shard": "s", "key": f"k{i:02d}", "label": "red" if i % 2 else "blue"} for i in range(n)]


BAD = [
    ({"shard": "nope", "key": "k00", "label": "red"}, "unknown shard"),
    ({"shard": "s", "key": "missing", "label": "red"}, "unknown key"),
    ({"shard": "s", "key": "broken", "label": "red"}, "undecodable image"),
    (
        {"shard": "s", "key": "k01", "box_id": 1, "label": "red", "x1": 500, "y1": 0, "x2": 600, "y2": 10},
        "box outside image",
    ),
    ({"shard": "s", "key": "k01", "box_id": 2, "label": "red"}, "unknown box"),
]
BAD_IN_FILE = [
    ({"shard": "s", "key": "k02", "box_id": 3, "label": ""}, "empty label"),
    ({"shard": "s", "key": "k02", "box_id": "x", "label": "red"}, "box_id"),
    ({"shard": "s", "key": "k02", "box_id": 4, "label": "red", "x1": 1, "y1": 1}, "box"),
    ({"shard": "s", "key": "k02", "box_id": 5, "label": "green"}, "label not in classes"),
]


def test_bad_rows_are_counted_with_reasons(
    tmp_path: Path, shard_writer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _shard(tmp_path, shard_writer)
    rows = _good_rows() + [r for r, _ in BAD + BAD_IN_FILE]
    rows += [{"shard": "s", "key": "k03", "label": "unclear"}, {"shard": "s", "key": "k04", "label": "blue"}]
    labels = write_labels(tmp_path / "labels.csv", rows, extra=["votes"])
    read = read_labels(labels, classes=["blue", "red"], drop=["unclear"])
    assert [r["reason"].split(":")[0] for r in read.rejected] == [why for _, why in BAD_IN_FILE]
    assert read.dropped == {"unclear": 1} and read.duplicates == 1 and len(read.rows) == 8 + len(BAD)

    out = tmp_path / "h" / "head.npz"
    code, _, err = run_cli(
        ["annotate", "train", labels, "--encoder", "torchvision:mobilenet_v3_small", "--pretrained", "none",
         "--shards", tmp_path / "s.tar", "--out", out, "--classes", "blue,red", "--drop-labels", "unclear"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    for _, why in BAD + BAD_IN_FILE:
        assert why in err
    head = load_head(out)
    assert head.training["rejected"] == len(BAD) + len(BAD_IN_FILE)
    assert head.training["rejected_reasons"]["unknown shard"] == 1
    assert head.training["parts"] == {"train": 4, "val": 2, "test": 2}
    assert sum(head.training["parts"].values()) == 8


def test_labels_file_problems_are_one_line(
    tmp_path: Path, shard_writer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _shard(tmp_path, shard_writer)
    base = ["annotate", "train", "--encoder", "torchvision:mobilenet_v3_small", "--pretrained", "none"]
    where = ["--shards", str(tmp_path / "s.tar"), "--out", str(tmp_path / "head.npz")]
    conflict = write_labels(
        tmp_path / "c.csv", [*_good_rows(), {"shard": "s", "key": "k01", "label": "blue"}]
    )
    assert_one_line_error(
        *run_cli([*base, conflict, *where], capsys)[::2], "k01", "'red' (row 2) and 'blue' (row 9)"
    )
    (tmp_path / "cols.csv").write_text("shard,key,label\ns,k00,red\n")
    assert_one_line_error(*run_cli([*base, tmp_path / "cols.csv", *where], capsys)[::2], "missing box_id")
    good = write_labels(tmp_path / "good.csv", _good_rows())
    assert_one_line_error(
        *run_cli([*base, tmp_path / "none.csv", *where], capsys)[::2], "no such LABELS file"
    )
    assert_one_line_error(
        *run_cli([*base, good, "--out", tmp_path / "h.npz"], capsys)[::2], "--ann", "--shards"
    )
    assert_one_line_error(*run_cli([*base, good, *where, "--split", "0.5,0.5"], capsys)[::2], "three")
    assert_one_line_error(*run_cli([*base, good, *where, "--split", "1,0,0"], capsys)[::2], "test")
    assert_one_line_error(
        *run_cli([*base, good, *where[:2], "--out", tmp_path / "h.pt"], capsys)[::2], ".npz"
    )
    assert_one_line_error(
        *run_cli([*base, good, *where, "--classes", "red,red"], capsys)[::2], "two distinct"
    )
    import torch

    if not torch.cuda.is_available():
        assert_one_line_error(*run_cli([*base, good, *where, "--device", "cuda"], capsys)[::2], "CUDA")
    unknown = [*base[:2], "--encoder", "torchvision:nope", "--pretrained", "none", good, *where]
    assert_one_line_error(*run_cli(unknown, capsys)[::2], "unknown torchvision model")
    one = write_labels(tmp_path / "one.csv", [r for r in _good_rows() if r["label"] == "red"])
    assert_one_line_error(*run_cli([*base, one, *where], capsys)[::2], "two classes")
    (tmp_path / "bad.jsonl").write_text('{"shard": "s", "key": "k00", "box_id": null, "label": "red"}\n[1]\n')
    assert_one_line_error(*run_cli([*base, tmp_path / "bad.jsonl", *where], capsys)[::2], "line 2")
    with pytest.raises(LabelsError, match="unknown LABELS format"):
        read_labels(tmp_path / "s.tar")


def test_parquet_jsonl_and_tsv_labels_read_like_csv(tmp_path: Path) -> None:
    rows = [
        *_good_rows(2),
        {"shard": "s", "key": "k05", "box_id": 1, "label": "red", "x1": 1, "y1": 2, "x2": 3, "y2": 4},
    ]
    csv_rows = read_labels(write_labels(tmp_path / "l.csv", rows)).rows
    full = [
        {"box_id": None, "x1": None, "y1": None, "x2": None, "y2": None, **r, "agreement": 1.0} for r in rows
    ]
    pq.write_table(pa.Table.from_pylist(full), tmp_path / "l.parquet")
    (tmp_path / "l.jsonl").write_text("".join(json.dumps(r) + "\n" for r in full))
    (tmp_path / "l.tsv").write_text((tmp_path / "l.csv").read_text().replace(",", "\t"))
    for name in ("l.parquet", "l.jsonl", "l.tsv"):
        got = read_labels(tmp_path / name).rows
        assert [(r.item, r.label, r.box) for r in got] == [(r.item, r.label, r.box) for r in csv_rows]
    assert csv_rows[2].box == (1.0, 2.0, 3.0, 4.0) and csv_rows[0].box_id is None


def test_ann_boxes_are_looked_up_by_box_id(tmp_path: Path, shard_writer: Any) -> None:
    shard = _shard(tmp_path, shard_writer)
    ref = resolve_shards(str(shard))[0]
    ann = tmp_path / "ann"
    layout.write_manifest(ann, {"inputs": [ref.to_json()]})
    boxes = [
        {"shard": "s", "key": "k00", "box_id": 0, "x1": 2.5, "y1": 3.0, "x2": 20.2, "y2": 30.0,
         "conf": 0.9, "class_name": "person", "width": 17.7, "height": 27.0, "area_frac": 0.1,
         "image_w": 64, "image_h": 48, "kept": True, "drop_reason": None},
    ]  # fmt: skip
    path = layout.boxes_path(ann, "s")
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(boxes, schema=layout.BOX_SCHEMA), path)
    labels = write_labels(
        tmp_path / "l.csv",
        [
            {"shard": "s", "key": "k00", "box_id": 0, "label": "blue"},
            {"shard": "s", "key": "k00", "box_id": 1, "label": "blue"},
            {"shard": "s", "key": "k00", "box_id": 2, "label": "blue", "x1": 0, "y1": 0, "x2": 4, "y2": 4},
        ],
    )
    source = CropSource({ref.name: ref}, ann=ann)
    got = {row.item: (crop, why) for row, crop, why in iter_crops(read_labels(labels).rows, source)}
    image = decode(_read(shard)["k00"])
    np.testing.assert_array_equal(got["s/k00/0"][0], image[3:30, 2:21])
    assert got["s/k00/1"][0] is None and "box 1 of 'k00' is not in boxes/s.parquet" in got["s/k00/1"][1]
    np.testing.assert_array_equal(got["s/k00/2"][0], image[0:4, 0:4])


def _read(shard: Path) -> dict[str, bytes]:
    import tarfile

    with tarfile.open(shard) as tf:
        return {m.name.split(".")[0]: tf.extractfile(m).read() for m in tf if m.name.endswith(".png")}  # type: ignore[union-attr]


def test_training_from_an_annotation_folder_caches_in_it(
    tmp_path: Path, shard_writer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    shard = _shard(tmp_path, shard_writer)
    ann = tmp_path / "ann"
    layout.write_manifest(ann, {"inputs": [resolve_shards(str(shard))[0].to_json()]})
    empty = {"conf": 0.9, "class_name": "person", "width": 1.0, "height": 1.0, "area_frac": 0.1}
    boxes = [
        {"shard": "s", "key": f"k{i:02d}", "box_id": b, "x1": 4.0 * b, "y1": 2.0, "x2": 30.0 + 4 * b,
         "y2": 40.0, **empty, "image_w": 64, "image_h": 48, "kept": True, "drop_reason": None}
        for i in range(8) for b in range(2)
    ]  # fmt: skip
    layout.boxes_path(ann, "s").parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(boxes, schema=layout.BOX_SCHEMA), layout.boxes_path(ann, "s"))
    labels = write_labels(tmp_path / "l.csv", [{**r, "box_id": b} for r in _good_rows() for b in range(2)])
    args = ["annotate", "train", labels, "--encoder", "torchvision:mobilenet_v3_small",
            "--pretrained", "none", "--ann", ann, "--out", tmp_path / "head.npz"]  # fmt: skip
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    assert "embedded now 16" in err
    assert (
        len(list((ann / ".fairsets" / "embeddings").glob("torchvision-mobilenet_v3_small-none-*/images/*")))
        == 1
    )
    head = load_head(tmp_path / "head.npz")
    assert head.training["parts"] == {"train": 8, "val": 4, "test": 4}  # two boxes per image, never split
    first = (tmp_path / "head.npz").read_bytes()
    code, _, err = run_cli(args, capsys)
    assert code == 0 and "embedded now 0" in err, err
    assert (tmp_path / "head.npz").read_bytes() == first  # same inputs, same head bytes


def test_why_no_class_is_usable_and_finetune_family_are_said_first(
    tmp_path: Path, shard_writer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Box ids without coordinates under --shards: the error says why no crop was usable; --finetune
    of a family that cannot be fine-tuned is refused before the encoder loads (offline: no hub error)."""
    _shard(tmp_path, shard_writer)
    rows = [{**r, "box_id": 0} for r in _good_rows()]
    labels = write_labels(tmp_path / "boxes.csv", rows)
    where = ["--shards", str(tmp_path / "s.tar"), "--out", str(tmp_path / "head.npz")]
    base = ["annotate", "train", "--encoder", "torchvision:mobilenet_v3_small", "--pretrained", "none"]
    assert_one_line_error(
        *run_cli([*base, labels, *where], capsys)[::2], "two classes", "8 labelled rows left out", "x1, y1"
    )
    good = write_labels(tmp_path / "good.csv", _good_rows())
    hf = ["annotate", "train", "--encoder", "hf:org/not-downloaded", good, *where, "--finetune"]
    assert_one_line_error(*run_cli(hf, capsys)[::2], "--finetune supports", "without --finetune")
