"""``annotate persons --deny FILE``: images whose URL is on a deny list are left out before detection.

A deny list names URLs or their sha256 (a published removal list). A listed image is one
``rejected`` row holding only its shard, key and the reason: no URL, caption, digest or size, and it
is never detected. The manifest records the list's digest and size and how many images it left
out; a shard annotated under another list (or none) is detected again, so lifting a removal brings
the image back and adding one takes it out of an existing folder.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from cli_helpers import assert_one_line_error, run_cli
from fairsets.annotate import layout
from fairsets.annotate.boxes.persons import annotate_persons
from fairsets.annotate.boxes.task import DENIED_REASON

URLS = [f"http://127.0.0.1:9/{n}.jpg" for n in ("bus", "zidane", "bus-copy", "zidane-copy")]


def _shard(tmp_path: Path, yolo_assets: Path, shard_writer: Any) -> Path:
    photos = [yolo_assets / "bus.jpg", yolo_assets / "zidane.jpg"] * 2
    samples = [
        (f"{i:06d}", {"jpg": p.read_bytes(), "txt": f"caption {i}", "json": {"url": url}})
        for i, (p, url) in enumerate(zip(photos, URLS, strict=True))
    ]
    return shard_writer(tmp_path / "shards" / "00000.tar", samples)


def _images(ann: Path) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in pq.read_table(layout.images_path(ann, "00000")).to_pylist()}


def test_listed_images_are_rejected_with_nothing_kept(tmp_path, yolo_assets, fall_weights, shard_writer):
    shard = _shard(tmp_path, yolo_assets, shard_writer)
    deny = tmp_path / "removals.txt"
    # one URL as written, one as its sha256 (upper case), a comment and a URL not in the shard
    deny.write_text(
        f"# removal requests\n{URLS[1]}\n{hashlib.sha256(URLS[2].encode()).hexdigest().upper()}\n"
        "http://127.0.0.1:9/elsewhere.jpg\n"
    )
    ann = tmp_path / "ann"
    kw = {"model": fall_weights, "person_classes": ["Normal", "Fall"], "workers": 0}
    manifest = annotate_persons([str(shard)], ann, deny=deny, **kw)

    rows = _images(ann)
    for key in ("000001", "000002"):
        row = rows[key]
        assert row["status"] == "rejected" and row["reason"] == DENIED_REASON
        assert row["url"] is None and row["caption"] is None and row["sha256"] is None
        assert row["image_w"] is None and row["original_width"] is None and row["n_boxes"] is None
    for key in ("000000", "000003"):
        assert rows[key]["status"] == "ok" and rows[key]["n_kept"] > 0
    boxes = pq.read_table(layout.boxes_path(ann, "00000")).to_pylist()
    assert {b["key"] for b in boxes} == {"000000", "000003"}  # a listed image is never detected
    written = b"".join(p.read_bytes() for p in ann.rglob("*") if p.is_file())
    assert URLS[1].encode() not in written and URLS[2].encode() not in written
    assert b"caption 1" not in written and b"caption 2" not in written
    assert manifest["deny"] == {
        "sha256": manifest["deny"]["sha256"],
        "entries": 3,
        "images_denied": 2,
    }
    assert manifest["counts"]["rejected"] == 2 and manifest["counts"]["ok"] == 2

    # the same list again: nothing to do; without it the two images come back (detected again)
    again = annotate_persons([str(shard)], ann, deny=deny, **kw)
    assert again["run"]["skipped"] == 1 and again["run"]["detected"] == 0
    lifted = annotate_persons([str(shard)], ann, **kw)
    assert lifted["run"]["detected"] == 1 and "deny" not in lifted
    rows = _images(ann)
    assert all(r["status"] == "ok" for r in rows.values())
    assert rows["000001"]["url"] == URLS[1]
    assert json.loads(layout.marker_path(ann, "persons", "00000").read_text())["deny"] is None


def test_the_command_takes_a_deny_list_and_says_what_it_left_out(
    tmp_path, yolo_assets, fall_weights, shard_writer, capsys
):
    shard = _shard(tmp_path, yolo_assets, shard_writer)
    deny = tmp_path / "removals.txt"
    deny.write_text(URLS[0] + "\n")
    args = ["annotate", "persons", shard, "--out", tmp_path / "ann", "--model", fall_weights]
    args += ["--person-classes", "Normal,Fall", "--workers", "0"]
    code, out, err = run_cli([*args, "--deny", deny], capsys)
    assert code == 0, err
    assert "1 image(s) on the deny list left out" in out + err

    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe not text")
    code, out, err = run_cli([*args, "--deny", bad], capsys)
    assert_one_line_error(code, err, "--deny", "UTF-8")
