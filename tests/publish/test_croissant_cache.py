"""Croissant URLs are unique per file content (or per Hub repository), so mlcroissant, which caches
downloads and extracted archives by URL alone, never reads one dataset's shards for another's."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from publish_fixtures import jpeg
from test_croissant import local_files

from fairsets.publish import metadata_name, write_croissant, write_metadata, write_shards
from fairsets.publish.croissant import HUB_URL, build_croissant


def tiny_build(out: Path, prefix: str, seed: int, repo_id: str | None = None) -> list[str]:
    """A one-split build whose shard and table have the same relative paths as every other
    build's (``shards/balanced/train-00000.tar``); returns its keys."""
    rows = [{"key": f"{prefix}_{i}", "split": "train", "state": "a", "gender": "f"} for i in range(2)]
    shards = write_shards(
        out, "balanced", "train", [(r["key"], jpeg(seed + i), r) for i, r in enumerate(rows)]
    )
    table = metadata_name("balanced", "train")
    write_metadata(out / table, rows, ["state", "gender"])
    split = {"num_samples": 2, "shards": [s["path"] for s in shards], "metadata": table}
    summary: dict[str, Any] = {"name": f"ds-{prefix}", "variants": {"balanced": {"train": split}}}
    if repo_id:
        summary["repo_id"] = repo_id
    write_croissant(out, summary)
    return [r["key"] for r in rows]


def loaded_keys(out: Path) -> tuple[list[str], list[str]]:
    """(metadata keys, image keys) read by mlcroissant from a local copy, as the card says."""
    import mlcroissant as mlc

    ds = mlc.Dataset(jsonld=str(out / "croissant.json"), mapping=local_files(out))
    meta = sorted(r["balanced_train/key"].decode() for r in ds.records("balanced_train"))
    images = sorted(r["balanced_train_images/key"].decode() for r in ds.records("balanced_train_images"))
    return meta, images


@pytest.mark.parametrize("repos", [(None, None), ("org-a/faces", "org-b/faces")], ids=["local", "hub"])
def test_two_builds_each_load_their_own_images(tmp_path: Path, repos: tuple[Any, Any]) -> None:
    # one process, one mlcroissant cache (conftest): the second build must not get the first's images
    a = tiny_build(tmp_path / "a" / "OUT", "alpha", 0, repos[0])
    b = tiny_build(tmp_path / "b" / "OUT", "beta", 50, repos[1])
    assert loaded_keys(tmp_path / "a" / "OUT") == (a, a)
    assert loaded_keys(tmp_path / "b" / "OUT") == (b, b)


def test_a_rebuild_in_place_is_not_read_from_the_old_extraction(tmp_path: Path) -> None:
    out = tmp_path / "OUT"
    first = tiny_build(out, "old", 0)
    assert loaded_keys(out)[1] == first
    for tar in (out / "shards").rglob("*.tar"):
        tar.unlink()
    again = tiny_build(out, "new", 70)
    assert loaded_keys(out)[1] == again


def test_hub_urls_name_the_repository(tmp_path: Path) -> None:
    out = tmp_path / "OUT"
    tiny_build(out, "k", 0, "my-org/my-faces")
    doc = json.loads((out / "croissant.json").read_text(encoding="utf-8"))
    urls = {f["@id"]: f["contentUrl"] for f in doc["distribution"] if f["@type"] == "cr:FileObject"}
    assert urls == {
        rel: HUB_URL.format(repo_id="my-org/my-faces", path=rel)
        for rel in ("shards/balanced/train-00000.tar", "metadata/balanced/train.parquet")
    }
    assert urls["shards/balanced/train-00000.tar"].startswith(
        "https://huggingface.co/datasets/my-org/my-faces/resolve/main/"
    )
    summary = {"name": "x", "repo_id": "not a repo", "variants": {"balanced": {"train": {"shards": []}}}}
    with pytest.raises(ValueError, match="repository id"):
        build_croissant(out, summary)


def test_the_card_snippet_loads_the_folder(layout: tuple[Path, dict[str, Any]], monkeypatch: Any) -> None:
    out, _ = layout
    card = (out / "README.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```python\n(.*?)```", card, re.S) if "mlcroissant" in b]
    assert len(blocks) == 1, "the card shows how to load the folder with mlcroissant"
    monkeypatch.chdir(out)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(blocks[0], "card-snippet", "exec"), {})
    doc = json.loads((out / "croissant.json").read_text(encoding="utf-8"))
    lines = printed.getvalue().splitlines()
    assert [ln.split()[0] for ln in lines] == [rs["@id"] for rs in doc["recordSet"]]
    assert all("/key" in ln for ln in lines)
