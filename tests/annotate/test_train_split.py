"""``annotate train`` keeps identical images (same sha256 of their bytes) in one part of the split."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from train_data import png, write_labels

from fairsets.annotate.heads.labels import LabelRow
from fairsets.annotate.heads.train import train_head
from fairsets.annotate.heads.train_split import split_parts
from fairsets.core.progress import Progress
from fairsets.models.base import VLM


def _planted(n_images: int = 40, n_copies: int = 12) -> tuple[list[LabelRow], dict[tuple[str, str], str]]:
    """Rows of ``n_images`` images in shards a and b (two boxes each) and their digests: the first
    ``n_copies`` images of shard a have a byte-identical copy under another key in shard b."""
    rows, digests = [], {}
    for i in range(n_images):
        image = ("a", f"img{i:03d}")
        digests[image] = f"sha-{i}"
        label = "x" if i % 2 else "y"
        rows += [LabelRow(*image, b, label, None, len(rows) + 1) for b in range(2)]
        if i < n_copies:
            copy = ("b", f"copy{i:03d}")
            digests[copy] = f"sha-{i}"
            rows.append(LabelRow(*copy, 0, label, None, len(rows) + 1))
    return rows, digests


def _sides(rows: list[LabelRow], parts: list[str]) -> dict[tuple[str, str], set[str]]:
    sides: dict[tuple[str, str], set[str]] = {}
    for row, part in zip(rows, parts, strict=True):
        sides.setdefault((row.shard, row.key), set()).add(part)
    return sides


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_copies_of_an_image_fall_in_its_part(seed: int) -> None:
    rows, digests = _planted()
    by_image = _sides(rows, split_parts(rows, (0.5, 0.2, 0.3), seed, digests))
    assert all(len(p) == 1 for p in by_image.values())  # still by image
    for i in range(12):
        assert by_image[("a", f"img{i:03d}")] == by_image[("b", f"copy{i:03d}")], i
    # the planted set does catch a split by key alone: some copy lands apart from its original
    by_key = _sides(rows, split_parts(rows, (0.5, 0.2, 0.3), seed))
    assert any(by_key[("a", f"img{i:03d}")] != by_key[("b", f"copy{i:03d}")] for i in range(12))


def test_without_copies_the_split_is_the_split_by_image() -> None:
    rows, digests = _planted(n_copies=0)
    for seed in range(3):
        assert split_parts(rows, (0.6, 0.2, 0.2), seed, digests) == split_parts(rows, (0.6, 0.2, 0.2), seed)


class MeanColour(VLM):
    """An encoder without torch: an image's embedding is its mean colour (the test needs no more)."""

    family, name, pretrained, device, embed_dim = "test", "mean-colour", "none", "cpu", 3

    def tokenize(self, texts: Any) -> Any:  # pragma: no cover - never asked for texts
        raise NotImplementedError

    def embed_images(self, images: Any) -> np.ndarray:
        return np.array([np.asarray(im.convert("RGB"), np.float32).mean(axis=(0, 1)) for im in images])


def test_annotate_train_never_tests_on_a_copy_of_a_training_image(tmp_path: Path, shard_writer: Any) -> None:
    rng = np.random.default_rng(3)
    a, b, labels = [], [], []
    for i in range(24):
        colour = np.array([200, 30, 30] if i % 2 else [30, 30, 200], np.uint8)
        data = png(np.clip(colour + rng.integers(-20, 20, (16, 16, 3)), 0, 255).astype(np.uint8))
        label = "red" if i % 2 else "blue"
        a.append((f"k{i:02d}", {"png": data, "txt": "x"}))
        labels.append({"shard": "a", "key": f"k{i:02d}", "label": label})
        if i < 10:  # the same bytes again, under another key in another shard
            b.append((f"dup{i:02d}", {"png": data, "txt": "x"}))
            labels.append({"shard": "b", "key": f"dup{i:02d}", "label": label})
    shards = [str(shard_writer(tmp_path / "a.tar", a)), str(shard_writer(tmp_path / "b.tar", b))]
    result = train_head(
        write_labels(tmp_path / "labels.csv", labels),
        encoder="test:mean-colour",
        out=tmp_path / "head.npz",
        shards=shards,
        split=(0.5, 0.0, 0.5),
        seed=1,
        vlm=MeanColour(),
        plot=False,
        progress=Progress(False),
    )
    tested = {item["key"] for item in result.head.metrics["test_items"]}
    assert tested and len(tested) < 34
    for i in range(10):
        assert (f"k{i:02d}" in tested) == (f"dup{i:02d}" in tested), (i, sorted(tested))
    assert result.head.training["duplicate_images"] == 20
