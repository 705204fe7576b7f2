"""``fairsets annotate persons``: person boxes over image–text shards
(:mod:`fairsets.annotate.boxes.persons`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fairsets._cli_util import die, setup_logging

from .options import DevicesOption, GpusPerTaskOption


def persons_cmd(
    shards: Annotated[
        list[str],
        typer.Argument(
            help="Shards: .tar files, globs ('shards/*.tar'), brace ranges ('shards/{00000..00099}.tar'), "
            "folders, a published fairsets dataset, or listings of local images (Parquet, CSV, JSONL)."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The annotation folder (a re-run resumes it).")],
    model: Annotated[
        str,
        typer.Option(
            help="YOLO weights: a local .pt, hf:org/repo/file.pt, or a file in the fairsets YOLO cache."
        ),
    ] = "yolo11l.pt",
    conf: Annotated[float, typer.Option(help="Minimum detection confidence.")] = 0.25,
    min_side: Annotated[
        float, typer.Option(help="Boxes with a shorter side under this (px) are kept=false.")
    ] = 30,
    imgsz: Annotated[int, typer.Option(help="Inference size in pixels.")] = 640,
    batch: Annotated[int, typer.Option(help="Images per forward pass.")] = 16,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
    devices: DevicesOption = None,
    gpus_per_task: GpusPerTaskOption = None,
    person_classes: Annotated[
        str | None,
        typer.Option(help="Comma-separated class names of the model that are persons (default: person)."),
    ] = None,
    workers: Annotated[int, typer.Option(help="Worker processes (local) or CPUs (ray); 0 = inline.")] = 1,
    executor: Annotated[str, typer.Option(help="local or ray.")] = "local",
    ray_address: Annotated[str | None, typer.Option(help="Address of an existing Ray cluster.")] = None,
    retry_failed: Annotated[
        bool, typer.Option("--retry-failed", help="Detect again the shards that have failed images.")
    ] = False,
    deny: Annotated[
        Path | None,
        typer.Option(
            "--deny",
            metavar="FILE",
            help="A deny list (one URL or URL sha256 a line): those images are rejected, never detected, "
            "and none of their data is kept.",
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
) -> None:
    """Detect every person in every image of SHARDS into OUT: boxes, image rows, manifest.

    A re-run resumes; a re-run with only another --min-side re-derives kept without detecting.
    """
    from fairsets.annotate.boxes.persons import annotate_persons, summary_line
    from fairsets.core.progress import Progress

    from .options import checked_device, checked_devices, library_errors, split_names

    setup_logging(False, quiet)
    classes = None
    if person_classes is not None:
        classes = split_names(person_classes, "--person-classes", "person")
    device = checked_device(device)
    device_list = checked_devices(devices)
    try:
        manifest = annotate_persons(
            shards,
            out,
            model=model,
            conf=conf,
            min_side=min_side,
            imgsz=imgsz,
            batch=batch,
            device=device,
            person_classes=classes,
            workers=workers,
            executor=executor,
            ray_address=ray_address,
            retry_failed=retry_failed,
            deny=deny,
            progress=Progress(False if quiet else None),
            devices=device_list,
            gpus_per_task=gpus_per_task,
        )
    except library_errors() as exc:
        # the library names its parameter; the command, its option
        die(str(exc).replace("with person_classes", "with --person-classes"))
    if not quiet:
        from fairsets.core.console import say

        say(summary_line(manifest, out), err=True)  # paths and shard names: never markup


def register(app: typer.Typer) -> None:
    """Add ``persons`` to ``app``."""
    app.command("persons")(persons_cmd)
