"""``fairsets annotate classify``: a perceived-attribute head applied to every kept box
(:mod:`fairsets.annotate.heads.classify`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fairsets._cli_util import die, setup_logging

from .options import (
    DevicesOption,
    GpusPerTaskOption,
    check_ann_folder,
    check_input_file,
    checked_device,
    checked_devices,
    library_errors,
)


def summary_line(entry: dict[str, Any], attr: str, ann: Path) -> str:
    """One line: boxes labelled per class, unlabelled ones, what this run did and its rate."""
    run = entry["run"]
    counts = ", ".join(f"{n} {c}" for c, n in entry["counts"].items())
    line = f"{attr}: {entry['labelled']} boxes labelled ({counts})"
    if entry["unlabelled"]:
        line += f", {entry['unlabelled']} without a label (see {attr}_reason)"
    line += (
        f"; {run['classified']} shard(s) classified, {run['skipped']} already done"
        f" ({run['boxes_classified']} boxes in {run['seconds']:.1f} s, {run['boxes_per_s']:.1f} boxes/s)"
    )
    if run["pending"]:
        line += f"; {len(run['pending'])} shard(s) have no boxes yet (run annotate persons to finish them)"
    return line + f" → {ann}/attributes/{attr}/"


def classify_cmd(
    ann: Annotated[Path, typer.Argument(help="The annotation folder (fairsets annotate persons --out).")],
    head: Annotated[Path, typer.Option("--head", help="A head .npz from fairsets annotate train.")],
    batch: Annotated[int, typer.Option(help="Crops per forward pass of the encoder.")] = 64,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
    devices: DevicesOption = None,
    gpus_per_task: GpusPerTaskOption = None,
    workers: Annotated[int, typer.Option(help="Worker processes (local) or CPUs (ray); 0 = inline.")] = 1,
    executor: Annotated[str, typer.Option(help="local or ray.")] = "local",
    ray_address: Annotated[str | None, typer.Option(help="Address of an existing Ray cluster.")] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Relabel every box when ANN holds labels of another head.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
) -> None:
    """Label every kept box of ANN with a head: perceived_ATTR and one probability per class.

    A re-run with the same head resumes; another head's labels are replaced only with --replace.
    """
    from fairsets.annotate.heads.classify import classify_boxes
    from fairsets.core.progress import Progress

    setup_logging(False, quiet)
    device = checked_device(device)
    device_list = checked_devices(devices)
    check_ann_folder(ann)
    check_input_file(head, "head .npz from fairsets annotate train")
    try:
        entry = classify_boxes(
            ann,
            head,
            batch=batch,
            device=device,
            workers=workers,
            executor=executor,
            ray_address=ray_address,
            replace=replace,
            progress=Progress(False if quiet else None),
            devices=device_list,
            gpus_per_task=gpus_per_task,
        )
    except library_errors() as exc:
        die(exc)
    if not quiet:
        from fairsets.core.console import say

        say(summary_line(entry, entry["attribute"], ann), err=True)  # labels and paths: never markup


def register(app: typer.Typer) -> None:
    """Add ``classify`` to ``app``."""
    app.command("classify")(classify_cmd)
