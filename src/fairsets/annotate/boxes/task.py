"""One ``annotate persons`` task: the person boxes of one shard, written as two tables and a marker.

:func:`run_persons_task` is the top-level function the executors call with a JSON spec (built by
:func:`fairsets.annotate.boxes.persons.annotate_persons`). It reads every record of the shard in order
(:func:`fairsets.annotate.shards.iter_records`), decodes each image
(:func:`fairsets.annotate.images.decode`), runs the detector on batches of up to ``batch``
decoded images of one shape (the detector runs one forward pass per shape; a few batches of
mixed shapes wait in memory for mates, bounded), and writes ``boxes/{shard}.parquet``,
``images/{shard}.parquet`` and, last, the marker ``.fairsets/markers/persons/{shard}.json``.
Every file is written atomically and every table is a deterministic function of the shard and
the parameters, so a task killed at any point and run again writes the same bytes.

Keeping a box: a box is written whatever its size; ``kept`` is false, with ``drop_reason``
``min side 22.4 px < 30``, when its shorter side (``width``/``height`` as stored, float32) is under
``min_side``. Because the decision reads only stored columns, a re-run that changes only
``min_side`` re-derives ``kept``, ``drop_reason`` and the images' ``n_kept`` from the stored tables
(their sha256 checked against the marker) without running the detector, and writes exactly what a
fresh run with that ``min_side`` writes.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fairsets.core.atomic import atomic_write_text, sha256_file
from fairsets.core.progress_live import TaskCounts
from fairsets.core.tables import write_table
from fairsets.pipeline.tasks import read_marker

from .. import layout
from ..images import ImageRejected, decode

if TYPE_CHECKING:
    import numpy as np

    from fairsets.models.yolo import Box, PersonDetector

__all__ = ["STAGE", "detector_for", "keep_box", "keep_detector", "load_detector", "run_persons_task"]

#: The marker stage of this task (``layout.marker_path(ann, STAGE, shard)``).
STAGE = "persons"

#: Decoded images waiting for a batch of their shape: at most this many batches, or this many
#: array values (600 MB of RGB), before every waiting image is detected.
_PENDING_BATCHES = 4
_PENDING_VALUES = 600_000_000

#: Detectors loaded in this process, by (weights file, device, person classes): one load per worker.
_DETECTORS: dict[tuple[str, str, tuple[str, ...]], PersonDetector] = {}


def detector_for(weights: str, device: str, person_classes: list[str]) -> PersonDetector:
    """The detector for these weights, loaded once per process."""
    key = (str(weights), device, tuple(person_classes))
    if key not in _DETECTORS:
        from fairsets.models.yolo import load_person_detector

        _DETECTORS[key] = load_person_detector(weights, device=device, person_classes=person_classes)
    return _DETECTORS[key]


#: Detectors loaded by :func:`load_detector`, by (model, device, classes): with the weights' state.
_LOADED: dict[tuple[str, str, tuple[str, ...] | None], tuple[tuple[int, int], PersonDetector]] = {}


def _file_state(path: Path) -> tuple[int, int]:
    st = Path(path).stat()
    return st.st_size, st.st_mtime_ns


def load_detector(model: str | Path, device: str, person_classes: list[str] | None) -> PersonDetector:
    """:func:`fairsets.models.yolo.load_person_detector`, once per process while the weights file is
    unchanged (a program that annotates several folders loads the model once)."""
    from fairsets.models.yolo import load_person_detector

    key = (str(model), device.strip(), tuple(person_classes) if person_classes is not None else None)
    hit = _LOADED.get(key)
    if hit is not None and hit[0] == _file_state(hit[1].weights):
        return hit[1]
    detector = load_person_detector(model, device=device, person_classes=person_classes)
    _LOADED[key] = (_file_state(detector.weights), detector)
    keep_detector(detector)
    return detector


def keep_detector(detector: PersonDetector) -> None:
    """Let :func:`detector_for` in this process return ``detector`` (already loaded) for its weights."""
    key = (str(detector.weights), detector.device, tuple(detector.person_classes.values()))
    _DETECTORS[key] = detector


def _fmt(value: float) -> str:
    """``22.4`` for 22.47 (floored to a tenth, so a side under the threshold never prints as it)."""
    return f"{math.floor(value * 10) / 10:g}"


def keep_box(width: float, height: float, min_side: float) -> tuple[bool, str | None]:
    """Whether a box of this size is kept, and the reason when it is not."""
    if width <= 0 or height <= 0:
        return False, "empty box after clamping to the image"
    side = min(width, height)
    if side < min_side:
        return False, f"min side {_fmt(side)} px < {min_side:g}"
    return True, None


def _f32(value: float) -> float:
    """``value`` rounded to float32 (the stored precision), as a Python float."""
    import numpy as np

    return float(np.float32(value))


def _box_rows(
    shard: str, key: str, boxes: list[Box], w: int, h: int, min_side: float
) -> list[dict[str, Any]]:
    """Rows of :data:`layout.BOX_SCHEMA` for one image: by descending confidence, clamped to the image."""
    order = sorted(range(len(boxes)), key=lambda i: -boxes[i].conf)
    rows = []
    for box_id, i in enumerate(order):
        b = boxes[i]
        x1, x2 = (_f32(min(max(v, 0.0), w)) for v in (b.x1, b.x2))
        y1, y2 = (_f32(min(max(v, 0.0), h)) for v in (b.y1, b.y2))
        width, height = _f32(x2 - x1), _f32(y2 - y1)
        kept, reason = keep_box(width, height, min_side)
        rows.append(
            {
                "shard": shard,
                "key": key,
                "box_id": box_id,
                "x1": x1,
                "y1": y1,
                "x2": x2,
                "y2": y2,
                "conf": _f32(b.conf),
                "class_name": b.class_name,
                "width": width,
                "height": height,
                "area_frac": _f32(width * height / (w * h)),
                "image_w": w,
                "image_h": h,
                "kept": kept,
                "drop_reason": reason,
            }
        )
    return rows


def _detect(detector: PersonDetector, images: list[np.ndarray], conf: float, imgsz: int) -> list[Any]:
    """Boxes per image; an image the detector fails on gets its error (an ``Exception``) instead."""
    try:
        return detector.detect(images, conf=conf, imgsz=imgsz)
    except Exception:  # isolate the image that breaks the batch; the others still get their boxes
        if len(images) == 1:
            import sys

            return [sys.exc_info()[1]]
        out: list[Any] = []
        for image in images:
            out.extend(_detect(detector, [image], conf, imgsz))
        return out


def _write(spec: dict[str, Any], boxes: list[dict], images: list[dict], stats: dict) -> dict[str, Any]:
    """Write both tables, then the marker (last); return the stats with the files."""
    ann, shard = Path(spec["ann"]), spec["task_id"]
    files = {}
    for name, path, rows, schema in (
        ("boxes", layout.boxes_path(ann, shard), boxes, layout.BOX_SCHEMA),
        ("images", layout.images_path(ann, shard), images, layout.IMAGE_SCHEMA),
    ):
        info = write_table(path, rows, schema)
        files[name] = {
            "path": path.relative_to(ann).as_posix(),
            "sha256": info["sha256"],
            "rows": info["rows"],
        }
    marker = {
        "stage": STAGE,
        "shard": shard,
        "input": spec["ref"],
        "source": spec.get("source"),
        "origin": spec["origin"],
        "fingerprint": spec["fingerprint"],
        "detection": spec["detection"],
        "deny": spec.get("deny_sha256"),
        "min_side": spec["min_side"],
        "files": files,
        "stats": stats,
    }
    if spec.get("placement"):  # the device the executor gave this task (none on the CPU path)
        marker["placement"] = spec["placement"]
    atomic_write_text(
        layout.marker_path(ann, STAGE, shard), json.dumps(marker, sort_keys=True, indent=1) + "\n"
    )
    return marker


def _stats(images: list[dict], boxes: list[dict], problems: list[str]) -> dict[str, Any]:
    status = Counter(r["status"] for r in images)
    return {
        "images": len(images),
        **{s: status.get(s, 0) for s in layout.IMAGE_STATUSES},
        "boxes": len(boxes),
        "kept": sum(1 for b in boxes if b["kept"]),
        "denied": sum(1 for r in images if r.get("reason") == DENIED_REASON),
        "problems": list(problems),
    }


#: The reason of an image left out because its URL is on ``--deny``'s list.
DENIED_REASON = "denied: its URL is on the deny list"


def _detect_shard(spec: dict[str, Any]) -> dict[str, Any]:
    from fairsets.fetch.shards.policy import url_hash

    from ..shards import ShardRef, iter_records
    from ..shards.origin import original_facts

    shard, min_side = spec["task_id"], spec["min_side"]
    conf, imgsz, batch = spec["detection"]["conf"], spec["detection"]["imgsz"], max(1, spec["batch"])
    max_bytes, max_pixels = spec["detection"]["max_bytes"], spec["detection"]["max_pixels"]
    detector = detector_for(spec["weights"], spec["device"], spec["detection"]["person_classes"])
    image_rows: list[dict[str, Any]] = []
    boxes_of: dict[int, list[dict[str, Any]]] = {}
    pending: dict[tuple[int, ...], list[tuple[int, np.ndarray]]] = {}  # by shape: one forward pass each
    live = TaskCounts(spec.get("progress"), shard)  # images and boxes done, for the driver's bar

    def flush(groups: list[list[tuple[int, np.ndarray]]]) -> None:
        items = [item for group in groups for item in group]
        if not items:
            return
        found = _detect(detector, [a for _, a in items], conf, imgsz)
        for (i, array), result in zip(items, found, strict=True):
            row = image_rows[i]
            if isinstance(result, Exception):
                row.update(status="failed", reason=f"detection failed: {type(result).__name__}: {result}")
                continue
            h, w = array.shape[:2]
            boxes_of[i] = _box_rows(shard, row["key"], result, w, h, min_side)
            row.update(n_boxes=len(boxes_of[i]), n_kept=sum(1 for b in boxes_of[i] if b["kept"]))
        live.add(images=len(items), boxes=sum(len(boxes_of.get(i, ())) for i, _ in items))

    def add(i: int, array: np.ndarray) -> None:
        """Detect in batches of one shape (what the detector runs together); bounded memory."""
        group = pending.setdefault(array.shape, [])
        group.append((i, array))
        if len(group) >= batch:
            flush([pending.pop(array.shape)])
        elif sum(a.size for g in pending.values() for _, a in g) >= _PENDING_VALUES or (
            sum(len(g) for g in pending.values()) >= _PENDING_BATCHES * batch
        ):
            flush(list(pending.values()))
            pending.clear()

    origin = spec["origin"]
    resize = {"resize_mode": origin["resize_mode"], "resize_size": origin["image_size"]}
    denied = frozenset(spec.get("deny_hashes") or ())
    stream = iter_records(ShardRef.from_json(spec["ref"]), max_bytes=max_bytes)
    for rec in stream:
        if denied and rec.url and url_hash(rec.url) in denied:
            # on the deny list: nothing of the sample is kept (no URL, caption, digest nor size)
            image_rows.append(
                {"shard": shard, "key": rec.key, "status": "rejected", "reason": DENIED_REASON, **resize}
            )
            live.add(images=1)
            continue
        row: dict[str, Any] = {
            "shard": shard,
            "key": rec.key,
            "caption": rec.caption,
            "url": rec.url,
            "sha256": hashlib.sha256(rec.data).hexdigest() if rec.data is not None else None,
            "status": rec.status,
            "reason": rec.reason,
            **(original_facts(rec.meta, origin) if rec.status == "ok" else {}),
            **resize,
        }
        image_rows.append(row)
        if rec.status != "ok":
            live.add(images=1)
            continue
        try:
            array = decode(rec.data, max_bytes=max_bytes, max_pixels=max_pixels)
        except ImageRejected as exc:
            row.update(status="rejected", reason=str(exc))
            live.add(images=1)
            continue
        except Exception as exc:  # a decoder bug on this image must not lose the shard
            row.update(status="failed", reason=f"decode failed: {type(exc).__name__}: {exc}")
            live.add(images=1)
            continue
        row.update(image_h=int(array.shape[0]), image_w=int(array.shape[1]))
        add(len(image_rows) - 1, array)
    flush(list(pending.values()))
    box_rows = [b for i in sorted(boxes_of) for b in boxes_of[i]]
    return _write(spec, box_rows, image_rows, _stats(image_rows, box_rows, stream.problems))


def _rederive(spec: dict[str, Any], marker: dict[str, Any]) -> dict[str, Any]:
    """Rewrite ``kept``/``drop_reason``/``n_kept`` for a new ``min_side`` from the stored tables."""
    import pyarrow.parquet as pq

    ann, shard, min_side = Path(spec["ann"]), spec["task_id"], spec["min_side"]
    boxes = pq.read_table(layout.boxes_path(ann, shard), schema=layout.BOX_SCHEMA).to_pylist()
    images = pq.read_table(layout.images_path(ann, shard), schema=layout.IMAGE_SCHEMA).to_pylist()
    kept: Counter[str] = Counter()
    for b in boxes:
        b["kept"], b["drop_reason"] = keep_box(b["width"], b["height"], min_side)
        kept[b["key"]] += b["kept"]
    for row in images:
        if row["n_kept"] is not None:
            row["n_kept"] = kept.get(row["key"], 0)
    return _write(spec, boxes, images, _stats(images, boxes, marker["stats"]["problems"]))


#: What a marker must share with the spec to stand for this shard: marker key, spec key (a marker
#: without ``origin``, from before the images table had the originals' columns, is detected again).
#: The deny list's digest too (none: ``None`` on both sides, as in markers from before ``--deny``).
_SAME = (
    ("fingerprint", "fingerprint"),
    ("input", "ref"),
    ("source", "source"),
    ("origin", "origin"),
    ("deny", "deny_sha256"),
)


def _finished(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The marker of this shard if it was written for this input (same file size and modification
    time) and these detection parameters, and its tables are the ones it names; else None (the
    shard is detected again)."""
    ann = Path(spec["ann"])
    marker = read_marker(layout.marker_path(ann, STAGE, spec["task_id"]))
    if marker is None or any(marker.get(k) != spec.get(v) for k, v in _SAME):
        return None
    try:
        for f in marker["files"].values():
            if sha256_file(ann / f["path"]) != f["sha256"]:
                return None
    except (OSError, KeyError, TypeError):
        return None
    return marker


def run_persons_task(spec: dict[str, Any]) -> dict[str, Any]:
    """Annotate one shard (see the module docstring); return its marker with ``ran`` added.

    ``ran`` is ``"detected"``, ``"rederived"`` (only ``min_side`` changed) or ``"skipped"``. With
    ``retry_failed`` in the spec, a finished shard that has ``failed`` images is detected again.
    """
    marker = _finished(spec)
    if marker is not None and spec.get("retry_failed") and marker["stats"].get("failed"):
        marker = None
    if marker is not None and marker["min_side"] == spec["min_side"]:
        return {**marker, "ran": "skipped"}
    if marker is not None:
        return {**_rederive(spec, marker), "ran": "rederived"}
    return {**_detect_shard(spec), "ran": "detected"}
