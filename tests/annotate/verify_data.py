"""Small annotation folders for the verify tests, written straight from planted boxes and labels."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from fairsets.annotate import layout
from fairsets.core.tables import write_table

CLASSES = ["female", "male", "unclear"]


def write_folder(
    root: Path,
    images: Sequence[Mapping],
    boxes: Sequence[Mapping],
    *,
    labels: Mapping[tuple[str, str, int], str | None] | None = None,
    attr: str = "gender",
    classes: Sequence[str] = CLASSES,
) -> Path:
    """An annotation folder of one shard per distinct ``shard``.

    ``images``: ``{"shard", "key", "w", "h", "status"="ok"}``; ``boxes``: ``{"shard", "key",
    "box_id", "box": (x1, y1, x2, y2), "kept"=True}``; ``labels``: (shard, key, box_id) → the
    classifier's label (None: a row with no label) for an attribute table of ``attr``.
    """
    manifest: dict = {"inputs": [], "shards": {}, "attributes": {}}
    if labels is not None:
        manifest["attributes"][attr] = {
            "head_sha256": "ab" * 32,
            "head": {"encoder": "test", "pretrained": None, "classes": list(classes), "metrics": {}},
            "counts": {},
        }
    layout.write_manifest(root, manifest)
    size = {(i["shard"], i["key"]): (i["w"], i["h"]) for i in images}
    for shard in sorted({i["shard"] for i in images}):
        rows = [
            {
                "shard": shard,
                "key": i["key"],
                "caption": None,
                "url": None,
                "sha256": None,
                "image_w": i["w"],
                "image_h": i["h"],
                "n_boxes": sum(1 for b in boxes if (b["shard"], b["key"]) == (shard, i["key"])),
                "n_kept": None,
                "status": i.get("status", "ok"),
                "reason": None,
            }
            for i in images
            if i["shard"] == shard
        ]
        write_table(layout.images_path(root, shard), rows, layout.IMAGE_SCHEMA)
        box_rows = []
        for b in boxes:
            if b["shard"] != shard:
                continue
            x1, y1, x2, y2 = b["box"]
            w, h = size[(shard, b["key"])]
            kept = b.get("kept", True)
            box_rows.append(
                {
                    "shard": shard,
                    "key": b["key"],
                    "box_id": b["box_id"],
                    "x1": x1,
                    "y1": y1,
                    "x2": x2,
                    "y2": y2,
                    "conf": 0.9,
                    "class_name": "person",
                    "width": x2 - x1,
                    "height": y2 - y1,
                    "area_frac": (x2 - x1) * (y2 - y1) / (w * h),
                    "image_w": w,
                    "image_h": h,
                    "kept": kept,
                    "drop_reason": None if kept else "min side < 30",
                }
            )
        write_table(layout.boxes_path(root, shard), box_rows, layout.BOX_SCHEMA)
        if labels is not None:
            attr_rows = [
                {"shard": s, "key": k, "box_id": i, f"perceived_{attr}": lab, f"{attr}_reason": None}
                for (s, k, i), lab in labels.items()
                if s == shard
            ]
            write_table(
                layout.attribute_path(root, attr, shard),
                attr_rows,
                layout.attribute_schema(attr, list(classes)),
            )
    return root
