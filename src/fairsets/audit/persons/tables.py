"""The views every person audit reads, over one annotation folder, and the rules behind them.

:func:`connect` opens an in-memory DuckDB connection with these views (lazy: DuckDB streams the
Parquet files when a query runs, so 10 M rows never sit in memory as a table):

* ``boxes`` — every **kept** box (``kept = true``) of a finished shard (``annotate persons`` writes
  boxes only for ``ok`` images): ``shard, key, box_id,
  area_frac, image_w, image_h`` and, for each attribute the folder has labels for,
  ``perceived_{attr}`` (NULL when the box could not be labelled);
* ``images`` — every ``ok`` image: ``shard, key, caption`` (the alt-text), ``n_boxes``, ``n_kept``;
* ``person_images`` — the images with at least one kept box, with the image-level groups below:
  ``n_persons`` (kept boxes), ``gender`` (the rule below; NULL when the folder has no gender
  labels), ``n_female``, ``n_male``, ``n_mixed``, ``n_unclear``, and ``races`` (the sorted list of
  distinct perceived races of its boxes; empty list when none);
* ``captions`` — person captions (``annotate caption``) when the folder has any: ``shard, key,
  box_id, caption, annotator`` with the box's labels (``status = 'ok'`` only).

**The image-level gender rule** (one group per image, from its kept boxes' perceived gender):

* ``female`` — every labelled box is ``female``; ``male`` likewise;
* ``mixed`` — at least one ``female`` and one ``male`` box, or any box labelled ``mixed`` (a box
  that shows several people);
* ``unclear`` — no box has a gender label other than ``unclear`` (or none is labelled).

``unclear`` boxes beside ``female`` ones leave the image ``female``: an unclear person says nothing
about the others. An image "with race g" is an image with at least one kept box of perceived race
``g`` (an image can be with several races).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from fairsets.annotate import layout
from fairsets.annotate.read import attribute_names

if TYPE_CHECKING:
    import duckdb

__all__ = ["GENDER_RULE", "attributes", "blank_sql", "connect", "has_captions"]

#: The image-level gender rule, as SQL over the per-image counts (documented in the module docstring).
GENDER_RULE = (
    "CASE WHEN n_mixed > 0 OR (n_female > 0 AND n_male > 0) THEN 'mixed' "
    "WHEN n_female > 0 THEN 'female' WHEN n_male > 0 THEN 'male' ELSE 'unclear' END"
)


def _files(folder: Path) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(str(p) for p in folder.iterdir() if p.suffix == ".parquet" and p.is_file())


def _finished(ann: Path) -> list[str]:
    manifest = layout.read_manifest(ann)
    names = []
    for ref in manifest.get("inputs") or []:
        name = layout.check_shard_name(ref["name"])
        if layout.marker_path(ann, "persons", name).exists() and layout.boxes_path(ann, name).is_file():
            names.append(name)
    return names


def _sql_list(paths: list[str]) -> str:
    return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"


def attributes(ann: str | os.PathLike[str]) -> list[str]:
    """The attributes ``ann`` has label tables for (``gender``, ``race``, …)."""
    return attribute_names(ann)


def has_captions(ann: str | os.PathLike[str]) -> bool:
    """Whether ``ann`` has person captions (``annotate caption``)."""
    root = Path(ann) / layout.CAPTIONS_DIR
    return root.is_dir() and any(_files(p) for p in root.iterdir() if p.is_dir())


def blank_sql(column: str) -> str:
    """SQL that is true when ``column`` is NULL or blank: nothing but whitespace (spaces, tabs,
    newlines, Unicode spaces such as the no-break space). Every audit leaves such texts out."""
    return rf"regexp_full_match(coalesce({column}, ''), '[\s\x0b\pZ]*')"


def connect(
    ann: str | os.PathLike[str], *, threads: int | None = None, memory_limit: str | None = None
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the views ``boxes``, ``images``, ``person_images`` and (when there
    are captions) ``captions`` over ``ann`` (see the module docstring).

    Args:
        ann: the annotation folder.
        threads: DuckDB threads (default: DuckDB's, one per core).
        memory_limit: DuckDB's memory limit, e.g. ``"1GB"`` (it spills to disk beyond it).

    Raises:
        AnnotationError: not an annotation folder, or no finished shard.
    """
    import duckdb

    folder = Path(ann)
    names = _finished(folder)
    if not names:
        raise layout.AnnotationError(
            f"{folder}: no finished box tables; run fairsets annotate persons SHARDS --out {folder} first"
        )
    con = duckdb.connect()
    if threads is not None:
        con.execute(f"SET threads = {int(threads)}")
    if memory_limit is not None:
        con.execute("SET memory_limit = ?", [memory_limit])
    boxes = [str(layout.boxes_path(folder, n)) for n in names]
    images = [str(layout.images_path(folder, n)) for n in names if layout.images_path(folder, n).is_file()]
    attrs = [a for a in attributes(folder) if _files(folder / layout.ATTRIBUTES_DIR / a)]
    selects, joins = ["b.shard", "b.key", "b.box_id", "b.area_frac", "b.image_w", "b.image_h"], []
    for i, attr in enumerate(attrs):
        layout.check_attribute(attr)
        files = _files(folder / layout.ATTRIBUTES_DIR / attr)
        selects.append(f"a{i}.perceived_{attr}")
        joins.append(
            f"LEFT JOIN read_parquet({_sql_list(files)}, union_by_name = true) a{i} "
            f"ON b.shard = a{i}.shard AND b.key = a{i}.key AND b.box_id = a{i}.box_id"
        )
    con.execute(
        f"CREATE VIEW boxes AS SELECT {', '.join(selects)} FROM read_parquet({_sql_list(boxes)}) b "
        + " ".join(joins)
        + " WHERE b.kept"
    )
    con.execute(
        "CREATE VIEW images AS SELECT shard, key, caption, n_boxes, n_kept "
        f"FROM read_parquet({_sql_list(images)}) WHERE status = 'ok'"
    )
    has_gender, has_race = "gender" in attrs, "race" in attrs
    count = lambda label: (  # noqa: E731
        f"count(*) FILTER (WHERE perceived_gender = '{label}')" if has_gender else "0"
    )
    races = (
        "coalesce(list_sort(list_distinct(list(perceived_race) FILTER (WHERE perceived_race IS NOT NULL))), "
        "[]::VARCHAR[])"
        if has_race
        else "[]::VARCHAR[]"
    )
    con.execute(
        "CREATE VIEW person_counts AS SELECT shard, key, count(*) AS n_persons, "
        f"{count('female')} AS n_female, {count('male')} AS n_male, {count('mixed')} AS n_mixed, "
        f"{count('unclear')} AS n_unclear, {races} AS races FROM boxes GROUP BY shard, key"
    )
    gender = GENDER_RULE if has_gender else "NULL::VARCHAR"
    con.execute(
        "CREATE VIEW person_images AS SELECT p.shard, p.key, i.caption, p.n_persons, "
        f"{gender} AS gender, p.n_female, p.n_male, p.n_mixed, p.n_unclear, p.races "
        "FROM person_counts p JOIN images i ON p.shard = i.shard AND p.key = i.key"
    )
    if has_captions(folder):
        root = folder / layout.CAPTIONS_DIR
        files = [f for p in sorted(root.iterdir()) if p.is_dir() for f in _files(p)]
        labels = "".join(f", b.perceived_{a}" for a in attrs)
        con.execute(
            f"CREATE VIEW captions AS SELECT c.shard, c.key, c.box_id, c.caption, c.annotator{labels} "
            f"FROM read_parquet({_sql_list(files)}) c JOIN boxes b "
            "ON c.shard = b.shard AND c.key = b.key AND c.box_id = b.box_id WHERE c.status = 'ok'"
        )
    return con
