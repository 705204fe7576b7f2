"""The offline example builds the whole published layout, loadable by datasets and webdataset."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

LAYOUT = ["README.md", "croissant.json", "ATTRIBUTION.md", "manifest.json", "rejects.parquet"]


def test_every_file_of_the_layout(example_out: Path) -> None:
    for name in LAYOUT:
        assert (example_out / name).is_file(), name
    for variant in ("imbalanced", "balanced", "augmented"):
        assert (example_out / "metadata" / variant / "train.parquet").is_file()
        assert list((example_out / "shards" / variant).glob("train-*.tar"))


def test_balanced_cells_hold_exactly_quota(example_out: Path) -> None:
    manifest = json.loads((example_out / "manifest.json").read_text())
    quota = manifest["recipe"]["quota"]
    rows = [
        r
        for s in ("train", "test")
        if (p := example_out / "metadata" / "balanced" / f"{s}.parquet").exists()
        for r in pq.read_table(p).to_pylist()
    ]
    cells = Counter((r["state"], r["gender"]) for r in rows)
    assert cells == {("Kerala", "female"): quota}  # Assam/female has no real face: reported, not faked
    assert manifest["warnings"] and any("Assam" in w and "no real image" in w for w in manifest["warnings"])
    aug = [r for r in rows if r["augmented_from"]]
    assert aug and all(json.loads(r["augmentation"])["applied"] for r in aug)
    rows_aug = [
        r
        for s in ("train", "test")
        if (p := example_out / "metadata" / "augmented" / f"{s}.parquet").exists()
        for r in pq.read_table(p).to_pylist()
    ]
    assert Counter((r["state"], r["gender"]) for r in rows_aug) == {k: 2 * quota for k in cells}


def test_each_filter_rejects_its_example(example_out: Path) -> None:
    rej = {
        r["source_path"]: (r["step"], r["reason"])
        for r in pq.read_table(example_out / "rejects.parquet").to_pylist()
    }
    assert rej["images/cameraman.png"][0] == "grayscale"
    assert (
        rej["images/astronaut_nc.png"][0] == "license" and "CC-BY-NC-4.0" in rej["images/astronaut_nc.png"][1]
    )
    assert rej["images/astronaut_blurred.jpg"][0] == "blur"
    assert rej["images/coffee.png"][0] in ("detect_face", "skin")
    # the cat is in a recipe cell, so only the face detector's threshold can stop it
    assert rej["images/chelsea.png"] == ("detect_face", "no face with confidence >= 0.9")
    assert rej["images/bomb.png"][0] == "decode"
    assert rej["images/grace_hopper_truncated.jpg"][0] == "decode"
    assert rej["images/not_an_image.jpg"][0] == "decode"
    assert (
        rej["images/astronaut_resaved.png"][0] == "dedup"
        and "exact" in rej["images/astronaut_resaved.png"][1]
    )
    assert (
        rej["images/grace_hopper_small.jpg"][0] == "dedup"
        and "near" in rej["images/grace_hopper_small.jpg"][1]
    )
    manifest = json.loads((example_out / "manifest.json").read_text())
    assert manifest["counts"]["candidates"] == 13
    assert manifest["counts"]["accepted"] == 2


def test_every_variant_has_an_identity_disjoint_split(example_out: Path) -> None:
    for variant in ("imbalanced", "balanced", "augmented"):
        ids = {}
        for split in ("train", "test"):
            rows = pq.read_table(example_out / "metadata" / variant / f"{split}.parquet").to_pylist()
            assert rows, (variant, split)
            ids[split] = {r["identity"] for r in rows}
        assert not ids["train"] & ids["test"], variant
    assert list((example_out / "shards" / "balanced").glob("test-*.tar"))


def test_loads_with_webdataset_and_datasets(example_out: Path, tmp_path: Path, monkeypatch) -> None:
    import datasets
    import webdataset as wds

    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf"))
    shards = sorted(str(p) for p in (example_out / "shards" / "balanced").glob("train-*.tar"))
    samples = list(wds.WebDataset(shards, shardshuffle=False).decode("pil"))
    assert samples and samples[0]["jpg"].size == (512, 512)
    assert {"state", "gender", "license", "split"} <= set(samples[0]["json"])
    ds = datasets.load_dataset(
        "webdataset", data_files={"train": shards}, split="train", cache_dir=str(tmp_path / "hf")
    )
    assert len(ds) == len(samples)
    row = ds[0]
    assert row["jpg"].size == (512, 512) and row["json"]["variant"] == "balanced"


def test_card_yaml_and_croissant(example_out: Path) -> None:
    from huggingface_hub import DatasetCard

    card = DatasetCard((example_out / "README.md").read_text())
    data = card.data.to_dict()
    assert data["license"] and data["configs"]
    assert any(c.get("default") for c in data["configs"])
    import mlcroissant as mlc

    mlc.Dataset(jsonld=str(example_out / "croissant.json"))


def test_published_metadata_has_no_local_paths(example_out: Path) -> None:
    import webdataset as wds

    tables = [*(example_out / "metadata").rglob("*.parquet"), example_out / "rejects.parquet"]
    for t in tables:
        table = pq.read_table(t)
        assert not {"path", "pool", "filename", "image"} & set(table.column_names), t
        text = json.dumps(table.to_pylist(), default=str)
        assert str(example_out) not in text and ".fairsets" not in text and "/tmp" not in text, t
    for shard in (example_out / "shards").rglob("*.tar"):
        for sample in wds.WebDataset(str(shard), shardshuffle=False):
            meta = json.loads(sample["json"])
            assert not {"path", "pool", "filename"} & set(meta)
            assert not any(isinstance(v, str) and v.startswith("/") for v in meta.values())


def _licence_rows(markdown: str) -> dict[str, tuple[int, int]]:
    """Licence table rows (name → source images, published files) of a card or ATTRIBUTION.md."""
    rows = {}
    for line in markdown.splitlines():
        if line.startswith("| [") and "](" in line:
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = (int(cells[1]), int(cells[2]))
    return rows


def test_card_and_attribution_count_the_same_things(example_out: Path) -> None:
    card = (example_out / "README.md").read_text(encoding="utf-8")
    attribution = (example_out / "ATTRIBUTION.md").read_text(encoding="utf-8")
    for text in (card, attribution):  # each count says what it counts
        assert "| Source images | Published files (all configs, incl. augmented copies) |" in text
    assert _licence_rows(card) == _licence_rows(attribution) != {}
    keys = {
        r["key"]: r
        for t in (example_out / "metadata").rglob("*.parquet")
        for r in pq.read_table(t).to_pylist()
    }
    real = [k for k, r in keys.items() if not r["augmented_from"]]
    assert sum(s for s, _ in _licence_rows(card).values()) == len(real) == 2
    assert sum(f for _, f in _licence_rows(card).values()) == len(keys)
    assert "Published samples (incl. augmented copies)" in card
