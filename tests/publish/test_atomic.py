"""Atomic writes: no partial file under the final name, no leftover temporary file."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from fairsets.core.atomic import (
    atomic_path,
    atomic_write_bytes,
    atomic_write_text,
    is_temp_name,
    sha256_file,
)


def test_write_bytes_and_text(tmp_path: Path) -> None:
    p = atomic_write_bytes(tmp_path / "a" / "b.bin", b"\x00\x01")
    assert p.read_bytes() == b"\x00\x01"
    atomic_write_text(tmp_path / "t.md", "line\nnext\n")
    assert (tmp_path / "t.md").read_bytes() == b"line\nnext\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a", "t.md"]


def test_sha256_file(tmp_path: Path) -> None:
    data = b"x" * (3 << 20)
    atomic_write_bytes(tmp_path / "big", data)
    assert sha256_file(tmp_path / "big") == hashlib.sha256(data).hexdigest()


def test_error_midway_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    with pytest.raises(RuntimeError, match="boom"), atomic_path(target) as tmp:
        with open(tmp, "wb") as f:
            f.write(b"partial data")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_error_keeps_previous_version(tmp_path: Path) -> None:
    target = atomic_write_text(tmp_path / "keep.txt", "old\n")
    with pytest.raises(ValueError), atomic_path(target) as tmp:
        tmp.write_text("new, incomplete")
        raise ValueError("writer failed")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_nothing_written_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError), atomic_path(tmp_path / "never"):
        pass
    assert list(tmp_path.iterdir()) == []


def test_temp_names_do_not_match_shard_globs(tmp_path: Path) -> None:
    seen = []
    with atomic_path(tmp_path / "train-00000.tar") as tmp:
        seen.append(tmp.name)
        tmp.write_bytes(b"x")
    assert is_temp_name(seen[0]) and not seen[0].startswith("train-")
    assert not is_temp_name("train-00000.tar")
