"""Shard mode: :func:`profile_shards` runs one pipeline task (:func:`run_profile_task`) per
LAION-style Parquet shard on the local or the Ray executor; each task writes
``OUT/<shard>.parquet`` atomically, then its completion marker, so a re-run resumes.

A run holds ``OUT/.fairsets/lock`` and first removes the temporary files a killed run left in OUT
(a worker killed between writing and renaming), so a resumed run ends with the same files, byte for
byte, as an uninterrupted one; ``profile.json`` says nothing of which shards a run skipped.
Shards are checked before any task runs (a readable Parquet file with a caption column), and a
folder ``fairsets download`` wrote contributes its shards, not its own side files
(:data:`SIDE_FILES`)."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fairsets.core.atomic import atomic_path, atomic_write_text, layout_lock, remove_temps, sha256_file
from fairsets.core.progress import Progress

from ..methods import GeoMethod, Prediction
from .files import _confidence, _predict, _sent, _summary, _with_sent
from .specs import _method_for, _spec_hash, release_methods
from .streams import ProfileError, caption_column

log = logging.getLogger(__package__)

SCHEMA = "fairsets.geo.profile/1"
#: Parquet files fairsets writes beside the shards of a folder it manages (one with a ``.fairsets``
#: work folder): ``fairsets download``'s ``status.parquet`` (one status row per listing row).
SIDE_FILES = frozenset({"status.parquet"})
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


def _side_file(p: Path) -> bool:
    """Whether ``p`` is one of the files fairsets keeps beside the shards of a folder it wrote."""
    return p.name in SIDE_FILES and (p.parent / ".fairsets").is_dir()


def shard_inputs(inputs: Sequence[str | Path]) -> list[Path]:
    """Parquet shards from files and folders (a folder contributes its ``*.parquet``, sorted, but
    not fairsets' side files: :data:`SIDE_FILES`)."""
    out: list[Path] = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            out.extend(
                sorted(x for x in p.glob("*.parquet") if not x.name.startswith(".") and not _side_file(x))
            )
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


def check_shards(shards: Sequence[Path], caption_col: str | None) -> None:
    """Refuse, before any task runs, a shard that is not a readable Parquet file with a caption
    column (its footer is read, not its rows); the message names the shard."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for p in shards:
        try:
            names = pq.read_schema(p).names
        except (OSError, pa.ArrowException) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ProfileError(f"{p}: not a readable Parquet shard ({first}); leave it out") from None
        try:
            caption_column(names, caption_col, p)
        except ProfileError as exc:
            fix = "another --caption-column" if caption_col else "--caption-column NAME"
            raise ProfileError(f"{exc}; give {fix}, or leave this file out") from None


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
    spec = dict(method.spec() if isinstance(method, GeoMethod) else method)
    shards = shard_inputs(inputs)
    out_dir = Path(out_dir)
    check_shard_out(shards, out_dir)
    check_shards(shards, caption_col)
    out_dir.mkdir(parents=True, exist_ok=True)
    with layout_lock(out_dir):
        _remove_stale_temps(out_dir)
        return _run(shards, spec, out_dir, executor, workers, ray_address, caption_col, batch_size, progress)


def _remove_stale_temps(out_dir: Path) -> None:
    """Delete the temporary files a killed run left in ``out_dir`` and its markers (under the lock,
    once no worker of an earlier run writes there); never enter the user's other folders."""
    from ...pipeline.executors import workers_busy

    if workers_busy(out_dir / ".fairsets"):
        raise ProfileError(
            f"a worker of an earlier run (its command was killed?) still writes in {out_dir}; wait for it "
            "to end or stop it, then run this again"
        )
    skip = tuple(p.name for p in out_dir.iterdir() if p.is_dir())
    removed = remove_temps(out_dir, skip=skip) + remove_temps(out_dir / ".fairsets" / "markers")
    if removed:
        log.info("removed %d temporary file(s) of an interrupted run: %s", len(removed), removed[:3])


def _run(
    shards: list[Path],
    spec: dict[str, Any],
    out_dir: Path,
    executor: str,
    workers: int,
    ray_address: str | None,
    caption_col: str | None,
    batch_size: int,
    progress: Progress | None,
) -> dict[str, Any]:
    from ...pipeline.executors import get_executor

    name = str(spec.get("method"))
    spec_hash = _spec_hash({"method": spec, "caption_column": caption_col, "v": _TASK_VERSION})
    tasks = [
        {
            "task_id": p.stem,  # what an executor names when the task fails
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
        "shards": {  # the same whether a shard was done now or by an earlier, interrupted run
            k: {kk: vv for kk, vv in v.items() if kk not in ("countries", "provenance", "skipped")}
            for k, v in sorted(results.items())
        },
        "captions": sum(r["captions"] for r in results.values()),
        "with_country": sum(r["with_country"] for r in results.values()),
        "errors": sum(r["errors"] for r in results.values()),
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
    return summary | {"skipped": sum(1 for r in results.values() if r.get("skipped"))}
