"""Croissant: the JSON-LD validates with mlcroissant and its record sets load offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fairsets.core.atomic import sha256_file
from fairsets.publish.croissant import CONFORMS_TO, build_croissant


def local_files(out: Path) -> dict[str, str]:
    """``mapping`` for ``mlc.Dataset``: each FileObject's ``@id`` (its relative path) to its file,
    as the card's loading snippet writes it."""
    doc = json.loads((out / "croissant.json").read_text(encoding="utf-8"))
    return {f["@id"]: str(out / f["@id"]) for f in doc["distribution"] if f["@type"] == "cr:FileObject"}


@pytest.fixture(scope="module")
def croissant(layout: tuple[Path, dict[str, Any]]) -> Any:
    import mlcroissant as mlc

    out, _ = layout
    return mlc.Dataset(jsonld=str(out / "croissant.json"), mapping=local_files(out))


def test_validates_without_errors(croissant: Any) -> None:
    issues = croissant.metadata.ctx.issues
    assert not issues.errors, issues.report()
    # only "recommended" properties may be missing (datePublished: no timestamps by design)
    assert all("recommended" in w for w in issues.warnings), issues.warnings


def test_file_objects_have_checksums(layout: tuple[Path, dict[str, Any]]) -> None:
    out, info = layout
    doc = json.loads((out / "croissant.json").read_text())
    assert doc["conformsTo"] == CONFORMS_TO and "datePublished" not in doc
    objs = {d["@id"]: d for d in doc["distribution"] if d["@type"] == "cr:FileObject"}
    expected = set()
    for splits in info["summary"]["variants"].values():
        for s in splits.values():
            expected |= set(s["shards"]) | {s["metadata"]}
    assert set(objs) == expected
    for rel, d in objs.items():
        assert d["sha256"] == sha256_file(out / rel)
        # a shard's URL carries its bytes' hash (mlcroissant caches extractions by URL)
        assert d["contentUrl"] == (f"{rel}?sha256={d['sha256']}" if rel.endswith(".tar") else rel)
        assert d["encodingFormat"] == (
            "application/x-tar" if rel.endswith(".tar") else "application/x-parquet"
        )
    assert sorted(doc["license"]) == sorted(
        [
            "https://creativecommons.org/licenses/by-sa/4.0/",
            "https://creativecommons.org/licenses/by/4.0/",
            "https://creativecommons.org/publicdomain/mark/1.0/",
            "https://creativecommons.org/publicdomain/zero/1.0/",
        ]
    )


def test_deterministic(layout: tuple[Path, dict[str, Any]]) -> None:
    out, info = layout
    doc = build_croissant(out, info["summary"])
    text = json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert text == (out / "croissant.json").read_text(encoding="utf-8")


def test_metadata_records_load(croissant: Any, layout: tuple[Path, dict[str, Any]]) -> None:
    _, info = layout
    records = list(croissant.records("balanced_train"))
    expected = sorted(r["key"] for r in info["rows"] if r["variant"] == "balanced" and r["split"] == "train")
    assert sorted(r["balanced_train/key"].decode() for r in records) == expected
    first = records[0]
    assert {"balanced_train/state", "balanced_train/gender", "balanced_train/license"} <= set(first)


def test_image_records_load(croissant: Any, layout: tuple[Path, dict[str, Any]]) -> None:
    _, info = layout
    records = list(croissant.records("augmented_test_images"))
    expected = sorted(r["key"] for r in info["rows"] if r["variant"] == "augmented" and r["split"] == "test")
    assert sorted(r["augmented_test_images/key"].decode() for r in records) == expected
    assert records[0]["augmented_test_images/image"].size == (24, 24)


def test_data_cannot_break_cite_as_or_link_elsewhere(layout: tuple[Path, dict[str, Any]]) -> None:
    out, info = layout
    hostile = dict(info["summary"], pretty_name="A } @misc{evil,\ntitle={x", url="javascript:alert(1)")
    doc = build_croissant(out, hostile)
    cite = doc["citeAs"]
    assert cite.count("{") == cite.count("}") and "\n" not in cite and "@misc{evil" not in cite
    assert "url" not in doc  # a javascript: URL is no dataset URL
    assert build_croissant(out, dict(info["summary"], url="https://example.org/d"))["url"] == (
        "https://example.org/d"
    )
