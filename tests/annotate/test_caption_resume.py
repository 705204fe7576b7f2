"""``annotate caption`` killed with SIGKILL mid-run, twice, then run to the end: the same tables and
markers as an uninterrupted run, byte for byte, and no box answered before a kill is asked again
(only the requests in flight at the kill are sent a second time)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from ann_data import make_ann
from test_caption import KEY_ENV, SECRET, RedBoxCaptioner, table_order, view_sha

from fairsets.annotate import layout
from fairsets.annotate.captions.caption import CAPTIONS_DIR, caption_boxes, stage
from fairsets.annotate.chat.annotators import load_annotators
from fairsets.annotate.chat.items import BoxItem, views
from fairsets.annotate.chat.requests import CAPTION_VIEW, caption_request, chat_cache_dir
from fairsets.fetch.chat import ChatClient


def _outputs(ann: Path) -> dict[str, bytes]:
    """The caption tables and markers (no temporary file may be left among them)."""
    files = [*(ann / CAPTIONS_DIR).rglob("*"), *layout.marker_path(ann, stage("cap"), "x").parent.rglob("*")]
    return {p.relative_to(ann).as_posix(): p.read_bytes() for p in files if p.is_file()}


def _entry(ann: Path) -> dict[str, Any]:
    entry = json.loads((ann / layout.MANIFEST).read_text())["captions"]["cap"]
    entry.pop("seconds")
    return entry


def _cached(ann: Path, toml: Path, items: dict[str, BoxItem]) -> set[str]:
    """The items whose answer is in the folder's chat cache now."""
    client = ChatClient(load_annotators(toml).get("cap"), cache_dir=chat_cache_dir(ann))
    found = set()
    for item, box in items.items():
        ((_, jpeg, _),) = list(views(ann, [box], **CAPTION_VIEW))
        path = client.cache.path(client.cache_key(caption_request(jpeg)))
        if path is not None and path.is_file():
            found.add(item)
    return found


def _start(ann: Path, toml: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "fairsets", "annotate", "caption", str(ann), "--annotators", str(toml)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([*cmd, "--captioner", "cap", "-q"], env=env, stderr=subprocess.PIPE)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)


def test_kill_9_twice_then_rerun_gives_the_same_bytes_and_asks_no_answered_box_again(
    tmp_path: Path, shard_writer: Any
) -> None:
    ann = make_ann(tmp_path, shard_writer, shards=2, images_per_shard=6, boxes_per_image=2, seed=11)
    reference = tmp_path / "reference"
    shutil.copytree(ann.path, reference)
    items = {
        item: BoxItem(*item.split("/")[:2], int(item.split("/")[2]), ann.boxes[item])  # type: ignore[misc]
        for item in table_order(ann)
    }
    sha_of = {item: view_sha(ann.path, box) for item, box in items.items()}
    with RedBoxCaptioner(delay=0.08) as cap:
        toml = cap.toml(tmp_path / "annotators.toml", concurrency=2)
        caption_boxes(reference, toml, "cap")
        assert cap.hits == 24
        for kill_after in (5, 6):
            cached = _cached(ann.path, toml, items)
            start = cap.hits
            proc = _start(ann.path, toml)
            deadline = time.monotonic() + 60
            while cap.hits - start < kill_after and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            asked = cap.seen[start:]
            for item in cached:  # answered before: never asked again
                assert sha_of[item] not in asked, item
            assert all(asked.count(sha_of[item]) <= 1 for item in items)
        cached = _cached(ann.path, toml, items)
        assert 0 < len(cached) < 24  # the kills came mid-run
        start = cap.hits
        proc = _start(ann.path, toml)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        asked = cap.seen[start:]
        assert sorted(asked) == sorted(sha_of[item] for item in items if item not in cached)
        assert _cached(ann.path, toml, items) == set(items)  # the request compare-captioners builds
    assert _outputs(ann.path) == _outputs(reference)
    assert _entry(ann.path) == _entry(reference)
    assert _entry(ann.path)["counts"] == {"ok": 24, "refused": 0, "failed": 0, "rejected": 0}
    assert not [p for p in (ann.path / CAPTIONS_DIR).rglob(".*")]
