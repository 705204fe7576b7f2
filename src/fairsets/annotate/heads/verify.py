"""Agreement of the perceived-attribute labels with human labels (``fairsets annotate verify``).

A CSV names boxes (``shard, key, box_id``) and gives one or two human labels per box. The report
has, for each human column, the accuracy and Cohen's κ against the classifier's
``perceived_{attr}`` with seeded bootstrap 95% intervals and the confusion matrix (human rows,
classifier columns). With two human columns it also has the human–human κ, the ceiling the
classifier can be held to, and the comparison is like for like: ``human_vs_human`` and
``same_boxes.human_vs_classifier`` are computed over the **same boxes** (both humans labelled the
box and the classifier labelled it), so both κ have the same n. The human–human κ over every row
of the file (boxes the classifier never labelled too) is kept apart as
``alternative.human_vs_human_all_rows``. Krippendorff's α (nominal) is reported beside κ: among
the humans over every row (a blank answer is missing, not dropped with the row), and among the
humans and the classifier together. Every number's rule is in the ``definitions`` block, and the
confusion matrices the correction of ``audit persons --correct-with`` reads are in ``confusion``
(format: :data:`CONFUSION_FORMAT`). Agreement is also given as a function of the
minimum box side (boxes whose shorter side is at least 0, 10, … 100 px, with their counts), the
curve that justifies a box-size threshold: the classifier labels only kept boxes, so to study
sizes below the ``persons`` threshold, annotate with a lower ``--min-side`` first.

Human labels are matched to the head's classes ignoring case and surrounding spaces; labels listed
in ``drop_labels`` (e.g. ``unclear``) and blank cells are left out and counted; any other label
that is not a class is an error. Rows whose box is not in the folder, was not kept, or has no
label are counted and listed, never silently dropped.

Outputs: ``OUT/verify_{attr}.json``, ``OUT/verify_{attr}.png``, and the headline numbers in
``manifest["attributes"][attr]["verification"]``.
"""

from __future__ import annotations

import csv
import json
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fairsets.core.atomic import atomic_path, atomic_write_text, layout_lock

from .. import layout, read
from ..agreement import bootstrap_agreement, confusion_matrix, krippendorff_alpha, ratings_table
from ..human_csv import open_human_csv

__all__ = [
    "CONFUSION_FORMAT",
    "DEFAULT_THRESHOLDS",
    "KEY_COLUMNS",
    "read_human_labels",
    "verify_labels",
]

KEY_COLUMNS = ("shard", "key", "box_id")
#: Minimum box sides (px) of the agreement curve.
DEFAULT_THRESHOLDS = tuple(range(0, 101, 10))
_LISTED = 20  # rows listed per problem in the report (all are counted)
#: How ``verify_{attr}.json``'s ``confusion`` block is laid out (also written into it).
CONFUSION_FORMAT = (
    "by_human_column[COLUMN][i][j] = boxes that human COLUMN labelled labels[i] and the classifier "
    "labelled labels[j] (rows: human = truth, columns: classifier), over every box that human "
    "labelled and the classifier labelled; default_column is the first human column"
)


def read_human_labels(
    path: str | os.PathLike[str], human_cols: Sequence[str] | None = None
) -> dict[str, Any]:
    """The rows of a human-label CSV: ``{"rows": [...], "columns": [...], "sha256": ...}``.

    Each row is ``{"line", "shard", "key", "box_id", <human column>: label or None}``. Without
    ``human_cols`` the human columns are every column besides ``shard, key, box_id`` (one or two).

    Raises:
        AnnotationError: unreadable file, missing columns, a ``box_id`` that is not an integer,
            a box labelled twice, or not one or two human columns.
    """
    p = Path(path)
    reader, sha256 = open_human_csv(
        p, KEY_COLUMNS, "human labels", "the CSV needs shard, key, box_id and the human label columns"
    )
    fields = list(reader.fieldnames or [])
    cols = list(human_cols) if human_cols else [f for f in fields if f not in KEY_COLUMNS]
    unknown = [c for c in cols if c not in fields or c in KEY_COLUMNS]
    if unknown:
        raise layout.AnnotationError(
            f"{p}: no human label column {unknown[0]!r} (columns: {', '.join(fields)})"
        )
    if not 1 <= len(cols) <= 2 or len(set(cols)) != len(cols):
        raise layout.AnnotationError(
            f"{p}: {len(cols)} human label columns ({', '.join(cols) or 'none'}); "
            "name one or two with --human-col"
        )
    rows: list[dict[str, Any]] = []
    seen: dict[tuple[str, str, int], int] = {}
    try:
        for row in reader:
            line = reader.line_num
            if None in row:
                raise layout.AnnotationError(f"{p}: line {line}: more fields than the header has")
            try:
                box_id = int(str(row["box_id"]).strip())
            except ValueError:
                raise layout.AnnotationError(
                    f"{p}: line {line}: box_id {row['box_id']!r} is not an integer"
                ) from None
            ident = (str(row["shard"]).strip(), str(row["key"]).strip(), box_id)
            if ident in seen:
                raise layout.AnnotationError(
                    f"{p}: lines {seen[ident]} and {line} label the same box {ident}; keep one row per box "
                    "(a second human goes in a second column)"
                )
            seen[ident] = line
            out: dict[str, Any] = {"line": line, "shard": ident[0], "key": ident[1], "box_id": box_id}
            for c in cols:
                value = (row.get(c) or "").strip()
                out[c] = value or None
            rows.append(out)
    except csv.Error as exc:
        raise layout.AnnotationError(f"{p}: line {reader.line_num}: not valid CSV ({exc})") from None
    return {"rows": rows, "columns": cols, "sha256": sha256}


def _attach_boxes(ann: str | os.PathLike[str], attr: str, rows: list[dict[str, Any]]) -> None:
    """Add ``found``, ``kept``, ``min_side``, ``classifier`` and ``reason`` to each label row."""
    import duckdb
    import pyarrow as pa

    con = duckdb.connect()
    labels = pa.table(
        {
            "i": pa.array(range(len(rows)), pa.int64()),
            "shard": pa.array([r["shard"] for r in rows], pa.string()),
            "key": pa.array([r["key"] for r in rows], pa.string()),
            "box_id": pa.array([r["box_id"] for r in rows], pa.int64()),
        }
    )
    con.register("labels", labels)
    rel = read.boxes(ann, [attr], con=con)
    con.register("boxes", rel)
    out = con.sql(
        f"SELECT l.i, b.kept, least(b.width, b.height) AS min_side, b.perceived_{attr} AS clf, "
        f"b.{attr}_reason AS reason, b.shard IS NOT NULL AS found FROM labels l LEFT JOIN boxes b "
        "ON l.shard = b.shard AND l.key = b.key AND l.box_id = b.box_id ORDER BY l.i"
    ).fetchall()
    for i, kept, min_side, clf, reason, found in out:
        rows[i].update(found=bool(found), kept=bool(kept), min_side=min_side, classifier=clf, reason=reason)


def _class_map(classes: Sequence[str]) -> dict[str, str]:
    return {c.strip().lower(): c for c in classes}


def _normalise(
    rows: list[dict[str, Any]], cols: Sequence[str], classes: Sequence[str], drop: Sequence[str], path: Path
) -> dict[str, dict[str, int]]:
    """Map human labels onto ``classes`` in place; count blank and dropped cells per column."""
    to_class = _class_map(classes)
    dropped = {d.strip().lower() for d in drop}
    counts: dict[str, dict[str, int]] = {c: {"blank": 0, "dropped": 0} for c in cols}
    unknown: dict[str, Counter[str]] = {c: Counter() for c in cols}
    for r in rows:
        for c in cols:
            value = r[c]
            if value is None:
                counts[c]["blank"] += 1
            elif value.lower() in dropped:
                counts[c]["dropped"] += 1
                r[c] = None
            elif value.lower() in to_class:
                r[c] = to_class[value.lower()]
            else:
                unknown[c][value] += 1
    for c, bad in unknown.items():
        if bad:
            shown = ", ".join(f"{v!r} ×{n}" for v, n in bad.most_common(5))
            raise layout.AnnotationError(
                f"{path}: column {c} has labels that are not classes of the head ({shown}); the classes are "
                f"{', '.join(classes)}: rename them, or leave them out with --drop-labels"
            )
    return counts


def _listed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keep = ("line", "shard", "key", "box_id", "reason")
    return [{k: r[k] for k in keep if r.get(k) is not None} for r in rows[:_LISTED]]


def _agreement(a: list[str], b: list[str], classes: Sequence[str], n_boot: int, seed: int) -> dict[str, Any]:
    return bootstrap_agreement(a, b, labels=classes, n_boot=n_boot, seed=seed)


def _human_pair(
    rows: list[dict[str, Any]], cols: Sequence[str], classes: Sequence[str], n_boot: int, seed: int
) -> dict[str, Any]:
    a, b = [r[cols[0]] for r in rows], [r[cols[1]] for r in rows]
    res = _agreement(a, b, classes, n_boot, seed)
    cm, _ = confusion_matrix(a, b, classes)
    res["columns"] = list(cols)
    res["confusion"] = {"rows": cols[0], "columns": cols[1], "labels": list(classes), "matrix": cm.tolist()}
    return res


def _alphas(
    rows: list[dict[str, Any]], cols: Sequence[str], classes: Sequence[str], n_boot: int, seed: int
) -> dict[str, Any]:
    """Krippendorff's α among the humans (two columns) and among the humans and the classifier."""
    out: dict[str, Any] = {"level": "nominal", "humans": None}
    if len(cols) == 2:
        out["humans"] = krippendorff_alpha(
            ratings_table([[r[c] for c in cols] for r in rows], classes), n_boot=n_boot, seed=seed
        )
    out["humans_and_classifier"] = krippendorff_alpha(
        ratings_table([[*(r[c] for c in cols), r["classifier"]] for r in rows], classes),
        n_boot=n_boot,
        seed=seed,
    )
    return out


def _definitions(cols: Sequence[str]) -> dict[str, str]:
    """The rule of every number of the report (rendered by the CLI, copied into the manifest)."""
    out = {
        "matched box": "a row of the human file whose (shard, key, box_id) is a kept box the classifier "
        "labelled; rows not found, on boxes not kept or on unlabelled boxes are counted and listed",
        "human_vs_classifier": "per human column: accuracy (share of equal labels) and Cohen's κ "
        "between that human and the classifier over every matched box that human labelled "
        "(a blank or dropped answer leaves the box out); n is that number of boxes",
        "kappa": "Cohen's κ = 1 − observed disagreement / chance disagreement (chance from each "
        "rater's own label shares); 95% interval: percentile bootstrap over the boxes (seeded)",
        "krippendorff.humans_and_classifier": "Krippendorff's α, nominal level, with every human "
        "column and the classifier as raters over every row of the file; a blank, dropped or "
        "unlabelled answer is missing (left out of its row, the row kept); items = rows with at "
        "least two answers, values = the answers they hold; interval: bootstrap over those rows",
        "min_side": "the agreement curve: per threshold t, human_vs_classifier over the matched boxes "
        "whose shorter side is at least t px",
        "confusion": CONFUSION_FORMAT,
    }
    if len(cols) == 2:
        out |= {
            "same boxes": f"the matched boxes that both {cols[0]} and {cols[1]} labelled: "
            "human_vs_human and same_boxes.human_vs_classifier are all computed over these boxes, "
            "so the human–human ceiling and the human–classifier κ have the same n (the paper's "
            "comparison, human–human κ 0.654 vs human–classifier κ 0.638)",
            "human_vs_human": f"Cohen's κ and accuracy between {cols[0]} and {cols[1]} over the same boxes",
            "same_boxes.human_vs_classifier": "per human column, κ and accuracy against the classifier "
            "over the same boxes",
            "alternative.human_vs_human_all_rows": f"κ between {cols[0]} and {cols[1]} over every row "
            "both labelled, boxes the classifier never labelled (not found, not kept, unlabelled) "
            "included: not comparable with the human–classifier κ",
            "krippendorff.humans": f"Krippendorff's α, nominal level, between {cols[0]} and {cols[1]} "
            "over every row of the file; a row with one answer carries no pair and is left out",
        }
    return out


def verify_labels(
    ann: str | os.PathLike[str],
    human: str | os.PathLike[str],
    *,
    attribute: str,
    out_dir: str | os.PathLike[str],
    human_cols: Sequence[str] | None = None,
    drop_labels: Sequence[str] = (),
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    n_boot: int = 1000,
    seed: int = 0,
    plot: bool = True,
) -> dict[str, Any]:
    """Compare human labels of boxes with ``perceived_{attribute}``; write the report; return it.

    Args:
        ann: the annotation folder (``annotate classify`` has labelled ``attribute``).
        human: CSV with ``shard, key, box_id`` and one or two human label columns.
        attribute: the attribute the humans labelled, e.g. ``gender``.
        out_dir: where ``verify_{attribute}.json`` and ``.png`` go.
        human_cols: the human label columns (default: every other column; one or two).
        drop_labels: human labels to leave out (``unclear``), counted in the report.
        thresholds: minimum box sides (px) of the agreement curve.
        n_boot: bootstrap resamples for the 95% intervals; ``seed`` seeds them.
        plot: draw ``verify_{attribute}.png`` (needs matplotlib).

    Returns:
        The report written to ``verify_{attribute}.json``.

    Raises:
        AnnotationError: the folder has no ``attribute`` labels, or the CSV is unusable (the
            message says how to fix it).
    """
    attr = layout.check_attribute(attribute)
    manifest = layout.read_manifest(ann)
    info = (manifest.get("attributes") or {}).get(attr)
    if not info:
        raise layout.AnnotationError(
            f"{ann}: no {attr} labels; run fairsets annotate classify {ann} --head HEAD.npz first"
        )
    classes = list(info["head"]["classes"])
    labels = read_human_labels(human, human_cols)
    rows, cols = labels["rows"], labels["columns"]
    if not rows:
        raise layout.AnnotationError(f"{human}: no label rows")
    blank_dropped = _normalise(rows, cols, classes, drop_labels, Path(human))
    _attach_boxes(ann, attr, rows)
    not_found = [r for r in rows if not r["found"]]
    not_kept = [r for r in rows if r["found"] and not r["kept"]]
    unlabelled = [r for r in rows if r["found"] and r["kept"] and r["classifier"] is None]
    matched = [r for r in rows if r["classifier"] is not None]
    if not any(r[c] is not None for r in matched for c in cols):  # nothing to compare: no numbers
        raise layout.AnnotationError(
            f"{human}: no human label meets a labelled box ({len(rows)} rows: {len(not_found)} not in "
            f"{ann}, {len(not_kept)} on boxes not kept, {len(unlabelled)} on unlabelled boxes, the rest "
            "blank or dropped); check shard, key and box_id against boxes/*.parquet and --drop-labels"
        )
    report: dict[str, Any] = {
        "attribute": attr,
        "classes": classes,
        "head_sha256": info.get("head_sha256"),
        "labels": {"file": Path(human).name, "sha256": labels["sha256"], "rows": len(rows)},
        "human_columns": cols,
        "drop_labels": sorted({d.strip().lower() for d in drop_labels}),
        "bootstrap": {"resamples": n_boot, "seed": seed, "level": 0.95},
        "rows": {
            "total": len(rows),
            "with_classifier_label": len(matched),
            "not_found": len(not_found),
            "not_kept": len(not_kept),
            "unlabelled": len(unlabelled),
            "per_column": blank_dropped,
        },
        "not_found": _listed(not_found),
        "not_kept": _listed(not_kept),
        "unlabelled": _listed(unlabelled),
        "human_vs_classifier": {},
        "human_vs_human": None,
        "same_boxes": None,
        "alternative": {},
        "min_side": {"thresholds": list(thresholds), "curves": {}},
    }
    for c in cols:
        pairs = [r for r in matched if r[c] is not None]
        hum, clf = [r[c] for r in pairs], [r["classifier"] for r in pairs]
        res = _agreement(hum, clf, classes, n_boot, seed)
        cm, _ = confusion_matrix(hum, clf, classes)
        res["confusion"] = {
            "rows": "human",
            "columns": "classifier",
            "labels": classes,
            "matrix": cm.tolist(),
        }
        report["human_vs_classifier"][c] = res
        curve = []
        for t in thresholds:
            sub = [r for r in pairs if r["min_side"] is not None and r["min_side"] >= t]
            point = _agreement([r[c] for r in sub], [r["classifier"] for r in sub], classes, n_boot, seed)
            curve.append({"min_side": t, **point})
        report["min_side"]["curves"][c] = curve
    if len(cols) == 2:
        same = [r for r in matched if r[cols[0]] is not None and r[cols[1]] is not None]
        report["human_vs_human"] = _human_pair(same, cols, classes, n_boot, seed)
        report["same_boxes"] = {
            "n": len(same),
            "human_vs_classifier": {
                c: _agreement([r[c] for r in same], [r["classifier"] for r in same], classes, n_boot, seed)
                for c in cols
            },
        }
        every = [r for r in rows if r[cols[0]] is not None and r[cols[1]] is not None]
        report["alternative"] = {"human_vs_human_all_rows": _human_pair(every, cols, classes, n_boot, seed)}
    report["krippendorff"] = _alphas(rows, cols, classes, n_boot, seed)
    report["confusion"] = {
        "format": CONFUSION_FORMAT,
        "rows": "human (truth)",
        "columns": "classifier",
        "labels": classes,
        "default_column": cols[0],
        "by_human_column": {c: report["human_vs_classifier"][c]["confusion"]["matrix"] for c in cols},
    }
    report["definitions"] = _definitions(cols)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if plot:
        report["plot"] = _plot(report, out / f"verify_{attr}.png").name
    atomic_write_text(out / f"verify_{attr}.json", json.dumps(report, indent=1, sort_keys=True) + "\n")
    _headline(ann, attr, report)
    return report


def _headline(ann: str | os.PathLike[str], attr: str, report: dict[str, Any]) -> None:
    """Copy the headline numbers into ``manifest["attributes"][attr]["verification"]``."""
    keep = ("n", "accuracy", "accuracy_ci", "kappa", "kappa_ci")
    headline = {
        "labels_sha256": report["labels"]["sha256"],
        "rows": report["rows"]["total"],
        "human_vs_classifier": {c: {k: v[k] for k in keep} for c, v in report["human_vs_classifier"].items()},
        "human_vs_human": (
            {k: report["human_vs_human"][k] for k in keep} if report["human_vs_human"] else None
        ),
        "same_boxes": (
            {
                "n": report["same_boxes"]["n"],
                "human_vs_classifier": {
                    c: {k: v[k] for k in keep} for c, v in report["same_boxes"]["human_vs_classifier"].items()
                },
            }
            if report["same_boxes"]
            else None
        ),
        "krippendorff_alpha": {
            name: ({k: v[k] for k in ("alpha", "alpha_ci", "items")} if v else None)
            for name, v in report["krippendorff"].items()
            if name != "level"
        },
        "definitions": report["definitions"],
        "min_side_kappa": {
            c: {str(p["min_side"]): p["kappa"] for p in curve}
            for c, curve in report["min_side"]["curves"].items()
        },
        "bootstrap": report["bootstrap"],
    }
    with layout_lock(ann):  # not while classify rewrites the manifest
        manifest = layout.read_manifest(ann)
        entry = (manifest.get("attributes") or {}).get(attr) or {}
        if entry.get("head_sha256") != report["head_sha256"]:
            raise layout.AnnotationError(
                f"{ann}: the {attr} labels changed while they were verified; run verify again"
            )
        entry["verification"] = headline
        layout.write_manifest(ann, manifest)


def _plot(report: dict[str, Any], path: Path) -> Path:
    """κ and accuracy against the minimum box side, with the box counts; same report, same bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 4.2), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    counts = ax.twinx()
    ts = report["min_side"]["thresholds"]
    width = (ts[1] - ts[0]) * 0.8 / max(1, len(report["min_side"]["curves"])) if len(ts) > 1 else 1.0
    for i, (col, curve) in enumerate(report["min_side"]["curves"].items()):
        nan = float("nan")
        kap = [nan if p["kappa"] is None else p["kappa"] for p in curve]
        acc = [nan if p["accuracy"] is None else p["accuracy"] for p in curve]
        ax.plot(ts, kap, marker="o", label=f"κ ({col} vs classifier)")
        ax.plot(ts, acc, marker="s", linestyle="--", label=f"accuracy ({col} vs classifier)")
        counts.bar(
            [t + i * width for t in ts], [p["n"] for p in curve], width=width, alpha=0.15, color="grey"
        )
    hh = report.get("human_vs_human")
    if hh and hh.get("kappa") is not None:
        ax.axhline(
            hh["kappa"],
            color="#333333",
            linestyle=":",
            linewidth=1,
            label="κ human–human (same boxes, all sizes)",
        )
    ax.set_xlabel("minimum box side (px): boxes at least this small side")
    ax.set_ylabel("agreement")
    counts.set_ylabel("boxes (bars)")
    ax.set_zorder(counts.get_zorder() + 1)
    ax.patch.set_visible(False)
    ax.set_title(f"perceived {report['attribute']}: classifier vs human labels")
    ax.legend(loc="lower right", fontsize="small")
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
    return path
