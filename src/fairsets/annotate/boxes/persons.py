"""Person boxes over image–text shards: ``fairsets annotate persons``.

:func:`annotate_persons` finds every person in every image of a set of shards with an ultralytics
YOLO detector (:mod:`fairsets.models.yolo`; by default YOLO11-l at confidence 0.25, recall first)
and writes an annotation folder (:mod:`fairsets.annotate.layout`): per shard, one row per detected
box and one row per image, then ``manifest.json`` with the detector, thresholds, versions and
counts. Boxes whose shorter side is under ``min_side`` pixels (30 by default: below it perceived
attributes are no longer labelled reliably) are written too, with ``kept`` false and the reason.

Shards are tasks of an executor (``local`` process pool or ``ray``; one task per shard, the same
bytes either way); each task loads the detector once per worker process
(:mod:`fairsets.annotate.boxes.task`) and, when a progress bar is shown, reports the images and
boxes it has done so far (:mod:`fairsets.core.progress_live`), so the bar's images/s move within a
shard. Running again into the same folder resumes: shards with a
marker are skipped, a shard a killed run left half-written is detected again (same bytes), and a
run that changes only ``min_side`` re-derives ``kept`` from the stored boxes without detecting.
Changing what the boxes are (weights, ``conf``, ``imgsz``, person classes) into the same folder is
refused: annotate into another folder. ``device`` and ``batch`` are not part of that: a run may
resume on a GPU (boxes then differ from CPU ones in the last digits; the manifest names the device
of the last run). A shard whose file changed (size or modification time) is detected again; shards
of earlier runs that are not among the inputs keep their files but leave the manifest.

Image rows: one per record of the shard, in the shard's order. Records the reader refused keep its
status and reason; an image :func:`fairsets.annotate.images.decode` refuses is ``rejected`` with
the decoder's reason; an image the detector fails on is ``failed``. Only ``ok`` rows have a size and
box counts (``image_w``, ``image_h``, ``n_boxes``, ``n_kept``; null otherwise), and the original's
size and hash where the shard's sidecar recorded them. Every row has its shard's resize mode and
size, and the manifest's ``originals`` the shard's record (:mod:`fairsets.annotate.shards.origin`):
what the card's re-download instructions are made of.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fairsets.core.atomic import layout_lock, remove_temps
from fairsets.core.progress import Progress
from fairsets.core.progress_live import live_for_tasks
from fairsets.core.version import __version__, package_versions

from .. import layout
from ..images import DEFAULT_MAX_BYTES, DEFAULT_MAX_PIXELS
from ..tasks import check_run_options, placement_options, run_shard_tasks
from .task import STAGE, load_detector, run_persons_task

__all__ = ["DEFAULT_MODEL", "annotate_persons", "summary_line"]

#: The detector of the LAION-400M person annotations (YOLO11-l); offline, pass a local file.
DEFAULT_MODEL = "yolo11l.pt"

#: What the manifest's ``versions`` lists.
_VERSIONED = ("numpy", "pillow", "pyarrow", "torch", "torchvision", "ultralytics")


def _check_params(conf: float, min_side: float, imgsz: int, batch: int, workers: int, executor: str) -> None:
    if not 0.0 < conf <= 1.0:
        raise layout.AnnotationError(f"--conf {conf}: use a confidence in (0, 1], e.g. 0.25")
    if min_side < 0:
        raise layout.AnnotationError(f"--min-side {min_side}: use a size in pixels >= 0, e.g. 30")
    if imgsz < 32:
        raise layout.AnnotationError(f"--imgsz {imgsz}: use an inference size of at least 32 px, e.g. 640")
    check_run_options(batch, workers, executor, "image")


def _source_state(path: str) -> dict[str, int] | None:
    """Size and modification time of an input file: a shard whose file changed is detected again."""
    try:
        st = Path(path).stat()
    except OSError:
        return None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _deny_spec(deny: str | Path | None) -> dict[str, Any] | None:
    """``{"deny_hashes": [...], "deny_sha256": digest}`` of a deny list (the digest as ``fairsets
    download`` records its own list's, :class:`~fairsets.fetch.shards.policy.RowPolicy`), or None."""
    if deny is None:
        return None
    from fairsets.fetch.shards.listing import ListingError
    from fairsets.fetch.shards.policy import RowPolicy, read_deny_file

    try:
        policy = RowPolicy(deny=read_deny_file(deny))
    except ListingError as exc:
        raise layout.AnnotationError(str(exc)) from None
    return {"deny_hashes": sorted(policy.deny), "deny_sha256": policy.settings["deny_sha256"]}


def _fingerprint(detection: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(detection, sort_keys=True).encode()).hexdigest()[:16]


def _differences(old: dict[str, Any], new: dict[str, Any]) -> str:
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return "; ".join(f"{k} {old.get(k)!r} there, {new.get(k)!r} now" for k in keys)


def _check_same_detection(ann: Path, manifest: dict[str, Any] | None, detection: dict[str, Any]) -> None:
    """Refuse to mix boxes of other detection parameters into ``ann`` (manifest or any marker)."""
    from fairsets.pipeline.tasks import read_marker

    seen = []
    if manifest is not None and isinstance(manifest.get("params"), dict):
        params = manifest["params"]
        old = {k: params.get(k) for k in ("conf", "imgsz", "person_classes", "max_bytes", "max_pixels")}
        old["weights_sha256"] = (manifest.get("detector") or {}).get("weights_sha256")
        seen.append(old)
    markers = layout.marker_path(ann, STAGE, "x").parent
    for path in sorted(markers.glob("*.json")) if markers.is_dir() else []:
        marker = read_marker(path)
        if marker is not None and isinstance(marker.get("detection"), dict):
            seen.append(marker["detection"])
    for old in seen:
        if old != detection:
            raise layout.AnnotationError(
                f"{ann} holds person boxes of other detection parameters ({_differences(old, detection)}): "
                "annotate into another --out folder (or run with the same parameters to resume)"
            )


def _existing_manifest(ann: Path) -> dict[str, Any] | None:
    return layout.read_manifest(ann) if (ann / layout.MANIFEST).exists() else None


def annotate_persons(
    inputs: str | Sequence[str],
    out: str | Path,
    *,
    model: str | Path = DEFAULT_MODEL,
    conf: float = 0.25,
    min_side: float = 30,
    imgsz: int = 640,
    batch: int = 16,
    device: str = "cpu",
    person_classes: Sequence[str] | None = None,
    workers: int = 1,
    executor: str = "local",
    ray_address: str | None = None,
    retry_failed: bool = False,
    deny: str | Path | None = None,
    progress: Progress | None = None,
    devices: Sequence[str] | None = None,
    gpus_per_task: float | None = None,
) -> dict[str, Any]:
    """Detect the persons of every image of ``inputs`` into the annotation folder ``out``.

    Args:
        inputs: Shards: paths, globs, brace ranges, folders, a published dataset folder, Parquet
            listings (:func:`fairsets.annotate.shards.resolve_shards`).
        out: The annotation folder (created; a re-run resumes it).
        model: YOLO weights: a local ``.pt``, ``hf:org/repo[@rev]/file.pt`` or a file name in the
            fairsets ultralytics cache (:func:`fairsets.models.yolo.load_person_detector`).
        conf: Minimum detection confidence.
        min_side: Boxes with a shorter side under this many pixels are written with ``kept`` false.
        imgsz: Inference size in pixels (images are letterboxed to it).
        batch: Decoded images per detector call.
        device: ``cpu``, ``cuda``, ``cuda:N``.
        person_classes: The model's class names that are persons (default: the class ``person``).
        deny: A deny list (one URL or URL sha256 a line, as ``fairsets download --deny``): an
            image whose URL is on it is recorded ``rejected`` with only its key and the reason,
            never detected; its URL, caption and digest are not kept. A shard annotated under
            another list (or none) is detected again.
        workers: Worker processes (``0``: tasks run in this process).
        executor: ``local`` or ``ray``.
        ray_address: An existing Ray cluster (``ray`` only).
        retry_failed: Detect again the finished shards that have ``failed`` images (an I/O error
            while reading, a detector error); other finished shards are skipped as usual.
        progress: Progress display (default: off).
        devices: GPUs for the local executor's workers, round-robin (``["cuda:0", "cuda:1"]``);
            the model is checked on the first. Each shard's marker records its ``placement``.
        gpus_per_task: GPUs each task asks the executor for (fractions allowed; default 1 on
            CUDA, none on the CPU). Ray pins each task to the GPU it gave it and the marker records
            it (on a CPU ``device`` the assignment is only recorded: compute stays on the CPU).

    Returns:
        The manifest written to ``out/manifest.json`` (with ``run``: what this call did, not written).

    Raises:
        fairsets.annotate.layout.AnnotationError: bad parameters, no shards, ``out`` is not an
            annotation folder or holds boxes of other detection parameters.
        fairsets.models.base.ModelUnavailable: the weights are not available here.
        ValueError: an unknown device or person class.
        fairsets.pipeline.executors.TaskFailed: a shard could not be read (the others are kept).
    """
    from ..shards import resolve_shards
    from ..shards.origin import shard_origin

    _check_params(conf, min_side, imgsz, batch, workers, executor)
    devices, resources = placement_options(device, devices, gpus_per_task, executor)
    if devices:
        device = devices[0]
    min_side = float(min_side)
    refs = resolve_shards(inputs)
    ann = Path(out).expanduser().resolve()
    _existing_manifest(ann)  # a folder of another kind is refused before the model loads
    deny_spec = _deny_spec(deny)
    classes = [c.strip() for c in person_classes] if person_classes is not None else None
    detector = load_detector(model, device, classes)
    names = list(detector.person_classes.values())
    detection = {
        "weights_sha256": detector.weights_sha256,
        "conf": float(conf),
        "imgsz": int(imgsz),
        "person_classes": names,
        "max_bytes": DEFAULT_MAX_BYTES,
        "max_pixels": DEFAULT_MAX_PIXELS,
    }
    ann.mkdir(parents=True, exist_ok=True)
    with layout_lock(ann):
        existing = _existing_manifest(ann)  # under the lock: classify may have added attributes
        _check_same_detection(ann, existing, detection)
        remove_temps(ann, skip=(layout.ATTRIBUTES_DIR, layout.WORKDIR))
        remove_temps(layout.marker_path(ann, STAGE, "x").parent)
        task = {
            "workdir": str(ann / layout.WORKDIR),
            "ann": str(ann),
            "weights": str(detector.weights),
            "device": detector.device,
            "detection": detection,
            "fingerprint": _fingerprint(detection),
            "min_side": min_side,
            "batch": batch,
            "retry_failed": retry_failed,
            **(deny_spec or {}),
        }
        origins = {r.name: shard_origin(r) for r in refs}
        specs = [
            {
                "task_id": r.name,
                "ref": r.to_json(),
                "source": _source_state(r.path),
                "origin": origins[r.name],
                **task,
            }
            for r in refs
        ]
        run = _run_tasks(specs, executor, workers, ray_address, progress, (devices, resources))
        manifest = {
            **(existing or {}),
            "fairsets_version": __version__,
            "inputs": [r.to_json() for r in refs],
            "originals": origins,
            "detector": detector.provenance(),
            "params": {"min_side": min_side, **{k: v for k, v in detection.items() if k != "weights_sha256"}},
            "shards": run.pop("shards"),
            "counts": run.pop("counts"),
            "versions": package_versions(_VERSIONED),
        }
        manifest.pop("deny", None)
        if deny_spec is not None:  # the list's digest and size, and how many images it left out
            manifest["deny"] = {
                "sha256": deny_spec["deny_sha256"],
                "entries": len(deny_spec["deny_hashes"]),
                "images_denied": sum(s.get("denied", 0) for s in manifest["shards"].values()),
            }
        layout.write_manifest(ann, manifest)
        return {**layout.read_manifest(ann), "run": run}


def _run_tasks(
    specs: list[dict[str, Any]],
    executor: str,
    workers: int,
    ray_address: str | None,
    progress: Progress | None,
    placing: tuple[Any, Any] = (None, None),
) -> dict[str, Any]:
    """Run the shards' tasks (``placing``: the local pool's devices, each task's resources);
    per-shard stats, total counts and what this run did (``ran``, rates).

    With a progress bar, each task reports its images and boxes as it goes (``spec["progress"]``).
    """
    live = live_for_tasks(specs, Path(specs[0]["workdir"]) / "progress" / STAGE, progress) if specs else None

    def counted(result: dict[str, Any]) -> dict[str, int]:
        fresh, stats = result["ran"] == "detected", result["stats"]
        counts = {"images": stats["images"] if fresh else 0, "boxes": stats["boxes"] if fresh else 0}
        return live.finish(result["shard"], counts) if live else counts

    with live or contextlib.nullcontext():
        results, seconds = run_shard_tasks(
            run_persons_task,
            specs,
            executor=executor,
            workers=workers,
            ray_address=ray_address,
            progress=progress,
            description="annotating persons (shards)",
            rates=("images", "boxes"),
            counted=counted,
            devices=placing[0],
            resources=placing[1],
        )
    shards = {name: results[name]["stats"] for name in sorted(results)}
    counts = {
        k: sum(s[k] for s in shards.values()) for k in ("images", *layout.IMAGE_STATUSES, "boxes", "kept")
    }
    ran = [r["ran"] for r in results.values()]
    detected = [r["stats"] for r in results.values() if r["ran"] == "detected"]
    return {
        "shards": shards,
        "counts": counts,
        "seconds": seconds,
        "detected": ran.count("detected"),
        "rederived": ran.count("rederived"),
        "skipped": ran.count("skipped"),
        "images_detected": sum(s["images"] for s in detected),
        "boxes_detected": sum(s["boxes"] for s in detected),
    }


def summary_line(manifest: dict[str, Any], ann: str | Path) -> str:
    """One line: shards, images by status, boxes kept, where, and the detection rate of this run."""
    c, run = manifest["counts"], manifest.get("run", {})
    seconds = max(run.get("seconds", 0.0), 1e-9)
    how = ", ".join(
        f"{run.get(k, 0)} {word}"
        for k, word in (("detected", "detected"), ("rederived", "re-derived"), ("skipped", "skipped"))
    )
    rate = ""
    if run.get("images_detected"):
        rate = (
            f" in {seconds:.1f} s ({run['images_detected'] / seconds:.1f} images/s, "
            f"{run['boxes_detected'] / seconds:.1f} boxes/s)"
        )
    problems = [f"{name}: {p}" for name, s in manifest["shards"].items() for p in s.get("problems", [])]
    if problems:
        rate += f"; {len(problems)} shard problem(s), e.g. {problems[0]}"
    if manifest.get("deny"):
        rate += f"; {manifest['deny']['images_denied']} image(s) on the deny list left out"
    return (
        f"{len(manifest['shards'])} shard(s) ({how}): {c['images']} images ({c['ok']} ok, "
        f"{c['rejected']} rejected, {c['failed']} failed), {c['boxes']} person boxes, {c['kept']} kept "
        f"(min side {manifest['params']['min_side']:g} px) -> {ann}{rate}"
    )
