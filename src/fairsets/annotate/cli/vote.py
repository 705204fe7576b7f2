"""``fairsets annotate vote``: consensus labels from several chat-model annotators
(:mod:`fairsets.annotate.vote`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fairsets._cli_util import console, die, setup_logging

from .options import check_ann_folder, check_input_file, library_errors, names_option, split_names

if TYPE_CHECKING:
    from fairsets.annotate.vote.run import VoteResult


def summary_line(result: VoteResult, attribute: str) -> str:
    """One line: boxes voted and kept per label, κ, what this run sent and where the files are."""
    stats, run = result.stats, result.run
    kept = ", ".join(f"{n} {lab}" for lab, n in stats["counts"]["kept"].items() if n)
    kappa = stats.get("fleiss_kappa")
    line = (
        f"{attribute}: {stats['items']} boxes voted by {len(stats['annotators'])} annotators, "
        f"{result.kept} kept ({kept or 'none'}), {stats['no_consensus']} without consensus"
    )
    if stats.get("relaxed"):
        line += f" ({stats['relaxed']} kept by a relaxed rule)"
    floor = stats.get("min_confidence")
    if floor:
        low, none = (sum(floor[k].values()) for k in ("low_confidence", "no_confidence"))
        line += (
            f"; answers counted only with confidence ≥ {floor['threshold']:g}: {low} under it and "
            f"{none} without a confidence did not count"
        )
    line += f"; Fleiss' κ {kappa:.3f}" if kappa is not None else "; Fleiss' κ undefined"
    rate = result.requests_sent / result.seconds if result.seconds > 0 else 0.0
    line += (
        f"; {result.requests_sent} requests sent ({rate:.1f}/s), {result.cache_hits} cached,"
        f" {run['prompt_tokens']} prompt + {run['completion_tokens']} completion tokens"
    )
    if result.pending:
        line += f"; {len(result.pending)} boxes pending (a request failed: run again to ask them)"
    if result.rejected:
        line += f"; {len(result.rejected)} boxes without an image (see {result.agreement.name})"
    return (
        line + f" → {result.votes} (+ {result.answers.name}, {result.agreement.name}, {result.report.name})"
    )


def vote_cmd(
    ann: Annotated[Path, typer.Argument(help="The annotation folder (fairsets annotate persons --out).")],
    attribute: Annotated[str, typer.Option("--attribute", help="gender or race.")],
    annotators: Annotated[
        Path,
        typer.Option(
            "--annotators", help="annotators.toml: one annotators.NAME table per model (2 or more)."
        ),
    ],
    sample: Annotated[int, typer.Option("--sample", help="Kept boxes to ask about (a seeded sample).")],
    out: Annotated[
        Path, typer.Option("--out", help="The VOTES labels file to write (.csv, .parquet or .jsonl).")
    ],
    voters: Annotated[
        list[str] | None,
        names_option(
            "--voters",
            "The annotators.NAME tables that vote, 2 or more (default: every table of the file)",
            metavar="NAME,NAME",
        ),
    ] = None,
    per_class_cap: Annotated[int, typer.Option(help="Consensus boxes kept per label at most.")] = 25_000,
    view: Annotated[
        str, typer.Option(help="crop (the box) or redbox (the whole image, the box framed in red).")
    ] = "crop",
    seed: Annotated[int, typer.Option(help="Seed of the sample, the option order and the cap.")] = 0,
    relax: Annotated[
        list[str] | None,
        typer.Option(
            "--relax",
            metavar="LABEL=K|none",
            help="Also keep LABEL when K annotators voted it and no other label as many "
            "(repeatable; default for gender: mixed=2; none: every annotator must agree).",
        ),
    ] = None,
    min_vote_confidence: Annotated[
        float | None,
        typer.Option(
            "--min-vote-confidence",
            metavar="P",
            help="An answer counts toward consensus only when the model's probability of its letter "
            "is at least P (0-1; needs logprobs = true in annotators.toml; an answer without a "
            "probability does not count).",
        ),
    ] = None,
    keywords: Annotated[
        Path | None,
        typer.Option("--keywords", help="Race keyword file (TOML) recalling candidates by alt-text."),
    ] = None,
    max_retries: Annotated[
        int, typer.Option(help="Retries of a request answered 429/5xx or timing out.")
    ] = 3,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
) -> None:
    """Ask several chat models about a sample of kept boxes and keep the labels they agree on.

    Writes VOTES (a LABELS table for fairsets annotate train) and beside it STEM.answers.parquet,
    STEM.agreement.json (κ, counts, run) and STEM.report.html. A re-run answers from the cache and
    asks only what failed.
    """
    from fairsets.annotate.vote.prompts import ATTRIBUTES
    from fairsets.annotate.vote.run import parse_relax, vote_boxes
    from fairsets.core.progress import Progress
    from fairsets.fetch.chat import ChatServiceError

    setup_logging(False, quiet)
    if attribute not in ATTRIBUTES:
        die(f"--attribute {attribute!r}: unknown attribute; use {' or '.join(ATTRIBUTES)}")
    check_ann_folder(ann)
    check_input_file(annotators, "annotators.toml")
    if not annotators.exists() and annotators.suffix.lower() != ".toml" and "/" not in str(annotators):
        die(
            f"--annotators {annotators}: no such file; --annotators takes the annotators.toml file, "
            "choose the tables that vote with --voters "
            f"(e.g. --annotators annotators.toml --voters {annotators})"
        )
    chosen = split_names(voters, "--voters", "qwen,internvl,gpt")
    if keywords is not None:
        check_input_file(keywords, "race keyword file (TOML)")
    if out.is_dir():
        die(f"--out {out}: a folder; give the VOTES file to write, e.g. {out / 'votes.parquet'}")
    if sample < 1:
        die(f"--sample {sample}: give the number of boxes to ask about (1 or more)")
    if per_class_cap < 1:
        die(f"--per-class-cap {per_class_cap}: give the most boxes to keep per label (1 or more)")
    if max_retries < 0:
        die(f"--max-retries {max_retries}: give 0 or more")
    if min_vote_confidence is not None and not 0.0 <= min_vote_confidence <= 1.0:
        die(
            f"--min-vote-confidence {min_vote_confidence:g}: give a probability from 0 to 1 "
            "(e.g. 0.8: an answer counts when the model gave its letter at least 80 %)"
        )
    try:
        rules = parse_relax(relax, attribute)
    except ValueError as exc:
        die(exc)
    try:
        result = vote_boxes(
            ann,
            attribute=attribute,
            annotators=annotators,
            voters=chosen or None,
            sample=sample,
            out=out,
            per_class_cap=per_class_cap,
            view=view,
            seed=seed,
            relax=rules,
            min_vote_confidence=min_vote_confidence,
            keywords=keywords,
            max_retries=max_retries,
            progress=Progress(False if quiet else None),
        )
    except ChatServiceError as exc:
        die(str(exc))
    except library_errors() as exc:
        die(exc)
    if not quiet:
        console.print(summary_line(result, attribute), highlight=False, soft_wrap=True, markup=False)


def register(app: typer.Typer) -> None:
    """Add ``vote`` to ``app``."""
    app.command("vote")(vote_cmd)
