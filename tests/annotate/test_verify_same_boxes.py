"""``annotate verify``: the human–human ceiling and human–classifier κ over the same boxes (issue 25,
finding 6), Krippendorff's α beside κ, and the confusion block ``audit persons --correct-with`` reads."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import typer
from sklearn.metrics import cohen_kappa_score
from test_agreement import hand_alpha
from typer.testing import CliRunner
from verify_data import CLASSES, write_folder

from fairsets.annotate.cli.verify import register
from fairsets.annotate.heads.verify import CONFUSION_FORMAT, verify_labels
from fairsets.audit.persons.correction import load_confusion


def planted(tmp_path: Path) -> tuple[Path, Path, list[dict], dict]:
    """120 labelled boxes the two humans mostly agree on, 80 rows on boxes the classifier never
    labelled (40 not in the folder, 20 not kept, 20 unlabelled) where they mostly disagree, and 15
    matched boxes only h1 answered (h2 blank)."""
    rng = np.random.default_rng(42)
    images, boxes, labels, rows = [], [], {}, []
    for i in range(155):
        key = f"{i:06d}"
        images.append({"shard": "00000", "key": key, "w": 640, "h": 480})
        kept = not 120 <= i < 140
        boxes.append(
            {"shard": "00000", "key": key, "box_id": 0, "box": (10.0, 10.0, 110.0, 210.0), "kept": kept}
        )
        truth = str(rng.choice(CLASSES[:2]))
        other = "male" if truth == "female" else "female"
        if kept:  # the classifier labelled every kept box
            labels[("00000", key, 0)] = truth if rng.random() < 0.85 else other
        if i < 120:  # matched, both humans (mostly agreeing)
            h1 = truth if rng.random() < 0.92 else other
            h2 = truth if rng.random() < 0.92 else other
        elif i < 140:  # not kept: the classifier never labelled it
            h1, h2 = truth, (truth if rng.random() < 0.4 else other)
        else:  # matched, only h1 answered
            h1, h2 = truth, ""
        rows.append({"shard": "00000", "key": key, "box_id": 0, "h1": h1, "h2": h2})
    for i in range(20):  # unlabelled boxes: kept, in the label table without a label
        key = f"u{i:05d}"
        images.append({"shard": "00000", "key": key, "w": 640, "h": 480})
        boxes.append({"shard": "00000", "key": key, "box_id": 0, "box": (0.0, 0.0, 50.0, 90.0)})
        labels[("00000", key, 0)] = None
        t = str(rng.choice(CLASSES[:2]))
        rows.append(
            {"shard": "00000", "key": key, "box_id": 0, "h1": t, "h2": t if rng.random() < 0.4 else "unclear"}
        )
    for i in range(40):  # boxes that are not in the folder
        t = str(rng.choice(CLASSES))
        rows.append(
            {
                "shard": "00000",
                "key": f"gone{i:03d}",
                "box_id": 0,
                "h1": t,
                "h2": t if rng.random() < 0.3 else "male",
            }
        )
    ann = write_folder(tmp_path / "ann", images, boxes, labels=labels)
    human = tmp_path / "human.csv"
    with open(human, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["shard", "key", "box_id", "h1", "h2"])
        w.writeheader()
        w.writerows(rows)
    return ann, human, rows, labels


def test_human_ceiling_and_classifier_kappa_are_over_the_same_boxes(tmp_path: Path) -> None:
    ann, human, rows, labels = planted(tmp_path)
    rep = verify_labels(ann, human, attribute="gender", out_dir=tmp_path / "out", n_boot=100, plot=False)

    def clf(r: dict) -> str | None:
        return labels.get((r["shard"], r["key"], r["box_id"]))

    same = [r for r in rows if clf(r) is not None and r["h1"] and r["h2"]]
    assert len(same) == 120
    hh = rep["human_vs_human"]
    assert hh["n"] == rep["same_boxes"]["n"] == 120
    assert hh["kappa"] == pytest.approx(cohen_kappa_score([r["h1"] for r in same], [r["h2"] for r in same]))
    for col in ("h1", "h2"):
        got = rep["same_boxes"]["human_vs_classifier"][col]
        assert got["n"] == 120
        assert got["kappa"] == pytest.approx(
            cohen_kappa_score([r[col] for r in same], [clf(r) for r in same])
        )
    # each human against the classifier over every box it labelled: h1 also on the 15 h2 left blank
    assert rep["human_vs_classifier"]["h1"]["n"] == 135 and rep["human_vs_classifier"]["h2"]["n"] == 120
    # the old reading (every row both humans labelled, 200 rows) is kept apart, named as such
    every = [r for r in rows if r["h1"] and r["h2"]]
    alt = rep["alternative"]["human_vs_human_all_rows"]
    assert alt["n"] == len(every) == 200
    assert alt["kappa"] == pytest.approx(
        cohen_kappa_score([r["h1"] for r in every], [r["h2"] for r in every])
    )
    assert alt["kappa"] < hh["kappa"] - 0.2  # the disagreement on boxes the classifier never saw
    assert "same boxes" in rep["definitions"] and "alternative.human_vs_human_all_rows" in rep["definitions"]
    # Krippendorff's α beside κ, every row, a blank answer missing (not the row)
    ka = rep["krippendorff"]
    assert ka["level"] == "nominal"
    units = [[r["h1"] or None, r["h2"] or None] for r in rows]
    assert ka["humans"]["alpha"] == pytest.approx(float(hand_alpha(units)), abs=1e-12)
    assert ka["humans"]["items"] == 200 and ka["humans"]["items_total"] == len(rows)
    units3 = [[r["h1"] or None, r["h2"] or None, clf(r)] for r in rows]
    assert ka["humans_and_classifier"]["alpha"] == pytest.approx(float(hand_alpha(units3)), abs=1e-12)
    lo, hi = ka["humans"]["alpha_ci"]
    assert lo <= ka["humans"]["alpha"] <= hi
    # the manifest's headline carries the like-for-like numbers and α too
    from fairsets.annotate import layout

    head = layout.read_manifest(ann)["attributes"]["gender"]["verification"]
    assert head["same_boxes"]["n"] == 120 and head["human_vs_human"]["kappa"] == hh["kappa"]
    assert head["krippendorff_alpha"]["humans"]["alpha"] == ka["humans"]["alpha"]


def test_the_confusion_block_is_what_the_correction_loads(tmp_path: Path) -> None:
    ann, human, rows, labels = planted(tmp_path)
    rep = verify_labels(ann, human, attribute="gender", out_dir=tmp_path / "out", n_boot=0, plot=False)
    block = json.loads((tmp_path / "out" / "verify_gender.json").read_text())["confusion"]
    assert (
        block["format"] == CONFUSION_FORMAT and block["labels"] == CLASSES and block["default_column"] == "h1"
    )
    for col in ("h1", "h2"):
        pairs = [(r[col], labels.get((r["shard"], r["key"], r["box_id"]))) for r in rows]
        pairs = [(h, c) for h, c in pairs if h and c]
        want = {t: {p: sum(1 for h, c in pairs if (h, c) == (t, p)) for p in CLASSES} for t in CLASSES}
        assert load_confusion(tmp_path / "out", "gender", human_col=col) == want
        assert block["by_human_column"][col] == [[want[t][p] for p in CLASSES] for t in CLASSES]
    assert load_confusion(tmp_path / "out" / "verify_gender.json", "gender") == load_confusion(
        tmp_path / "out", "gender", human_col="h1"
    )
    assert rep["confusion"] == block


def test_cli_prints_the_same_box_table_and_alpha(tmp_path: Path) -> None:
    ann, human, _, _ = planted(tmp_path)
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # two commands: the verify command keeps its name
    runner = CliRunner(env={"COLUMNS": "200"})
    args = ["verify", str(ann), "--out", str(tmp_path / "o"), "--bootstrap", "50", "--no-plot"]
    res = runner.invoke(app, [*args, "--human", str(human)])
    assert res.exit_code == 0, res.output
    assert "same 120 boxes" in res.output and "Krippendorff's α" in res.output
    assert "every row, alternative" in res.output
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "nothing to verify" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, [*args, "--human", str(human), "--iou", "1.5"])
    assert res.exit_code == 2 and "--iou 1.5" in res.output
