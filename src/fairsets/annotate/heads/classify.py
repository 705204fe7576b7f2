"""Perceived attributes for every kept box: ``fairsets annotate classify``.

:func:`classify_boxes` applies a head (:mod:`fairsets.annotate.heads`, written by
``fairsets annotate train``) to every kept box of an annotation folder: each box's crop is cut from
its image as stored in the shard (:func:`fairsets.annotate.shards.read_images`,
:func:`~fairsets.annotate.images.decode`, :func:`~fairsets.annotate.images.crop`), embedded with the
encoder the head names (:func:`~fairsets.annotate.heads.embed.embed_crops`; loaded once per worker,
crops batched across images) and scored by the head. Per shard it writes
``attributes/{attr}/{shard}.parquet`` (:func:`~fairsets.annotate.layout.attribute_schema`): one row
per kept box in the order of the box table, with ``perceived_{attr}`` (the most probable class),
``p_{attr}_{class}`` (probabilities summing to 1) and ``{attr}_reason`` (why a box has no label:
its image is missing from the shard or no longer decodes; the label and probabilities are then
null). The manifest's ``attributes[attr]`` records the head (sha256, encoder, classes, test
metrics) and the per-class counts.

Shards are executor tasks (``local`` or ``ray``, same bytes: the encoder runs on one CPU thread per
task, whatever the executor, so parallelism comes from ``workers``), each writing its table and then its
marker (``.fairsets/markers/classify-{attr}/{shard}.json``) naming the head's sha256 and the box
table it read. A re-run with the same head skips finished shards and resumes the others; a shard
whose boxes changed (``annotate persons`` re-run) is classified again. Labels of another head for
the same attribute are never mixed in: that is refused unless ``replace``, which relabels every box.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fairsets.core.atomic import layout_lock, remove_temps, sha256_file
from fairsets.core.progress import Progress
from fairsets.core.progress_live import live_for_tasks

from .. import layout
from ..tasks import check_run_options, placement_options, run_shard_tasks
from .classify_task import encoder_for, run_classify_task, stage

if TYPE_CHECKING:
    from .store import Head

__all__ = ["classify_boxes", "run_classify_task", "stage"]


def _other_heads(ann: Path, manifest: dict[str, Any], attr: str, sha: str) -> list[str]:
    """sha256s of other heads whose labels of ``attr`` are in ``ann`` (manifest or any marker)."""
    from fairsets.pipeline.tasks import read_marker

    seen = set()
    old = (manifest.get("attributes") or {}).get(attr) or {}
    if old.get("head_sha256"):
        seen.add(old["head_sha256"])
    markers = layout.marker_path(ann, stage(attr), "x").parent
    for path in sorted(markers.glob("*.json")) if markers.is_dir() else []:
        marker = read_marker(path)
        if marker is not None and marker.get("head_sha256"):
            seen.add(marker["head_sha256"])
    return sorted(seen - {sha})


def _forget(ann: Path, attr: str) -> None:
    """Remove every marker, then every table, of ``attr``'s labels (``replace``)."""
    for folder in (layout.marker_path(ann, stage(attr), "x").parent, ann / layout.ATTRIBUTES_DIR / attr):
        if folder.is_dir():
            for p in sorted(folder.iterdir()):
                if p.is_file() and not p.is_symlink():
                    p.unlink()


def classify_boxes(
    ann: str | Path,
    head_path: str | Path,
    *,
    batch: int = 64,
    device: str = "cpu",
    workers: int = 1,
    executor: str = "local",
    ray_address: str | None = None,
    replace: bool = False,
    progress: Progress | None = None,
    devices: Sequence[str] | None = None,
    gpus_per_task: float | None = None,
) -> dict[str, Any]:
    """Label every kept box of ``ann`` with the head at ``head_path``.

    Args:
        ann: The annotation folder (``fairsets annotate persons`` wrote it).
        head_path: A head ``.npz`` (``fairsets annotate train``); its attribute names the labels.
        batch: Crops per forward pass of the encoder (crops of several images share a batch).
        device: ``cpu``, ``cuda``, ``cuda:N``.
        workers: Worker processes (``0``: tasks run in this process).
        executor: ``local`` or ``ray``.
        ray_address: An existing Ray cluster (``ray`` only).
        replace: Relabel every box when ``ann`` holds labels of another head for this attribute
            (without it that is an error).
        progress: Progress display (default: off); counts boxes per second.
        devices: GPUs for the local executor's workers, round-robin (``["cuda:0", "cuda:1"]``);
            each shard's marker records its ``placement``.
        gpus_per_task: GPUs each task asks the executor for (fractions allowed; default 1 on
            CUDA, none on the CPU); Ray pins each task to the GPU it gave it.

    Returns:
        ``manifest["attributes"][attr]`` as written, with ``attribute`` and ``run``: shards
        classified and skipped, shards still without boxes (``pending``), boxes classified,
        seconds, boxes per second.

    Raises:
        fairsets.annotate.layout.AnnotationError: not an annotation folder, bad parameters, or
            labels of another head (the message says to pass ``replace``).
        ValueError: the head file is not a head (or is corrupt).
        fairsets.models.base.ModelUnavailable: the head's encoder cannot be loaded here.
        fairsets.pipeline.executors.TaskFailed: a shard could not be labelled (the others are kept).
    """
    from .store import load_head

    check_run_options(batch, workers, executor, "crop")
    devices, resources = placement_options(device, devices, gpus_per_task, executor)
    if devices:
        device = devices[0]
    ann = Path(ann).expanduser().resolve()
    manifest = layout.read_manifest(ann)
    head_path = Path(head_path).expanduser().resolve()
    head = load_head(head_path)
    attr = head.attribute
    others = _other_heads(ann, manifest, attr, head.sha256)
    if others and not replace:
        raise layout.AnnotationError(
            f"{ann} holds {attr} labels of another head (sha256 {others[0][:12]}…, this one "
            f"{head.sha256[:12]}…): pass --replace to relabel every box with this head"
        )
    # the encoder loads before any task: a head whose encoder is missing fails here, in one line
    if workers == 0:
        encoder_for(head.encoder, head.pretrained, device)  # kept for the tasks run in this process
    else:
        from fairsets.models import load_vlm

        load_vlm(head.encoder, head.pretrained, device="cpu")  # each worker loads its own
    with layout_lock(ann):
        if replace:
            _forget(ann, attr)
        remove_temps(ann / layout.ATTRIBUTES_DIR / attr)
        remove_temps(layout.marker_path(ann, stage(attr), "x").parent)
        old = (manifest.get("attributes") or {}).get(attr) or {}
        entry = {"head_sha256": head.sha256, "head": head.describe()}
        if old.get("head_sha256") != head.sha256 or replace:
            manifest.setdefault("attributes", {})[attr] = entry  # the head in use, before any table
            layout.write_manifest(ann, manifest)
        placing = (devices, resources)
        return _run(ann, head_path, head, batch, device, workers, executor, ray_address, progress, placing)


def _run(
    ann: Path,
    head_path: Path,
    head: Head,
    batch: int,
    device: str,
    workers: int,
    executor: str,
    ray_address: str | None,
    progress: Progress | None,
    placing: tuple[Any, Any] = (None, None),
) -> dict[str, Any]:
    manifest = layout.read_manifest(ann)
    params = manifest.get("params") or {}
    from ..images import DEFAULT_MAX_BYTES, DEFAULT_MAX_PIXELS

    ready, pending = layout.box_shards(ann, manifest)
    gone = [ref for ref in ready if not Path(ref["path"]).is_file()]
    if gone:
        raise layout.AnnotationError(
            f"{len(gone)} shard(s) of {ann} are missing or unreadable, e.g. {gone[0]['path']}: put them back "
            "where annotate persons read them, then run classify again"
        )
    specs = [
        {
            "task_id": ref["name"],
            "workdir": str(ann / layout.WORKDIR),
            "ann": str(ann),
            "ref": ref,
            "head": str(head_path),
            "head_sha256": head.sha256,
            "boxes_sha256": sha256_file(layout.boxes_path(ann, ref["name"])),
            "stage": stage(head.attribute),
            "attribute": head.attribute,
            "batch": batch,
            "device": device,
            "max_bytes": int(params.get("max_bytes") or DEFAULT_MAX_BYTES),
            "max_pixels": int(params.get("max_pixels") or DEFAULT_MAX_PIXELS),
        }
        for ref in ready
    ]
    work = ann / layout.WORKDIR / "progress" / stage(head.attribute)
    live = live_for_tasks(specs, work, progress)  # the boxes done within each shard, live

    def counted(result: dict[str, Any]) -> dict[str, int]:
        counts = {"boxes": result["stats"]["boxes"] if result["ran"] == "classified" else 0}
        return live.finish(result["shard"], counts) if live else counts

    with live or contextlib.nullcontext():
        results, seconds = run_shard_tasks(
            run_classify_task,
            specs,
            executor=executor,
            workers=workers,
            ray_address=ray_address,
            progress=progress,
            description=f"classifying {head.attribute} (shards)",
            rates=("boxes",),
            counted=counted,
            devices=placing[0],
            resources=placing[1],
        )
    stats = {name: results[name]["stats"] for name in sorted(results)}
    counts = {c: sum(s["counts"].get(c, 0) for s in stats.values()) for c in head.classes}
    reasons: Counter[str] = Counter()
    for s in stats.values():
        reasons.update(s["reasons"])
    manifest = layout.read_manifest(ann)
    old = (manifest.get("attributes") or {}).get(head.attribute) or {}
    entry = {
        "head_sha256": head.sha256,
        "head": head.describe(),
        "counts": counts,
        "boxes": sum(s["boxes"] for s in stats.values()),
        "labelled": sum(s["labelled"] for s in stats.values()),
        "unlabelled": sum(s["unlabelled"] for s in stats.values()),
        "reasons": dict(sorted(reasons.items())),
        "shards": {name: {k: v for k, v in s.items() if k != "reasons"} for name, s in stats.items()},
        "pending_shards": pending,
    }
    if old.get("head_sha256") == head.sha256 and "verification" in old:
        entry["verification"] = old["verification"]  # checked against these very labels
    manifest.setdefault("attributes", {})[head.attribute] = entry
    layout.write_manifest(ann, manifest)
    classified = [r for r in results.values() if r["ran"] == "classified"]
    boxes = sum(r["stats"]["boxes"] for r in classified)
    run = {
        "seconds": seconds,
        "classified": len(classified),
        "skipped": len(results) - len(classified),
        "pending": pending,
        "boxes_classified": boxes,
        "boxes_per_s": boxes / max(seconds, 1e-9),
    }
    return {**entry, "attribute": head.attribute, "run": run}
