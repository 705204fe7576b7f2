"""Annotation folders written straight as tables (no images), with effects planted where a test wants.

:func:`write_person_tables` writes what ``fairsets annotate persons`` + ``classify`` (+ ``caption``)
would: manifest, ``boxes/``, ``images/`` (alt-text in ``caption``), ``attributes/gender`` and
``attributes/race`` (``perceived_*``), persons markers and optionally ``captions/{name}/``. The
caller decides every image's boxes and texts, so the ground truth of every audit number is known
in the test without running fairsets' own code on it.

    spec = [ImageSpec(boxes=[("female", "white", 0.1)], alt="a nurse at work"), ...]
    ann = write_person_tables(tmp_path / "ann", spec, shard_size=100)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fairsets.annotate import layout
from fairsets.core.tables import write_table


@dataclass
class ImageSpec:
    """One image: its kept boxes as ``(gender, race, area_frac)`` (gender/race may be None: no
    label), its alt-text, optional person captions (one per box, or None), and dropped boxes."""

    boxes: list[tuple[str | None, str | None, float]]
    alt: str | None = "a photo"
    person_captions: list[str | None] | None = None
    dropped: int = 0
    status: str = "ok"
    extra: dict = field(default_factory=dict)


def write_person_tables(
    ann: Path, images: Sequence[ImageSpec], *, shard_size: int = 1000, captioner: str = "cap"
) -> Path:
    """Write the folder (see the module docstring); images are split into shards of ``shard_size``."""
    ann.mkdir(parents=True, exist_ok=True)
    refs = []
    any_captions = any(img.person_captions for img in images)
    for s, start in enumerate(range(0, max(1, len(images)), shard_size)):
        shard = f"{s:05d}"
        boxes, imgs, gender, race, caps = [], [], [], [], []
        for i, img in enumerate(images[start : start + shard_size]):
            key = f"{s:05d}{i:06d}"
            w, h = 640, 480
            n_all = len(img.boxes) + img.dropped
            imgs.append(
                {
                    "shard": shard, "key": key, "caption": img.alt, "url": f"http://img.invalid/{key}",
                    "sha256": f"{s:032x}{i:032x}", "image_w": w, "image_h": h, "n_boxes": n_all,
                    "n_kept": len(img.boxes), "status": img.status,
                    "reason": None if img.status == "ok" else "scripted",
                }
            )  # fmt: skip
            for b in range(n_all):
                kept = b < len(img.boxes)
                area = img.boxes[b][2] if kept else 0.0005
                side = (area * w * h) ** 0.5
                boxes.append(
                    {
                        "shard": shard, "key": key, "box_id": b, "x1": 0.0, "y1": 0.0, "x2": side,
                        "y2": side, "conf": 0.9, "class_name": "person", "width": side, "height": side,
                        "area_frac": area, "image_w": w, "image_h": h, "kept": kept,
                        "drop_reason": None if kept else "min side 10 px < 30",
                    }
                )  # fmt: skip
                if not kept:
                    continue
                g, r, _ = img.boxes[b]
                gender.append({"shard": shard, "key": key, "box_id": b, "perceived_gender": g})
                race.append({"shard": shard, "key": key, "box_id": b, "perceived_race": r})
                if img.person_captions is not None:
                    text = img.person_captions[b]
                    caps.append(
                        {
                            "shard": shard, "key": key, "box_id": b, "caption": text, "model": "m",
                            "annotator": captioner, "prompt_sha256": "0" * 64,
                            "status": "ok" if text is not None else "failed",
                            "reason": None if text is not None else "scripted", "finish_reason": "stop",
                            "prompt_tokens": 1, "completion_tokens": 1,
                        }
                    )  # fmt: skip
        write_table(layout.boxes_path(ann, shard), boxes, layout.BOX_SCHEMA)
        write_table(layout.images_path(ann, shard), imgs, layout.IMAGE_SCHEMA)
        write_table(layout.attribute_path(ann, "gender", shard), gender)
        write_table(layout.attribute_path(ann, "race", shard), race)
        if any_captions:
            write_table(layout.captions_path(ann, captioner, shard), caps, layout.CAPTION_SCHEMA)
        marker = layout.marker_path(ann, "persons", shard)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"task_id": shard}))
        refs.append({"name": shard, "path": str(ann / f"{shard}.tar"), "kind": "tar"})
    layout.write_manifest(ann, {"inputs": refs, "params": {"min_side": 30}})
    return ann


def image_group(labels: Sequence[str | None]) -> str:
    """The exclusive image-level group of one attribute, written out from the rule's words (an
    independent reference for the tests, not fairsets' SQL): no label at all → ``unlabelled``;
    only ``unclear`` → ``unclear``; one label besides ``unclear`` → that label; more → ``mixed``."""
    named = {x for x in labels if x is not None}
    known = named - {"unclear"}
    if not named:
        return "unlabelled"
    if not known:
        return "unclear"
    return next(iter(known)) if len(known) == 1 else "mixed"


def image_groups_any(labels: Sequence[str | None]) -> set[str]:
    """The groups of one attribute an image is in under the ``any`` rule (every label a box has)."""
    return {x for x in labels if x is not None} or {"unlabelled"}
