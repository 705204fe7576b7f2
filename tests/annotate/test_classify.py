"""``annotate classify``: every kept box gets the head's label and probabilities; resumable, replaceable."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image
from typer.testing import CliRunner

from cli_helpers import assert_one_line_error, run_cli
from fairsets.annotate import layout, read
from fairsets.annotate.heads.classify import classify_boxes, stage
from fairsets.annotate.heads.embed import embed_crops
from fairsets.annotate.heads.store import Head, load_head, write_head
from fairsets.annotate.images import crop, decode
from fairsets.annotate.shards import ShardRef
from fairsets.cli import app
from fairsets.core.atomic import atomic_write_text
from fairsets.core.tables import write_table
from fairsets.models import load_vlm

ENCODER = "torchvision:mobilenet_v3_small"  # seeded random weights ("none"): offline, small
CLASSES = ["female", "male", "unclear"]


def _jpeg(rng: np.random.Generator, w: int, h: int) -> bytes:
    small = rng.integers(0, 256, size=(6, 5, 3), dtype=np.uint8)
    img = Image.fromarray(small).resize((w, h), Image.BILINEAR)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def make_ann(
    root: Path, shard_writer: Any, *, shards: int = 2, images: int = 4, seed: int = 0
) -> dict[str, Any]:
    """Tar shards of generated JPEGs, and an annotation folder over them written through ``layout``.

    Each image has 1–3 boxes (one partly outside the image, one too small and not kept). Shard 0
    also lists a key the tar lacks and an image whose bytes no longer decode. Returns the images'
    bytes by key and the kept boxes in table order.
    """
    rng = np.random.default_rng(seed)
    ann, data = root / "ann", {}
    kept: list[tuple[str, str, int, tuple[float, float, float, float]]] = []
    inputs = []
    for s in range(shards):
        name = f"{s:05d}"
        samples, boxes = [], []
        keys = [f"{s:03d}{i:05d}" for i in range(images)] + (["missing0", "broken00"] if s == 0 else [])
        for i, key in enumerate(keys):
            w, h = int(rng.integers(90, 200)), int(rng.integers(90, 200))
            blob = _jpeg(rng, w, h)
            if key == "broken00":
                blob = blob[:40]  # a JPEG header and nothing else
            if key != "missing0":
                samples.append(
                    (key, {"jpg": blob, "txt": f"caption {key}", "json": {"url": f"http://x.invalid/{key}"}})
                )
            data[key] = blob
            for b in range(1 + i % 3):
                x1, y1 = float(rng.uniform(0, w / 2)), float(rng.uniform(0, h / 2))
                bw, bh = (12.0, 50.0) if b == 2 else (float(rng.uniform(30, w)), float(rng.uniform(30, h)))
                x2, y2 = x1 + bw, y1 + bh  # may reach past the image: crops are clamped
                keep = b != 2
                boxes.append(
                    {
                        "shard": name, "key": key, "box_id": b, "x1": x1, "y1": y1, "x2": x2, "y2": y2,
                        "conf": 0.9, "class_name": "person", "width": bw, "height": bh,
                        "area_frac": bw * bh / (w * h), "image_w": w, "image_h": h, "kept": keep,
                        "drop_reason": None if keep else "min side 12 px < 30",
                    }
                )  # fmt: skip
                if keep:
                    kept.append((name, key, b, (x1, y1, x2, y2)))
        tar = shard_writer(root / "shards" / f"{name}.tar", samples)
        inputs.append(ShardRef(name=name, path=str(tar), kind="tar").to_json())
        write_table(layout.boxes_path(ann, name), boxes, layout.BOX_SCHEMA)
        atomic_write_text(layout.marker_path(ann, "persons", name), json.dumps({"shard": name}))
    layout.write_manifest(ann, {"inputs": inputs, "params": {"min_side": 30}, "shards": {}})
    return {"ann": ann, "data": data, "kept": kept}


def make_head(path: Path, *, seed: int = 0, classes: list[str] = CLASSES) -> Head:
    rng = np.random.default_rng(seed)
    dim = load_vlm(ENCODER, "none").embed_dim
    head = Head(
        attribute="gender",
        classes=classes,
        encoder=ENCODER,
        pretrained="none",
        coef=rng.normal(0, 4.0, size=(len(classes), dim)),
        intercept=rng.normal(0, 0.1, size=len(classes)),
        normalise=True,
        metrics={"accuracy": 0.9},
    )
    return write_head(path, head)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, shard_writer: Any) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("classify")
    out = make_ann(root, shard_writer)
    out["head"] = make_head(root / "head.npz")
    out["head_path"] = root / "head.npz"
    out["result"] = classify_boxes(out["ann"], out["head_path"], batch=5, workers=0)
    return out


def test_every_kept_box_gets_the_heads_label_and_probabilities(built: dict[str, Any]) -> None:
    ann, head, kept = built["ann"], built["head"], built["kept"]
    tables = [pq.read_table(layout.attribute_path(ann, "gender", s)) for s in ("00000", "00001")]
    assert all(t.schema == layout.attribute_schema("gender", CLASSES) for t in tables)
    rows = [r for t in tables for r in t.to_pylist()]
    # one row per kept box, in box-table order
    assert [(r["shard"], r["key"], r["box_id"]) for r in rows] == [k[:3] for k in kept]
    labelled = [r for r in rows if r["gender_reason"] is None]
    unlabelled = [r for r in rows if r["gender_reason"] is not None]
    assert {r["key"] for r in unlabelled} == {"missing0", "broken00"}
    assert all(r["perceived_gender"] is None and r["p_gender_male"] is None for r in unlabelled)
    reasons = {r["key"]: r["gender_reason"] for r in unlabelled}
    assert reasons["missing0"].startswith("image not found in the shard")
    assert reasons["broken00"].startswith("image no longer decodes: ")
    probs = np.array([[r[f"p_gender_{c}"] for c in CLASSES] for r in labelled])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-6)
    assert [r["perceived_gender"] for r in labelled] == [CLASSES[i] for i in probs.argmax(axis=1)]
    # independently: decode, crop, embed, head
    boxes = {k[:3]: k[3] for k in kept}
    crops = [
        crop(decode(built["data"][r["key"]]), boxes[(r["shard"], r["key"], r["box_id"])]) for r in labelled
    ]
    want = load_head(built["head_path"]).predict_proba(
        embed_crops(load_vlm(ENCODER, "none"), crops, batch_size=7)
    )
    np.testing.assert_allclose(probs, want, atol=2e-5)
    assert len(set(np.round(probs[:, 0], 4))) > 3  # the crops really differ
    # the manifest: the head and the counts
    entry = layout.read_manifest(ann)["attributes"]["gender"]
    assert entry["head_sha256"] == head.sha256 and entry["head"]["classes"] == CLASSES
    assert entry["counts"] == {c: sum(r["perceived_gender"] == c for r in labelled) for c in CLASSES}
    assert entry["labelled"] == len(labelled) and entry["unlabelled"] == len(unlabelled) == 4
    assert built["result"]["run"]["classified"] == 2 and built["result"]["run"]["boxes_classified"] == len(
        rows
    )


def test_reader_joins_the_labels(built: dict[str, Any]) -> None:
    rel = read.boxes(built["ann"])
    rows = rel.fetchall()
    cols = rel.columns
    kept = {k[:3] for k in built["kept"]}
    by_id = {(r[0], r[1], r[2]): dict(zip(cols, r, strict=True)) for r in rows}
    assert len(rows) == len(by_id) > len(kept)
    for ident, r in by_id.items():
        assert (r["perceived_gender"] is not None) == (
            ident in kept and r["key"] not in ("missing0", "broken00")
        )


def test_rerun_skips_and_other_head_needs_replace(built: dict[str, Any], tmp_path: Path) -> None:
    ann = built["ann"]
    files = sorted((ann / "attributes").rglob("*.parquet")) + sorted(
        (ann / ".fairsets" / "markers").rglob("*.json")
    )
    before = {p: p.read_bytes() for p in [*files, ann / "manifest.json"]}
    again = classify_boxes(ann, built["head_path"], batch=3, workers=0)
    assert again["run"]["skipped"] == 2 and again["run"]["classified"] == 0
    assert {p: p.read_bytes() for p in before} == before
    make_head(tmp_path / "other.npz", seed=5, classes=["female", "male"])
    with pytest.raises(layout.AnnotationError, match=r"another head.*--replace"):
        classify_boxes(ann, tmp_path / "other.npz", workers=0)
    res = CliRunner().invoke(app, ["annotate", "classify", str(ann), "--head", str(tmp_path / "other.npz")])
    assert res.exit_code == 2 and "--replace" in res.output and "Traceback" not in res.output
    assert {p: p.read_bytes() for p in before} == before  # nothing touched


def test_replace_relabels_every_box(built: dict[str, Any], tmp_path: Path, shard_writer: Any) -> None:
    made = make_ann(tmp_path, shard_writer)
    ann = made["ann"]
    classify_boxes(ann, built["head_path"], workers=0)
    other = make_head(tmp_path / "other.npz", seed=5, classes=["female", "male"])
    res = CliRunner().invoke(
        app,
        [
            "annotate",
            "classify",
            str(ann),
            "--head",
            str(tmp_path / "other.npz"),
            "--replace",
            "--workers",
            "0",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "boxes/s" in res.output
    entry = layout.read_manifest(ann)["attributes"]["gender"]
    assert entry["head_sha256"] == other.sha256 and set(entry["counts"]) == {"female", "male"}
    for s in ("00000", "00001"):
        t = pq.read_table(layout.attribute_path(ann, "gender", s))
        assert t.schema == layout.attribute_schema("gender", ["female", "male"])
        marker = json.loads(layout.marker_path(ann, stage("gender"), s).read_text())
        assert marker["head_sha256"] == other.sha256


def test_changed_boxes_are_classified_again(built: dict[str, Any], tmp_path: Path, shard_writer: Any) -> None:
    made = make_ann(tmp_path, shard_writer, images=2)
    ann = made["ann"]
    classify_boxes(ann, built["head_path"], workers=0)
    t = pq.read_table(layout.boxes_path(ann, "00001")).to_pylist()
    t[0]["kept"] = False  # as a persons re-run with a larger --min-side would
    write_table(layout.boxes_path(ann, "00001"), t, layout.BOX_SCHEMA)
    res = classify_boxes(ann, built["head_path"], workers=0)
    assert res["run"]["classified"] == 1 and res["run"]["skipped"] == 1
    rows = pq.read_table(layout.attribute_path(ann, "gender", "00001")).to_pylist()
    assert (t[0]["key"], t[0]["box_id"]) not in {(r["key"], r["box_id"]) for r in rows}


def test_a_missing_shard_is_a_one_line_error_and_a_rerun_labels_it(
    built: dict[str, Any], tmp_path: Path, shard_writer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    made = make_ann(tmp_path, shard_writer, images=2)
    ann, tar = made["ann"], tmp_path / "shards" / "00001.tar"
    tar.rename(tmp_path / "away.tar")
    args = ["annotate", "classify", ann, "--head", built["head_path"], "--workers", "0"]
    code, _, err = run_cli(args, capsys)
    assert_one_line_error(code, err, "missing or unreadable", "00001.tar", "put them back")
    assert not (ann / layout.ATTRIBUTES_DIR / "gender").exists()
    (tmp_path / "away.tar").rename(tar)
    res = classify_boxes(ann, built["head_path"], workers=0)
    assert res["run"]["classified"] == 2
    assert res["unlabelled"] == 3  # only the missing key's 2 kept boxes and the broken image's 1


def test_an_edited_label_table_is_written_again(
    built: dict[str, Any], tmp_path: Path, shard_writer: Any
) -> None:
    ann = make_ann(tmp_path, shard_writer, images=2)["ann"]
    classify_boxes(ann, built["head_path"], workers=0)
    path = layout.attribute_path(ann, "gender", "00000")
    original = path.read_bytes()
    rows = pq.read_table(path).to_pylist()
    rows[0]["perceived_gender"] = "male" if rows[0]["perceived_gender"] != "male" else "female"
    write_table(path, rows, layout.attribute_schema("gender", CLASSES))
    res = classify_boxes(ann, built["head_path"], workers=0)
    assert res["run"]["classified"] == 1 and res["run"]["skipped"] == 1
    assert path.read_bytes() == original
