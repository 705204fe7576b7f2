"""WebDataset shards: determinism, member layout, loading with webdataset and datasets."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from publish_fixtures import jpeg

from fairsets.publish.shards import SHARD_MTIME, shard_json, shard_name, write_shard, write_shards


def _records(n: int = 3) -> list[tuple[str, bytes, dict[str, Any]]]:
    return [(f"key_{i}", jpeg(i), {"key": f"key_{i}", "z": i, "a": "é"}) for i in range(n)]


def test_shard_name() -> None:
    assert shard_name("balanced", "train", 3) == "shards/balanced/train-00003.tar"
    with pytest.raises(ValueError):
        shard_name("Bal/anced", "train", 0)
    with pytest.raises(ValueError):
        shard_name("balanced", "train", 100_000)


def test_write_shard_is_byte_deterministic(tmp_path: Path) -> None:
    a = write_shard(tmp_path / "a" / "train-00000.tar", _records())
    b = write_shard(tmp_path / "b" / "train-00000.tar", _records())
    assert (tmp_path / "a" / "train-00000.tar").read_bytes() == (
        tmp_path / "b" / "train-00000.tar"
    ).read_bytes()
    assert a["sha256"] == b["sha256"] and a["count"] == 3
    assert a["bytes"] == (tmp_path / "a" / "train-00000.tar").stat().st_size


def test_members_and_headers(tmp_path: Path) -> None:
    recs = _records()
    write_shard(tmp_path / "s.tar", recs)
    with tarfile.open(tmp_path / "s.tar") as tf:
        members = tf.getmembers()
        assert [m.name for m in members] == [f"key_{i}.{ext}" for i in range(3) for ext in ("jpg", "json")]
        for m in members:
            assert (m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) == (
                SHARD_MTIME,
                0,
                0,
                "fairsets",
                "fairsets",
                0o644,
            )
        assert tf.extractfile("key_1.jpg").read() == recs[1][1]
        raw = tf.extractfile("key_1.json").read()
        assert raw == '{"a":"é","key":"key_1","z":1}'.encode()


@pytest.mark.parametrize("bad", ["a.b", "", "x/y", "key with space"])
def test_illegal_key_leaves_nothing(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="illegal sample key"):
        write_shard(tmp_path / "s.tar", [*_records(2), (bad, jpeg(9), {})])
    assert list(tmp_path.iterdir()) == []


def test_duplicate_key_and_bad_metadata(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="duplicate"):
        write_shard(tmp_path / "s.tar", [*_records(2), ("key_0", jpeg(9), {})])
    with pytest.raises(ValueError, match="JSON"):
        write_shard(tmp_path / "s.tar", [("k", jpeg(1), {"x": object()})])
    with pytest.raises(ValueError, match="JSON"):
        write_shard(tmp_path / "s.tar", [("k", jpeg(1), {"x": float("nan")})])
    assert list(tmp_path.iterdir()) == []


def test_error_in_record_iterator_leaves_nothing(tmp_path: Path) -> None:
    def gen():
        yield from _records(2)
        raise RuntimeError("source died")

    with pytest.raises(RuntimeError):
        write_shard(tmp_path / "s.tar", gen())
    assert list(tmp_path.iterdir()) == []


def test_write_shards_splits_by_count(tmp_path: Path) -> None:
    out = write_shards(tmp_path, "balanced", "train", _records(5), max_count=2)
    assert [s["path"] for s in out] == [shard_name("balanced", "train", i) for i in range(3)]
    assert [s["count"] for s in out] == [2, 2, 1]
    assert write_shards(tmp_path, "balanced", "test", []) == []


def test_webdataset_reads_layout(layout: tuple[Path, dict[str, Any]]) -> None:
    import webdataset as wds

    out, info = layout
    shards = info["summary"]["variants"]["balanced"]["train"]["shards"]
    urls = [str(out / s) for s in shards]
    ds = (
        wds.WebDataset(urls, shardshuffle=False, empty_check=False)
        .decode("pil")
        .to_tuple("__key__", "jpg", "json")
    )
    rows = list(ds)
    expected = sorted(r["key"] for r in info["rows"] if r["variant"] == "balanced" and r["split"] == "train")
    assert [k for k, _, _ in rows] == expected
    for key, img, meta in rows:
        assert img.size == (24, 24)
        assert meta["key"] == key and meta["variant"] == "balanced"


@pytest.mark.parametrize("variant", ["balanced", "augmented"])
def test_datasets_load_webdataset(layout: tuple[Path, dict[str, Any]], hf_cache: Path, variant: str) -> None:
    import datasets

    out, info = layout
    files = {s: str(out / "shards" / variant / f"{s}-*.tar") for s in ("train", "test")}
    for split in ("train", "test"):
        ds = datasets.load_dataset("webdataset", data_files=files, split=split, cache_dir=str(hf_cache))
        expected = {r["key"]: r for r in info["rows"] if r["variant"] == variant and r["split"] == split}
        assert len(ds) == len(expected)
        assert {"__key__", "jpg", "json"} <= set(ds.column_names)
        for row in ds:
            meta = row["json"]
            assert meta["key"] == row["__key__"] in expected
            assert meta["split"] == split
            assert row["jpg"].size == (24, 24)
            want = expected[row["__key__"]]
            assert meta["state"] == want["state"]
            assert meta["license"] == (want["license"] or "")  # nulls are "" in the shard JSON
            assert meta["augmented_from"] == (want["augmented_from"] or "")
    json.dumps(info["summary"])  # the summary itself stays JSON-able


def test_shard_json_is_type_stable() -> None:
    meta = {"a": None, "b": {"z": 1, "y": [1, 2]}, "c": [1, 2], "d": 3}
    assert shard_json(meta) == {"a": "", "b": '{"y":[1,2],"z":1}', "c": [1, 2], "d": 3}
    assert shard_json(meta, null=None)["a"] is None


def test_datasets_loads_late_non_null_values(tmp_path: Path, hf_cache: Path) -> None:
    """datasets infers the json schema from the first 5 samples: nulls there must not break later rows."""
    import datasets

    metas = [{"key": f"k{i}", "augmented_from": None, "augmentation": None} for i in range(6)]
    metas.append({"key": "k6", "augmented_from": "k0", "augmentation": {"flip": True}})
    write_shard(tmp_path / "train-00000.tar", [(m["key"], jpeg(i), m) for i, m in enumerate(metas)])
    ds = datasets.load_dataset(
        "webdataset",
        data_files={"train": str(tmp_path / "train-*.tar")},
        split="train",
        cache_dir=str(hf_cache),
    )
    last = ds[6]["json"]
    assert last["augmented_from"] == "k0" and last["augmentation"] == '{"flip":true}'
    assert ds[0]["json"]["augmented_from"] == ""
