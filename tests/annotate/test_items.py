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
from fairsets.annotate.chat.items import kept_boxes, sample, views
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


def test_the_view_index_answers_only_for_the_same_image_box_and_settings(
    tmp_path: Path, shard_writer
) -> None:
    import hashlib

    import pyarrow as pa

    from fairsets.annotate.chat.items import (
        RENDER_VERSION,
        BoxItem,
        remember_view,
        source_sha256,
        view_digest,
    )

    ann = make_ann(tmp_path, shard_writer, shards=1, images_per_shard=2, boxes_per_image=2)
    items = kept_boxes(ann.path)
    # make_ann writes a placeholder sha256 for every image; annotate persons writes the real one
    path = layout.images_path(ann.path, "00000")
    table = pq.read_table(path)
    real = {k: hashlib.sha256(k.encode()).hexdigest() for k in table["key"].to_pylist()}
    real_col = pa.array([real[k] for k in table["key"].to_pylist()])
    pq.write_table(table.set_column(table.schema.get_field_index("sha256"), "sha256", real_col), path)
    sources = source_sha256(ann.path, items)
    assert sources == {("00000", it.key): real[it.key] for it in items}

    index = tmp_path / "views"
    it, source = items[0], sources[("00000", items[0].key)]
    jpeg = next(j for _, j, _ in views(ann.path, [it], view="crop", max_side=512))
    assert view_digest(index, it, source, view="crop", max_side=512) is None
    digest = remember_view(index, it, source, jpeg, view="crop", max_side=512)
    assert digest == hashlib.sha256(jpeg).hexdigest()
    assert view_digest(index, it, source, view="crop", max_side=512) == digest
    assert view_digest(index, it, source, view="crop", max_side=512, quality=90) == digest  # the default
    # another image, box, item or setting is another entry
    assert view_digest(index, it, "f" * 64, view="crop", max_side=512) is None
    moved = BoxItem(it.shard, it.key, it.box_id, (0.0, 0.0, 10.0, 10.0), it.alt_text)
    assert view_digest(index, moved, source, view="crop", max_side=512) is None
    assert view_digest(index, items[1], source, view="crop", max_side=512) is None
    assert view_digest(index, it, source, view="redbox", max_side=512) is None
    assert view_digest(index, it, source, view="crop", max_side=256) is None
    assert view_digest(index, it, None, view="crop", max_side=512) is None
    with pytest.raises(TypeError, match="unknown view settings: colour"):
        view_digest(index, it, source, colour="red")
    entries = [p for p in index.rglob("*") if p.is_file()]
    assert len(entries) == 1 and entries[0].read_bytes() == digest.encode()
    assert RENDER_VERSION
    # a damaged entry is no answer (the view is rendered again)
    entries[0].write_bytes(b"garbage")
    assert view_digest(index, it, source, view="crop", max_side=512) is None
    # nothing recorded without the source's digest
    remember_view(index, items[1], None, jpeg, view="crop", max_side=512)
    assert len([p for p in index.rglob("*") if p.is_file()]) == 1


def test_folders_without_image_digests_are_always_rendered(tmp_path: Path, shard_writer) -> None:
    from fairsets.annotate.chat.items import source_sha256

    ann = make_ann(tmp_path, shard_writer, shards=2, images_per_shard=2, boxes_per_image=1)
    items = kept_boxes(ann.path)
    old = layout.images_path(ann.path, "00000")  # a folder from before the sha256 column
    pq.write_table(pq.read_table(old).drop_columns(["sha256"]), old)
    layout.images_path(ann.path, "00001").unlink()  # no images table at all
    assert source_sha256(ann.path, items) == {(it.shard, it.key): None for it in items}


def test_kept_views_come_back_only_intact(tmp_path: Path) -> None:
    import hashlib

    from fairsets.annotate.chat.items import keep_view, kept_view

    index, view = tmp_path / "views", b"\xff\xd8 a view \xff\xd9"
    digest = hashlib.sha256(view).hexdigest()
    assert kept_view(index, digest) is None and kept_view(index, None) is None
    keep_view(index, digest, b"small copy")
    assert kept_view(index, digest) == b"small copy"
    assert kept_view(index, "0" * 64) is None
    (entry,) = [p for p in index.rglob("*") if p.is_file()]
    entry.write_bytes(entry.read_bytes()[:-1] + b"X")  # damaged: not handed out
    assert kept_view(index, digest) is None
