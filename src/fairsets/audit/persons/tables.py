"""The views every person audit reads, over one annotation folder, and the rules behind them.

:func:`connect` opens an in-memory DuckDB connection with these views (lazy: DuckDB streams the
Parquet files when a query runs, so 10 M rows never sit in memory as a table):

* ``boxes`` — every **kept** box (``kept = true``) of a finished shard (``annotate persons`` writes
  boxes only for ``ok`` images): ``shard, key, box_id,
  area_frac, image_w, image_h`` and, for each attribute the folder has labels for,
  ``perceived_{attr}`` (NULL when the box could not be labelled);
* ``images`` — every ``ok`` image: ``shard, key, caption`` (the alt-text), ``n_boxes``, ``n_kept``;
* ``person_images`` — the images with at least one kept box, with the image-level groups below:
  ``n_persons`` (kept boxes), ``gender`` and ``race`` (the exclusive image-level group of each
  attribute, :func:`image_group_sql`; NULL when the folder has no labels for it), ``n_female``,
  ``n_male``, ``n_mixed``, ``n_unclear``, ``genders`` and ``races`` (the sorted lists of distinct
  labels of its boxes; empty when none is labelled);
* ``captions`` — person captions (``annotate caption``) when the folder has any: ``shard, key,
  box_id, caption, annotator`` with the box's labels (``status = 'ok'`` only).

**Fact tables** (``connect(ann, cache=FOLDER)``, what the audit commands use). Without a cache,
``boxes`` joins the label tables to the box tables in every query that reads it, and
``person_images`` groups the boxes by image again each time: at 10 M boxes a composition of a dozen
queries spends minutes re-joining. With a cache, each finished shard is joined **once**, alone (an
image never spans shards, so a shard's join is small and never spills), into two Parquet tables
of ``FOLDER``: ``boxes-{shard}-{fp}.parquet`` (the ``boxes`` columns) and
``person_images-{shard}-{fp}.parquet``; the views then read those with no join. Shards are built
``threads`` at a time, each written atomically; ``fp`` fingerprints the shard's input tables
(names, sizes, modification times) and the attributes, so a re-run reuses what is there and a
shard classified or annotated again is rebuilt (stale files are removed). The label tables hold
the kept boxes in box-table order (``annotate classify`` writes them so), so a shard is joined by
position, every row's ``(key, box_id)`` checked; a shard whose check fails is joined by key. Both
ways give the same rows as the views without a cache (a test compares every audit number).

**The image-level identity group** (one rule for every audit section and both attributes;
``--group-rule``). Let L be the distinct labels of the image's kept boxes for the attribute (NULL
labels left out):

* ``exclusive`` (the default) — one group per image: ``unlabelled`` when L is empty (no box has a
  label at all); ``unclear`` when every label in L is ``unclear``; the one label when L holds one
  label besides ``unclear`` (``female``, ``male``, ``white``, …); ``mixed`` when it holds two or
  more (a ``female`` and a ``male`` box; two races) — a box labelled ``mixed`` (several people in
  one box) makes the image ``mixed`` too. An ``unclear`` box beside ``female`` ones leaves the
  image ``female``: an unclear person says nothing about the others. The groups of one attribute
  partition the person images, so their shares sum to 1.
* ``any`` — an image is in every group in L (multi-membership: an image with a ``female`` and a
  ``male`` box is in both), and in ``unlabelled`` when L is empty. Shares may sum over 1.

``unclear`` (the classifier saw a person but could not tell) and ``unlabelled`` (no label: the box
was never classified) are different groups everywhere. :func:`groups_sql` is the rule as SQL; every
section (composition, crime words, sentiment, themes) reads its groups through it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fairsets.annotate import layout
from fairsets.annotate.read import attribute_names

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "DEFAULT_GROUP_RULE",
    "GROUP_RULES",
    "MIXED",
    "UNCLEAR",
    "UNLABELLED",
    "attributes",
    "blank_sql",
    "check_group_rule",
    "connect",
    "finished_shards",
    "group_rule_definition",
    "groups_sql",
    "has_captions",
    "image_group_sql",
    "labelled_attributes",
    "own_box_groups_sql",
    "view_names",
]

#: The image-level group rules (see "The image-level identity group" in the module docstring).
GROUP_RULES = ("exclusive", "any")
#: The rule every section uses unless told otherwise.
DEFAULT_GROUP_RULE = "exclusive"
#: The classifier's "could not tell" label; a group of its own.
UNCLEAR = "unclear"
#: The group of an image (or box) with no label at all; never the same as ``unclear``.
UNLABELLED = "unlabelled"
#: The exclusive group of an image with two or more distinct labels.
MIXED = "mixed"


def finished_shards(ann: str | os.PathLike[str]) -> list[str]:
    """The names of the shards whose ``persons`` stage finished
    (:func:`~fairsets.annotate.layout.box_shards`)."""
    return [ref["name"] for ref in layout.box_shards(ann, layout.read_manifest(ann))[0]]


def check_group_rule(rule: str) -> str:
    """``rule`` when it is one of :data:`GROUP_RULES`, else a one-line ValueError."""
    if rule not in GROUP_RULES:
        raise ValueError(f"group rule must be one of {', '.join(GROUP_RULES)}; got {rule!r}")
    return rule


def image_group_sql(labels: str) -> str:
    """The exclusive image-level group as SQL over ``labels``, a column holding the list of
    distinct non-NULL labels of the image's boxes (see the module docstring)."""
    # ``labels`` is distinct, so the labels besides 'unclear' number len - (1 if it has 'unclear')
    known = f"(len({labels}) - CASE WHEN list_contains({labels}, '{UNCLEAR}') THEN 1 ELSE 0 END)"
    only = f"CASE WHEN {labels}[1] = '{UNCLEAR}' THEN {labels}[2] ELSE {labels}[1] END"
    return (
        f"CASE WHEN coalesce(len({labels}), 0) = 0 THEN '{UNLABELLED}' "
        f"WHEN {known} = 0 THEN '{UNCLEAR}' WHEN {known} = 1 THEN {only} ELSE '{MIXED}' END"
    )


def groups_sql(attr: str, rule: str = DEFAULT_GROUP_RULE, alias: str = "") -> str:
    """SQL over ``person_images`` (columns prefixed with ``alias``, e.g. ``"t."``) giving the LIST
    of groups the image is in for ``attr`` (``gender`` or ``race``) under ``rule``: one group
    under ``exclusive``, every label of its boxes (or ``unlabelled``) under ``any``. NULL when the
    folder has no labels for ``attr`` (the ``exclusive`` column is NULL then)."""
    check_group_rule(rule)
    if attr not in ("gender", "race"):
        raise ValueError(f"attribute must be gender or race; got {attr!r}")
    column, labels = f"{alias}{attr}", f"{alias}{attr}s"
    if rule == "exclusive":
        return f"CASE WHEN {column} IS NULL THEN NULL ELSE [{column}] END"
    return (
        f"CASE WHEN {column} IS NULL THEN NULL "
        f"WHEN coalesce(len({labels}), 0) = 0 THEN ['{UNLABELLED}'] ELSE {labels} END"
    )


def own_box_groups_sql(attr: str, present: bool, alias: str = "") -> str:
    """SQL giving the LIST of groups of a row that belongs to ONE box (a person caption): the box's
    own label for ``attr``, ``unlabelled`` when it has none; NULL when the folder has no labels for
    ``attr`` (``present`` false). The same shape as :func:`groups_sql` gives for images."""
    if not present:
        return "NULL::VARCHAR[]"
    return f"[coalesce({alias}perceived_{attr}, '{UNLABELLED}')]"


def view_names(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The views (and tables) of ``con``: whether ``captions`` is there, say."""
    return {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}


def labelled_attributes(con: duckdb.DuckDBPyConnection, view: str) -> dict[str, bool]:
    """``{"gender": bool, "race": bool}``: whether ``view`` has the ``perceived_{attr}`` column."""
    cols = {row[0] for row in con.execute(f"DESCRIBE {view}").fetchall()}
    return {a: f"perceived_{a}" in cols for a in ("gender", "race")}


def group_rule_definition(rule: str) -> str:
    """The rule ``rule`` in one sentence (for the ``definitions`` of every section)."""
    check_group_rule(rule)
    if rule == "exclusive":
        return (
            "exclusive (image level, one group per image and attribute): the one label of its boxes "
            "besides 'unclear'; 'mixed' when they carry two or more (female and male, two races, or a "
            "box labelled mixed); 'unclear' when every labelled box is unclear; 'unlabelled' when no "
            "box has a label. Groups partition the person images; shares sum to 1"
        )
    return (
        "any (image level, multi-membership): an image is in every group one of its boxes is labelled "
        "with ('unclear' included), and in 'unlabelled' when no box has a label; an image can be in "
        "several groups, so shares may sum over 1"
    )


def _files(folder: Path) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(str(p) for p in folder.iterdir() if p.suffix == ".parquet" and p.is_file())


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
    ann: str | os.PathLike[str],
    *,
    threads: int | None = None,
    memory_limit: str | None = None,
    cache: str | os.PathLike[str] | None = None,
    progress: Any = None,
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the views ``boxes``, ``images``, ``person_images`` and (when there
    are captions) ``captions`` over ``ann`` (see the module docstring).

    Args:
        ann: the annotation folder.
        threads: DuckDB threads (default: DuckDB's, one per core); also the shards built at once.
        memory_limit: DuckDB's memory limit, e.g. ``"1GB"`` (it spills to disk beyond it).
        cache: a folder for the per-shard fact tables (see "Fact tables" in the module docstring);
            without it, every query joins the label tables again.
        progress: a :class:`fairsets.core.progress.Progress` for building the fact tables.

    Raises:
        AnnotationError: not an annotation folder, or no finished shard.
    """
    import duckdb

    folder = Path(ann)
    names = finished_shards(folder)
    if not names:
        raise layout.AnnotationError(
            f"{folder}: no finished box tables; run fairsets annotate persons SHARDS --out {folder} first"
        )
    con = duckdb.connect()
    if threads is not None:
        con.execute(f"SET threads = {int(threads)}")
    if memory_limit is not None:
        con.execute("SET memory_limit = ?", [memory_limit])
    attrs = [a for a in attributes(folder) if _files(folder / layout.ATTRIBUTES_DIR / a)]
    for attr in attrs:
        layout.check_attribute(attr)
    images = [str(layout.images_path(folder, n)) for n in names if layout.images_path(folder, n).is_file()]
    con.execute(
        "CREATE VIEW images AS SELECT shard, key, caption, n_boxes, n_kept "
        f"FROM read_parquet({_sql_list(images)}) WHERE status = 'ok'"
    )
    if cache is not None:
        box_facts, image_facts = _facts(con, folder, names, attrs, Path(cache), threads, progress)
        con.execute(f"CREATE VIEW boxes AS SELECT * FROM read_parquet({_sql_list(box_facts)})")
        con.execute(f"CREATE VIEW person_images AS SELECT * FROM read_parquet({_sql_list(image_facts)})")
    else:
        con.execute(f"CREATE VIEW boxes AS {_boxes_sql(folder, names, attrs)}")
        con.execute(f"CREATE VIEW person_counts AS {_person_counts_sql('boxes', attrs)}")
        con.execute(f"CREATE VIEW person_images AS {_person_images_sql('person_counts', 'images', attrs)}")
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


_BOX_COLUMNS = ("shard", "key", "box_id", "area_frac", "image_w", "image_h")


def _boxes_sql(folder: Path, names: list[str], attrs: list[str]) -> str:
    """The kept boxes of ``names`` with their labels: LEFT JOINs of the label tables."""
    boxes = [str(layout.boxes_path(folder, n)) for n in names]
    selects, joins = [f"b.{c}" for c in _BOX_COLUMNS], []
    for i, attr in enumerate(attrs):
        files = _files(folder / layout.ATTRIBUTES_DIR / attr)
        selects.append(f"a{i}.perceived_{attr}")
        joins.append(
            f"LEFT JOIN read_parquet({_sql_list(files)}, union_by_name = true) a{i} "
            f"ON b.shard = a{i}.shard AND b.key = a{i}.key AND b.box_id = a{i}.box_id"
        )
    return (
        f"SELECT {', '.join(selects)} FROM read_parquet({_sql_list(boxes)}) b "
        + " ".join(joins)
        + " WHERE b.kept"
    )


def _person_counts_sql(boxes: str, attrs: list[str]) -> str:
    has_gender = "gender" in attrs
    count = lambda label: (  # noqa: E731
        f"count(*) FILTER (WHERE perceived_gender = '{label}')" if has_gender else "0"
    )

    def labels(attr: str) -> str:
        if attr not in attrs:
            return "[]::VARCHAR[]"
        col = f"perceived_{attr}"
        distinct = f"list_sort(list_distinct(list({col}) FILTER (WHERE {col} IS NOT NULL)))"
        return f"coalesce({distinct}, []::VARCHAR[])"

    return (
        "SELECT shard, key, count(*) AS n_persons, "
        f"{count('female')} AS n_female, {count('male')} AS n_male, {count('mixed')} AS n_mixed, "
        f"{count('unclear')} AS n_unclear, {labels('gender')} AS genders, {labels('race')} AS races "
        f"FROM {boxes} GROUP BY shard, key"
    )


def _person_images_sql(counts: str, images: str, attrs: list[str]) -> str:
    gender = image_group_sql("p.genders") if "gender" in attrs else "NULL::VARCHAR"
    race = image_group_sql("p.races") if "race" in attrs else "NULL::VARCHAR"
    return (
        "SELECT p.shard, p.key, i.caption, p.n_persons, "
        f"{gender} AS gender, {race} AS race, p.n_female, p.n_male, p.n_mixed, p.n_unclear, "
        "p.genders, p.races "
        f"FROM {counts} p JOIN {images} i ON p.shard = i.shard AND p.key = i.key"
    )


#: Bumped when the fact tables' content changes, so older caches are rebuilt.
FACTS_VERSION = 2


def _fingerprint(folder: Path, name: str, attrs: list[str]) -> str:
    """Of one shard's inputs (path, size, mtime of its box, image and label tables)."""
    paths = [layout.boxes_path(folder, name), layout.images_path(folder, name)]
    paths += [layout.attribute_path(folder, a, name) for a in attrs]
    parts: list[Any] = [FACTS_VERSION, attrs]
    for p in paths:
        try:
            st = p.stat()
            parts.append([p.name, st.st_size, st.st_mtime_ns])
        except OSError:
            parts.append([p.name, None])
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def _build_shard(cur: Any, folder: Path, name: str, attrs: list[str], out_b: Path, out_p: Path) -> None:
    """Write the two fact tables of one shard (atomically, the image table last)."""
    from fairsets.core.atomic import atomic_path

    box = layout.boxes_path(folder, name)
    kept = f"(SELECT {', '.join(_BOX_COLUMNS)} FROM read_parquet({_sql_list([str(box)])}) WHERE kept)"
    present = [a for a in attrs if layout.attribute_path(folder, a, name).is_file()]
    # The label tables hold the kept boxes in box-table order (annotate classify writes them so):
    # a positional join, checked row by row; a hash join when the check fails.
    selects = [f"b.{c}" for c in _BOX_COLUMNS] + [
        f"a{i}.perceived_{a}" if a in present else f"NULL::VARCHAR AS perceived_{a}"
        for i, a in enumerate(attrs)
    ]
    labels = {
        i: f"(SELECT key, box_id, perceived_{a} FROM "
        f"read_parquet({_sql_list([str(layout.attribute_path(folder, a, name))])}))"
        for i, a in enumerate(attrs)
        if a in present
    }
    same = (
        " AND ".join(f"coalesce(b.key = a{i}.key AND b.box_id = a{i}.box_id, false)" for i in labels)
        or "true"
    )
    positional = "".join(f" POSITIONAL JOIN {sql} a{i}" for i, sql in labels.items())
    cur.execute(
        f"CREATE OR REPLACE TEMP TABLE facts AS SELECT {', '.join(selects)}, {same} AS same "
        f"FROM {kept} b{positional}"
    )
    if labels and not cur.execute("SELECT coalesce(bool_and(same), true) FROM facts").fetchone()[0]:
        hashed = "".join(
            f" LEFT JOIN {sql} a{i} ON b.key = a{i}.key AND b.box_id = a{i}.box_id"
            for i, sql in labels.items()
        )
        cur.execute(
            f"CREATE OR REPLACE TEMP TABLE facts AS SELECT {', '.join(selects)}, true AS same "
            f"FROM {kept} b{hashed}"
        )
    image = layout.images_path(folder, name)
    images = (
        f"(SELECT shard, key, caption FROM read_parquet({_sql_list([str(image)])}) WHERE status = 'ok')"
        if image.is_file()
        else "(SELECT NULL::VARCHAR AS shard, NULL::VARCHAR AS key, NULL::VARCHAR AS caption WHERE false)"
    )
    for sql, out in (
        ("SELECT * EXCLUDE (same) FROM facts", out_b),
        (_person_images_sql(f"({_person_counts_sql('facts', attrs)})", images, attrs), out_p),
    ):
        with atomic_path(out) as tmp:
            target = str(tmp).replace("'", "''")
            cur.execute(f"COPY ({sql}) TO '{target}' (FORMAT parquet, COMPRESSION zstd)")
    cur.execute("DROP TABLE facts")


def _facts(
    con: Any,
    folder: Path,
    names: list[str],
    attrs: list[str],
    cache: Path,
    threads: int | None,
    progress: Any,
) -> tuple[list[str], list[str]]:
    """The per-shard fact tables of ``names`` in ``cache`` (built where missing or stale)."""
    import concurrent.futures
    import contextlib

    cache.mkdir(parents=True, exist_ok=True)
    plan = []
    for name in names:
        fp = _fingerprint(folder, name, attrs)
        plan.append(
            (name, cache / f"boxes-{name}-{fp}.parquet", cache / f"person_images-{name}-{fp}.parquet")
        )
    todo = [t for t in plan if not (t[1].is_file() and t[2].is_file())]
    workers = max(1, min(len(todo), threads or os.cpu_count() or 1))
    stage = progress.stage("person tables", len(todo)) if progress and todo else contextlib.nullcontext(None)
    with stage as advance:

        def run(batch: list[tuple[str, Path, Path]]) -> None:
            cur = con.cursor()
            cur.execute("SET threads = 1")
            try:
                for name, out_b, out_p in batch:
                    _build_shard(cur, folder, name, attrs, out_b, out_p)
                    if advance is not None:
                        advance(1)
            finally:
                cur.close()

        if workers == 1:
            run(todo)
        else:
            with concurrent.futures.ThreadPoolExecutor(workers) as pool:
                for f in [pool.submit(run, todo[i::workers]) for i in range(workers)]:
                    f.result()
    keep = {p.name for _, b, i in plan for p in (b, i)}
    for stale in cache.glob("*.parquet"):
        if stale.name not in keep and stale.name.startswith(("boxes-", "person_images-")):
            stale.unlink(missing_ok=True)
    return [str(b) for _, b, _ in plan], [str(i) for _, _, i in plan]
