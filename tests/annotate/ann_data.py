"""A small annotation folder written directly (no detector), whose boxes carry their label as a colour.

:func:`make_ann` writes tar shards and the folder ``annotate persons`` would have made from them
(manifest, ``boxes/``, ``images/``, persons markers): every image has ``boxes_per_image`` kept
boxes, each a flat rectangle painted in its label's colour (:func:`colour_of`) on a noisy
background, plus one small dropped box (``kept = false``) that nothing may ever ask about.

A scripted annotator "sees" a box's label by reading the colour back from the image it is sent
(:func:`label_of_jpeg`), so tests exercise the real crop, rendering and JPEG path end to end.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from fairsets.annotate import layout
from fairsets.annotate.heads.labels import item_id
from fairsets.annotate.shards import ShardRef
from fairsets.annotate.vote.prompts import OPTIONS

#: The vote's label orders: :func:`colour_of` must be given the same order the annotator reads with.
GENDER = tuple(label for label, _ in OPTIONS["gender"][1])
RACE = tuple(label for label, _ in OPTIONS["race"][1])
_BASE = [
    (200, 60, 170),
    (40, 80, 210),
    (40, 170, 60),
    (130, 130, 130),
    (230, 200, 40),
    (40, 200, 200),
    (120, 60, 20),
    (250, 150, 100),
    (20, 20, 20),
    (160, 120, 240),
]


def colour_of(label: str, labels: Sequence[str]) -> tuple[int, int, int]:
    """The colour boxes of ``label`` are painted with (never pure red: red boxes are drawn on top)."""
    return _BASE[list(labels).index(label)]


def label_of_pixels(rgb: np.ndarray, labels: Sequence[str]) -> str:
    """The label whose colour is nearest the median of the central half of ``rgb``."""
    h, w = rgb.shape[:2]
    centre = rgb[h // 4 : max(h // 4 + 1, 3 * h // 4), w // 4 : max(w // 4 + 1, 3 * w // 4)].reshape(-1, 3)
    med = np.median(centre.astype(float), axis=0)
    dist = [np.linalg.norm(med - np.array(colour_of(lab, labels))) for lab in labels]
    return list(labels)[int(np.argmin(dist))]


def label_of_jpeg(data: bytes | Path, labels: Sequence[str]) -> str:
    """:func:`label_of_pixels` of an encoded image (a crop view)."""
    raw = data.read_bytes() if isinstance(data, Path) else data
    return label_of_pixels(np.asarray(Image.open(io.BytesIO(raw)).convert("RGB")), labels)


@dataclass
class Ann:
    """What :func:`make_ann` wrote: the folder, and the ground truth by item id."""

    path: Path
    shards_dir: Path
    truth: dict[str, str] = field(default_factory=dict)  # item → label
    boxes: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)  # item → box
    sizes: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)  # (shard, key) → (w, h)
    captions: dict[tuple[str, str], str] = field(default_factory=dict)  # (shard, key) → alt-text
    dropped: list[str] = field(default_factory=list)  # items of the kept = false boxes


def make_ann(
    root: Path,
    write_shard: Callable[..., Path],
    *,
    shards: int = 2,
    images_per_shard: int = 6,
    boxes_per_image: int = 2,
    labels: Sequence[str] = GENDER,
    seed: int = 0,
    size: tuple[int, int] = (200, 150),
    caption: Callable[[str, list[str]], str] | None = None,
) -> Ann:
    """Write ``root/shards/*.tar`` and the annotation folder ``root/ann`` (see the module docstring).

    Labels are drawn with ``np.random.default_rng(seed)``; ``caption(key, box_labels)`` gives each
    image's alt-text (default ``"photo {key}"``).
    """
    from fairsets.core.tables import write_table

    rng = np.random.default_rng(seed)
    w, h = size
    out = Ann(path=root / "ann", shards_dir=root / "shards")
    out.path.mkdir(parents=True, exist_ok=True)
    refs = []
    slot = w // max(1, boxes_per_image)
    for s in range(shards):
        shard = f"{s:05d}"
        samples, box_rows, image_rows = [], [], []
        for i in range(images_per_shard):
            key = f"{s:03d}{i:05d}"
            pixels = rng.integers(200, 256, size=(h, w, 3)).astype(np.uint8)
            box_labels = [str(rng.choice(list(labels))) for _ in range(boxes_per_image)]
            rows = []
            for b, lab in enumerate(box_labels):
                x1, x2 = b * slot + 6, (b + 1) * slot - 6
                y1, y2 = 10 + b * 3, h - 12
                pixels[y1:y2, x1:x2] = colour_of(lab, labels)
                rows.append((x1, y1, x2, y2, True, None))
                it = item_id(shard, key, b)
                out.truth[it], out.boxes[it] = lab, (float(x1), float(y1), float(x2), float(y2))
            rows.append((2, 2, 14, 12, False, "min side 10 px < 30"))  # a dropped box
            out.dropped.append(item_id(shard, key, boxes_per_image))
            buf = io.BytesIO()
            Image.fromarray(pixels).save(buf, format="PNG")
            text = caption(key, box_labels) if caption else f"photo {key}"
            out.captions[(shard, key)], out.sizes[(shard, key)] = text, (w, h)
            samples.append(
                (key, {"png": buf.getvalue(), "txt": text, "json": {"url": f"http://img.invalid/{key}"}})
            )
            for b, (x1, y1, x2, y2, kept, reason) in enumerate(rows):
                bw, bh = x2 - x1, y2 - y1
                box_rows.append(
                    {
                        "shard": shard, "key": key, "box_id": b, "x1": x1, "y1": y1, "x2": x2, "y2": y2,
                        "conf": 0.9 - 0.1 * b, "class_name": "person", "width": bw, "height": bh,
                        "area_frac": bw * bh / (w * h), "image_w": w, "image_h": h,
                        "kept": kept, "drop_reason": reason,
                    }
                )  # fmt: skip
            image_rows.append(
                {
                    "shard": shard, "key": key, "caption": text, "url": f"http://img.invalid/{key}",
                    "sha256": hashlib.sha256(buf.getvalue()).hexdigest(),
                    "image_w": w, "image_h": h, "n_boxes": len(rows),
                    "n_kept": boxes_per_image, "status": "ok", "reason": None,
                }
            )  # fmt: skip
        tar = write_shard(out.shards_dir / f"{shard}.tar", samples)
        ref = ShardRef(name=shard, path=str(tar.resolve()), kind="tar")
        refs.append(ref.to_json())
        write_table(layout.boxes_path(out.path, shard), box_rows, layout.BOX_SCHEMA)
        write_table(layout.images_path(out.path, shard), image_rows, layout.IMAGE_SCHEMA)
        marker = layout.marker_path(out.path, "persons", shard)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"task_id": shard, "stats": {"images": images_per_shard}}))
    layout.write_manifest(
        out.path,
        {
            "inputs": refs,
            "params": {"min_side": 30, "max_bytes": 50_000_000, "max_pixels": 40_000_000},
            "detector": {"model": "synthetic (tests/annotate/ann_data.py)"},
        },
    )
    return out
