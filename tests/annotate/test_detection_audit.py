"""``annotate verify --boxes``: the paper's detection audit recovers planted false positives and misses."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner
from verify_data import write_folder

from fairsets.annotate import layout
from fairsets.annotate.boxes.detection_audit import audit_detection, iou_matrix, match_boxes, read_human_boxes
from fairsets.annotate.cli.verify import register

W, H = 800, 600
SIZES = {"small": (20.0, 30.0), "medium": (50.0, 80.0), "large": (120.0, 150.0)}  # 600, 4000, 18000 px²


def cell(c: int, size: str) -> tuple[float, float, float, float]:
    """A box in grid cell ``c`` (4 × 3 cells of 200 px): boxes in different cells never overlap."""
    x, y = 200.0 * (c % 4) + 10.0, 200.0 * (c // 4) + 10.0
    w, h = SIZES[size]
    return (x, y, x + w, y + h)


def plant(tmp_path: Path, seed: int = 0) -> tuple[Path, Path, dict]:
    """200 audited images: 165 correct (10 of them with no person and no box), 20 with a false
    positive (5 with no person), 15 with a missed person; plus one image not in the folder and one
    the detector could not decode. Returns the folder, the CSV and the planted outcome of every box."""
    rng = np.random.default_rng(seed)
    kinds = ["correct"] * 155 + ["empty"] * 10 + ["fp"] * 15 + ["fp_empty"] * 5 + ["missed"] * 15
    rng.shuffle(kinds)
    images, boxes, csv_rows = [], [], []
    events: list[tuple[str, str, float]] = []  # (who: human|pred, outcome, area)
    for i, kind in enumerate(kinds):
        shard, key = f"{i % 2:05d}", f"{i:08d}"
        images.append({"shard": shard, "key": key, "w": W, "h": H})
        n_h = 0 if kind in ("empty", "fp_empty") else int(rng.integers(1, 4))
        cells = rng.permutation(12)
        box_id = 0
        miss = int(rng.integers(0, n_h)) if kind == "missed" else -1
        for j in range(n_h):
            size = str(rng.choice(list(SIZES)))
            hb = cell(int(cells[j]), size)
            csv_rows.append({"shard": shard, "key": key, "x1": hb[0], "y1": hb[1], "x2": hb[2], "y2": hb[3]})
            area = (hb[2] - hb[0]) * (hb[3] - hb[1])
            if j == miss:
                events.append(("human", "missed", area))
                continue
            events += [("human", "correct", area), ("pred", "matched", area)]
            shifted = (hb[0] + 2, hb[1] + 1, hb[2] + 2, hb[3] + 1)  # IoU > 0.7 at every size
            boxes.append({"shard": shard, "key": key, "box_id": box_id, "box": shifted})
            box_id += 1
        if kind in ("fp", "fp_empty"):
            size = str(rng.choice(list(SIZES)))
            fb = cell(int(cells[11]), size)
            boxes.append({"shard": shard, "key": key, "box_id": box_id, "box": fb})
            events.append(("pred", "false_positive", (fb[2] - fb[0]) * (fb[3] - fb[1])))
            box_id += 1
        if kind == "correct" and i % 7 == 0:  # a box dropped by the size filter: not a prediction by default
            boxes.append(
                {
                    "shard": shard,
                    "key": key,
                    "box_id": box_id,
                    "box": cell(int(cells[10]), "small"),
                    "kept": False,
                }
            )
        if n_h == 0:
            csv_rows.append({"shard": shard, "key": key, "x1": "", "y1": "", "x2": "", "y2": ""})
    images.append({"shard": "00000", "key": "broken", "w": W, "h": H, "status": "rejected"})
    csv_rows.append({"shard": "00000", "key": "broken", "x1": 1, "y1": 1, "x2": 60, "y2": 90})
    csv_rows.append({"shard": "00000", "key": "elsewhere", "x1": 1, "y1": 1, "x2": 60, "y2": 90})
    ann = write_folder(tmp_path / "ann", images, boxes)
    path = tmp_path / "boxes.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["shard", "key", "x1", "y1", "x2", "y2"])
        w.writeheader()
        w.writerows(csv_rows)
    return ann, path, {"kinds": kinds, "events": events}


def coco(area: float) -> str:
    return "small" if area < 32**2 else "medium" if area < 96**2 else "large"


def test_the_audit_recovers_planted_false_positives_and_misses(tmp_path: Path) -> None:
    ann, path, planted = plant(tmp_path)
    rep = audit_detection(ann, path, out_dir=tmp_path / "out")
    assert rep == json.loads((tmp_path / "out" / "verify_boxes.json").read_text())
    assert rep["images"] == {"in_file": 202, "audited": 200, "not_found": 1, "not_ok": 1}
    img = rep["per_image"]
    # the paper's 82.5 % / 10 % / 7.5 %, planted
    assert img["correct"] == {"images": 165, "share": 0.825}
    assert img["false_positive"] == {"images": 20, "share": 0.10}
    assert img["missed"] == {"images": 15, "share": 0.075}
    assert img["both"] == {"images": 0, "share": 0.0}
    assert sum(img[c]["share"] for c in ("correct", "false_positive", "missed", "both")) == pytest.approx(1.0)
    ev = planted["events"]
    human = [e for e in ev if e[0] == "human"]
    pred = [e for e in ev if e[0] == "pred"]
    n_missed = sum(1 for e in human if e[1] == "missed")
    n_fp = sum(1 for e in pred if e[1] == "false_positive")
    assert n_missed == 15 and n_fp == 20
    box = rep["per_box"]
    assert (box["human_boxes"], box["predicted_boxes"], box["missed"], box["false_positive"]) == (
        len(human),
        len(pred),
        15,
        20,
    )
    assert box["missed_rate"] == pytest.approx(15 / len(human))
    assert box["false_positive_rate"] == pytest.approx(20 / len(pred))
    assert box["correct_rate"] == pytest.approx(1 - 15 / len(human))
    for size in ("small", "medium", "large"):
        h = [e for e in human if coco(e[2]) == size]
        p = [e for e in pred if coco(e[2]) == size]
        got = rep["by_size"][size]
        assert got["human_boxes"] == len(h) and got["predicted_boxes"] == len(p)
        assert got["missed"] == sum(1 for e in h if e[1] == "missed")
        assert got["false_positive"] == sum(1 for e in p if e[1] == "false_positive")
    frac = rep["alternative"]["by_area_fraction"]
    assert frac["under 1%"]["human_boxes"] == sum(1 for e in human if e[2] / (W * H) < 0.01)
    assert frac["1-10%"]["false_positive"] == sum(
        1 for e in pred if e[1] == "false_positive" and 0.01 <= e[2] / (W * H) < 0.1
    )
    assert {"matching", "per_image", "by_size", "per_box.false_positive_rate"} <= set(rep["definitions"])
    # every detected box, the ones the size filter dropped too: those become false positives
    dropped = sum(1 for i, k in enumerate(planted["kinds"]) if k == "correct" and i % 7 == 0)
    alt = audit_detection(ann, path, out_dir=tmp_path / "all", all_detections=True)
    assert alt["per_box"]["false_positive"] == 20 + dropped
    assert alt["per_image"]["false_positive"]["images"] == 20 + dropped


def test_matching_is_one_to_one_greedy_by_iou_at_the_threshold() -> None:
    human = np.array([[0, 0, 100, 100], [300, 300, 400, 400]], dtype=float)
    pred = np.array([[10, 0, 110, 100], [0, 0, 100, 100], [300, 345, 400, 445]], dtype=float)
    m = iou_matrix(human, pred)
    assert m[0, 0] == pytest.approx(90 * 100 / (2 * 10000 - 9000))
    assert m[1, 2] == pytest.approx(55 * 100 / (2 * 10000 - 5500))  # 0.379: below 0.5
    # the exact box wins the human box; the shifted one is left over (a false positive)
    assert match_boxes(human, pred, 0.5) == [(0, 1, 1.0)]
    assert [(i, j) for i, j, _ in match_boxes(human, pred, 0.3)] == [(0, 1), (1, 2)]


def test_bad_box_files_are_one_line_errors(tmp_path: Path) -> None:
    bad = {
        "shard,key,x1,y1,x2\n0,k,1,1,2\n": "no column y2",
        "shard,key,x1,y1,x2,y2\n0,k,1,1,,5\n": "line 2: some coordinates are blank",
        "shard,key,x1,y1,x2,y2\n0,k,1,1,a,5\n": "line 2: coordinates 1, 1, a, 5 are not all numbers",
        "shard,key,x1,y1,x2,y2\n0,k,5,1,2,5\n": "line 2: box .* is empty or inverted",
        "shard,key,x1,y1,x2,y2\n": "no rows",
    }
    for i, (text, message) in enumerate(bad.items()):
        (tmp_path / f"b{i}.csv").write_text(text)
        with pytest.raises(layout.AnnotationError, match=message) as err:
            read_human_boxes(tmp_path / f"b{i}.csv")
        assert "\n" not in str(err.value)
    (tmp_path / "ok.csv").write_text(
        "shard,key,x1,y1,x2,y2,note\n0,a,,,,,nobody\n0,b,1,2,3,4,\n0,b,5,6,7,8,x\n"
    )
    assert read_human_boxes(tmp_path / "ok.csv")["images"] == {
        ("0", "a"): [],
        ("0", "b"): [(1.0, 2.0, 3.0, 4.0), (5.0, 6.0, 7.0, 8.0)],
    }


def test_cli_boxes(tmp_path: Path) -> None:
    ann, path, _ = plant(tmp_path, seed=1)
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)
    runner = CliRunner(env={"COLUMNS": "200"})
    res = runner.invoke(app, ["verify", str(ann), "--boxes", str(path), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "82.5 %" in res.output and "200 images" in res.output
    assert (tmp_path / "o" / "verify_boxes.json").is_file()
    (tmp_path / "bad.csv").write_text("shard,key,x1\n")
    res = runner.invoke(
        app, ["verify", str(ann), "--boxes", str(tmp_path / "bad.csv"), "--out", str(tmp_path / "p")]
    )
    assert res.exit_code == 2 and "no column y1, x2, y2" in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1
