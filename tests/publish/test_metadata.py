"""Parquet tables: column order, types, determinism."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fairsets.core.tables import (
    metadata_columns,
    metadata_name,
    write_metadata,
    write_rejects,
    write_table,
)


def _rows() -> list[dict[str, Any]]:
    return [
        {
            "zz_extra": 1.5,
            "key": "b",
            "gender": "f",
            "split": "train",
            "width": 10,
            "height": 12,
            "license": "CC0-1.0",
        },
        {
            "key": "a",
            "split": "train",
            "gender": "m",
            "augmentation": {"seed": 1, "flip": True},
            "augmented_from": "b",
        },
    ]


def test_column_order_and_types(tmp_path: Path) -> None:
    info = write_metadata(tmp_path / metadata_name("balanced", "train"), _rows(), ["gender"])
    assert info["rows"] == 2 and info["path"].endswith("metadata/balanced/train.parquet")
    t = pq.read_table(info["path"])
    assert t.column_names == [
        "key",
        "split",
        "gender",
        "license",
        "augmented_from",
        "augmentation",
        "width",
        "height",
        "zz_extra",
    ]
    assert t.schema.field("width").type == pa.int32()
    assert t.schema.field("augmented_from").type == pa.string()
    assert t.column("augmentation").to_pylist() == [None, '{"flip":true,"seed":1}']
    assert pq.read_metadata(info["path"]).row_group(0).column(0).compression == "ZSTD"
    assert t.schema.metadata is None or b"pandas" not in t.schema.metadata


def test_metadata_columns() -> None:
    cols = metadata_columns(["state", "gender"])
    assert cols[:5] == ["key", "split", "variant", "state", "gender"]
    assert cols[-2:] == ["width", "height"]


def test_deterministic_bytes(tmp_path: Path) -> None:
    a = write_table(tmp_path / "a.parquet", _rows())
    b = write_table(tmp_path / "b.parquet", _rows())
    assert a["sha256"] == b["sha256"]
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()


def test_all_null_columns_are_strings(tmp_path: Path) -> None:
    write_table(tmp_path / "t.parquet", [{"key": "a", "augmented_from": None, "note": None}])
    t = pq.read_table(tmp_path / "t.parquet")
    assert t.schema.field("augmented_from").type == pa.string()
    assert t.schema.field("note").type == pa.string()


def test_empty_and_schema(tmp_path: Path) -> None:
    write_rejects(tmp_path / "rejects.parquet", [])
    t = pq.read_table(tmp_path / "rejects.parquet")
    assert t.num_rows == 0 and t.column_names[:4] == ["key", "status", "step", "reason"]
    schema = pa.schema([("key", pa.string()), ("n", pa.int64())])
    write_table(tmp_path / "s.parquet", [{"key": "a", "n": 1}], schema)
    assert pq.read_table(tmp_path / "s.parquet").schema.equals(schema)
    with pytest.raises(ValueError, match="not in the schema"):
        write_table(tmp_path / "s2.parquet", [{"key": "a", "other": 1}], schema)
    assert not (tmp_path / "s2.parquet").exists()


def test_bad_type_raises_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="width"):
        write_table(tmp_path / "bad.parquet", [{"key": "a", "width": "wide"}])
    assert list(tmp_path.iterdir()) == []


def test_layout_tables_readable_with_duckdb(layout: tuple[Path, dict[str, Any]]) -> None:
    duckdb = pytest.importorskip("duckdb")
    out, info = layout
    n = duckdb.sql(f"SELECT count(*) FROM '{out}/metadata/*/*.parquet'").fetchall()[0][0]
    assert n == len(info["rows"])
    rows = duckdb.sql(
        f"SELECT key, sha256 FROM '{out}/metadata/augmented/train.parquet' ORDER BY key"
    ).fetchall()
    assert all(len(sha) == 64 for _, sha in rows)
