"""Crop embeddings: batching, the (item, pixels) cache, a second run embeds nothing, a killed run resumes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from train_data import png, write_labels

from fairsets.annotate.heads.embed import CropSource, crop_cache, crop_sha256, embed_crops, embed_labelled
from fairsets.annotate.heads.labels import read_labels
from fairsets.annotate.shards import resolve_shards
from fairsets.models import load_vlm


@pytest.fixture(scope="module")
def encoder() -> Any:
    return load_vlm("torchvision:mobilenet_v3_small", "none")


class Counting:
    """An encoder that counts its forward passes and crops, and can fail at a given pass."""

    def __init__(self, inner: Any, fail_at: int | None = None) -> None:
        self.inner, self.fail_at, self.calls, self.crops = inner, fail_at, 0, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed_images(self, images: list[Any]) -> np.ndarray:
        self.calls += 1
        if self.fail_at is not None and self.calls >= self.fail_at:
            raise KeyboardInterrupt("killed")
        self.crops += len(images)
        return self.inner.embed_images(images)


def _dataset(root: Path, shard_writer: Any, n: int = 10) -> tuple[Path, CropSource]:
    rng = np.random.default_rng(3)
    samples, rows = [], []
    for i in range(n):
        key = f"k{i:02d}"
        samples.append((key, {"png": png(rng.integers(0, 256, (40 + i, 50, 3), dtype=np.uint8))}))
        rows.append({"shard": "s", "key": key, "label": "a" if i % 2 else "b"})
        rows.append(
            {"shard": "s", "key": key, "box_id": 0, "label": "a", "x1": 5, "y1": 5, "x2": 30, "y2": 25}
        )
    shard_writer(root / "s.tar", samples)
    refs = resolve_shards(str(root / "s.tar"))
    return write_labels(root / "labels.csv", rows), CropSource({r.name: r for r in refs})


def test_embed_crops_batches_and_checks_its_input(encoder: Any) -> None:
    rng = np.random.default_rng(0)
    crops = [rng.integers(0, 256, (20 + i, 30, 3), dtype=np.uint8) for i in range(5)]
    one = embed_crops(encoder, crops, batch_size=1)
    assert one.shape == (5, encoder.embed_dim) and one.dtype == np.float32
    np.testing.assert_allclose(embed_crops(encoder, crops, batch_size=3), one, rtol=1e-4, atol=1e-5)
    grey = embed_crops(encoder, [crops[0][..., 0]])
    np.testing.assert_allclose(
        grey, embed_crops(encoder, [np.repeat(crops[0][..., :1], 3, axis=2)]), atol=1e-6
    )
    assert embed_crops(encoder, []).shape == (0, encoder.embed_dim)
    with pytest.raises(ValueError, match="uint8"):
        embed_crops(encoder, [crops[0].astype(np.float32)])
    with pytest.raises(ValueError, match="non-empty"):
        embed_crops(encoder, [crops[0][:0]])
    # The cache key tells apart pixels of another shape with the same bytes.
    assert crop_sha256(crops[0]) != crop_sha256(crops[0].reshape(30, 20 + 0, 3))


def test_a_second_run_embeds_nothing(tmp_path: Path, encoder: Any, shard_writer: Any) -> None:
    labels, source = _dataset(tmp_path, shard_writer)
    rows = read_labels(labels).rows
    first = Counting(encoder)
    a = embed_labelled(first, rows, source, crop_cache(tmp_path / "cache", encoder), batch_size=4)
    assert a.computed == first.crops == 20 and first.calls == 5 and not a.rejected
    again = Counting(encoder)
    b = embed_labelled(again, rows, source, crop_cache(tmp_path / "cache", encoder), batch_size=4)
    assert again.calls == 0 and b.computed == 0
    np.testing.assert_array_equal(a.vectors, b.vectors)
    assert [r.item for r in b.rows] == [r.item for r in rows]
    # A changed box is a new crop: only it is embedded again.
    moved = [r if r.item != "s/k03/0" else type(r)(**{**r.__dict__, "box": (6, 5, 30, 25)}) for r in rows]
    third = Counting(encoder)
    assert embed_labelled(third, moved, source, crop_cache(tmp_path / "cache", encoder)).computed == 1


def test_a_killed_run_resumes_where_it_stopped(tmp_path: Path, encoder: Any, shard_writer: Any) -> None:
    labels, source = _dataset(tmp_path, shard_writer, n=6)
    rows = read_labels(labels).rows
    cache = tmp_path / "cache"
    killed = Counting(encoder, fail_at=4)  # three batches of 2 embedded, 4 crops flushed
    with pytest.raises(KeyboardInterrupt):
        embed_labelled(killed, rows, source, crop_cache(cache, encoder), batch_size=2, flush_every=4)
    assert len(crop_cache(cache, encoder).load_images()) == 4
    resumed = Counting(encoder)
    got = embed_labelled(resumed, rows, source, crop_cache(cache, encoder), batch_size=2, flush_every=4)
    assert got.computed == resumed.crops == 8
    whole = embed_labelled(
        Counting(encoder), rows, source, crop_cache(tmp_path / "fresh", encoder), batch_size=2
    )
    np.testing.assert_allclose(got.vectors, whole.vectors, rtol=1e-4, atol=1e-5)
