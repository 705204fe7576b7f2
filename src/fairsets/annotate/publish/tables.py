"""The tables of a prepared annotation folder, written from ``ANN`` with DuckDB, one shard at a time.

:func:`prepare_shard` writes ``data/boxes/{shard}.parquet`` (the box rows with every attribute's
columns joined on ``(shard, key, box_id)``) and ``data/images/{shard}.parquet``, streamed in
batches from DuckDB into a zstd Parquet writer (the settings of :mod:`fairsets.core.tables`), so a
shard never sits whole in memory; the bytes depend only on the inputs. Every table read must be
the one its stage's completion marker recorded (``persons``, ``classify-{attr}``: path and sha256),
and labels must be of the current boxes: an unfinished shard or a table changed since is refused,
naming the command that makes it again. Its own completion marker
(``layout.marker_path(ANN, "publish", shard)``) is written last and holds the inputs' fingerprint:
a shard whose marker and tables are current is kept as it is. :func:`table_counts` sums the
prepared tables. Reasons and URLs lose the directories of any absolute local path
(:func:`scrub_paths`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from fairsets.annotate import layout
from fairsets.annotate.layout import AnnotationError
from fairsets.core.atomic import atomic_path, atomic_write_text, sha256_file

__all__ = ["FORMAT_VERSION", "STAGE", "boxes_schema", "prepare_shard", "scrub_paths", "table_counts"]

STAGE = "publish"
#: Bumped whenever the prepared tables change for the same inputs (it is part of every marker).
FORMAT_VERSION = 1
_JOIN = ("shard", "key", "box_id")
#: The directories of an absolute path inside a text (at its start or after a space, quote, ``(`` or
#: ``=``); URLs are left alone (their ``//`` follows a ``:``).
_ABS_DIRS = re.compile(r"""(^|[\s'"(=])/(?:[^\s/'"]+/)+""")


def scrub_paths(value: Any) -> Any:
    """``value`` with the directories of every absolute path in its strings cut off (recursively).

    ``"cannot read /home/me/shards/00001.tar: truncated"`` → ``"cannot read 00001.tar: truncated"``.
    """
    if isinstance(value, str):
        return _ABS_DIRS.sub(r"\1", value)
    if isinstance(value, Mapping):
        return {str(k): scrub_paths(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_paths(v) for v in value]
    return value


def _attribute_columns(attr: str, classes: list[str]) -> list[tuple[str, pa.Field]]:
    """``(source column, output field)`` of an attribute table, join keys left out; a column not
    named after the attribute gets its name as a prefix, so two attributes never collide."""
    out = []
    for f in layout.attribute_schema(attr, classes):
        if f.name in _JOIN:
            continue
        named = f.name.startswith((f"perceived_{attr}", f"p_{attr}_", f"{attr}_"))
        out.append((f.name, f if named else f.with_name(f"{attr}_{f.name}")))
    return out


def boxes_schema(attrs: Mapping[str, list[str]]) -> pa.Schema:
    """The columns of ``data/boxes/{shard}.parquet``: the box columns, then each attribute's."""
    extra = [f for attr, classes in attrs.items() for _, f in _attribute_columns(attr, classes)]
    return pa.schema([*layout.BOX_SCHEMA, *extra])


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _scrubbed(expr: str, name: str) -> str:
    """SQL for column ``expr`` with the directories of absolute paths cut off (:func:`scrub_paths`)."""
    return f"regexp_replace({expr}, $pattern, '\\1', 'g') AS {_q(name)}"


def _check_columns(path: Path, wanted: list[str], fix: str) -> None:
    import pyarrow.parquet as pq

    try:
        names = set(pq.read_schema(path).names)
    except FileNotFoundError:
        raise AnnotationError(f"{path.name}: missing ({path}); {fix}") from None
    except (OSError, pa.ArrowException) as e:
        raise AnnotationError(f"{path}: not a readable Parquet table ({e}); {fix}") from None
    missing = [c for c in wanted if c not in names]
    if missing:
        raise AnnotationError(f"{path}: columns {missing} are missing; {fix}")


#: Rows per Parquet row group of a prepared table: fixed, so the bytes never depend on how DuckDB
#: happened to cut its batches.
ROW_GROUP = 65_536


def _write_query(con: Any, sql: str, params: dict[str, Any], schema: pa.Schema, target: Path) -> dict:
    """Stream the rows of ``sql`` into ``target`` (Parquet, zstd, atomic); its file entry."""
    import pyarrow.parquet as pq

    rows = 0
    pending: list[pa.RecordBatch] = []
    with atomic_path(target) as tmp:
        reader = con.sql(sql, params=params).to_arrow_reader(ROW_GROUP)
        with pq.ParquetWriter(
            tmp, schema, compression="zstd", use_dictionary=True, write_statistics=True
        ) as writer:
            for batch in itertools.chain(reader, [None]):  # None: the end, write the rest
                if batch is not None:
                    pending.append(batch)
                table = pa.Table.from_batches(pending, schema=reader.schema)
                while table.num_rows >= ROW_GROUP or (batch is None and table.num_rows):
                    writer.write_table(table.slice(0, ROW_GROUP).cast(schema), row_group_size=ROW_GROUP)
                    rows += min(ROW_GROUP, table.num_rows)
                    table = table.slice(ROW_GROUP)
                pending = table.to_batches()
        entry = {"sha256": sha256_file(tmp), "bytes": tmp.stat().st_size, "rows": rows}
    return entry


def _check_markers(
    ann: Path, shard: str, sources: dict[str, Path], digests: dict[str, str], attrs: Mapping[str, Any]
) -> None:
    """Every table read must be what its stage's completion marker recorded (files, sha256): a shard
    that a stage has not finished, or a table changed since, is never published."""
    stages = {"persons": ("boxes", "images"), **{f"classify-{a}": (f"attributes/{a}",) for a in attrs}}
    for stage, names in stages.items():
        fix = (
            "run fairsets annotate persons for this folder again"
            if stage == "persons"
            else f"run fairsets annotate classify with the {stage.split('-', 1)[1]} head again"
        )
        path = layout.marker_path(ann, stage, shard)
        try:
            marker = json.loads(path.read_text(encoding="utf-8"))
            recorded = {
                f["path"]: f["sha256"]
                for f in marker["files"].values()
                if isinstance(f, dict) and "path" in f
            }
        except FileNotFoundError:
            raise AnnotationError(
                f"shard {shard}: {_command(stage)} has not finished it (no marker); {fix}"
            ) from None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise AnnotationError(f"{path}: unreadable completion marker; {fix}") from None
        for name in names:
            rel = sources[name].relative_to(ann).as_posix()
            if recorded.get(rel) != digests[name]:
                raise AnnotationError(
                    f"{rel}: not the table {_command(stage)} recorded (sha256 {digests[name]} != marker "
                    f"{recorded.get(rel)}); it was changed or replaced: {fix}"
                )
        if stage != "persons" and marker.get("boxes_sha256") not in (None, digests["boxes"]):
            raise AnnotationError(
                f"shard {shard}: its boxes changed after {_command(stage)} labelled them; {fix}"
            )


def _command(stage: str) -> str:
    """The command a stage is: ``annotate persons``, ``annotate classify (gender head)``."""
    return "annotate persons" if stage == "persons" else f"annotate classify ({stage.split('-', 1)[1]} head)"


def prepare_shard(
    con: Any, ann: Path, out: Path, shard: str, attrs: dict[str, list[str]]
) -> tuple[dict, bool]:
    """Write one shard's two tables (or keep them if its marker says they are current)."""
    persons_fix = "run fairsets annotate persons for this folder again"
    sources = {"boxes": layout.boxes_path(ann, shard), "images": layout.images_path(ann, shard)}
    _check_columns(sources["boxes"], layout.BOX_SCHEMA.names, persons_fix)
    _check_columns(sources["images"], layout.IMAGE_SCHEMA.names, persons_fix)
    for attr, classes in attrs.items():
        path = layout.attribute_path(ann, attr, shard)
        _check_columns(
            path,
            [*_JOIN, *(c for c, _ in _attribute_columns(attr, classes))],
            f"run fairsets annotate classify for {attr} again",
        )
        sources[f"attributes/{attr}"] = path
    digests = {k: sha256_file(p) for k, p in sources.items()}
    _check_markers(ann, shard, sources, digests, attrs)
    fingerprint = hashlib.sha256(
        json.dumps(
            {"format": FORMAT_VERSION, "attributes": attrs, "sources": digests},
            sort_keys=True,
        ).encode()
    ).hexdigest()
    rels = {"boxes": f"data/boxes/{shard}.parquet", "images": f"data/images/{shard}.parquet"}
    marker = layout.marker_path(ann, STAGE, shard)
    try:
        done = json.loads(marker.read_text(encoding="utf-8"))
        if done.get("fingerprint") == fingerprint and all(
            (out / rel).is_file() and sha256_file(out / rel) == done["files"][rel]["sha256"]
            for rel in rels.values()
        ):
            return done["files"], True
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass

    params: dict[str, Any] = {"boxes": str(sources["boxes"]), "pattern": _ABS_DIRS.pattern}
    selects = [
        _scrubbed(f"b.{_q(c)}", c) if c == "drop_reason" else f"b.{_q(c)}" for c in layout.BOX_SCHEMA.names
    ]
    joins = []
    for i, (attr, classes) in enumerate(attrs.items()):
        params[f"a{i}"] = str(sources[f"attributes/{attr}"])
        table = f"read_parquet($a{i})"
        dup, orphan = con.sql(
            f"SELECT count(*) - count(DISTINCT (shard, key, box_id)), "
            f"count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM read_parquet($boxes) b WHERE b.kept "
            f"AND b.shard = a.shard AND b.key = a.key AND b.box_id = a.box_id)) FROM {table} a",
            params={"boxes": params["boxes"], f"a{i}": params[f"a{i}"]},
        ).fetchall()[0]
        if dup or orphan:
            raise AnnotationError(
                f"{sources[f'attributes/{attr}']}: {dup} duplicated and {orphan} unknown or dropped boxes; "
                f"run fairsets annotate classify for {attr} again"
            )
        selects += [
            _scrubbed(f"a{i}.{_q(col)}", field.name)
            if col.endswith("_reason")
            else f"a{i}.{_q(col)} AS {_q(field.name)}"
            for col, field in _attribute_columns(attr, classes)
        ]
        joins.append(
            f"LEFT JOIN {table} a{i} ON a{i}.shard = b.shard AND a{i}.key = b.key AND a{i}.box_id = b.box_id"
        )
    boxes_sql = (
        f"SELECT {', '.join(selects)} FROM read_parquet($boxes, file_row_number = true) b {' '.join(joins)} "
        "ORDER BY b.file_row_number"
    )
    image_cols = [_scrubbed(_q(c), c) if c in ("reason", "url") else _q(c) for c in layout.IMAGE_SCHEMA.names]
    images_sql = (
        f"SELECT {', '.join(image_cols)} FROM read_parquet($images, file_row_number = true) "
        "ORDER BY file_row_number"
    )
    files = {
        rels["boxes"]: _write_query(con, boxes_sql, params, boxes_schema(attrs), out / rels["boxes"]),
        rels["images"]: _write_query(
            con,
            images_sql,
            {"images": str(sources["images"]), "pattern": _ABS_DIRS.pattern},
            layout.IMAGE_SCHEMA,
            out / rels["images"],
        ),
    }
    atomic_write_text(
        marker, json.dumps({"fingerprint": fingerprint, "files": files}, sort_keys=True, indent=1) + "\n"
    )
    return files, False


def table_counts(
    con: Any, out: Path, box_files: list[str], image_files: list[str], attrs: dict[str, list[str]]
) -> dict:
    """Totals over the prepared tables: images by status, boxes kept/dropped and why, labels per class."""
    boxes = {"files": [str(out / r) for r in box_files]}
    images = {"files": [str(out / r) for r in image_files]}
    by_status = dict(
        con.sql("SELECT status, count(*) FROM read_parquet($files) GROUP BY 1", params=images).fetchall()
    )
    total, kept = con.sql(
        "SELECT count(*), count(*) FILTER (WHERE kept) FROM read_parquet($files)", params=boxes
    ).fetchall()[0]
    reasons = con.sql(
        "SELECT regexp_replace(drop_reason, '[0-9]+(\\.[0-9]+)?', 'N', 'g') r, count(*) "
        "FROM read_parquet($files) WHERE NOT kept GROUP BY 1 ORDER BY 2 DESC, 1",
        params=boxes,
    ).fetchall()
    labels: dict[str, Any] = {}
    for attr in attrs:
        col = _q(f"perceived_{attr}")
        rows = con.sql(
            f"SELECT {col}, count(*) FROM read_parquet($files) WHERE kept GROUP BY 1 ORDER BY 1", params=boxes
        ).fetchall()
        labels[attr] = {
            "classes": {str(k): int(n) for k, n in rows if k is not None},
            "unlabelled": int(sum(n for k, n in rows if k is None)),
        }
    return {
        "images": {
            "total": int(sum(by_status.values())),
            **{s: int(by_status.get(s, 0)) for s in layout.IMAGE_STATUSES},
        },
        "boxes": {
            "total": int(total),
            "kept": int(kept),
            "dropped": int(total - kept),
            "drop_reasons": {str(r or "unknown"): int(n) for r, n in reasons},
        },
        "attributes": labels,
    }
