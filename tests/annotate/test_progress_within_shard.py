"""``annotate persons`` and ``annotate classify`` show their counts while a shard is being worked on
(images/s, boxes/s), not only when a shard ends; every count is shown once."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_classify import make_ann
from test_persons import StandIn, _box, _jpeg

from fairsets.annotate import layout
from fairsets.annotate.boxes.persons import annotate_persons
from fairsets.annotate.heads.classify import classify_boxes
from fairsets.annotate.heads.store import Head, write_head
from fairsets.core.progress import Progress
from fairsets.models.base import VLM


def _seen_within(progress: Progress, name: str, least: int, seconds: float = 5.0) -> int:
    """Wait (inside a running task) until the bar shows ``least`` of ``name``; what it shows."""
    end = time.monotonic() + seconds
    while progress.counts().get(name, 0) < least and time.monotonic() < end:
        time.sleep(0.05)
    return progress.counts().get(name, 0)


def test_persons_counts_images_while_the_shard_runs(
    tmp_path: Path, shard_writer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    progress = Progress(True)
    seen: list[int] = []

    def boxes_for(image: Any) -> list[Any]:
        time.sleep(0.15)  # a detector that takes its time: the task reports as it goes
        if len(det.calls) == 8:  # the last image of the only shard: the bar must already move
            seen.append(_seen_within(progress, "images", 3))
        return [_box(2, 2, 40, 40, 0.9)]

    weights = tmp_path / "stand-in.pt"
    weights.write_bytes(b"weights")
    det = StandIn(weights, boxes_for)
    monkeypatch.setattr("fairsets.annotate.boxes.task._LOADED", {})
    monkeypatch.setattr("fairsets.models.yolo.load_person_detector", lambda *a, **k: det)
    shard = shard_writer(
        tmp_path / "a.tar", [(f"k{i}", {"jpg": _jpeg((20, 30, 40)), "txt": "x"}) for i in range(8)]
    )
    annotate_persons(str(shard), tmp_path / "ann", model="unused", workers=0, batch=1, progress=progress)
    assert seen and seen[0] >= 3, f"within the shard the bar showed {seen} images"
    assert progress.counts() == {"images": 8, "boxes": 8}  # each image and box counted once
    assert not (tmp_path / "ann" / layout.WORKDIR / "progress").exists()  # work state, removed


class MeanColour(VLM):
    """An encoder without torch: a crop's embedding is its mean colour."""

    family, name, pretrained, device, embed_dim = "test", "mean-colour", "none", "cpu", 3
    calls = 0
    on_call: Any = None

    def tokenize(self, texts: Any) -> Any:  # pragma: no cover - never asked for texts
        raise NotImplementedError

    def embed_images(self, images: Any) -> np.ndarray:
        MeanColour.calls += 1
        time.sleep(0.15)
        if MeanColour.on_call is not None:
            MeanColour.on_call(MeanColour.calls)
        return np.array([np.asarray(im.convert("RGB"), np.float32).mean(axis=(0, 1)) for im in images])


def test_classify_counts_boxes_while_the_shard_runs(
    tmp_path: Path, shard_writer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = make_ann(tmp_path, shard_writer, shards=1, images=8)
    kept = len(built["kept"])
    # the head names a real encoder family (checked up front); the task gets the stand-in encoder
    head = Head("gender", ["a", "b"], "torchvision:mobilenet_v3_small", "none", np.eye(2, 3), np.zeros(2))
    write_head(tmp_path / "head.npz", head)
    progress = Progress(True)
    seen: list[int] = []
    MeanColour.calls = 0
    MeanColour.on_call = lambda n: seen.append(_seen_within(progress, "boxes", 3)) if n == 6 else None
    for where in ("classify", "classify_task"):
        monkeypatch.setattr(f"fairsets.annotate.heads.{where}.encoder_for", lambda *a: MeanColour())
    monkeypatch.setattr("fairsets.annotate.heads.classify_task.one_torch_thread", contextlib.nullcontext)
    classify_boxes(built["ann"], tmp_path / "head.npz", batch=1, workers=0, progress=progress)
    assert seen and seen[0] >= 3, f"within the shard the bar showed {seen} boxes"
    assert progress.counts() == {"boxes": kept}  # each kept box once (those of unreadable images too)
    assert not (built["ann"] / layout.WORKDIR / "progress").exists()
