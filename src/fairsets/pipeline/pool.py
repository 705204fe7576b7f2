"""The driver's view of the per-sample results: the pool, and what is taken out of it before selection.

:func:`_screen_pool` reads every task's pool and rejects (:func:`_collect`), then rejects, each with
a reason, the candidates manual review did not accept (:func:`_apply_review`), duplicates
(:func:`_dedup`), samples outside the recipe's cells (:func:`_filter_cells`) and a person's images
outside their home cell (:func:`_one_cell_per_identity`). :func:`_need` says what each cell still
lacks (what a supplement is asked for).
"""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from typing import Any

from fairsets.core.data import Status
from fairsets.pipeline.config import Recipe

from .layout import BuildError
from .tasks import read_marker, sample_marker

# The column that carries each row's task file in ``_collect`` (no listing column can be named so).
_FILE_COLUMN = "__fairsets_task_file__"


def _screen_pool(
    recipe: Recipe, workdir: Path, specs: list[dict[str, Any]]
) -> tuple[list[dict], list[dict], dict, list[dict], dict[str, int]]:
    """Every task's pool, less what manual review, dedup and the cell rules reject.

    Returns the pool left, the rejects (the tasks' and these), the tasks' step stats (with the
    review's count), the candidates awaiting review and the duplicate counts.
    """
    pool, rejects, step_stats = _collect(workdir, specs)
    pool, review_rejects, pending = _apply_review(workdir, pool)
    pool, dup_rejects, dup_counts = _dedup(recipe, pool)
    pool, cell_rejects = _filter_cells(recipe, pool)
    pool, person_rejects = _one_cell_per_identity(recipe, pool)
    rejects.extend(review_rejects + dup_rejects + cell_rejects + person_rejects)
    if review_rejects:
        step_stats["rejected"]["review"] = len(review_rejects)
    return pool, rejects, step_stats, pending, dup_counts


def _need(
    recipe: Recipe, pool: list[dict], candidates: list[dict] | None = None
) -> dict[tuple[str, ...], int]:
    """Per expected cell, how many accepted samples are missing to reach the quota.

    Counts the samples that need no manual review, after dedup, so that the need (and so what a
    supplement is asked for) does not change when reviews come in. Where the recipe lists no
    ``cells``, the expected ones are those of every candidate so far (accepted or not): a cell
    whose candidates were all rejected is the one a supplement must be asked for.
    """
    rows = [r for r in pool if r.get("review") in (None, "")]
    rows, _, _ = _dedup(recipe, rows)
    rows, _ = _filter_cells(recipe, rows)
    rows, _ = _one_cell_per_identity(recipe, rows)
    have = Counter(tuple(str(r[g]) for g in recipe.groups) for r in rows)
    seen = [c for c in candidates or [] if all(c.get(g) not in (None, "") for g in recipe.groups)]
    need = {}
    for cell in _expected_cells(recipe, [*rows, *seen]):
        k = tuple(cell[g] for g in recipe.groups)
        if have[k] < recipe.quota:
            need[k] = recipe.quota - have[k]
    return need


def _apply_review(workdir: Path, pool: list[dict]) -> tuple[list[dict], list[dict], list[dict]]:
    """Apply manual review decisions to candidates that need them (``review == "pending"``).

    Accepted ones take the licence and author the reviewer gave; rejected ones and those still
    awaiting a decision go to the rejects table (step ``review``). The candidates awaiting a
    decision are listed in ``.fairsets/review/pending.parquet`` for ``fairsets review export``.
    """
    from fairsets.core.tables import write_table

    path = workdir / "review" / "decisions.parquet"
    decisions: dict[str, dict[str, Any]] = {}
    if path.is_file():
        from fairsets.pipeline.review import load_decisions

        decisions = load_decisions(path)
    kept, rejected, pending = [], [], []
    for row in pool:
        if row.get("review") != "pending":
            kept.append(row)
            continue
        d = decisions.get(row["key"]) or {}
        decision = d.get("decision") or ""
        if decision == "accept":
            kept.append(
                {
                    **row,
                    "review": "accepted",
                    "license": d["license"],
                    "author": d.get("author") or row.get("author"),
                    "reviewed_at": d.get("reviewed_at"),
                }
            )
            continue
        if decision == "reject":
            why = "rejected in manual review" + (f": {d['note']}" if d.get("note") else "")
        else:
            why = "awaiting manual review (fairsets review export / import)"
            pending.append(row)
        rejected.append({**row, "status": Status.REJECTED.value, "step": "review", "reason": why})
    write_table(workdir / "review" / "pending.parquet", pending, order=None if pending else ("key", "pool"))
    return kept, rejected, pending


def _collect(workdir: Path, specs: list[dict[str, Any]]) -> tuple[list[dict], list[dict], dict]:
    """Read every task's pool metadata (not the image bytes) and rejects with DuckDB; sum the stats.

    Reads each task's marker as it is (with ``--retry-failed`` a task may still hold failed samples
    after its retry: they are part of the result, not a reason to re-run it here).
    """
    import duckdb

    stats: dict[str, Counter[str]] = {"rejected": Counter(), "failed": Counter()}
    pools, rejects = [], []
    for m in (read_marker(sample_marker(workdir, s["task_id"])) for s in specs):
        if m is None:  # the executor raised before this point if a task failed
            raise BuildError("a per-sample task finished without its marker")
        pools.append(str(workdir / m["pool"]))
        rejects.append(str(workdir / m["rejects"]))
        for kind in ("rejected", "failed"):
            stats[kind].update(m["stats"][kind])
    if not pools:  # no task ran (nothing to read): DuckDB cannot read an empty list of files
        return [], [], {k: dict(v) for k, v in stats.items()}
    prefix = len(str(workdir)) + 1
    con = duckdb.connect()

    def fetch(files: list[str], drop: set[str]) -> list[dict[str, Any]]:
        # Columns are named explicitly: a table without accepted rows has no ``image`` column, and a
        # listing may have a column of any name (``filename`` included), so nothing is assumed.
        rel = f"read_parquet(?, union_by_name = true, filename = '{_FILE_COLUMN}')"
        names = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {rel}", [files]).fetchall()]
        cols = [n for n in names if n not in drop]
        sql = f"SELECT {', '.join(_ident(n) for n in cols)} FROM {rel} ORDER BY key, {_FILE_COLUMN}"
        cur = con.execute(sql, [files])
        return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]

    pool_rows = fetch(pools, {"image"})
    for r in pool_rows:
        r["pool"] = r.pop(_FILE_COLUMN)[prefix:]
    reject_rows = fetch(rejects, {_FILE_COLUMN})
    con.close()
    return pool_rows, reject_rows, {k: dict(v) for k, v in stats.items()}


def _ident(name: str) -> str:
    """A DuckDB identifier, quoted (column names come from listings)."""
    return '"' + name.replace('"', '""') + '"'


def _dedup(recipe: Recipe, pool: list[dict]) -> tuple[list[dict], list[dict], dict[str, int]]:
    if not recipe.dedup.enabled or not pool:
        return pool, [], {"exact": 0, "near": 0}
    from ..vision.dedup import find_duplicates

    # Earlier sources win (a supplement's copy of a primary image is the duplicate), then keys.
    ranked = [{**r, "priority": r.get("_stage") or 0} for r in pool]
    dups = find_duplicates(ranked, hamming=recipe.dedup.hamming)
    by_key = {d["key"]: d for d in dups}
    kept, rejected = [], []
    for row in pool:
        d = by_key.get(row["key"])
        if d is None:
            kept.append(row)
            continue
        why = f"{d['kind']} duplicate of {d['kept_key']}"
        if d["kind"] == "near":
            why += f" (hamming {d['distance']})"
        rejected.append({**row, "status": Status.REJECTED.value, "step": "dedup", "reason": why})
    counts = Counter(d["kind"] for d in dups)
    return kept, rejected, {"exact": counts.get("exact", 0), "near": counts.get("near", 0)}


def _expected_cells(recipe: Recipe, pool: list[dict]) -> list[dict[str, str]]:
    """Every combination of the recipe's ``cells`` values (observed values where not given)."""
    values = []
    for g in recipe.groups:
        vals = recipe.cells.get(g) or sorted({str(r[g]) for r in pool})
        values.append(vals)
    return [dict(zip(recipe.groups, combo, strict=True)) for combo in itertools.product(*values)]


def _filter_cells(recipe: Recipe, pool: list[dict]) -> tuple[list[dict], list[dict]]:
    """Reject samples whose group value is outside the recipe's ``cells`` (recorded, not dropped)."""
    if not recipe.cells:
        return pool, []
    kept, rejected = [], []
    for row in pool:
        bad = [f"{g}={row[g]!r}" for g, vals in recipe.cells.items() if str(row[g]) not in vals]
        if bad:
            rejected.append(
                {
                    **row,
                    "status": Status.REJECTED.value,
                    "step": "select",
                    "reason": f"not a recipe cell: {', '.join(bad)}",
                }
            )
        else:
            kept.append(row)
    return kept, rejected


def _one_cell_per_identity(recipe: Recipe, pool: list[dict]) -> tuple[list[dict], list[dict]]:
    """Reject a person's images outside their home cell (the one with most of them), recorded.

    Splits are planned per cell; a person in two cells could otherwise be in train and in test.
    """
    from ..select.split import cross_cell_identities

    groups = list(recipe.groups)
    crossing = cross_cell_identities(pool, groups, recipe.identity_column)
    if not crossing:
        return pool, []
    kept, rejected = [], []
    for row in pool:
        ident = row.get(recipe.identity_column)
        home = crossing.get(str(ident))[0] if ident is not None and str(ident) in crossing else None
        if home is None or tuple(str(row[g]) for g in groups) == home:
            kept.append(row)
            continue
        where = ", ".join(f"{g}={v!r}" for g, v in zip(groups, home, strict=True))
        why = f"identity {str(ident)[:80]!r} belongs to the cell with most of its images ({where})"
        rejected.append({**row, "status": Status.REJECTED.value, "step": "select", "reason": why})
    return kept, rejected
