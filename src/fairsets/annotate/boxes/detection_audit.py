"""The detection audit (``fairsets annotate verify --boxes HUMAN.csv``): boxes against human boxes.

The paper inspected 200 images by hand: "82.5% were perfectly correct, 10% misidentified objects
as persons, and 7.5% missed persons" — shares of **images**. This audit gives those shares and
the per-**box** rates beside them, overall and by box size, from a CSV of the persons a human
drew in a sample of images.

**The human CSV** (UTF-8, header row): ``shard, key, x1, y1, x2, y2`` — the image as in the
annotation folder (``boxes/*.parquet``: ``shard``, ``key``) and one person box per row, corners in
pixels of the image the detector saw (the same space as the folder's ``x1 … y2``; ``x2 > x1``,
``y2 > y1``). Other columns are ignored. Every image of the sample must appear: an image with no
person is one row with the four coordinates blank (an image absent from the CSV was not
inspected and is not counted). The set of images in the CSV is the sample.

**Matching** at IoU ≥ ``iou`` (0.5 by default), one to one, **greedy by descending IoU** within
an image (ties: human box order, then ``box_id``): the pair with the highest IoU is matched
first, both boxes leave, and so on until no pair left reaches the threshold. Greedy rather than
Hungarian: with the threshold ≥ 0.5 two predictions can rarely both reach one human box, and the
rule is the one people apply by eye. The predicted boxes are the **kept** boxes (after the
size filter: what the dataset's statistics count); ``all_detections=True`` takes every box the
detector returned.

**Per box**: a human box is *correct* when matched, *missed* otherwise (denominator: human
boxes); a predicted box is a *false positive* when unmatched (denominator: predicted boxes).
**Per image** (exclusive; the shares sum to 1): *correct* — every human box matched and every
predicted box matched (an image with neither is correct); *false positive* — a predicted box
unmatched, no human box missed; *missed* — a human box missed, no false positive; *both*.
``with_false_positive`` and ``with_missed`` are the non-exclusive shares (``both`` in each).
**By size**, each box by its own area (a human box for correct/missed, a predicted box for false
positives): COCO's pixel-area classes, small < 32², medium < 96², large ≥ 96² px²; the
alternative by share of the image area (< 1 %, < 10 %, ≥ 10 %) is under ``alternative``.

Images of the CSV that are not in the folder, or whose detection did not run (status not ``ok``),
are counted and listed, never counted as correct. Output: ``OUT/verify_boxes.json``.
"""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from fairsets.core.atomic import atomic_write_text

from .. import layout, read
from ..human_csv import open_human_csv

__all__ = [
    "AREA_FRACTION_CLASSES",
    "BOX_COLUMNS",
    "COCO_AREA_CLASSES",
    "audit_detection",
    "iou_matrix",
    "match_boxes",
    "read_human_boxes",
]

BOX_COLUMNS = ("shard", "key", "x1", "y1", "x2", "y2")
#: COCO's size classes by box area in px²: (name, upper bound exclusive).
COCO_AREA_CLASSES = (("small", 32.0**2), ("medium", 96.0**2), ("large", math.inf))
#: The alternative size classes by box area / image area.
AREA_FRACTION_CLASSES = (("under 1%", 0.01), ("1-10%", 0.10), ("10% and more", math.inf))
_LISTED = 20
_CATEGORIES = ("correct", "false_positive", "missed", "both")

Box = tuple[float, float, float, float]


def read_human_boxes(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The human boxes of a CSV: ``{"images": {(shard, key): [box, …]}, "rows", "sha256"}``.

    Raises:
        AnnotationError: unreadable file, a missing column, a coordinate that is not a number,
            some but not all coordinates blank, or a box with ``x2 <= x1`` or ``y2 <= y1``.
    """
    p = Path(path)
    fix = "the CSV needs shard,key,x1,y1,x2,y2 (pixels; an image with no person: one row, coordinates blank)"
    reader, sha256 = open_human_csv(p, BOX_COLUMNS, "human boxes", fix)
    images: dict[tuple[str, str], list[Box]] = {}
    rows = 0
    try:
        for row in reader:
            line = reader.line_num
            rows += 1
            ident = (str(row["shard"] or "").strip(), str(row["key"] or "").strip())
            if not all(ident):
                raise layout.AnnotationError(f"{p}: line {line}: shard or key is blank; {fix}")
            cells = [str(row[c] or "").strip() for c in BOX_COLUMNS[2:]]
            boxes = images.setdefault(ident, [])
            if not any(cells):
                continue
            if not all(cells):
                raise layout.AnnotationError(
                    f"{p}: line {line}: some coordinates are blank; give all four, or none for an "
                    "image with no person"
                )
            try:
                x1, y1, x2, y2 = (float(c) for c in cells)
            except ValueError:
                raise layout.AnnotationError(
                    f"{p}: line {line}: coordinates {', '.join(cells)} are not all numbers (pixels)"
                ) from None
            if not all(math.isfinite(v) for v in (x1, y1, x2, y2)) or x2 <= x1 or y2 <= y1:
                raise layout.AnnotationError(
                    f"{p}: line {line}: box ({x1:g}, {y1:g}, {x2:g}, {y2:g}) is empty or inverted; "
                    "give corners with x2 > x1 and y2 > y1"
                )
            boxes.append((x1, y1, x2, y2))
    except csv.Error as exc:
        raise layout.AnnotationError(f"{p}: line {reader.line_num}: not valid CSV ({exc})") from None
    if not images:
        raise layout.AnnotationError(f"{p}: no rows; {fix}")
    return {"images": images, "rows": rows, "sha256": sha256}


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box of ``a`` (n, 4) with every box of ``b`` (m, 4), corners ``x1, y1, x2, y2``."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    w = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    h = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    inter = w * h
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / union, 0.0)


def match_boxes(human: np.ndarray, pred: np.ndarray, iou: float = 0.5) -> list[tuple[int, int, float]]:
    """One-to-one matches ``(human index, predicted index, IoU)``, greedy by descending IoU ≥ ``iou``."""
    m = iou_matrix(human, pred)
    pairs = sorted(
        ((float(m[i, j]), i, j) for i, j in zip(*np.nonzero(m >= iou), strict=True)),
        key=lambda t: (-t[0], t[1], t[2]),
    )
    used_h: set[int] = set()
    used_p: set[int] = set()
    out = []
    for v, i, j in pairs:
        if i not in used_h and j not in used_p:
            used_h.add(int(i))
            used_p.add(int(j))
            out.append((int(i), int(j), v))
    return out


def _size_class(value: float, classes: tuple[tuple[str, float], ...]) -> str:
    return next(name for name, upper in classes if value < upper)


def _by_size(events: list[tuple[str, str]], names: list[str]) -> dict[str, Any]:
    """Per size class: human boxes (correct, missed) and predicted boxes (false positives)."""
    out: dict[str, Any] = {}
    for name in names:
        kinds = [k for s, k in events if s == name]
        human = kinds.count("correct") + kinds.count("missed")
        pred = kinds.count("matched_prediction") + kinds.count("false_positive")
        out[name] = {
            "human_boxes": human,
            "correct": kinds.count("correct"),
            "missed": kinds.count("missed"),
            "missed_rate": kinds.count("missed") / human if human else None,
            "predicted_boxes": pred,
            "false_positive": kinds.count("false_positive"),
            "false_positive_rate": kinds.count("false_positive") / pred if pred else None,
        }
    return out


def _predictions(ann: str | os.PathLike[str], keys: list[tuple[str, str]], all_detections: bool) -> Any:
    import duckdb
    import pyarrow as pa

    con = duckdb.connect()
    con.register(
        "wanted",
        pa.table({"shard": pa.array([k[0] for k in keys]), "key": pa.array([k[1] for k in keys])}),
    )
    con.register("imgs", read.images(ann, con=con))
    images = {
        (s, k): (status, w, h)
        for s, k, status, w, h in con.sql(
            "SELECT i.shard, i.key, i.status, i.image_w, i.image_h FROM imgs i JOIN wanted USING (shard, key)"
        ).fetchall()
    }
    con.register("bx", read.boxes(ann, [], con=con))
    where = "" if all_detections else "WHERE b.kept"
    boxes: dict[tuple[str, str], list[tuple[int, Box]]] = {}
    for s, k, box_id, x1, y1, x2, y2 in con.sql(
        f"SELECT b.shard, b.key, b.box_id, b.x1, b.y1, b.x2, b.y2 FROM bx b JOIN wanted USING (shard, key) "
        f"{where} ORDER BY b.shard, b.key, b.box_id"
    ).fetchall():
        boxes.setdefault((s, k), []).append((int(box_id), (x1, y1, x2, y2)))
    return images, boxes


def _area(box: Box) -> float:
    return (box[2] - box[0]) * (box[3] - box[1])


def audit_detection(
    ann: str | os.PathLike[str],
    human: str | os.PathLike[str],
    *,
    out_dir: str | os.PathLike[str],
    iou: float = 0.5,
    all_detections: bool = False,
) -> dict[str, Any]:
    """Match the folder's boxes to human boxes per image; write ``OUT/verify_boxes.json``; return it.

    Raises:
        AnnotationError: an unusable CSV or folder, ``iou`` outside (0, 1], or no image of the
            CSV that the detector ran on.
    """
    if not 0.0 < iou <= 1.0:
        raise layout.AnnotationError(f"--iou {iou}: give an IoU threshold in (0, 1], e.g. 0.5")
    truth = read_human_boxes(human)
    keys = sorted(truth["images"])
    images, predicted = _predictions(ann, keys, all_detections)
    not_found = [k for k in keys if k not in images]
    not_ok = [k for k in keys if k in images and images[k][0] != "ok"]
    audited = [k for k in keys if k in images and images[k][0] == "ok"]
    if not audited:
        raise layout.AnnotationError(
            f"{human}: none of its {len(keys)} images is an image of {ann} the detector ran on "
            f"({len(not_found)} not found, {len(not_ok)} not ok); "
            "check shard and key against images/*.parquet"
        )
    cats = dict.fromkeys(_CATEGORIES, 0)
    listed: dict[str, list[dict[str, Any]]] = {c: [] for c in _CATEGORIES[1:]}
    coco: list[tuple[str, str]] = []
    frac: list[tuple[str, str]] = []
    n_h = n_p = n_t = 0
    for k in audited:
        hum = truth["images"][k]
        preds = predicted.get(k, [])
        pred_arr = np.array([b for _, b in preds]).reshape(-1, 4)
        matches = match_boxes(np.array(hum).reshape(-1, 4), pred_arr, iou)
        hit_h, hit_p = {i for i, _, _ in matches}, {j for _, j, _ in matches}
        _, w, h = images[k]
        image_area = float(w) * float(h) if w and h else math.nan
        for i, box in enumerate(hum):
            kind = "correct" if i in hit_h else "missed"
            coco.append((_size_class(_area(box), COCO_AREA_CLASSES), kind))
            frac.append((_size_class(_area(box) / image_area, AREA_FRACTION_CLASSES), kind))
        for j, (_, box) in enumerate(preds):
            kind = "matched_prediction" if j in hit_p else "false_positive"
            coco.append((_size_class(_area(box), COCO_AREA_CLASSES), kind))
            frac.append((_size_class(_area(box) / image_area, AREA_FRACTION_CLASSES), kind))
        fp, miss = len(preds) - len(hit_p), len(hum) - len(hit_h)
        cat = "both" if fp and miss else "false_positive" if fp else "missed" if miss else "correct"
        cats[cat] += 1
        if cat != "correct" and len(listed[cat]) < _LISTED:
            listed[cat].append({"shard": k[0], "key": k[1], "false_positive": fp, "missed": miss})
        n_h, n_p, n_t = n_h + len(hum), n_p + len(preds), n_t + len(matches)
    n_img = len(audited)
    report: dict[str, Any] = {
        "human_boxes_file": {"file": Path(human).name, "sha256": truth["sha256"], "rows": truth["rows"]},
        "iou_threshold": iou,
        "matching": "greedy by descending IoU, one to one, per image",
        "predicted": "every detected box" if all_detections else "kept boxes",
        "images": {
            "in_file": len(keys),
            "audited": n_img,
            "not_found": len(not_found),
            "not_ok": len(not_ok),
        },
        "not_found": [{"shard": s, "key": k} for s, k in not_found[:_LISTED]],
        "not_ok": [{"shard": s, "key": k, "status": images[(s, k)][0]} for s, k in not_ok[:_LISTED]],
        "per_image": {
            **{c: {"images": n, "share": n / n_img} for c, n in cats.items()},
            "with_false_positive": (cats["false_positive"] + cats["both"]) / n_img,
            "with_missed": (cats["missed"] + cats["both"]) / n_img,
        },
        "per_box": {
            "human_boxes": n_h,
            "predicted_boxes": n_p,
            "matched": n_t,
            "missed": n_h - n_t,
            "false_positive": n_p - n_t,
            "correct_rate": n_t / n_h if n_h else None,
            "missed_rate": (n_h - n_t) / n_h if n_h else None,
            "false_positive_rate": (n_p - n_t) / n_p if n_p else None,
        },
        "by_size": _by_size(coco, [n for n, _ in COCO_AREA_CLASSES]),
        "alternative": {"by_area_fraction": _by_size(frac, [n for n, _ in AREA_FRACTION_CLASSES])},
        "examples": listed,
        "paper": {"images": 200, "correct": 0.825, "false_positive": 0.10, "missed": 0.075},
        "definitions": _definitions(iou, all_detections),
    }
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "verify_boxes.json", json.dumps(report, indent=1, sort_keys=True) + "\n")
    return report


def _definitions(iou: float, all_detections: bool) -> dict[str, str]:
    pred = "every box the detector returned" if all_detections else "the kept boxes (after the size filter)"
    return {
        "sample": "the images named in the human CSV that the detector ran on (status ok); images not "
        "in the folder or not ok are counted apart and left out",
        "predicted boxes": pred,
        "matching": f"one to one per image at IoU >= {iou:g}, greedy by descending IoU (ties: human box "
        "order, then box_id)",
        "per_box.correct_rate": "matched human boxes / human boxes",
        "per_box.missed_rate": "unmatched human boxes / human boxes",
        "per_box.false_positive_rate": "unmatched predicted boxes / predicted boxes",
        "per_image": "exclusive classes of the audited images, shares of them summing to 1: correct (every "
        "human and every predicted box matched; no person and no box is correct), false_positive (a "
        "predicted box unmatched, none missed), missed (a human box unmatched, no false positive), both; "
        "with_false_positive and with_missed count 'both' in each. The paper's 82.5% / 10% / 7.5% are "
        "shares of images",
        "by_size": "each box by its own area in px² (human boxes for correct/missed, predicted boxes for "
        "false positives), COCO classes: small < 32², medium < 96², large >= 96²; rates within a class",
        "alternative.by_area_fraction": "the same by box area / image area: under 1%, 1-10%, 10% and more",
    }
