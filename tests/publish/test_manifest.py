"""manifest.json and verify_layout."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fairsets.publish.manifest import file_entries, package_versions, verify_layout, write_manifest


def test_write_manifest_format(tmp_path: Path) -> None:
    info = write_manifest(tmp_path / "manifest.json", {"b": 1, "a": {"z": [1, 2], "y": "é"}})
    text = (tmp_path / "manifest.json").read_text(encoding="utf-8")
    assert text == '{\n  "a": {\n    "y": "é",\n    "z": [\n      1,\n      2\n    ]\n  },\n  "b": 1\n}\n'
    assert info["bytes"] == len(text.encode())


def test_package_versions() -> None:
    v = package_versions(["pyarrow", "webdataset", "surely-not-installed-pkg"])
    assert list(v) == ["pyarrow", "surely-not-installed-pkg", "webdataset"]
    assert v["webdataset"] and v["surely-not-installed-pkg"] is None


def test_layout_is_clean(layout: tuple[Path, dict[str, Any]]) -> None:
    out, _ = layout
    assert verify_layout(out) == []
    files = json.loads((out / "manifest.json").read_text())["files"]
    assert "manifest.json" not in files and "shards/balanced/train-00000.tar" in files


def test_layout_is_byte_deterministic(
    layout: tuple[Path, dict[str, Any]], make_layout: Callable[[Path], dict[str, Any]], tmp_path: Path
) -> None:
    out, _ = layout
    again = tmp_path / "OUT"
    make_layout(again)
    assert file_entries(again) == file_entries(out)
    assert (again / "manifest.json").read_bytes() == (out / "manifest.json").read_bytes()


@pytest.fixture()
def copy(layout: tuple[Path, dict[str, Any]], tmp_path: Path) -> Path:
    out, _ = layout
    dst = tmp_path / "OUT"
    shutil.copytree(out, dst)
    return dst


def test_hidden_work_files_are_ignored(copy: Path) -> None:
    (copy / ".fairsets" / "markers").mkdir(parents=True)
    (copy / ".fairsets" / "markers" / "t1.json").write_text("{}")
    (copy / ".gitattributes").write_text("*.tar filter=lfs\n")
    assert verify_layout(copy) == []
    assert ".gitattributes" not in file_entries(copy) and not any(
        r.startswith(".") for r in file_entries(copy)
    )


def test_finds_corrupted_shard(copy: Path) -> None:
    shard = copy / "shards" / "balanced" / "train-00000.tar"
    data = bytearray(shard.read_bytes())
    data[600] ^= 0xFF  # same size, different content
    shard.write_bytes(bytes(data))
    problems = verify_layout(copy)
    assert len(problems) == 1 and "shards/balanced/train-00000.tar: sha256" in problems[0]


def test_finds_truncated_missing_and_unlisted(copy: Path) -> None:
    (copy / "metadata" / "augmented" / "test.parquet").write_bytes(b"PAR1")
    (copy / "ATTRIBUTION.md").unlink()
    (copy / "shards" / "balanced" / "train-00099.tar").write_bytes(b"")
    (copy / "shards" / "balanced" / ".train-00002.tar.tmp-1-abcd").write_bytes(b"x")
    problems = "\n".join(verify_layout(copy))
    assert "metadata/augmented/test.parquet: size 4 != manifest" in problems
    assert "ATTRIBUTION.md: required file is missing" in problems
    assert "ATTRIBUTION.md: listed in the manifest but missing" in problems
    assert "shards/balanced/train-00099.tar: on disk but not listed" in problems
    assert "leftover temporary file" in problems


def test_missing_manifest_and_split(copy: Path) -> None:
    (copy / "manifest.json").unlink()
    shutil.rmtree(copy / "metadata" / "balanced")
    problems = verify_layout(copy)
    assert "manifest.json: missing" in problems
    assert any("shards for split train have no metadata/balanced/train.parquet" in p for p in problems)
    assert verify_layout(copy / "nope") == [f"{copy / 'nope'}: output directory does not exist"]
