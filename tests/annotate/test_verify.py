"""``annotate verify``: human labels against perceived_{attr}, equal to scikit-learn on the same pairs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, cohen_kappa_score
from sklearn.metrics import confusion_matrix as sk_confusion
from typer.testing import CliRunner

from fairsets.annotate import layout, read
from fairsets.annotate.heads.verify import read_human_labels, verify_labels
from fairsets.cli import app
from fairsets.core.tables import write_table

CLASSES = ["female", "male", "unclear"]


def make_ann(root: Path, *, n_per_shard: int = 80, seed: int = 0) -> dict[tuple[str, str, int], dict]:
    """An annotation folder with two shards of boxes and gender labels; returns the boxes by id."""
    rng = np.random.default_rng(seed)
    truth: dict[tuple[str, str, int], dict] = {}
    layout.write_manifest(
        root,
        {
            "inputs": [],
            "shards": {},
            "attributes": {
                "gender": {
                    "head_sha256": "ab" * 32,
                    "head": {"encoder": "test", "pretrained": None, "classes": CLASSES, "metrics": {}},
                    "counts": {},
                }
            },
        },
    )
    for shard in ("00000", "00001"):
        boxes, labels = [], []
        for i in range(n_per_shard):
            key = f"{shard}{i // 2:04d}"
            box_id = i % 2
            w, h = float(rng.uniform(4, 160)), float(rng.uniform(4, 160))
            kept = i % 17 != 5  # a few boxes that the classifier never saw
            boxes.append(
                {
                    "shard": shard,
                    "key": key,
                    "box_id": box_id,
                    "x1": 0.0,
                    "y1": 0.0,
                    "x2": w,
                    "y2": h,
                    "conf": 0.9,
                    "class_name": "person",
                    "width": w,
                    "height": h,
                    "area_frac": 0.1,
                    "image_w": 400,
                    "image_h": 400,
                    "kept": kept,
                    "drop_reason": None if kept else "test",
                }
            )
            clf = str(rng.choice(CLASSES)) if kept else None
            if kept:
                reason = "image no longer decodes" if i == 11 else None
                clf = None if reason else clf
                probs = {f"p_gender_{c}": (None if reason else 1.0 / 3) for c in CLASSES}
                labels.append(
                    {"shard": shard, "key": key, "box_id": box_id, "perceived_gender": clf, **probs}
                    | {"gender_reason": reason}
                )
            truth[(shard, key, box_id)] = {"min_side": min(w, h), "clf": clf, "kept": kept}
        write_table(layout.boxes_path(root, shard), boxes, layout.BOX_SCHEMA)
        write_table(
            layout.attribute_path(root, "gender", shard), labels, layout.attribute_schema("gender", CLASSES)
        )
    return truth


def write_labels(path: Path, truth: dict, *, seed: int = 1, two: bool = True) -> list[dict]:
    """Human labels that mostly agree with the classifier; with case and spacing variations."""
    rng = np.random.default_rng(seed)
    rows = []
    for (shard, key, box_id), t in truth.items():
        base = t["clf"] or str(rng.choice(CLASSES))
        h1 = base if rng.random() < 0.8 else str(rng.choice(CLASSES))
        h2 = h1 if rng.random() < 0.85 else str(rng.choice(CLASSES))
        row = {
            "shard": shard,
            "key": key,
            "box_id": box_id,
            "h1": f" {h1.upper()} " if rng.random() < 0.1 else h1,
        }
        if two:
            row["h2"] = h2
        rows.append(row)
    rows[3]["h1"] = "Not sure"  # dropped with --drop-labels
    rows.append({"shard": "00000", "key": "nokey", "box_id": 0, "h1": "male", "h2": "male"})
    rows.append({"shard": "00009", "key": "00000000", "box_id": 0, "h1": "male", "h2": "female"})
    if two:
        rows[4]["h2"] = ""  # blank
    else:
        for r in rows:
            r.pop("h2", None)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return rows


def _norm(v: str | None) -> str | None:
    if v is None or not v.strip() or v.strip().lower() == "not sure":
        return None
    return v.strip().lower()


def test_numbers_equal_sklearn_and_curve_counts(tmp_path: Path) -> None:
    ann = tmp_path / "ann"
    truth = make_ann(ann)
    rows = write_labels(tmp_path / "labels.csv", truth)
    rep = verify_labels(
        ann,
        tmp_path / "labels.csv",
        attribute="gender",
        out_dir=tmp_path / "out",
        drop_labels=["not sure"],
        n_boot=200,
    )
    # the same pairs, built independently from what the test wrote
    for col in ("h1", "h2"):
        pairs = [
            (_norm(r[col]), truth[(r["shard"], r["key"], r["box_id"])])
            for r in rows
            if (r["shard"], r["key"], r["box_id"]) in truth
        ]
        pairs = [(h, t) for h, t in pairs if h is not None and t["clf"] is not None]
        hum = [h for h, _ in pairs]
        clf = [t["clf"] for _, t in pairs]
        got = rep["human_vs_classifier"][col]
        assert got["n"] == len(pairs)
        assert got["accuracy"] == pytest.approx(accuracy_score(hum, clf), abs=1e-12)
        assert got["kappa"] == pytest.approx(cohen_kappa_score(hum, clf), abs=1e-12)
        assert got["confusion"]["matrix"] == sk_confusion(hum, clf, labels=CLASSES).tolist()
        lo, hi = got["kappa_ci"]
        assert lo <= got["kappa"] <= hi
        curve = rep["min_side"]["curves"][col]
        assert [p["min_side"] for p in curve] == list(range(0, 101, 10))
        for point in curve:
            sub = [(h, t["clf"]) for h, t in pairs if t["min_side"] >= point["min_side"]]
            assert point["n"] == len(sub)
            if len({x for p in sub for x in p}) > 1:
                assert point["kappa"] == pytest.approx(cohen_kappa_score(*zip(*sub, strict=True)), abs=1e-12)
        assert curve[0]["n"] > curve[5]["n"] > curve[-1]["n"] > 0

    # the human-human ceiling over the same boxes as human-classifier (both humans and the classifier)
    def ident(r: dict) -> tuple:
        return (r["shard"], r["key"], r["box_id"])

    same = [
        (_norm(r["h1"]), _norm(r["h2"]), truth[ident(r)]["clf"])
        for r in rows
        if ident(r) in truth and truth[ident(r)]["clf"] is not None
    ]
    same = [p for p in same if None not in p]
    hh = rep["human_vs_human"]
    assert hh["n"] == rep["same_boxes"]["n"] == len(same)
    assert hh["kappa"] == pytest.approx(
        cohen_kappa_score([p[0] for p in same], [p[1] for p in same]), abs=1e-12
    )
    for i, col in enumerate(("h1", "h2")):
        got = rep["same_boxes"]["human_vs_classifier"][col]
        assert got["n"] == len(same)
        assert got["kappa"] == pytest.approx(
            cohen_kappa_score([p[i] for p in same], [p[2] for p in same]), abs=1e-12
        )
    both = [(_norm(r["h1"]), _norm(r["h2"])) for r in rows]
    both = [p for p in both if None not in p]
    alt = rep["alternative"]["human_vs_human_all_rows"]
    assert alt["n"] == len(both) > len(same)
    assert alt["kappa"] == pytest.approx(cohen_kappa_score(*zip(*both, strict=True)), abs=1e-12)
    counts = rep["rows"]
    assert counts["total"] == len(rows)
    assert counts["not_found"] == 2
    assert {(r["shard"], r["key"]) for r in rep["not_found"]} == {("00000", "nokey"), ("00009", "00000000")}
    assert counts["not_kept"] == sum(1 for t in truth.values() if not t["kept"])
    assert counts["unlabelled"] == 2 and rep["unlabelled"][0]["reason"] == "image no longer decodes"
    assert counts["per_column"]["h1"]["dropped"] == 1 and counts["per_column"]["h2"]["blank"] == 1
    # written: the JSON report, the plot, the headline in the manifest
    on_disk = json.loads((tmp_path / "out" / "verify_gender.json").read_text())
    assert on_disk == json.loads(json.dumps(rep))
    assert (tmp_path / "out" / "verify_gender.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    head = layout.read_manifest(ann)["attributes"]["gender"]["verification"]
    assert head["human_vs_classifier"]["h1"]["kappa"] == rep["human_vs_classifier"]["h1"]["kappa"]
    assert head["human_vs_human"]["kappa"] == hh["kappa"]


def test_same_inputs_same_report_bytes(tmp_path: Path) -> None:
    ann = tmp_path / "ann"
    write_labels(tmp_path / "l.csv", make_ann(ann), two=False)
    kw = {"attribute": "gender", "drop_labels": ["not sure"], "n_boot": 100}
    verify_labels(ann, tmp_path / "l.csv", out_dir=tmp_path / "a", **kw)
    verify_labels(ann, tmp_path / "l.csv", out_dir=tmp_path / "b", **kw)
    for name in ("verify_gender.json", "verify_gender.png"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    rep = json.loads((tmp_path / "a" / "verify_gender.json").read_text())
    assert rep["human_columns"] == ["h1"] and rep["human_vs_human"] is None


def test_unknown_labels_and_bad_csv_are_clear_errors(tmp_path: Path) -> None:
    ann = tmp_path / "ann"
    truth = make_ann(ann, n_per_shard=10)
    write_labels(tmp_path / "l.csv", truth)
    with pytest.raises(layout.AnnotationError, match=r"'Not sure' ×1.*--drop-labels"):
        verify_labels(ann, tmp_path / "l.csv", attribute="gender", out_dir=tmp_path / "o")
    (tmp_path / "bad.csv").write_text("shard,key,box_id,h1\n00000,000000,zero,male\n")
    with pytest.raises(layout.AnnotationError, match="line 2: box_id 'zero' is not an integer"):
        read_human_labels(tmp_path / "bad.csv")
    (tmp_path / "dup.csv").write_text("shard,key,box_id,h1\n00000,k,0,male\n00000,k,0,female\n")
    with pytest.raises(layout.AnnotationError, match="lines 2 and 3 label the same box"):
        read_human_labels(tmp_path / "dup.csv")
    (tmp_path / "three.csv").write_text("shard,key,box_id,a,b,c\n")
    with pytest.raises(layout.AnnotationError, match="3 human label columns"):
        read_human_labels(tmp_path / "three.csv")
    with pytest.raises(layout.AnnotationError, match="no column box_id"):
        (tmp_path / "nokey.csv").write_text("shard,key,h1\n")
        read_human_labels(tmp_path / "nokey.csv")


def test_labels_that_meet_no_labelled_box_are_an_error_not_undefined_numbers(tmp_path: Path) -> None:
    ann = tmp_path / "ann"
    make_ann(ann, n_per_shard=10)
    (tmp_path / "l.csv").write_text("shard,key,box_id,h1\n00000,nope,0,male\n00000,nope,1,female\n")
    with pytest.raises(layout.AnnotationError, match=r"no human label meets a labelled box \(2 rows: 2 not"):
        verify_labels(ann, tmp_path / "l.csv", attribute="gender", out_dir=tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_cli_verify(tmp_path: Path) -> None:
    ann = tmp_path / "ann"
    write_labels(tmp_path / "l.csv", make_ann(ann))
    runner = CliRunner()
    args = ["annotate", "verify", str(ann), "--human", str(tmp_path / "l.csv"), "--attribute", "gender"]
    res = runner.invoke(
        app, [*args, "--human-col", "h1", "--drop-labels", "not sure", "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 0, res.output
    assert "κ" in res.output and (tmp_path / "o" / "verify_gender.json").exists()
    rep = json.loads((tmp_path / "o" / "verify_gender.json").read_text())
    assert rep["human_columns"] == ["h1"]
    res = runner.invoke(app, [*args, "--out", str(tmp_path / "o2")])
    assert res.exit_code == 2
    assert "--drop-labels" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, [*args, "--attribute", "race", "--out", str(tmp_path / "o3")])
    assert res.exit_code == 2 and "no race labels" in res.output


def test_reader_joins_every_attribute_in_box_order(tmp_path: Path) -> None:
    ann = tmp_path / "ann"
    truth = make_ann(ann, n_per_shard=12)
    rel = read.boxes(ann)
    assert read.attribute_names(ann) == ["gender"]
    cols = rel.columns
    assert cols[: len(layout.BOX_SCHEMA)] == layout.BOX_SCHEMA.names
    assert cols[len(layout.BOX_SCHEMA) :] == layout.attribute_schema("gender", CLASSES).names[3:]
    got = rel.fetchall()
    assert [(r[0], r[1], r[2]) for r in got] == list(truth)
    clf = {(r[0], r[1], r[2]): r[cols.index("perceived_gender")] for r in got}
    assert clf == {k: t["clf"] for k, t in truth.items()}
    assert read.boxes(ann, []).columns == layout.BOX_SCHEMA.names
    with pytest.raises(layout.AnnotationError, match="no race labels yet"):
        read.boxes(ann, ["race"])
    with pytest.raises(layout.AnnotationError, match="not an annotation folder"):
        read.boxes(tmp_path)
    with pytest.raises(layout.AnnotationError, match="no image tables yet"):
        read.images(ann)
