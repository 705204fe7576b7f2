"""``fairsets annotate caption``: one caption per kept box from a chat model shown the box in red
(:mod:`fairsets.annotate.captions.caption`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fairsets._cli_util import console, die, setup_logging

from .options import check_ann_folder, check_input_file, library_errors, read_prompt


def summary_line(entry: dict[str, Any], ann: Path) -> str:
    """One line: captions by status, tokens, what this run did and its rate."""
    run, counts, name = entry["run"], entry["counts"], entry["captioner"]
    line = f"{name}: {counts['ok']} captions"
    if entry.get("cut_short"):
        line += f" ({entry['cut_short']} cut short at the token limit)"
    line += f", {counts['failed']} failed"
    extra = [f"{counts[s]} {s}" for s in ("refused", "rejected") if counts.get(s)]
    if extra:
        line += ", " + ", ".join(extra)
    if extra or counts["failed"]:
        line += " (see status and reason)"
    tokens = entry["tokens"]
    line += (
        f"; {tokens['prompt']} prompt + {tokens['completion']} completion tokens"
        f"; {run['captioned']} shard(s) captioned, {run['skipped']} already done"
        f" ({run['boxes_asked']} boxes, {run['requests_sent']} requests sent, {run['cache_hits']} cached,"
        f" {run['seconds']:.1f} s, {run['boxes_per_s']:.1f} boxes/s)"
    )
    if counts.get("failed"):
        line += "; run again to ask the failed boxes again"
    if run["pending"]:
        line += f"; {len(run['pending'])} shard(s) have no boxes yet (run annotate persons to finish them)"
    return line + f" → {ann}/captions/{name}/"


def caption_cmd(
    ann: Annotated[Path, typer.Argument(help="The annotation folder (fairsets annotate persons --out).")],
    annotators: Annotated[
        Path,
        typer.Option(
            "--annotators", help="annotators.toml naming the captioner (one annotators.NAME table per model)."
        ),
    ],
    captioner: Annotated[str, typer.Option("--captioner", help="The NAME of the captioning model.")],
    prompt: Annotated[
        str | None, typer.Option("--prompt", help="Text sent with each image (default: the paper's).")
    ] = None,
    prompt_file: Annotated[
        Path | None, typer.Option("--prompt-file", help="A UTF-8 file holding the prompt.")
    ] = None,
    max_retries: Annotated[
        int, typer.Option(help="Retries of a request answered 429/5xx or timing out.")
    ] = 3,
    limit: Annotated[
        int | None, typer.Option(help="Caption only N kept boxes (a seeded sample), to try a captioner.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the --limit sample.")] = 0,
    replace: Annotated[
        bool,
        typer.Option("--replace", help="Caption again when NAME's captions used another model or prompt."),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
) -> None:
    """Describe every kept box of ANN with a chat model shown the whole image, the box framed in red.

    Writes ANN/captions/NAME/{shard}.parquet. A re-run resumes (answers are cached) and asks
    failed boxes again.
    """
    from fairsets.annotate.captions.caption import caption_boxes
    from fairsets.core.progress import Progress
    from fairsets.fetch.chat import ChatServiceError

    setup_logging(False, quiet)
    check_ann_folder(ann)
    check_input_file(annotators, "annotators.toml")
    prompt = read_prompt(prompt, prompt_file)
    try:
        entry = caption_boxes(
            ann,
            annotators,
            captioner,
            prompt=prompt,
            max_retries=max_retries,
            limit=limit,
            seed=seed,
            replace=replace,
            progress=Progress(False if quiet else None),
        )
    except ChatServiceError as exc:
        die(f"{exc}; answers received so far are cached, run again once it is fixed")
    except library_errors() as exc:
        die(exc)
    if not quiet:
        console.print(summary_line(entry, ann), highlight=False, soft_wrap=True, markup=False)


def register(app: typer.Typer) -> None:
    """Add ``caption`` to ``app``."""
    app.command("caption")(caption_cmd)
