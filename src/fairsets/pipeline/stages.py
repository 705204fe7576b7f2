"""The executor stages' tasks: per-sample tasks over one source's candidates, and one materialize
task per shard of the selection plan."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from fairsets.core.progress import Progress
from fairsets.pipeline.config import Recipe, config_hash

from .tasks import run_sample_task, sample_task_done

log = logging.getLogger("fairsets.pipeline.build")  # the build's name, as log lines always showed

# Columns of the pool that stay internal (not published as sample metadata).
_INTERNAL = {"image", "status", "step", "reason", "phash", "annotations", "path"}


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
