"""One ``annotate classify`` task: the perceived-attribute labels of one shard's kept boxes.

:func:`run_classify_task` reads the shard's box table, fetches the images of its kept boxes from the
shard (:func:`fairsets.annotate.shards.read_images`, :data:`IMAGES_PER_READ` images at a time),
decodes and crops them in a background thread while the encoder embeds the previous crops
(``batch`` crops per forward pass, across images), applies the head, and writes
``attributes/{attr}/{shard}.parquet`` and then the marker. The encoder is loaded once per process
(:func:`encoder_for`) and runs on one CPU thread, so the bytes written do not depend on the
executor or the number of workers. A finished shard (marker for this head and this box table,
table intact) is skipped.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fairsets.core.atomic import atomic_write_text, sha256_file
from fairsets.core.progress_live import TaskCounts
from fairsets.models.threads import one_torch_thread

from .. import layout
from ..tasks import prefetched

if TYPE_CHECKING:
    import numpy as np

    from fairsets.models import VLM

    from .store import Head

__all__ = ["IMAGES_PER_READ", "encoder_for", "run_classify_task", "stage"]

#: Images whose bytes one :func:`~fairsets.annotate.shards.read_images` call returns (bounds memory).
IMAGES_PER_READ = 512
_BOX_COLUMNS = ["shard", "key", "box_id", "x1", "y1", "x2", "y2", "kept"]

#: Encoders loaded in this process, by (encoder, pretrained, device): one load per worker.
_ENCODERS: dict[tuple[str, str | None, str], VLM] = {}


def stage(attr: str) -> str:
    """The marker stage of ``attr``'s labels: ``classify-{attr}``."""
    return f"classify-{layout.check_attribute(attr)}"


def encoder_for(encoder: str, pretrained: str | None, device: str) -> VLM:
    """The encoder ``load_vlm(encoder, pretrained, device=device)``, loaded once per process."""
    key = (encoder, pretrained, device)
    if key not in _ENCODERS:
        from fairsets.models import load_vlm

        _ENCODERS[key] = load_vlm(encoder, pretrained, device=device)
    return _ENCODERS[key]


def _kept_boxes(path: Path) -> list[tuple[str, int, tuple[float, float, float, float]]]:
    """``(key, box_id, (x1, y1, x2, y2))`` of the kept boxes of a box table, in table order."""
    import pyarrow.parquet as pq

    t = pq.read_table(path, columns=_BOX_COLUMNS).to_pydict()
    return [
        (t["key"][i], int(t["box_id"][i]), (t["x1"][i], t["y1"][i], t["x2"][i], t["y2"][i]))
        for i in range(len(t["key"]))
        if t["kept"][i]
    ]


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _crops(
    ref: Any, boxes: list[tuple[str, int, tuple[float, float, float, float]]], spec: dict[str, Any]
) -> Iterator[tuple[int, np.ndarray | None, str | None]]:
    """``(box index, crop, None)`` or ``(box index, None, reason)`` for every kept box, in order."""
    from ..images import ImageRejected, crop, decode
    from ..shards import read_images

    by_key: dict[str, list[int]] = {}
    for i, (key, _, _) in enumerate(boxes):
        by_key.setdefault(key, []).append(i)
    keys = list(by_key)
    for chunk in _chunks(keys, IMAGES_PER_READ):
        stored = read_images(ref, chunk, max_bytes=spec["max_bytes"])
        for key in chunk:
            data = stored.pop(key, None)
            if data is None:
                for i in by_key[key]:
                    yield i, None, "image not found in the shard (or unreadable there now)"
                continue
            try:
                image = decode(data, max_bytes=spec["max_bytes"], max_pixels=spec["max_pixels"])
            except ImageRejected as exc:
                for i in by_key[key]:
                    yield i, None, f"image no longer decodes: {exc}"
                continue
            for i in by_key[key]:
                try:
                    yield i, crop(image, boxes[i][2]), None
                except ValueError as exc:
                    yield i, None, str(exc)


def _label_rows(spec: dict[str, Any], head: Head, encoder: VLM) -> tuple[list[dict[str, Any]], Counter[str]]:
    """The attribute rows of the shard's kept boxes (box order) and the reasons for unlabelled ones."""
    import numpy as np

    from ..shards import ShardRef
    from .embed import embed_crops

    ann, shard, attr, batch = Path(spec["ann"]), spec["task_id"], head.attribute, int(spec["batch"])
    boxes = _kept_boxes(layout.boxes_path(ann, shard))
    ref = ShardRef.from_json(spec["ref"])
    if not os.access(ref.path, os.R_OK) or not Path(ref.path).is_file():
        # not a per-image problem: no marker, so a re-run labels the shard once it is back
        raise layout.AnnotationError(
            f"shard {shard}: {ref.path} is missing or unreadable; put it back where annotate persons read it"
        )
    rows: list[dict[str, Any]] = [
        {"shard": shard, "key": key, "box_id": box_id, f"perceived_{attr}": None} for key, box_id, _ in boxes
    ]
    reasons: Counter[str] = Counter()
    pending: list[tuple[int, np.ndarray]] = []
    live = TaskCounts(spec.get("progress"), shard)  # boxes done, for the driver's bar

    def flush() -> None:
        probs = head.predict_proba(embed_crops(encoder, [c for _, c in pending], batch_size=batch))
        best = np.argmax(probs, axis=1)
        for (i, _), p, b in zip(pending, probs, best, strict=True):
            rows[i][f"perceived_{attr}"] = head.classes[int(b)]
            rows[i].update({f"p_{attr}_{c}": float(v) for c, v in zip(head.classes, p, strict=True)})
        live.add(boxes=len(pending))
        pending.clear()

    for i, crop, reason in prefetched(_crops(ref, boxes, spec), 2 * batch):
        if crop is None:
            rows[i][f"{attr}_reason"] = reason
            reasons[str(reason).split(":")[0]] += 1
            live.add(boxes=1)
            continue
        pending.append((i, crop))
        if len(pending) >= batch:
            flush()
    if pending:
        flush()
    return rows, reasons


def _finished(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The shard's marker if it is for this head and this box table and its table is intact."""
    from fairsets.pipeline.tasks import read_marker

    ann = Path(spec["ann"])
    marker = read_marker(layout.marker_path(ann, spec["stage"], spec["task_id"]))
    if (
        marker is None
        or marker.get("head_sha256") != spec["head_sha256"]
        or marker.get("boxes_sha256") != spec["boxes_sha256"]
    ):
        return None
    labels = layout.attribute_path(ann, spec["attribute"], spec["task_id"])
    recorded = ((marker.get("files") or {}).get("labels") or {}).get("sha256")
    intact = labels.is_file() and recorded == sha256_file(labels)
    return marker if intact else None


def run_classify_task(spec: dict[str, Any]) -> dict[str, Any]:
    """Label the kept boxes of one shard; return its marker with ``ran`` (``classified``/``skipped``).

    ``spec``: ``task_id`` (the shard), ``workdir``, ``ann``, ``ref`` (the shard reference),
    ``head`` (path), ``head_sha256``, ``attribute``, ``boxes_sha256``, ``stage``, ``batch``, ``device``,
    ``max_bytes``, ``max_pixels``; optional ``progress`` (where to report the boxes done so far).
    """
    from fairsets.core.tables import write_table

    from .store import load_head

    done = _finished(spec)
    if done is not None:
        return {**done, "ran": "skipped"}
    ann, shard = Path(spec["ann"]), spec["task_id"]
    head = load_head(spec["head"])
    if head.sha256 != spec["head_sha256"]:
        raise layout.AnnotationError(f"{spec['head']} changed during the run; run classify again")
    boxes_path = layout.boxes_path(ann, shard)
    if sha256_file(boxes_path) != spec["boxes_sha256"]:
        raise layout.AnnotationError(f"{boxes_path} changed during the run; run classify again")
    encoder = encoder_for(head.encoder, head.pretrained, spec["device"])
    with one_torch_thread():
        rows, reasons = _label_rows(spec, head, encoder)
    attr = head.attribute
    path = layout.attribute_path(ann, attr, shard)
    info = write_table(path, rows, layout.attribute_schema(attr, head.classes))
    labels = Counter(r[f"perceived_{attr}"] for r in rows if r[f"perceived_{attr}"] is not None)
    marker = {
        "stage": spec["stage"],
        "shard": shard,
        "head_sha256": spec["head_sha256"],
        "boxes_sha256": spec["boxes_sha256"],
        "files": {"labels": {"path": path.relative_to(ann).as_posix(), "sha256": info["sha256"]}},
        "stats": {
            "boxes": len(rows),
            "labelled": sum(labels.values()),
            "unlabelled": len(rows) - sum(labels.values()),
            "counts": {c: labels.get(c, 0) for c in head.classes},
            "reasons": dict(sorted(reasons.items())),
        },
    }
    if spec.get("placement"):  # the device the executor gave this task (none on the CPU path)
        marker["placement"] = spec["placement"]
    atomic_write_text(
        layout.marker_path(ann, spec["stage"], shard), json.dumps(marker, sort_keys=True, indent=1) + "\n"
    )
    return {**marker, "ran": "classified"}
