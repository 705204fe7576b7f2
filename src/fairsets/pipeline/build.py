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

import logging
from pathlib import Path
from typing import Any

from fairsets.core.progress import Progress
from fairsets.pipeline.config import Recipe, resolve_steps

from .executors import get_executor
from .layout import SPLITS, WORKDIR, BuildError, BuildResult, remove_stale  # noqa: F401 - re-exported
from .outfolder import _lock, _remove_temps
from .pool import _collect, _expected_cells, _need, _screen_pool
from .signals import BuildStopped, _stop_on_signals
from .source_check import _open_source, check_sources
from .stages import _materialize_specs, _run_stage
from .tasks import materialize_task_done, run_materialize_task

__all__ = ["WORKDIR", "BuildError", "BuildResult", "BuildStopped", "build", "check_sources", "remove_stale"]

log = logging.getLogger(__name__)


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
        removals = _load_removals(recipe, out)
        candidates = removals.keep(candidates)  # before anything is downloaded or read
        if not candidates:
            raise BuildError(
                f"every candidate is on the deny list ({out}/{WORKDIR}/removals.jsonl): nothing to build",
            )
        stage_args["removals"] = removals
        ex_ctx = get_executor(kind, workers=n_workers, ray_address=ray_address or ex_cfg.ray_address)
        # again after the executor started: Ray sets its own SIGTERM handler in ray.init
        with ex_ctx as ex, _stop_on_signals():
            specs = _run_stage(0, primary, candidates, ex=ex, **_stage_kwargs(stage_args))
            sources_summary = [{"type": recipe.source.type, "stage": 0, "candidates": len(candidates)}]
            n_candidates = len(candidates) + _run_supplements(recipe, specs, sources_summary, ex, stage_args)
            pool, rejects, step_stats, pending, dup_counts = _screen_pool(recipe, workdir, specs)

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
            removals=removals.state,
        )


def _stage_kwargs(stage_args: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in stage_args.items() if k != "removals"}


def _load_removals(recipe: Recipe, out: Path) -> Any:
    """The folder's deny list, ready to leave candidates out (see :mod:`.removals`)."""
    from .removals import RemovalError, deny_path, read_deny_list

    try:
        requests, revisions = read_deny_list(deny_path(out))
    except RemovalError as exc:
        raise BuildError(str(exc)) from None
    return _Removals(recipe, requests, revisions)


class _Removals:
    """Leaves the deny list's candidates out of each source's rows and remembers them (counts only)."""

    def __init__(self, recipe: Recipe, requests: list[dict], revisions: dict[int, dict[str, int]]) -> None:
        self.recipe, self.requests, self.revisions = recipe, requests, revisions
        self.removed: list[tuple[dict, dict]] = []

    def keep(self, rows: list[dict]) -> list[dict]:
        from .removals import split_removed

        kept, removed = split_removed(rows, self.requests, self.recipe.identity_column)
        self.removed.extend(removed)
        if removed:
            log.info("deny list: %d candidate(s) left out before download", len(removed))
        return kept

    @property
    def state(self) -> Any:
        from .removal_summary import Removals

        return Removals(self.requests, self.revisions, self.removed, list(self.recipe.groups))


def _run_supplements(
    recipe: Recipe,
    specs: list[dict[str, Any]],
    sources_summary: list[dict[str, Any]],
    ex: Any,
    stage_args: dict[str, Any],
) -> int:
    """Ask each supplement, in turn, for what the cells still lack; run its candidates' tasks.

    Appends the supplements' tasks to ``specs`` and their entries to ``sources_summary``; returns
    how many candidates they listed.
    """
    workdir = stage_args["workdir"]
    n_candidates = 0
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
        rows = stage_args["removals"].keep([r for r in source.scan_for(need) if r["key"] not in known])
        entry["candidates"] = len(rows)
        n_candidates += len(rows)
        specs.extend(_run_stage(stage, source, rows, ex=ex, **_stage_kwargs(stage_args)))
    return n_candidates
