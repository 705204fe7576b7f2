"""Shard mode: :func:`profile_shards` runs one pipeline task (:func:`run_profile_task`) per
LAION-style Parquet shard on the local or the Ray executor; each task writes
``OUT/<shard>.parquet`` atomically, then its completion marker, so a re-run resumes."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fairsets.core.atomic import atomic_path, atomic_write_text, sha256_file
from fairsets.core.progress import Progress

from ..methods import GeoMethod, Prediction
from .files import _confidence, _predict, _sent, _summary, _with_sent
from .specs import _method_for, _spec_hash, release_methods
from .streams import ProfileError, caption_column

SCHEMA = "fairsets.geo.profile/1"
#: What a shard task's marker depends on beyond the method spec (the output columns).
_TASK_VERSION = 2


def _marker(out_dir: Path, stem: str) -> Path:
    return out_dir / ".fairsets" / "markers" / f"{stem}.json"


def run_profile_task(task: dict[str, Any]) -> dict[str, Any]:
    """Pipeline task: profile one Parquet shard → ``out_dir/<stem>.parquet`` + marker.

    ``task``: ``input``, ``out_dir``, ``stem``, ``method`` (a method spec), ``spec_hash``,
    ``caption_column``, ``batch_size``. Deterministic given its inputs; safe to re-run. The
    method is built on a process's first task and kept for its next ones.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = Path(task["input"])
    out_dir = Path(task["out_dir"])
    stem = task["stem"]
    marker = _marker(out_dir, stem)
    out = out_dir / f"{stem}.parquet"
    done = _read_marker(marker)
    if (
        done
        and done.get("spec") == task["spec_hash"]
        and out.exists()
        and sha256_file(out) == done.get("sha256")
    ):
        return done | {"skipped": True}
    table = pq.read_table(src)
    cap = caption_column(table.column_names, task.get("caption_column"), src)
    captions = ["" if c is None else str(c) for c in table.column(cap).to_pylist()]
    method = _method_for(task["method"])
    size = max(1, int(task.get("batch_size", 4096)))
    preds: list[Prediction] = []
    sent = _sent(method)
    for start in range(0, len(captions), size):
        preds.extend(_predict(method, captions[start : start + size]))
    cols = {
        "country": pa.array([p.country or "" for p in preds], pa.string()),
        "country_confidence": pa.array([_confidence(p.confidence) for p in preds], pa.float64()),
        "country_evidence": pa.array([p.evidence or "" for p in preds], pa.string()),
    }
    if any(p.error for p in preds):
        cols["geo_error"] = pa.array([p.error or "" for p in preds], pa.string())
    for name, arr in cols.items():
        if name in table.column_names:
            table = table.drop_columns([name])
        table = table.append_column(name, arr)
    out_dir.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        pq.write_table(table, tmp)
    result = {
        "input": str(src),
        "output": out.name,
        "sha256": sha256_file(out),
        "spec": task["spec_hash"],
        "provenance": method.provenance(),
        **_summary([p.country for p in preds], [p.error for p in preds]),
    }
    _with_sent(result, method, sent)
    marker.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(marker, json.dumps(result, sort_keys=True, default=str) + "\n")
    return result


def _read_marker(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def shard_inputs(inputs: Sequence[str | Path]) -> list[Path]:
    """Parquet shards from files and folders (a folder contributes its ``*.parquet``, sorted)."""
    out: list[Path] = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            out.extend(sorted(x for x in p.glob("*.parquet") if not x.name.startswith(".")))
        elif p.suffix.lower() == ".parquet" and p.is_file():
            out.append(p)
        else:
            raise ProfileError(f"{p}: not a Parquet shard or a folder of them")
    stems = Counter(p.stem for p in out)
    dup = [s for s, n in stems.items() if n > 1]
    if dup:
        raise ProfileError(f"two shards share a name ({', '.join(dup[:3])}); outputs are named after shards")
    if not out:
        where = ", ".join(str(i) for i in list(inputs)[:3])
        raise ProfileError(f"no Parquet shards found in {where}; give .parquet files or folders of them")
    return out


def check_shard_out(shards: Sequence[Path], out_dir: str | Path) -> None:
    """Refuse an output folder where a shard's output (``OUT/<stem>.parquet``) is the shard itself."""
    out_dir = Path(out_dir)
    clash = [p for p in shards if (out_dir / f"{p.stem}.parquet").resolve() == p.resolve()]
    if clash:
        raise ProfileError(
            f"--out {out_dir} holds the input shard {clash[0].name}, which its output would replace; "
            "choose another --out folder"
        )


def profile_shards(
    inputs: Sequence[str | Path],
    method: dict[str, Any] | GeoMethod,
    out_dir: str | Path,
    *,
    executor: str = "local",
    workers: int = 1,
    ray_address: str | None = None,
    caption_col: str | None = None,
    batch_size: int = 4096,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Profile Parquet shards as pipeline tasks; writes ``OUT/profile.json`` and returns it.

    ``method``: a spec (:func:`method_spec`; the driver never builds it, each worker does once)
    or an already built method (its :meth:`~GeoMethod.spec` is sent).
    """
    from ...pipeline.executors import get_executor

    spec = dict(method.spec() if isinstance(method, GeoMethod) else method)
    name = str(spec.get("method"))
    shards = shard_inputs(inputs)
    out_dir = Path(out_dir)
    check_shard_out(shards, out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    spec_hash = _spec_hash({"method": spec, "caption_column": caption_col, "v": _TASK_VERSION})
    tasks = [
        {
            "input": str(p.resolve()),
            "out_dir": str(out_dir.resolve()),
            # the executor holds a shared lock here while the task writes (an orphaned worker is seen)
            "workdir": str((out_dir / ".fairsets").resolve()),
            "stem": p.stem,
            "method": spec,
            "spec_hash": spec_hash,
            "caption_column": caption_col,
            "batch_size": batch_size,
        }
        for p in shards
    ]
    progress = progress or Progress()
    results: dict[str, dict[str, Any]] = {}
    try:
        with progress.stage(f"geo-profiling shards ({name})", len(tasks)) as advance:

            def done(task: dict[str, Any], result: dict[str, Any]) -> None:
                results[task["stem"]] = result
                advance(1)

            with get_executor(executor, workers=workers, ray_address=ray_address) as ex:
                ex.map(run_profile_task, tasks, on_done=done)
    finally:
        release_methods()  # what inline tasks built in this process
    total: Counter[str] = Counter()
    for r in results.values():
        total.update(r.get("countries", {}))
    provenance = next(
        (r["provenance"] for _, r in sorted(results.items()) if r.get("provenance")),
        {"method": name, "options": {k: v for k, v in spec.items() if k != "method"}},
    )
    summary = {
        "schema": SCHEMA,
        "method": provenance,
        "shards": {
            k: {kk: vv for kk, vv in v.items() if kk not in ("countries", "provenance")}
            for k, v in sorted(results.items())
        },
        "captions": sum(r["captions"] for r in results.values()),
        "with_country": sum(r["with_country"] for r in results.values()),
        "errors": sum(r["errors"] for r in results.values()),
        "skipped": sum(1 for r in results.values() if r.get("skipped")),
        **(
            {"sent_to_llm": sum(r["sent_to_llm"] for r in results.values())}
            if results and all("sent_to_llm" in r for r in results.values())
            else {}
        ),
        "countries": dict(sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))),
    }
    atomic_write_text(
        out_dir / "profile.json", json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n"
    )
    return summary
