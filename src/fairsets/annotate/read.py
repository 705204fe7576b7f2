"""Reading an annotation folder: every box with its perceived attributes, as one DuckDB relation.

The tables are never loaded whole: :func:`boxes` and :func:`images` return lazy DuckDB relations
over the folder's Parquet files, which DuckDB streams when the relation is consumed::

    from fairsets.annotate import read

    rel = read.boxes("ANN")                       # every box, every attribute table joined
    rel.filter("kept").aggregate("perceived_gender, count(*)").fetchall()
    for batch in rel.arrow():                     # pyarrow record batches, bounded memory
        ...
    rel.write_parquet("boxes_with_gender.parquet")

Rows come in shard order (shard name), then in the order of the shard's box table (image order,
then ``box_id``). Attribute columns (``perceived_{attr}``, ``p_{attr}_{class}``,
``{attr}_reason``) are null for boxes without a label (boxes that were not kept, shards not yet
classified).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from . import layout

if TYPE_CHECKING:
    import duckdb

__all__ = ["attribute_names", "boxes", "captions", "images"]


def _tables(folder: Path) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(
        str(p)
        for p in folder.iterdir()
        if p.suffix == ".parquet" and not p.name.startswith(".") and p.is_file()
    )


def _sql_list(paths: Sequence[str]) -> str:
    return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def attribute_names(ann: str | os.PathLike[str]) -> list[str]:
    """The attributes that have label tables in ``ann`` (``attributes/{attr}/*.parquet``), sorted."""
    root = Path(ann) / layout.ATTRIBUTES_DIR
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and _tables(p))


def _connection(con: duckdb.DuckDBPyConnection | None) -> duckdb.DuckDBPyConnection:
    import duckdb

    return con if con is not None else duckdb.connect()


def boxes(
    ann: str | os.PathLike[str],
    attributes: Sequence[str] | None = None,
    *,
    con: duckdb.DuckDBPyConnection | None = None,
) -> duckdb.DuckDBPyRelation:
    """Every box of ``ann`` (:data:`~fairsets.annotate.layout.BOX_SCHEMA` columns) joined with its labels.

    Args:
        ann: the annotation folder.
        attributes: attributes whose tables to join (``["gender"]``); ``None`` joins every attribute
            the folder has (:func:`attribute_names`), ``[]`` none.
        con: the DuckDB connection to build the relation on (default: a new in-memory one).

    Returns:
        A lazy relation: the box columns, then per attribute ``perceived_{attr}``, the
        ``p_{attr}_{class}`` columns and ``{attr}_reason``.

    Raises:
        AnnotationError: ``ann`` is not an annotation folder, has no box tables yet, or an asked
            attribute has no label tables (the message names the command that makes them).
    """
    layout.read_manifest(ann)
    box_files = _tables(Path(ann) / layout.BOXES_DIR)
    if not box_files:
        raise layout.AnnotationError(
            f"{ann}: no box tables yet; run fairsets annotate persons SHARDS --out {ann} first"
        )
    attrs = list(attribute_names(ann) if attributes is None else attributes)
    selects = ["b.* EXCLUDE (file_row_number)"]
    joins = []
    for i, attr in enumerate(attrs):
        layout.check_attribute(attr)
        files = _tables(Path(ann) / layout.ATTRIBUTES_DIR / attr)
        if not files:
            raise layout.AnnotationError(
                f"{ann}: no {attr} labels yet; run fairsets annotate classify {ann} --head HEAD.npz "
                f"with a {attr} head first"
            )
        alias = f"a{i}"
        selects.append(f"{alias}.* EXCLUDE (shard, key, box_id)")
        joins.append(
            f"LEFT JOIN read_parquet({_sql_list(files)}, union_by_name = true) {alias} "
            f"ON b.shard = {alias}.shard AND b.key = {alias}.key AND b.box_id = {alias}.box_id"
        )
    query = (
        f"SELECT {', '.join(selects)} "
        f"FROM read_parquet({_sql_list(box_files)}, file_row_number = true) b "
        + " ".join(joins)
        + " ORDER BY b.shard, b.file_row_number"
    )
    return _connection(con).sql(query)


def images(
    ann: str | os.PathLike[str], *, con: duckdb.DuckDBPyConnection | None = None
) -> duckdb.DuckDBPyRelation:
    """Every image row of ``ann`` (:data:`~fairsets.annotate.layout.IMAGE_SCHEMA`), in shard order.

    Raises:
        AnnotationError: not an annotation folder, or no image tables yet.
    """
    layout.read_manifest(ann)
    files = _tables(Path(ann) / layout.IMAGES_DIR)
    if not files:
        raise layout.AnnotationError(
            f"{ann}: no image tables yet; run fairsets annotate persons SHARDS --out {ann} first"
        )
    query = (
        f"SELECT * EXCLUDE (file_row_number) FROM read_parquet({_sql_list(files)}, file_row_number = true) "
        "ORDER BY shard, file_row_number"
    )
    return _connection(con).sql(query)


def captions(
    ann: str | os.PathLike[str], captioner: str | None = None, *, con: duckdb.DuckDBPyConnection | None = None
) -> duckdb.DuckDBPyRelation:
    """The person captions of ``ann`` (:data:`~fairsets.annotate.layout.CAPTION_SCHEMA`), one lazy relation.

    Args:
        ann: the annotation folder.
        captioner: only this captioner's captions (default: every captioner's).
        con: the DuckDB connection to build the relation on (default: a new in-memory one).

    Rows come by captioner name, then shard, then box-table order.

    Raises:
        AnnotationError: not an annotation folder, or no caption tables (of ``captioner``) yet.
    """
    folder = Path(ann)
    layout.read_manifest(folder)
    root = folder / layout.CAPTIONS_DIR
    if captioner is not None:
        files = _tables(root / layout.check_annotator_name(captioner, "captioner"))
    else:
        names = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        files = [f for n in names if layout.ANNOTATOR_NAME.match(n) for f in _tables(root / n)]
    if not files:
        which = f"--captioner {captioner}" if captioner else "--captioner NAME"
        raise layout.AnnotationError(
            f"{ann}: no captions yet; run fairsets annotate caption {ann} "
            f"--annotators annotators.toml {which}"
        )
    query = (
        f"SELECT * EXCLUDE (file_row_number, filename) FROM read_parquet({_sql_list(files)}, "
        "file_row_number = true, filename = true) ORDER BY filename, file_row_number"
    )
    return _connection(con).sql(query)
