"""The kept boxes commands ask models about: which ones, a stable sample, and the image each is shown as."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from ann_data import GENDER, label_of_jpeg, make_ann
from PIL import Image

from fairsets.annotate import layout
from fairsets.annotate.items import kept_boxes, sample, views
from fairsets.annotate.layout import AnnotationError


def test_kept_boxes_are_every_kept_box_with_its_alt_text(tmp_path: Path, shard_writer) -> None:
    ann = make_ann(tmp_path, shard_writer, shards=2, images_per_shard=3, boxes_per_image=2)
    items = kept_boxes(ann.path)
    assert [it.item for it in items] == sorted(ann.truth)
    assert not {it.item for it in items} & set(ann.dropped)
    for it in items:
        assert it.box == ann.boxes[it.item]
        assert it.alt_text == ann.captions[(it.shard, it.key)]


def test_unfinished_shards_are_left_out_and_an_empty_folder_says_what_to_run(
    tmp_path: Path, shard_writer
) -> None:
    ann = make_ann(tmp_path, shard_writer, shards=2, images_per_shard=2)
    layout.marker_path(ann.path, "persons", "00001").unlink()
    assert {it.shard for it in kept_boxes(ann.path)} == {"00000"}
    layout.marker_path(ann.path, "persons", "00000").unlink()
    with pytest.raises(AnnotationError, match=r"annotate persons SHARDS --out"):
        kept_boxes(ann.path)


def test_sample_is_seeded_stable_and_nested(tmp_path: Path, shard_writer) -> None:
    items = kept_boxes(make_ann(tmp_path, shard_writer, shards=3, images_per_shard=10).path)
    small, large = sample(items, 10, seed=1), sample(items, 25, seed=1)
    assert len(small) == 10 and len(large) == 25
    assert {i.item for i in small} <= {i.item for i in large}
    assert sample(items, 10, seed=1) == small
    assert sample(items, 10, seed=2) != small
    assert sample(list(reversed(items)), 10, seed=1) == small  # input order does not matter
    assert sample(items, 10, seed=1, salt="other") != small
    assert small == sorted(small, key=lambda i: (i.shard, i.key, i.box_id))
    assert sample(items, None, seed=1) == items == sample(items, 10_000, seed=1)
    with pytest.raises(ValueError, match="0 or more"):
        sample(items, -1, seed=0)


def test_views_show_each_box_and_report_missing_images(tmp_path: Path, shard_writer) -> None:
    ann = make_ann(tmp_path, shard_writer, shards=1, images_per_shard=4)
    items = kept_boxes(ann.path)
    crops = list(views(ann.path, items, view="crop", max_side=64))
    assert [it for it, _, _ in crops] == items
    for it, jpeg, reason in crops:
        assert reason is None and label_of_jpeg(jpeg, GENDER) == ann.truth[it.item]
        assert max(Image.open(io.BytesIO(jpeg)).size) <= 64
    framed = list(views(ann.path, items[:1], view="redbox"))
    pixels = np.asarray(Image.open(io.BytesIO(framed[0][1])).convert("RGB")).astype(int)
    x1, y1, _, _ = (int(v) for v in items[0].box)
    assert pixels[y1 + 20, x1 - 2].tolist() == pytest.approx([255, 0, 0], abs=40)  # the frame, left side

    # one image gone from the shard: its boxes come back with a reason, the others still render
    gone = items[0].key
    table = pq.read_table(layout.images_path(ann.path, "00000"))
    rows = [k for k in table.column("key").to_pylist() if k != gone]
    shard_writer(
        ann.shards_dir / "00000.tar",
        [(k, {"png": _png(ann, "00000", k), "txt": "x"}) for k in rows],
    )
    out = list(views(ann.path, items, view="crop"))
    assert [(it.key == gone, reason is not None) for it, _, reason in out] == [
        (it.key == gone, it.key == gone) for it in items
    ]
    assert all("not found" in r for it, _, r in out if it.key == gone)


def _png(ann, shard: str, key: str) -> bytes:
    from fairsets.annotate.shards import ShardRef, read_images

    return read_images(ShardRef("00000", str(ann.shards_dir / "00000.tar"), "tar"), [key])[key]
