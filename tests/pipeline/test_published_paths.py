"""No published file holds the curator's file system (issue 11, defect 8).

The listing names its images relatively, absolutely inside its folder, absolutely elsewhere and
through ``..``; the recipe names the listing by its absolute path. Every published file (metadata
and rejects Parquet, the shards' JSON, card, Croissant, attribution, manifest) is read as text and
searched for the build's absolute folder.
"""

from __future__ import annotations

import csv
import json
import os
import tarfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from fairsets.pipeline.build import build
from fairsets.pipeline.config import load_recipe
from helpers import ROOT, write_candidates, write_recipe


def _texts(out: Path) -> dict[str, str]:
    """Every published file as text (Parquet rows as JSON, every member of every shard)."""
    texts = {}
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out).as_posix()
        if not p.is_file() or rel.startswith(".fairsets/"):
            continue
        if p.suffix == ".parquet":
            texts[rel] = json.dumps(pq.read_table(p).to_pylist(), default=str)
        elif p.suffix == ".tar":
            with tarfile.open(p) as tar:
                for m in tar.getmembers():
                    texts[f"{rel}:{m.name}"] = m.name
                    if m.name.endswith(".json"):
                        texts[f"{rel}:{m.name}"] += tar.extractfile(m).read().decode()
        else:
            texts[rel] = p.read_text(errors="replace")
    return texts


@pytest.mark.timeout(300)
def test_no_published_file_holds_an_absolute_local_path(tmp_path: Path) -> None:
    listing = write_candidates(tmp_path / "cands", 12)
    (tmp_path / "elsewhere").mkdir()
    with listing.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for i, row in enumerate(rows):
        name = row["path"]
        if i % 4 == 1:  # absolute, inside the listing's folder
            row["path"] = str(listing.parent / name)
        elif i % 4 == 2:  # absolute, outside it
            os.replace(listing.parent / name, tmp_path / "elsewhere" / name)
            row["path"] = str(tmp_path / "elsewhere" / name)
        elif i % 4 == 3:  # outside, through ..
            os.replace(listing.parent / name, tmp_path / "elsewhere" / name)
            row["path"] = f"../elsewhere/{name}"
    (tmp_path / "elsewhere" / "junk.jpg").write_bytes(b"not an image")
    rows.append({**rows[0], "path": str(tmp_path / "elsewhere" / "junk.jpg"), "identity": "junk"})
    with listing.open("w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    recipe = write_recipe(tmp_path / "r.toml", listing, quota=2)
    policy = tmp_path / "policies" / "policy.toml"  # a step parameter that is an absolute path
    policy.parent.mkdir()
    policy.write_bytes((ROOT / "licenses" / "policy.toml").read_bytes())
    text = recipe.read_text().replace(
        'name = "license"\n', f'name = "license"\npolicy = "{policy.as_posix()}"\n', 1
    )
    recipe.write_text(text)
    out = tmp_path / "out"
    build(load_recipe(recipe), out)
    steps = json.loads((out / "manifest.json").read_text())["steps"]
    assert [s["params"]["policy"] for s in steps if s["name"] == "license"] == ["policies/policy.toml"]

    texts = _texts(out)
    published = json.dumps(pq.read_table(out / "metadata" / "imbalanced" / "train.parquet").to_pylist())
    assert "external/" in published and "img000.jpg" in published  # all three kinds got through
    rejects = pq.read_table(out / "rejects.parquet").to_pylist()
    junk = [r for r in rejects if r["source_path"].endswith("junk.jpg")]
    assert junk and junk[0]["step"] == "decode" and junk[0]["source_path"].startswith("external/")
    assert any(name.endswith(".json") for name in texts) and "README.md" in texts and "manifest.json" in texts
    for needle in {str(tmp_path), os.path.realpath(tmp_path)}:
        leaks = [name for name, text in texts.items() if needle in text]
        assert not leaks, f"{needle} published in {leaks}"


def test_public_paths_of_a_recipe(tmp_path: Path) -> None:
    from fairsets.sources.base import public_paths

    recipe = {
        "source": {"path": str(tmp_path / "data" / "l.csv"), "prepare": f"{tmp_path}/hooks.py:make"},
        "supplement": [{"path": "/srv/other/x.parquet"}, {"path": "../up/y.csv"}],
        "steps": [{"params": {"weights": "~/models/w.onnx", "url": "https://example.org/a", "n": 3}}],
        "name": "kept/as/is",
    }
    public = public_paths(recipe, tmp_path)
    assert public["source"] == {"path": "data/l.csv", "prepare": "hooks.py:make"}
    assert public["supplement"][0]["path"].startswith("external/") and public["supplement"][0][
        "path"
    ].endswith("/x.parquet")
    assert public["supplement"][1]["path"].startswith("external/")
    assert public["steps"][0]["params"]["weights"].endswith("/w.onnx")
    assert public["steps"][0]["params"]["url"] == "https://example.org/a" and public["name"] == "kept/as/is"
    assert str(tmp_path) not in json.dumps(public)
    home = os.path.expanduser("~")
    assert len(home) < 2 or home not in json.dumps(public)
