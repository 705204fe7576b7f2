"""Parquet tables of the published layout: ``metadata/{variant}/{split}.parquet`` and ``rejects.parquet``.

Tables are built from a list of row dicts with :mod:`pyarrow` (no pandas, hence no index column
and no pandas schema metadata) and written zstd-compressed, atomically. Column order is stable:
the preferred columns (``order``; by default :data:`METADATA_COLUMNS`) that occur in the rows
come first in that order, then every other column sorted by name. Conventional columns have
fixed types (:data:`COLUMN_TYPES`) so every split of every variant has the same schema even
when, e.g., ``augmented_from`` is null throughout; other columns are inferred by pyarrow, and
an extra column that is null in every row is typed ``string``. Dict values are stored as JSON
strings (sorted keys), e.g. ``augmentation``.

Metadata column conventions (one row per published sample):
    ``key, split, variant, <group attributes>, identity, source, source_url, license, author,
    sha256`` (of the published JPEG bytes), ``augmented_from`` (key of the real source image;
    null for real images), ``augmentation`` (JSON string of the applied transform; null for
    real), ``width, height``, then any extra columns.

Rejects column conventions (one row per candidate that was not published):
    ``key, status`` (rejected/failed/not_selected...), ``step, reason, source, source_url,
    license, author, identity``, then extras.

API:
    * ``metadata_name(variant, split) -> str`` — ``"metadata/{variant}/{split}.parquet"``
    * ``metadata_columns(groups) -> list[str]`` — the conventional order with the group attributes
    * ``write_table(path, rows, schema=None, *, order=None) -> dict`` with
      ``{"path", "sha256", "bytes", "rows"}``
    * ``write_metadata(path, rows, groups) -> dict`` and ``write_rejects(path, rows) -> dict``
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from fairsets.core.atomic import atomic_path, sha256_file

__all__ = [
    "COLUMN_TYPES",
    "METADATA_COLUMNS",
    "REJECT_COLUMNS",
    "metadata_columns",
    "metadata_name",
    "write_metadata",
    "write_rejects",
    "write_table",
]

#: Conventional metadata columns, in order, without the group attributes (they follow ``variant``).
METADATA_COLUMNS: tuple[str, ...] = (
    "key",
    "split",
    "variant",
    "identity",
    "source",
    "source_url",
    "license",
    "author",
    "sha256",
    "augmented_from",
    "augmentation",
    "width",
    "height",
)

REJECT_COLUMNS: tuple[str, ...] = (
    "key",
    "status",
    "step",
    "reason",
    "source",
    "source_url",
    "license",
    "author",
    "identity",
)

_S = pa.string()
COLUMN_TYPES: dict[str, pa.DataType] = {
    "key": _S,
    "split": _S,
    "variant": _S,
    "identity": _S,
    "source": _S,
    "source_url": _S,
    "license": _S,
    "author": _S,
    "sha256": _S,
    "augmented_from": _S,
    "augmentation": _S,
    "width": pa.int32(),
    "height": pa.int32(),
    "status": _S,
    "step": _S,
    "reason": _S,
}


def metadata_name(variant: str, split: str) -> str:
    """Return the relative path of the metadata table of ``variant``/``split``."""
    return f"metadata/{variant}/{split}.parquet"


def metadata_columns(groups: Sequence[str] = ()) -> list[str]:
    """Return the conventional metadata column order with ``groups`` inserted after ``variant``."""
    cols = list(METADATA_COLUMNS)
    i = cols.index("variant") + 1
    return cols[:i] + [g for g in groups if g not in cols] + cols[i:]


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return value


def _build_table(rows: list[dict[str, Any]], schema: pa.Schema | None, order: Sequence[str]) -> pa.Table:
    if schema is not None:
        names = schema.names
        unknown = sorted({k for r in rows for k in r} - set(names))
        if unknown:
            raise ValueError(f"rows have columns not in the schema: {unknown}")
        data = {n: [_jsonable(r.get(n)) for r in rows] for n in names}
        return pa.Table.from_pydict(data, schema=schema)
    present = {k for r in rows for k in r}
    names = [c for c in order if c in present] + sorted(present - set(order))
    arrays = []
    fields = []
    for name in names:
        values = [_jsonable(r.get(name)) for r in rows]
        typ = COLUMN_TYPES.get(name)
        try:
            arr = pa.array(values, type=typ) if typ is not None else pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise ValueError(f"column {name!r}: {e}") from e
        if pa.types.is_null(arr.type):
            arr = pa.array(values, type=_S)
        arrays.append(arr)
        fields.append(pa.field(name, arr.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def write_table(
    path: str | os.PathLike[str],
    rows: list[dict[str, Any]],
    schema: pa.Schema | None = None,
    *,
    order: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Write ``rows`` as a zstd-compressed Parquet file, atomically and deterministically.

    Args:
        path: destination (parents are created).
        rows: one dict per row; missing keys are null.
        schema: optional explicit schema (its column order wins; rows may not have other keys).
            Without rows and without a schema the table has the columns of ``order``, typed
            with :data:`COLUMN_TYPES` (string by default).
        order: preferred leading columns (default :data:`METADATA_COLUMNS`).

    Returns:
        ``{"path": str(path), "sha256": hex, "bytes": size, "rows": len(rows)}``.

    Raises:
        ValueError: if a column cannot be converted (mixed types, wrong type for a
            conventional column) or rows have columns missing from ``schema``.
    """
    order = tuple(order) if order is not None else METADATA_COLUMNS
    if not rows and schema is None:
        schema = pa.schema([pa.field(c, COLUMN_TYPES.get(c, _S)) for c in order])
    table = _build_table(rows, schema, order)
    target = Path(path)
    with atomic_path(target) as tmp:
        pq.write_table(table, tmp, compression="zstd", use_dictionary=True, write_statistics=True)
        digest = sha256_file(tmp)
        size = tmp.stat().st_size
    return {"path": str(target), "sha256": digest, "bytes": size, "rows": len(rows)}


def write_metadata(path: str | os.PathLike[str], rows: list[dict[str, Any]], groups: Sequence[str]) -> dict:
    """Write a per-split metadata table with the conventional column order (see module docstring)."""
    return write_table(path, rows, order=metadata_columns(groups))


def write_rejects(path: str | os.PathLike[str], rows: list[dict[str, Any]]) -> dict:
    """Write ``rejects.parquet`` with the conventional rejects column order."""
    return write_table(path, rows, order=REJECT_COLUMNS)
