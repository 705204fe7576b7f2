"""``fairsets annotate verify``: agreement of the perceived-attribute labels with human labels."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fairsets._cli_util import die, setup_logging

from .options import check_ann_folder, check_input_file, names_option, split_names


def _fmt(value: float | None, ci: list[float] | None = None) -> str:
    if value is None:
        return "undefined"
    return f"{value:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _summary(rep: dict[str, Any], out: Path) -> None:
    from fairsets.core.console import DataTable, show

    hh, same = rep["human_vs_human"], rep.get("same_boxes")
    if hh and same:  # the ceiling comparison: every row over the same boxes
        table = DataTable(
            title=f"perceived {rep['attribute']}: agreement over the same {same['n']} boxes "
            "(both humans and the classifier labelled them; 95% bootstrap intervals)"
        )
        for col in ("raters", "boxes", "accuracy", "Cohen's κ"):
            table.add_column(col)
        pair = " vs ".join(hh["columns"])
        table.add_row(
            pair, str(hh["n"]), _fmt(hh["accuracy"], hh["accuracy_ci"]), _fmt(hh["kappa"], hh["kappa_ci"])
        )
        for col, r in same["human_vs_classifier"].items():
            table.add_row(
                f"{col} vs classifier",
                str(r["n"]),
                _fmt(r["accuracy"], r["accuracy_ci"]),
                _fmt(r["kappa"], r["kappa_ci"]),
            )
        show(table)
    table = DataTable(
        title=f"perceived {rep['attribute']}: each human vs the classifier, every box it labelled"
    )
    for col in ("raters", "boxes", "accuracy", "Cohen's κ"):
        table.add_column(col)
    for col, r in rep["human_vs_classifier"].items():
        table.add_row(
            f"{col} vs classifier",
            str(r["n"]),
            _fmt(r["accuracy"], r["accuracy_ci"]),
            _fmt(r["kappa"], r["kappa_ci"]),
        )
    alt = (rep.get("alternative") or {}).get("human_vs_human_all_rows")
    if alt:
        table.add_row(
            " vs ".join(alt["columns"]) + " (every row, alternative)",
            str(alt["n"]),
            _fmt(alt["accuracy"], alt["accuracy_ci"]),
            _fmt(alt["kappa"], alt["kappa_ci"]),
        )
    show(table)
    for name, a in (rep.get("krippendorff") or {}).items():
        if isinstance(a, dict):
            who = "humans" if name == "humans" else "humans and classifier"
            typer.echo(
                f"Krippendorff's α (nominal), {who}: {_fmt(a['alpha'], a['alpha_ci'])} over "
                f"{a['items']} rows with two or more answers"
            )
    rows = rep["rows"]
    skipped = {k: rows[k] for k in ("not_found", "not_kept", "unlabelled") if rows[k]}
    if skipped:
        said = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in skipped.items())
        typer.echo(f"{said} of {rows['total']} label rows (listed in the report)")
    typer.echo(
        f"wrote {out / ('verify_' + rep['attribute'] + '.json')}"
        + (f" and {out / rep['plot']}" if rep.get("plot") else "")
        + " (definitions of every number inside)"
    )


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def _box_summary(rep: dict[str, Any], out: Path) -> None:
    from fairsets.core.console import DataTable, show

    img, box = rep["per_image"], rep["per_box"]
    n = rep["images"]["audited"]
    table = DataTable(title=f"person detection vs human boxes: {n} images, IoU ≥ {rep['iou_threshold']:g}")
    for col in ("", "images", "boxes"):
        table.add_column(col)
    table.add_row(
        "correct",
        f"{_pct(img['correct']['share'])} ({img['correct']['images']})",
        f"{_pct(box['correct_rate'])} of {box['human_boxes']} human boxes matched",
    )
    table.add_row(
        "false positive",
        f"{_pct(img['with_false_positive'])} with one or more",
        f"{_pct(box['false_positive_rate'])} of {box['predicted_boxes']} predicted boxes",
    )
    table.add_row(
        "missed",
        f"{_pct(img['with_missed'])} with one or more",
        f"{_pct(box['missed_rate'])} of {box['human_boxes']} human boxes",
    )
    show(table)
    size = ", ".join(
        f"{name}: missed {_pct(s['missed_rate'])}, false positive {_pct(s['false_positive_rate'])}"
        for name, s in rep["by_size"].items()
    )
    typer.echo(f"by box size (COCO px² classes): {size}")
    left = rep["images"]["not_found"] + rep["images"]["not_ok"]
    if left:
        typer.echo(f"{left} of {rep['images']['in_file']} images left out (not in the folder or not ok)")
    typer.echo(f"wrote {out / 'verify_boxes.json'} (definitions of every number inside)")


def _only_attribute(ann: Path) -> str:
    """The attribute ANN holds labels of, when --attribute is not given: there must be exactly one."""
    from fairsets.annotate.layout import AnnotationError, read_manifest

    try:
        labelled = sorted(read_manifest(ann).get("attributes") or {})
    except AnnotationError as exc:
        die(exc)
    if len(labelled) == 1:
        return labelled[0]
    if not labelled:
        die(f"{ann}: no labels to verify; run fairsets annotate classify {ann} --head HEAD.npz first")
    die(f"{ann} holds labels of {', '.join(labelled)}: name the one the humans labelled with --attribute")


def verify_cmd(
    ann: Annotated[Path, typer.Argument(help="The annotation folder (annotate classify has labelled it).")],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Folder for verify_ATTR.json, verify_ATTR.png, verify_boxes.json."),
    ],
    human: Annotated[
        Path | None,
        typer.Option("--human", help="CSV: shard, key, box_id and 1–2 human label columns (audits labels)."),
    ] = None,
    attribute: Annotated[
        str | None,
        typer.Option(
            "--attribute",
            "-a",
            help="The attribute labelled, e.g. gender (default: the one ANN holds labels of, if only one).",
        ),
    ] = None,
    human_col: Annotated[
        list[str] | None,
        names_option(
            "--human-col",
            "The human label columns, one or two (default: the columns other than shard, key, box_id)",
            "<columns>",
        ),
    ] = None,
    drop_labels: Annotated[
        list[str] | None, names_option("--drop-labels", "Human labels to leave out, e.g. unclear,invalid")
    ] = None,
    min_sides: Annotated[
        str,
        typer.Option("--min-sides", help="Minimum box sides (px) of the agreement curve, comma-separated."),
    ] = "0,10,20,30,40,50,60,70,80,90,100",
    bootstrap: Annotated[int, typer.Option(help="Bootstrap resamples for the 95% intervals.", min=0)] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
    no_plot: Annotated[bool, typer.Option("--no-plot", help="Skip the PNG (no matplotlib needed).")] = False,
    boxes: Annotated[
        Path | None,
        typer.Option(
            "--boxes",
            help="CSV of the persons humans drew: shard, key, x1, y1, x2, y2 (px; an image with no person: "
            "one row, coordinates blank). Audits the detection: correct / false positive / missed.",
        ),
    ] = None,
    iou: Annotated[float, typer.Option("--iou", help="IoU a detected box needs to match a human box.")] = 0.5,
    all_detections: Annotated[
        bool,
        typer.Option("--all-detections", help="Audit every detected box, not only the kept ones (--boxes)."),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary.")] = False,
) -> None:
    """Classifier labels vs human labels (κ, Krippendorff's α, by box size); boxes vs human boxes."""
    from fairsets.annotate.heads.verify import verify_labels
    from fairsets.annotate.layout import AnnotationError
    from fairsets.core.atomic import LayoutBusy

    setup_logging(False, quiet)
    if human is None and boxes is None:
        die(
            "nothing to verify: give --human LABELS.csv (attribute labels), "
            "--boxes BOXES.csv (person boxes), or both"
        )
    if not 0.0 < iou <= 1.0:
        die(f"--iou {iou}: give an IoU threshold in (0, 1], e.g. 0.5")
    try:
        thresholds = [
            float(x) if "." in x else int(x) for x in (s.strip() for s in min_sides.split(",")) if x
        ]
    except ValueError:
        die(f"--min-sides {min_sides!r}: give pixel sizes separated by commas, e.g. 0,10,20,30")
    if not thresholds:
        die("--min-sides is empty: give pixel sizes separated by commas, e.g. 0,10,20,30")
    check_ann_folder(ann)
    for path, what in (
        (human, "human labels (shard, key, box_id, label columns)"),
        (boxes, "human boxes (shard, key, x1, y1, x2, y2)"),
    ):
        if path is not None:
            check_input_file(path, f"CSV of {what}")
            if not path.is_file():
                die(f"{path}: no such file; give the CSV of {what}")
    if out.exists() and not out.is_dir():
        die(f"{out}: a file is where the output folder must be; choose another --out")
    if boxes is not None:
        from fairsets.annotate.boxes.detection_audit import audit_detection

        try:
            box_rep = audit_detection(ann, boxes, out_dir=out, iou=iou, all_detections=all_detections)
        except (AnnotationError, OSError) as exc:
            die(exc)
        if not quiet:
            _box_summary(box_rep, out)
    if human is None:
        return
    if attribute is None:
        attribute = _only_attribute(ann)
    try:
        rep = verify_labels(
            ann,
            human,
            attribute=attribute,
            out_dir=out,
            human_cols=split_names(human_col, "--human-col", "rater_a,rater_b") or None,
            drop_labels=split_names(drop_labels, "--drop-labels", "unclear,invalid"),
            thresholds=thresholds,
            n_boot=bootstrap,
            seed=seed,
            plot=not no_plot,
        )
    except (AnnotationError, LayoutBusy, OSError) as exc:
        die(exc)
    if not quiet:
        _summary(rep, out)


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command("verify")(verify_cmd)
