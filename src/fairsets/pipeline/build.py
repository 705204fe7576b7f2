"""A build: recipe + candidates → the published layout (DESIGN.md, "Outputs of a build").

Stages:

1. **scan** (driver): the source lists candidates; they are sorted by key and cut into tasks.
2. **samples** (executor): per-sample steps per task; pool + rejects + marker per task.
3. **dedup + select** (driver): exact/near duplicates across all sources, then the balanced plan
   (quota per cell, augmentation, identity-disjoint split) for every variant.
4. **materialize** (executor): one task per shard.
5. **publish** (driver): metadata Parquet, rejects, card, Croissant, attribution, manifest.

Work state lives in ``OUT/.fairsets/`` (never published). Task ids are content-addressed (they
hash the task's inputs and configuration), so a re-run skips what is done, and a changed recipe
re-runs exactly the tasks it affects.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import logging
import os
import shutil
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fairsets.core.data import Status
from fairsets.core.progress import Progress
from fairsets.pipeline.config import Recipe, config_hash, resolve_steps

from ..sources import build_source
from .executors import WORKERS_LOCK, get_executor, workers_busy
from .layout import SPLITS, WORKDIR, BuildError, BuildResult, remove_stale  # noqa: F401 - re-exported
from .tasks import (
    materialize_task_done,
    read_marker,
    run_materialize_task,
    run_sample_task,
    sample_marker,
    sample_task_done,
)

__all__ = ["WORKDIR", "BuildError", "BuildResult", "BuildStopped", "build", "check_sources", "remove_stale"]

log = logging.getLogger(__name__)

# Columns of the pool that stay internal (not published as sample metadata).
_INTERNAL = {"image", "status", "step", "reason", "phash", "annotations", "path"}
# The column that carries each row's task file in ``_collect`` (no listing column can be named so).
_FILE_COLUMN = "__fairsets_task_file__"


class BuildStopped(SystemExit):
    """A signal (SIGINT, SIGTERM, SIGHUP) stopped the build; its code is 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signal = signal.Signals(signum).name

    def __str__(self) -> str:
        return f"stopped by {self.signal}; finished tasks are kept: build again to resume"


_SIGNALS = {"depth": 0, "stopping": False}


@contextmanager
def _stop_on_signals() -> Iterator[None]:
    """Turn SIGINT/SIGTERM/SIGHUP into :class:`BuildStopped`, so that every ``with`` block unwinds
    (workers terminated, Ray shut down, locks released). Only the main thread can set handlers;
    elsewhere this does nothing. Further signals while unwinding are ignored (it is bounded)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    names = ("SIGINT", "SIGTERM", "SIGHUP")
    sigs = [getattr(signal, n) for n in names if hasattr(signal, n)]
    if not _SIGNALS["depth"]:
        _SIGNALS["stopping"] = False
    _SIGNALS["depth"] += 1

    def handler(signum: int, _frame: object) -> None:
        if _SIGNALS["stopping"]:  # shared by nested uses: one stop per build
            return
        _SIGNALS["stopping"] = True
        raise BuildStopped(signum)

    # a signal ignored on entry (``nohup``, a background job's SIGINT) stays ignored
    previous = {s: signal.signal(s, handler) for s in sigs if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield
    finally:
        _SIGNALS["depth"] -= 1
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


def _check_out(out: Path, force: bool) -> None:
    """Refuse an output that is a file, or a non-empty folder that is not a fairsets output."""
    if out.exists() and not out.is_dir():
        raise BuildError(f"the output {out} is an existing file, not a folder; choose a folder path")
    if force or not out.is_dir() or (out / WORKDIR).exists() or (out / "manifest.json").exists():
        return
    try:
        entries = sorted(p.name for p in out.iterdir())
    except OSError as exc:
        raise BuildError(f"cannot read the output folder {out}: {exc.strerror or exc}") from None
    if entries:
        shown = ", ".join(entries[:3]) + (", …" if len(entries) > 3 else "")
        problem = f"the output folder {out} is not empty ({shown}) and is not a fairsets output"
        raise BuildError(
            f"{problem}; choose an empty or new folder, or pass force=True to build into it",
            cli=f"{problem}; choose an empty or new --out folder, or pass --force to build into it",
        )


@contextmanager
def _lock(out: Path, *, force: bool = False) -> Iterator[None]:
    """Hold ``OUT/.fairsets/lock`` for the build; refuse while another build or an old worker runs.

    If the build fails and this call created the work folder, it is removed again when nothing but
    the locks was written in it (and ``out`` too, if this call created it and it is empty): a
    failed start leaves no trace. A build that wrote anything keeps it, to resume.
    """
    _check_out(out, force)
    workdir = out / WORKDIR
    made_work = not workdir.exists()
    made = next((d for d in reversed([out, *out.parents]) if not d.exists()), None)  # topmost new
    try:
        workdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        problem = f"cannot create the output folder {out}: {exc.strerror or exc}"
        raise BuildError(
            f"{problem}; choose an output folder on a disk you can write to",
            cli=f"{problem}; choose an --out folder on a disk you can write to",
        ) from None
    path = workdir / "lock"
    for _ in range(5):
        try:
            fh = open(path, "a")  # noqa: SIM115 - held open for the whole build
        except OSError as exc:
            problem = f"cannot open the lock file {path}: {exc.strerror or exc}"
            raise BuildError(
                f"{problem}; choose an output folder on a disk you can write to",
                cli=f"{problem}; choose an --out folder on a disk you can write to",
            ) from None
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            raise BuildError(
                f"another build (or a Hub publish or card update) is running in {out}; wait for it to end "
                "(or stop it), then build again"
            ) from None
        try:
            if os.fstat(fh.fileno()).st_ino == os.stat(path).st_ino:
                break  # else a failed build removed the file we locked: lock the new one
        except FileNotFoundError:
            pass
        fh.close()
    else:
        raise BuildError(f"cannot lock {path}: it keeps being replaced; is another build starting?")
    ok = False
    try:
        if workers_busy(workdir):
            raise BuildError(
                f"a worker of an earlier build (its driver was killed?) still writes in {out}; wait for "
                "it to end or stop it, then build again"
            )
        yield
        ok = True
    finally:
        try:
            if not ok and not workers_busy(workdir):  # stopped (Ctrl-C): the workers were terminated
                _remove_temps(out, workdir)  # mid-write, so what they were writing is garbage
            if not ok and made_work:
                _remove_if_untouched(out, workdir, made)
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
            fh.close()


def _remove_temps(out: Path, workdir: Path) -> None:
    """Delete the temporary files a killed build left in the layout and in its own work folders.

    Called under the lock, once no worker of an earlier build runs (:func:`_lock`), so no writer
    of them is alive. The work folder's other contents (an audit's embedding cache) are not ours.
    """
    from fairsets.core.atomic import remove_temps

    try:
        removed = remove_temps(out, skip=(WORKDIR,))
        for sub in ("markers", "samples", "materialize"):
            removed += [f"{WORKDIR}/{sub}/{r}" for r in remove_temps(workdir / sub)]
    except OSError as exc:  # a courtesy: what is left is removed by the next build, or reported
        log.warning("could not remove the temporary files of an interrupted build: %s", exc)
        return
    if removed:
        log.info("removed %d temporary file(s) of an interrupted build: %s", len(removed), removed[:3])


def _remove_if_untouched(out: Path, workdir: Path, made: Path | None) -> None:
    """Remove a work folder holding nothing but the locks, then the empty folders this build made
    (``out`` up to ``made``, the topmost folder that did not exist before)."""
    try:
        files = [p for p in workdir.rglob("*") if not p.is_dir()]
        if any(p.parent != workdir or p.name not in ("lock", WORKERS_LOCK) for p in files):
            return
        shutil.rmtree(workdir)
        if made is None:
            return
        for d in [out, *out.parents]:
            if any(d.iterdir()):
                break
            d.rmdir()
            if d == made:
                break
    except OSError as exc:  # cleaning up is a courtesy; the build's own error matters
        log.debug("could not remove %s: %s", workdir, exc)


def build(
    recipe: Recipe,
    out: str | Path,
    *,
    executor: str | None = None,
    workers: int | None = None,
    ray_address: str | None = None,
    retry_failed: bool = False,
    progress: Progress | None = None,
    force: bool = False,
) -> BuildResult:
    """Run a recipe into ``out``; see the module docstring for the stages.

    ``out`` must be new, empty or an earlier fairsets output (``force`` allows any folder).
    Raises :class:`BuildError` (bad input, a locked folder) and :class:`BuildStopped` (a signal).
    """
    if not str(out).strip():  # Path("") is the current folder: never what was meant
        raise BuildError(
            f"the output folder is empty ({str(out)!r}); pass the path of a new or empty folder as out",
            cli=f"--out is empty ({str(out)!r}); pass a new or empty folder, e.g. --out my-dataset",
        )
    out = Path(out)
    workdir = out / WORKDIR
    progress = progress or Progress(enabled=False)
    ex_cfg = recipe.executor
    kind = executor or ex_cfg.type
    n_workers = ex_cfg.workers if workers is None else workers

    steps = resolve_steps(recipe)
    step_cfg = [{"name": s.name, "params": s.params.model_dump(mode="json")} for s in steps]
    stage_args = {
        "recipe": recipe,
        "steps": steps,
        "step_cfg": step_cfg,
        "workdir": workdir,
        "retry_failed": retry_failed,
        "progress": progress,
    }
    with _stop_on_signals(), _lock(out, force=force):
        _remove_temps(out, workdir)
        primary = _open_source(recipe.source.type, recipe.source.params(), recipe, workdir)
        candidates = primary.scan()
        if not candidates:
            raise BuildError("the source listed no candidates")
        ex_ctx = get_executor(kind, workers=n_workers, ray_address=ray_address or ex_cfg.ray_address)
        # again after the executor started: Ray sets its own SIGTERM handler in ray.init
        with ex_ctx as ex, _stop_on_signals():
            specs = _run_stage(0, primary, candidates, ex=ex, **stage_args)
            n_candidates = len(candidates)
            sources_summary = [{"type": recipe.source.type, "stage": 0, "candidates": len(candidates)}]
            for stage, sup_cfg in enumerate(recipe.supplement, start=1):
                pool, _, _ = _collect(workdir, specs)
                need = _need(recipe, pool, [c for s in specs for c in s["rows"]])
                entry = {"type": sup_cfg.type, "stage": stage, "candidates": 0, "cells": len(need)}
                sources_summary.append(entry)
                if not need:
                    log.info("supplement %s: every cell reached its quota; not asked", sup_cfg.type)
                    continue
                source = _open_source(sup_cfg.type, sup_cfg.params(), recipe, workdir)
                known = {c["key"] for s in specs for c in s["rows"]}
                rows = [r for r in source.scan_for(need) if r["key"] not in known]
                entry["candidates"] = len(rows)
                n_candidates += len(rows)
                specs += _run_stage(stage, source, rows, ex=ex, **stage_args)

            pool, rejects, step_stats = _collect(workdir, specs)
            pool, review_rejects, pending = _apply_review(workdir, pool)
            pool, dup_rejects, dup_counts = _dedup(recipe, pool)
            pool, cell_rejects = _filter_cells(recipe, pool)
            pool, person_rejects = _one_cell_per_identity(recipe, pool)
            rejects.extend(review_rejects + dup_rejects + cell_rejects + person_rejects)
            if review_rejects:
                step_stats["rejected"]["review"] = len(review_rejects)

            from ..select.balance import select

            plan = select(
                pool,
                groups=list(recipe.groups),
                quota=recipe.quota,
                variants=list(recipe.variants),
                seed=recipe.seed,
                cells=_expected_cells(recipe, pool),
                identity_column=recipe.identity_column,
                fractions={"train": recipe.split.train, "test": recipe.split.test},
            )
            m_specs = _materialize_specs(recipe, plan, pool, workdir, out)
            m_todo = [s for s in m_specs if materialize_task_done(s) is None]
            with progress.stage("write shards", len(m_todo)) as advance:
                ex.map(run_materialize_task, m_todo, on_done=lambda spec, res: advance(1))

        m_markers = [materialize_task_done(s) for s in m_specs]
        from .publish_step import publish_layout

        return publish_layout(
            recipe=recipe,
            out=out,
            workdir=workdir,
            candidates=n_candidates,
            sources=sources_summary,
            pending_review=len(pending),
            steps=steps,
            step_stats=step_stats,
            pool=pool,
            rejects=rejects,
            dup_counts=dup_counts,
            plan=plan,
            m_specs=m_specs,
            m_markers=m_markers,
        )


def _open_source(kind: str, params: dict[str, Any], recipe: Recipe, workdir: Path | None) -> Any:
    return build_source(kind, params, recipe.base_dir, recipe.groups, workdir=workdir)


def check_sources(recipe: Recipe) -> None:
    """What can be checked of the sources without building: their parameters and the files they name.

    Raises :class:`~fairsets.sources.SourceError` for a bad parameter, or a ``path`` (listing or
    folder) or ``states_file`` that does not exist. A source with a ``prepare`` hook writes its
    listing when the build starts, so only the hook's file has to exist.
    """
    from ..sources import SourceError

    configs = [("source", recipe.source)] + [
        (f"supplement {i + 1}", c) for i, c in enumerate(recipe.supplement)
    ]
    for where, cfg in configs:
        source = _open_source(cfg.type, cfg.params(), recipe, None)
        params = source.params
        prepare = getattr(params, "prepare", None)
        if prepare:
            hook = recipe.base_dir / str(prepare).partition(":")[0]
            if not hook.is_file():
                raise SourceError(
                    f"{where}.prepare: no such hook file {hook}; write it next to the recipe or fix the name"
                )
        for name in ("path", "states_file"):
            value = getattr(params, name, None)
            if not value or (name == "path" and prepare):
                continue
            target = source.resolve_path(str(value))
            if not target.exists():
                raise SourceError(
                    f"{where}.{name}: no such file or folder: {target}; fix the path (a relative one is "
                    "taken from the recipe's folder)"
                )


def _run_stage(
    stage: int,
    source: Any,
    rows: list[dict[str, Any]],
    *,
    recipe: Recipe,
    steps: list[Any],
    step_cfg: list[dict[str, Any]],
    workdir: Path,
    retry_failed: bool,
    progress: Progress,
    ex: Any,
) -> list[dict[str, Any]]:
    """Download (URL sources), then run the per-sample steps over one source's candidates."""
    rows = sorted(rows, key=lambda r: r["key"])
    for r in rows:
        r["_stage"] = stage
    if source.downloads and rows:
        from .download import download_phase

        download_phase(
            rows, source, recipe, steps, workdir, stage, retry_failed=retry_failed, progress=progress
        )
    src_cfg = {
        "type": source.registered_name,
        "params": source.params.model_dump(mode="json"),
        "base_dir": str(recipe.base_dir),
        "groups": list(recipe.groups),
        "workdir": str(workdir),
    }
    ex_cfg = recipe.executor
    specs = []
    for i in range(0, len(rows), ex_cfg.task_size):
        chunk = rows[i : i + ex_cfg.task_size]
        tid = config_hash({"rows": chunk, "steps": step_cfg, "v": 1})
        specs.append(
            {
                "task_id": f"t{tid}",
                "workdir": str(workdir),
                "rows": chunk,
                "source": src_cfg,
                "steps": step_cfg,
                "seed": recipe.seed,
                "retry_failed": retry_failed,
                "jpeg_quality": recipe.publish.jpeg_quality,
            }
        )
    todo = [s for s in specs if sample_task_done(s) is None]
    log.info("%s: %d candidates in %d tasks (%d to run)", src_cfg["type"], len(rows), len(specs), len(todo))
    label = "per-sample steps" if stage == 0 else f"per-sample steps ({src_cfg['type']})"
    with progress.stage(label, len(todo)) as advance:
        ex.map(run_sample_task, todo, on_done=lambda spec, res: advance(1))
    return specs


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


def _public_meta(row: dict[str, Any]) -> dict[str, Any]:
    from ..publish.attribution import redact_url

    meta = {
        k: v
        for k, v in row.items()
        if k not in _INTERNAL and k not in ("pool", "key") and not k.startswith("_")
    }
    meta["source_sha256"] = meta.pop("pixel_sha256", None)
    for k in ("source_url", "url"):
        if k in meta:
            meta[k] = redact_url(meta[k])
    ann = json.loads(row.get("annotations") or "{}")
    for k in ("face_box", "face_confidence"):
        if k in ann:
            meta[k] = ann[k]
    return meta


def _materialize_specs(recipe: Recipe, plan: Any, pool: list[dict], workdir: Path, out: Path) -> list[dict]:
    by_key = {r["key"]: r for r in pool}
    groups: dict[tuple[str, str], list[Any]] = {}
    for item in plan.items:
        groups.setdefault((item.variant, item.split), []).append(item)
    specs = []
    size = recipe.executor.shard_size
    for (variant, split), items in sorted(groups.items()):
        for n, i in enumerate(range(0, len(items), size)):
            chunk = [
                {
                    "key": it.key,
                    "source_key": it.source_key,
                    "pool": by_key[it.source_key]["pool"],
                    "augment": it.augment,
                    "variant": variant,
                    "split": split,
                    "meta": _public_meta(by_key[it.source_key]),
                }
                for it in items[i : i + size]
            ]
            shard = f"shards/{variant}/{split}-{n:05d}.tar"
            tid = config_hash({"shard": shard, "items": chunk, "q": recipe.publish.jpeg_quality, "v": 1})
            specs.append(
                {
                    "task_id": f"m{tid}",
                    "workdir": str(workdir),
                    "out_dir": str(out),
                    "shard": shard,
                    "items": chunk,
                    "jpeg_quality": recipe.publish.jpeg_quality,
                }
            )
    return specs
