"""The embedding cache: computed once per model, reused, resumable, per-sample rejections."""

from __future__ import annotations

import numpy as np
import pytest
from vlm_fixtures import CountingVLM, copy_dataset, damage_image, flip_image

from fairsets.audit.dataset import DatasetError, open_dataset
from fairsets.audit.embeddings import EmbeddingCache, embed_dataset, embed_texts
from fairsets.publish.manifest import verify_layout


@pytest.fixture
def dataset(two_state_out, tmp_path):
    return copy_dataset(two_state_out, tmp_path / "ds")


def test_images_are_embedded_once_and_reused(dataset, clip_vlm):
    ds = open_dataset(dataset)
    vlm = CountingVLM(clip_vlm)
    first = embed_dataset(ds, vlm, "balanced", ["train"], batch_size=3)
    n = len(ds.rows("balanced", ["train"]))
    assert first.vectors.shape == (n, clip_vlm.embed_dim)
    assert first.vectors.dtype == np.float32
    assert vlm.images_embedded == n and first.computed == n
    assert [r["key"] for r in first.rows] == [r["key"] for r in ds.rows("balanced", ["train"])]

    again = embed_dataset(ds, vlm, "balanced", ["train"])
    assert vlm.images_embedded == n and again.computed == 0  # all from the cache
    assert again.vectors.tobytes() == first.vectors.tobytes()

    # The cache sits beside the dataset, in its hidden working folder, keyed by model; the
    # published layout is untouched.
    folder = dataset / ".fairsets" / "embeddings" / clip_vlm.slug
    assert (folder / "model.json").is_file() and list((folder / "images").glob("part-*.parquet"))
    assert verify_layout(dataset) == []

    # The augmented variant shares the balanced images: only its new ones are embedded.
    aug_rows = ds.rows("augmented", ["train"])
    balanced_keys = {r["key"] for r in first.rows}
    new = sum(1 for r in aug_rows if r["key"] not in balanced_keys)
    embed_dataset(ds, vlm, "augmented", ["train"])
    assert vlm.images_embedded == n + new


def test_embeddings_match_direct_model_calls(dataset, clip_vlm):
    ds = open_dataset(dataset)
    emb = embed_dataset(ds, clip_vlm, "balanced", ["train"], batch_size=2)
    key, data = next(ds.images("balanced", ["train"]))
    import io

    from PIL import Image

    direct = clip_vlm.embed_images([Image.open(io.BytesIO(data)).convert("RGB")])[0]
    row = [r["key"] for r in emb.rows].index(key)
    np.testing.assert_allclose(emb.vectors[row], direct, rtol=1e-4, atol=1e-5)


def test_an_interrupted_run_keeps_finished_parts_and_resumes(dataset, clip_vlm):
    ds = open_dataset(dataset)
    n = len(ds.rows("balanced", ["train"]))
    broken = CountingVLM(clip_vlm, fail_after=4)
    with pytest.raises(KeyboardInterrupt):
        embed_dataset(ds, broken, "balanced", ["train"], batch_size=2, flush_every=2)
    assert broken.images_embedded == 4
    resumed = CountingVLM(clip_vlm)
    out = embed_dataset(ds, resumed, "balanced", ["train"], batch_size=2)
    assert resumed.images_embedded == n - 4
    assert out.vectors.shape[0] == n


def test_a_damaged_image_is_skipped_with_its_reason(dataset, clip_vlm):
    ds = open_dataset(dataset)
    key = ds.rows("balanced", ["train"])[1]["key"]
    damage_image(dataset, "balanced", "train", key)
    out = embed_dataset(ds, clip_vlm, "balanced", ["train"])
    assert [s["key"] for s in out.skipped] == [key]
    assert "does not decode" in out.skipped[0]["reason"]
    assert key not in [r["key"] for r in out.rows]
    assert out.vectors.shape[0] == len(ds.rows("balanced", ["train"])) - 1


def test_a_changed_image_is_embedded_again(dataset, clip_vlm):
    ds = open_dataset(dataset)
    vlm = CountingVLM(clip_vlm)
    embed_dataset(ds, vlm, "balanced", ["train"])
    before = vlm.images_embedded
    key = ds.rows("balanced", ["train"])[0]["key"]
    old = embed_dataset(ds, vlm, "balanced", ["train"]).vectors[0].copy()
    flip_image(dataset, "balanced", "train", key)  # new bytes, new sha256 in the metadata
    out = embed_dataset(ds, vlm, "balanced", ["train"])
    assert vlm.images_embedded == before + 1  # only the changed image
    assert out.skipped == [] and not np.array_equal(out.vectors[0], old)


def test_texts_are_cached(dataset, clip_vlm):
    ds = open_dataset(dataset)
    cache = EmbeddingCache.for_dataset(ds, clip_vlm)
    a = embed_texts(clip_vlm, ["An Indian person", "a cat", "An Indian person"], cache=cache)
    assert a.shape == (3, clip_vlm.embed_dim)
    assert a[0].tobytes() == a[2].tobytes()
    assert set(cache.load_texts()) == {"An Indian person", "a cat"}
    b = embed_texts(clip_vlm, ["a cat"], cache=cache)
    assert b[0].tobytes() == a[1].tobytes()


def test_a_cache_of_another_model_is_refused(dataset, tmp_path):
    root = tmp_path / "cache"
    EmbeddingCache(root, "open_clip:ViT-B-32:none").save_texts({"x": np.ones(4, np.float32)})
    with pytest.raises(ValueError, match="belongs to model"):
        EmbeddingCache(root, "open_clip:ViT-B-16:none")


def test_not_a_dataset(tmp_path):
    with pytest.raises(DatasetError, match="not a published fairsets dataset"):
        open_dataset(tmp_path)
    with pytest.raises(DatasetError, match="no such dataset"):
        open_dataset(tmp_path / "missing")


def test_missing_split_and_variant_are_named(dataset):
    ds = open_dataset(dataset)
    with pytest.raises(DatasetError, match="no split 'test'"):
        ds.rows("balanced", ["test"])
    with pytest.raises(DatasetError, match="no variant 'nope'"):
        ds.splits("nope")
    assert ds.default_variant() == "balanced"
    assert ds.default_splits("balanced") == ["train"]  # one identity per cell: no test split
