"""Task functions run by the executors (top-level, importable, deterministic in their spec).

Per-sample task (``run_sample_task``): read a chunk of candidates, run the steps, and write
``samples/<task>.g<gen>.pool.parquet`` (accepted samples with their published image bytes) and
``samples/<task>.g<gen>.rejects.parquet`` (rejected/failed samples with step and reason), then
the completion marker ``markers/samples/<task>.json`` *last*. The marker names the files of its
generation, so a retry (``--retry-failed``) writes a new generation and commits it with one
atomic rename of the marker; a kill at any point leaves either the old or the new state.

Materialize task (``run_materialize_task``): turn planned items into one WebDataset shard (real
images copied, augmented ones made from their source with a recorded seed), write the shard
atomically, its metadata rows, and the marker last. Only a shard with augmented items imports
albumentations' transforms (without its package ``__init__``, and so without PyTorch:
:mod:`fairsets.vision.augment`); the tar writer is webdataset's alone, without its package
``__init__`` (:mod:`fairsets.core.light_import`).

Both run in executor workers that live for the whole build, so a worker pays each import once.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from fairsets.core.atomic import atomic_write_text
from fairsets.core.data import Sample, Status
from fairsets.core.step import Step, StepContext, build_step
from fairsets.core.tables import write_table

__all__ = [
    "materialize_marker",
    "materialize_task_done",
    "read_marker",
    "run_materialize_task",
    "run_sample_task",
    "sample_marker",
    "sample_task_done",
]

log = logging.getLogger(__name__)

_STEP_CACHE: dict[str, list[Step]] = {}
_SOURCE_CACHE: dict[str, Any] = {}


def sample_marker(workdir: Path, task_id: str) -> Path:
    return workdir / "markers" / "samples" / f"{task_id}.json"


def materialize_marker(workdir: Path, spec_id: str) -> Path:
    return workdir / "markers" / "materialize" / f"{spec_id}.json"


def sample_task_done(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The marker of a finished per-sample task, or None if it has to run (again)."""
    marker = read_marker(sample_marker(Path(spec["workdir"]), spec["task_id"]))
    if marker is not None and spec.get("retry_failed") and marker["stats"]["failed"]:
        return None
    return marker


def materialize_task_done(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The marker of a written shard, or None if the shard is missing or not the one recorded."""
    marker = read_marker(materialize_marker(Path(spec["workdir"]), spec["task_id"]))
    shard = Path(spec["out_dir"]) / spec["shard"]
    if marker is None or not shard.is_file() or shard.stat().st_size != marker["bytes"]:
        return None
    return marker


def read_marker(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, OSError):  # a marker is written atomically; garbage means tampering
        log.warning("ignoring unreadable marker %s", path)
        return None


def _steps(spec: dict[str, Any]) -> list[Step]:
    key = json.dumps(spec["steps"], sort_keys=True)
    if key not in _STEP_CACHE:
        from fairsets.pipeline.config import _import_components

        _import_components()
        _STEP_CACHE[key] = [build_step(s["name"], s["params"]) for s in spec["steps"]]
    return _STEP_CACHE[key]


def _source(spec: dict[str, Any]) -> Any:
    src = spec["source"]
    key = json.dumps(src, sort_keys=True)
    if key not in _SOURCE_CACHE:
        from ..sources import build_source

        workdir = Path(src["workdir"]) if src.get("workdir") else None
        _SOURCE_CACHE[key] = build_source(
            src["type"], src["params"], Path(src["base_dir"]), src["groups"], workdir=workdir
        )
    source = _SOURCE_CACHE[key]
    source.max_bytes = _max_bytes(spec)
    return source


def _max_bytes(spec: dict[str, Any]) -> int | None:
    """The ``decode`` step's byte cap: a source reads no file larger (None: no decode step)."""
    return next((int(st.params.max_bytes) for st in _steps(spec) if st.name == "decode"), None)


def _samples(rows: list[dict[str, Any]]) -> Iterator[Sample]:
    """Samples of the task's rows; a row its source already refused (``_rejected``) is rejected."""
    for row in rows:
        sample = Sample(key=row["key"], meta={k: v for k, v in row.items() if k != "key"})
        if row.get("_rejected"):
            sample.reject(row.get("_rejected_step") or "source", row["_rejected"])
        yield sample


def _read_bytes(samples: Iterator[Sample], source: Any) -> Iterator[Sample]:
    """Read each still-``ok`` sample's bytes (samples rejected by metadata-only steps are never read)."""
    from ..sources import SourceReadError, SourceRejected

    for sample in samples:
        if sample.ok and sample.data is None:
            row = {"key": sample.key, **sample.meta}
            try:
                sample.data = source.read(row)
            except SourceReadError as exc:
                sample.fail(exc.step, str(exc))
            except SourceRejected as exc:
                sample.reject(exc.step, str(exc))
        yield sample


def _encode_fallback(sample: Sample, quality: int) -> bytes:
    """Encode ``sample.image`` as JPEG when no step produced ``sample.out`` (e.g. no crop step)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(sample.image).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


_ROW_COLUMNS = ("key", "status", "step", "reason", "pixel_sha256", "phash", "annotations")


def _row(sample: Sample) -> dict[str, Any]:
    row = {"key": sample.key, **{k: v for k, v in sample.meta.items() if k != "path"}}
    row["status"] = sample.status.value
    row["step"] = sample.step
    row["reason"] = sample.reason
    row["pixel_sha256"] = sample.annotations.get("pixel_sha256")
    row["phash"] = sample.annotations.get("phash")
    row["annotations"] = json.dumps(sample.annotations, sort_keys=True, default=str)
    return row


def run_sample_task(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the per-sample steps over one chunk of candidates (see module docstring)."""
    workdir = Path(spec["workdir"])
    task_id = spec["task_id"]
    if (done := sample_task_done(spec)) is not None:
        return done
    marker_path = sample_marker(workdir, task_id)
    previous = read_marker(marker_path)
    rows = spec["rows"]
    keep_pool: pa.Table | None = None
    keep_rejects: pa.Table | None = None
    gen = 0
    if previous is not None:  # --retry-failed with failed samples in the previous generation
        # Re-process only the failed samples; keep everything else of the previous generation.
        gen = previous["generation"] + 1
        old_rej = pq.read_table(workdir / previous["rejects"])
        failed_keys = set(
            old_rej.filter(pa.compute.equal(old_rej["status"], Status.FAILED.value))["key"].to_pylist()
        )
        rows = [r for r in rows if r["key"] in failed_keys]
        keep_rejects = old_rej.filter(
            pa.compute.invert(pa.compute.is_in(old_rej["key"], pa.array(list(failed_keys))))
        )
        keep_pool = pq.read_table(workdir / previous["pool"])

    ctx = StepContext(seed=spec["seed"], task_id=task_id, workdir=workdir)
    steps = _steps(spec)
    # Leading steps that only look at metadata (the licence check) run before any bytes are read.
    n_meta = next((i for i, st in enumerate(steps) if st.needs_bytes), len(steps))
    stream: Iterator[Sample] = _samples(rows)
    for step in steps[:n_meta]:
        stream = step.run(stream, ctx)
    stream = _read_bytes(stream, _source(spec))
    for step in steps[n_meta:]:
        stream = step.run(stream, ctx)

    accepted: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    for sample in stream:
        if sample.ok:
            if sample.out is None:
                if sample.image is None:
                    raise RuntimeError(f"sample {sample.key} reached the end of the steps without an image")
                sample.out = _encode_fallback(sample, spec.get("jpeg_quality", 95))
            row = _row(sample)
            row["image"] = sample.out
            accepted.append(row)
        else:
            rejected.append(_row(sample))

    pool = _merge(keep_pool, accepted)
    rejects = _merge(keep_rejects, rejected)
    names = {
        "pool": f"samples/{task_id}.g{gen}.pool.parquet",
        "rejects": f"samples/{task_id}.g{gen}.rejects.parquet",
    }
    # An empty table gets only the columns every row has, so that reading all tasks' tables by
    # column name (DuckDB union_by_name) does not invent columns that no sample has.
    write_table(workdir / names["pool"], pool, order=None if pool else _ROW_COLUMNS)
    write_table(workdir / names["rejects"], rejects, order=None if rejects else _ROW_COLUMNS)
    stats = _stats(len(spec["rows"]), pool, rejects)
    marker = {"task_id": task_id, "generation": gen, **names, "stats": stats}
    atomic_write_text(marker_path, json.dumps(marker, sort_keys=True, indent=1))
    if previous is not None:  # the old generation is no longer referenced
        for name in ("pool", "rejects"):
            (workdir / previous[name]).unlink(missing_ok=True)
    return marker


def _merge(old: pa.Table | None, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if old is None:
        return rows
    merged = old.to_pylist() + rows
    merged.sort(key=lambda r: r["key"])
    return merged


def _stats(n: int, pool: list[dict[str, Any]], rejects: list[dict[str, Any]]) -> dict[str, Any]:
    by: dict[str, dict[str, int]] = {"rejected": {}, "failed": {}}
    for r in rejects:
        bucket = by["failed" if r["status"] == Status.FAILED.value else "rejected"]
        bucket[r["step"]] = bucket.get(r["step"], 0) + 1
    return {"candidates": n, "ok": len(pool), "rejected": by["rejected"], "failed": by["failed"]}


# --------------------------------------------------------------------------------------------
# materialize


def _pool_images(path: Path, keys: set[str]) -> dict[str, bytes]:
    table = pq.read_table(path, columns=["key", "image"], filters=[("key", "in", sorted(keys))])
    return dict(zip(table["key"].to_pylist(), table["image"].to_pylist(), strict=True))


def _augmented_jpeg(data: bytes, augment: dict[str, Any], quality: int) -> tuple[bytes, dict[str, Any]]:
    import cv2
    import numpy as np

    from ..vision.augment import augment as apply_augment

    bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    image = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    applied: dict[str, Any] = {}
    if augment.get("base"):  # a colour copy of a mild augmentation: apply the base first
        image, applied["base"] = apply_augment(image, augment["base"]["kind"], augment["base"]["seed"])
    image, applied["transforms"] = apply_augment(image, augment["kind"], augment["seed"])
    ok, buf = cv2.imencode(
        ".jpg", cv2.cvtColor(image, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality]
    )
    if not ok:
        raise RuntimeError("JPEG encoding failed")
    return buf.tobytes(), applied


def run_materialize_task(spec: dict[str, Any]) -> dict[str, Any]:
    """Write one shard of planned items, its metadata rows, then its marker (see module docstring)."""
    import hashlib

    from ..publish.shards import write_shard

    workdir = Path(spec["workdir"])
    out_dir = Path(spec["out_dir"])
    if (done := materialize_task_done(spec)) is not None:
        return done
    marker_path = materialize_marker(workdir, spec["task_id"])
    shard_path = out_dir / spec["shard"]

    wanted: dict[str, set[str]] = {}
    for item in spec["items"]:
        wanted.setdefault(item["pool"], set()).add(item["source_key"])
    images: dict[str, bytes] = {}
    for pool_file, keys in sorted(wanted.items()):
        images.update(_pool_images(workdir / pool_file, keys))

    records, rows = [], []
    for item in spec["items"]:
        data = images[item["source_key"]]
        applied = None
        if item["augment"]:
            data, applied = _augmented_jpeg(data, item["augment"], spec["jpeg_quality"])
        meta = dict(item["meta"])
        meta.update(
            key=item["key"],
            variant=item["variant"],
            split=item["split"],
            sha256=hashlib.sha256(data).hexdigest(),
            augmented_from=item["source_key"] if item["augment"] else None,
            augmentation=json.dumps({"spec": item["augment"], "applied": applied}, sort_keys=True)
            if item["augment"]
            else None,
        )
        records.append((item["key"], data, meta))
        rows.append(meta)
    info = write_shard(shard_path, records)
    rows_rel = f"materialize/{spec['task_id']}.rows.parquet"
    write_table(workdir / rows_rel, rows)
    marker = {
        "task_id": spec["task_id"],
        "shard": spec["shard"],
        "rows": rows_rel,
        "sha256": info["sha256"],
        "bytes": info["bytes"],
        "count": len(records),
    }
    atomic_write_text(marker_path, json.dumps(marker, sort_keys=True, indent=1))
    return marker
