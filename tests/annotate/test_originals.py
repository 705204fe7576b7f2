"""Boxes of resized shards map back to the original images, as the card says.

A loopback server serves ultralytics' ``bus.jpg`` (810 x 1080) and ``zidane.jpg`` (1280 x 720);
``fairsets download`` stores them unresized, ``keep_ratio`` and ``center_crop`` to 320 px, and
``fairsets annotate persons`` finds the people in each. The images table keeps each original's
size and the sha256 of the served bytes (recomputed here from the files), the manifest and the
card say how each shard was made, and the boxes of the resized shards, converted as the card
states, land on the people the detector finds in the unresized originals (IoU >= 0.5), while the
unconverted boxes do not. The geometry is also checked against albumentations itself.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from helpers import needs_img2dataset
from servers import LoopbackServer, Response

SIZE = 320
PHOTOS = ("bus", "zidane")


def _iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def test_resized_size_is_albumentations_smallest_max_size() -> None:
    import numpy as np

    pytest.importorskip("albumentations")
    import albumentations as A

    from fairsets.annotate.publish.originals import resized_size

    rng = np.random.default_rng(0)
    sizes = [(810, 1080), (1280, 720), (333, 500), (257, 1000), (999, 777), (320, 320), (100, 37)]
    sizes += [tuple(int(v) for v in rng.integers(40, 3000, 2)) for _ in range(60)]
    for w, h in sizes:
        for size in (64, 256, 320, 384):
            out = A.SmallestMaxSize(max_size=size, p=1.0)(image=np.zeros((h, w), np.uint8))["image"]
            assert resized_size(w, h, size) == (out.shape[1], out.shape[0]), (w, h, size)


def test_to_original_refuses_what_cannot_be_inverted() -> None:
    from fairsets.annotate.publish.originals import NotConvertible, to_original

    row = {"image_w": 320, "image_h": 426, "original_width": 810, "original_height": 1080}
    assert to_original((1, 2, 3, 4), resize_mode="no", resize_size=None, **row) == (1, 2, 3, 4)
    with pytest.raises(NotConvertible, match="border"):
        to_original((1, 2, 3, 4), resize_mode="border", resize_size=320, **row)
    with pytest.raises(NotConvertible, match="not recorded"):
        to_original((1, 2, 3, 4), resize_mode=None, resize_size=None, **row)
    with pytest.raises(NotConvertible, match="not the stored"):  # 810x1080 -> 320x426, not 320x400
        to_original((1, 2, 3, 4), resize_mode="keep_ratio", resize_size=320, **{**row, "image_h": 400})
    with pytest.raises(NotConvertible, match="original_width"):
        to_original(
            (1, 2, 3, 4), resize_mode="keep_ratio", resize_size=320, **{**row, "original_width": None}
        )
    same = {**row, "image_w": 810, "image_h": 1080}
    assert to_original((5, 6, 7, 8), resize_mode=None, resize_size=None, **same) == (5, 6, 7, 8)


@pytest.fixture(scope="module")
def folders(
    yolo_assets: Path, fall_weights: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """mode → (annotation folder, the photos' raw bytes by URL): one download and annotation per mode."""
    pytest.importorskip("img2dataset")
    from fairsets.annotate.boxes import annotate_persons
    from fairsets.fetch.download import ImageSpec
    from fairsets.fetch.guard import FetchPolicy
    from fairsets.fetch.shards import download_listing

    raw = {name: (yolo_assets / f"{name}.jpg").read_bytes() for name in PHOTOS}
    root = tmp_path_factory.mktemp("originals")
    out: dict[str, Any] = {}
    with LoopbackServer() as srv:
        for name, data in raw.items():
            srv.route(f"/{name}.jpg", lambda req, d=data: Response(200, {"Content-Type": "image/jpeg"}, d))
        urls = {srv.url(f"/{name}.jpg"): data for name, data in raw.items()}
        listing = root / "listing.csv"
        listing.write_text("url,caption\n" + "".join(f"{u},people\n" for u in urls))
        for mode in ("no", "keep_ratio", "center_crop"):
            shards = root / f"shards-{mode}"
            rows = download_listing(
                listing,
                shards,
                FetchPolicy(allow_loopback=True, timeout=10),
                processes=0,
                threads=2,
                image=ImageSpec(mode, SIZE),
            )
            assert [r["status"] for r in rows] == ["ok", "ok"], rows
            ann = root / f"ann-{mode}"
            annotate_persons(
                str(shards), ann, model=fall_weights, person_classes=["Normal", "Fall"], workers=0, imgsz=640
            )
            out[mode] = ann
    return {"anns": out, "urls": urls}


def _joined(ann: Path) -> tuple[dict[str, dict], list[dict]]:
    images = {
        r["key"]: r for p in sorted((ann / "images").glob("*.parquet")) for r in pq.read_table(p).to_pylist()
    }
    boxes = [r for p in sorted((ann / "boxes").glob("*.parquet")) for r in pq.read_table(p).to_pylist()]
    return images, boxes


@needs_img2dataset
@pytest.mark.slow
def test_the_images_table_and_manifest_keep_the_originals(folders: dict[str, Any]) -> None:
    from PIL import Image

    from fairsets.annotate.layout import read_manifest

    for mode, ann in folders["anns"].items():
        images, _ = _joined(ann)
        assert len(images) == 2
        for row in images.values():
            data = folders["urls"][row["url"]]
            w, h = Image.open(io.BytesIO(data)).size  # neither photo has an EXIF rotation
            assert (row["original_width"], row["original_height"]) == (w, h)
            assert row["original_sha256"] == hashlib.sha256(data).hexdigest()
            assert row["resize_mode"] == mode
            assert row["resize_size"] == (None if mode == "no" else SIZE)
            if mode == "no":  # JPEG bytes stored unchanged: the stored hash is the original's
                assert row["sha256"] == row["original_sha256"] and (row["image_w"], row["image_h"]) == (w, h)
            else:
                assert row["sha256"] != row["original_sha256"]
                assert min(row["image_w"], row["image_h"]) == SIZE
        origin = read_manifest(ann)["originals"]
        assert list(origin.values()) == [
            {
                "resize_mode": mode,
                "image_size": None if mode == "no" else SIZE,
                "original_hash": "sha256",
                "recorded_by": "fairsets download",
            }
        ]


@needs_img2dataset
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["keep_ratio", "center_crop"])
def test_converted_boxes_land_on_the_people_of_the_originals(folders: dict[str, Any], mode: str) -> None:
    from fairsets.annotate.publish import prepare
    from fairsets.annotate.publish.originals import redownload_lines, to_original

    originals_images, originals_boxes = _joined(folders["anns"]["no"])
    by_url = {r["url"]: r["key"] for r in originals_images.values()}
    truth: dict[str, list[tuple[float, ...]]] = {}
    for b in originals_boxes:
        truth.setdefault(originals_images[b["key"]]["url"], []).append((b["x1"], b["y1"], b["x2"], b["y2"]))
    assert len(by_url) == 2 and all(len(v) >= 2 for v in truth.values())

    ann = folders["anns"][mode]
    prepared = prepare(ann, repo_id="org/persons")
    card = (prepared.folder / "README.md").read_text()
    lines = redownload_lines(prepared.manifest)
    assert "\n".join(lines) in card  # the card states exactly these instructions
    stated = "\n".join(lines)
    assert f"`{mode}`, shorter side {SIZE} px" in stated and "`original_sha256`" in stated
    if mode == "keep_ratio":
        assert "multiply `x1` and `x2` by `original_width / image_w`" in stated
    else:
        assert (
            f"`ox = floor((rw − {SIZE}) / 2)`" in stated and "`x → (x + ox) × original_width / rw`" in stated
        )
    published = pq.read_table(next((prepared.folder / "data/images").glob("*.parquet"))).to_pylist()
    assert {r["original_sha256"] for r in published} == {
        r["original_sha256"] for r in originals_images.values()
    }

    images, boxes = _joined(ann)
    confident = [b for b in boxes if b["conf"] >= 0.5]
    assert len({b["key"] for b in confident}) == 2
    matched, raw_matched = 0, 0
    for b in confident:
        img = images[b["key"]]
        stored = (b["x1"], b["y1"], b["x2"], b["y2"])
        columns = ("resize_mode", "resize_size", "image_w", "image_h", "original_width", "original_height")
        mapped = to_original(stored, **{k: img[k] for k in columns})
        if mode == "keep_ratio":  # the card's rule, recomputed here: x * W / w, y * H / h
            sx, sy = img["original_width"] / img["image_w"], img["original_height"] / img["image_h"]
            assert mapped == pytest.approx((stored[0] * sx, stored[1] * sy, stored[2] * sx, stored[3] * sy))
        people = truth[img["url"]]
        if mode == "center_crop":  # the card: a box on the square's edge may cut its person off there
            w, h, s = (
                img["original_width"],
                img["original_height"],
                SIZE / min(img["original_width"], img["original_height"]),
            )
            rw, rh = round(w * s), round(h * s)
            x0, y0 = (rw - SIZE) // 2 * w / rw, (rh - SIZE) // 2 * h / rh
            x1, y1 = x0 + SIZE * w / rw, y0 + SIZE * h / rh
            people = [(max(t[0], x0), max(t[1], y0), min(t[2], x1), min(t[3], y1)) for t in people]
            people = [t for t in people if t[2] > t[0] and t[3] > t[1]]
        best = max(_iou(mapped, t) for t in people)
        assert best >= 0.5, (b, mapped, people)
        matched += 1
        raw_matched += max(_iou(stored, t) for t in truth[img["url"]]) >= 0.5
    assert matched == len(confident) >= 4
    assert raw_matched < matched / 2  # unconverted, the boxes miss the people: the conversion matters


@needs_img2dataset
@pytest.mark.slow
def test_the_unresized_card_needs_no_conversion(folders: dict[str, Any]) -> None:
    from fairsets.annotate.publish import prepare

    prepared = prepare(folders["anns"]["no"], repo_id="org/persons")
    card = (prepared.folder / "README.md").read_text()
    assert "stored as downloaded" in card and "need no conversion" in card
    assert "Convert a box" not in card and "resized by img2dataset" not in card
