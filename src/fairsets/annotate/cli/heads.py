"""``fairsets annotate train``: an attribute head from labelled crops
(:mod:`fairsets.annotate.heads.train`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fairsets._cli_util import die, setup_logging

from .options import (
    check_ann_folder,
    check_input_file,
    checked_device,
    library_errors,
    names_option,
    split_names,
)

if TYPE_CHECKING:
    from fairsets.annotate.heads.train import TrainResult


def _check_out(out: Path) -> None:
    """--out refused before any crop is embedded: a folder, or a path under a file."""
    if out.is_dir():
        die(f"--out {out}: a folder; give the head's file name, e.g. {out / 'gender.npz'}")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                die(f"--out {out}: {parent} is a file, not a folder; choose another path")
            return


def train_cmd(
    labels: Annotated[
        Path,
        typer.Argument(
            help="LABELS: CSV, Parquet or JSONL with shard, key, box_id, label (box_id empty = whole image; "
            "optional x1, y1, x2, y2; other columns ignored)."
        ),
    ],
    encoder: Annotated[
        str,
        typer.Option(
            help="Image encoder: hf:google/siglip-base-patch16-224, ViT-B-32, torchvision:mobilenet_v2, …"
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The head to write (.npz).")],
    pretrained: Annotated[
        str | None, typer.Option(help="The encoder's weights: a tag, a local file, or 'none' (random).")
    ] = None,
    ann: Annotated[
        Path | None, typer.Option(help="Annotation folder: boxes by box_id, shards from its manifest.")
    ] = None,
    shards: Annotated[
        list[str] | None,
        typer.Option(help="Shards (repeatable; globs, folders); boxes then only as x1, y1, x2, y2 columns."),
    ] = None,
    attribute: Annotated[str, typer.Option(help="What the head predicts.")] = "gender",
    classes: Annotated[
        list[str] | None,
        names_option("--classes", "The label set and its order (default: the labels found)"),
    ] = None,
    drop_labels: Annotated[
        list[str] | None, names_option("--drop-labels", "Labels to leave out, e.g. unclear,invalid")
    ] = None,
    split: Annotated[
        str, typer.Option(help="Train, validation, test fractions (by image).")
    ] = "0.7,0.15,0.15",
    seed: Annotated[int, typer.Option(help="Seed of the split and of training.")] = 0,
    batch: Annotated[int, typer.Option(help="Crops per forward pass.")] = 32,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
    finetune: Annotated[
        bool, typer.Option("--finetune", help="Fine-tune the encoder end to end (a GPU is advised).")
    ] = False,
    epochs: Annotated[int, typer.Option(help="Fine-tuning epochs.")] = 3,
    lr: Annotated[float, typer.Option(help="Fine-tuning learning rate of the encoder.")] = 1e-5,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
) -> None:
    """Train a head that predicts ATTRIBUTE from crop embeddings, and test it.

    Crops are embedded once (cached in ANN/.fairsets/embeddings, or beside --out with --shards);
    the split is by image, stratified and seeded; a logistic head with C chosen on the validation
    part, or --finetune. Writes --out, its confusion plot (OUT.confusion.png) and prints the metrics.
    """
    from fairsets.annotate.heads.finetune import FinetuneParams
    from fairsets.annotate.heads.train import parse_split, train_head
    from fairsets.core.progress import Progress

    setup_logging(False, quiet)
    if batch < 1:
        die(f"--batch {batch}: give at least 1 crop per forward pass")
    device = checked_device(device)
    check_input_file(labels, "LABELS file (CSV, Parquet or JSONL with shard, key, box_id, label)")
    if ann is not None:
        check_ann_folder(ann, "--ann")
    _check_out(out)
    try:
        fractions = parse_split(split)
        params = FinetuneParams(epochs=epochs, lr=lr, batch_size=batch) if finetune else None
    except ValueError as exc:
        die(f"{exc}")
    try:
        result = train_head(
            labels,
            encoder=encoder,
            pretrained=pretrained,
            out=out,
            ann=ann,
            shards=shards,
            attribute=attribute,
            classes=split_names(classes, "--classes") or None,
            drop_labels=split_names(drop_labels, "--drop-labels", "unclear,invalid"),
            split=fractions,
            seed=seed,
            batch_size=batch,
            device=device,
            finetune=params,
            progress=Progress(False if quiet else None),
        )
    except library_errors() as exc:
        die(exc)
    if not quiet:
        _print_report(result)


def _print_report(result: TrainResult) -> None:
    from fairsets.annotate.heads.labels import summary_lines
    from fairsets.core.console import DataTable, say, show

    head, m = result.head, result.head.metrics
    for line in summary_lines(result.labels):  # labels, shards and reasons are data: never markup
        say(line, err=True)
    if result.embedded.rejected:
        say(f"{len(result.embedded.rejected)} labelled crop(s) not usable:", err=True)
        for r in result.embedded.rejected[:5]:
            say(f"  row {r['row']} {r['item']}: {r['reason']}", err=True)
    table = DataTable(title=f"{head.attribute} head on the test part ({m['n']} crops)")
    for col in ("class", "precision", "recall", "F1", "support"):
        table.add_column(col, justify="left" if col == "class" else "right")
    for cls, row in m["per_class"].items():
        table.add_row(
            cls, f"{row['precision']:.3f}", f"{row['recall']:.3f}", f"{row['f1']:.3f}", str(row["support"])
        )
    show(table, err=True)
    parts = ", ".join(f"{k} {v}" for k, v in result.parts.items())
    kappa = "undefined" if m["kappa"] is None else f"{m['kappa']:.3f}"
    say(
        f"accuracy {m['accuracy']:.3f}, Cohen's κ {kappa}, macro-F1 {m['macro_f1']:.3f}; "
        f"crops: {parts}; embedded now {result.embedded.computed}; C {head.training['fit'].get('C', '-')}",
        err=True,
    )
    say(
        f"wrote {result.path} (sha256 {head.sha256[:12]}…)" + (f" and {result.plot}" if result.plot else ""),
        err=True,
    )


def register(app: typer.Typer) -> None:
    """Add ``train`` to ``app``."""
    app.command("train")(train_cmd)
