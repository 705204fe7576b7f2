"""``fairsets audit transfer``: how much of a model's gender (and race) bias about social
categories the alt-texts of an annotation folder predict (:mod:`fairsets.audit.persons.transfer.run`).

Every input is checked before a model loads (the template, the category file, the exclusions file,
the folder's gender labels and, with ``--race``, its race labels, the probe, the generated-images
layout and the gender head, the output folder), and each problem is one line with its fix and exit
code 2. The summary (the per-group ρ / R² table) is plain text: group names are data, never markup.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fairsets._cli_util import die, setup_logging
from fairsets.audit.cli import MODEL_HELP, PRETRAINED_HELP, check_out, load_vlm_or_die

from ..transfer import DEFAULT_TEMPLATE

__all__ = ["audit_transfer_cmd"]


def _check_race_labels(folder: Path) -> None:
    from ..tables import connect

    con = connect(folder)
    try:
        columns = {row[0] for row in con.execute("DESCRIBE boxes").fetchall()}
    finally:
        con.close()
    if "perceived_race" not in columns:
        raise ValueError(
            f"--race: ANN {folder} has no race labels; run fairsets annotate classify {folder} --head "
            "RACE_HEAD, or leave out --race"
        )


def _check_gender_labels(folder: Path, what: str) -> None:
    from ..tables import connect

    con = connect(folder)
    try:
        columns = {row[0] for row in con.execute("DESCRIBE boxes").fetchall()}
    finally:
        con.close()
    if "perceived_gender" not in columns:
        raise ValueError(
            f"{what} {folder}: no gender labels; run fairsets annotate classify {folder} --head GENDER_HEAD"
        )


def audit_transfer_cmd(
    ann: Annotated[Path, typer.Argument(help="The annotation folder (alt-texts and gender labels).")],
    model: Annotated[str, typer.Option("--model", "-m", help=MODEL_HELP)],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Folder for transfer.json, scatter.png, report.html.")
    ],
    pretrained: Annotated[str | None, typer.Option(help=PRETRAINED_HELP)] = None,
    categories: Annotated[
        Path | None,
        typer.Option(
            "--categories", help="A TOML category file ([kind] categories = [...]); default: shipped."
        ),
    ] = None,
    template: Annotated[
        str, typer.Option(help="Probe prompt; {category} is the category, {a} the article a/an.")
    ] = DEFAULT_TEMPLATE,
    min_count: Annotated[
        int, typer.Option(help="Keep a category named in at least this many single-gender images.", min=1)
    ] = 100,
    exclusions: Annotated[
        Path | None,
        typer.Option(
            "--exclusions",
            help="Innocent-sense phrases masked out of the alt-texts before matching (replaces the "
            "shipped file).",
        ),
    ] = None,
    no_exclusions: Annotated[
        bool, typer.Option("--no-exclusions", help="Mask no phrase before matching.")
    ] = False,
    race: Annotated[
        bool | None,
        typer.Option(
            "--race/--no-race",
            help="Race bias transfer per race group against the rest (default: when ANN has race labels).",
        ),
    ] = None,
    cv_folds: Annotated[
        int | None,
        typer.Option(
            help="Folds of the Chebyshev cross-validation (default: leave-one-out below 50 categories, "
            "else 5).",
            min=2,
        ),
    ] = None,
    probe: Annotated[
        Path | None,
        typer.Option(
            help="Probe images: an annotation folder (its female/male boxes) or a published "
            "dataset with a gender column; default ANN."
        ),
    ] = None,
    probe_attribute: Annotated[str, typer.Option(help="A dataset probe's gender column.")] = "gender",
    max_probe: Annotated[int, typer.Option(help="At most this many probe images per gender.", min=1)] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the probe sample (and of --generate).")] = 0,
    generated: Annotated[
        Path | None,
        typer.Option(help="Generated images: one sub-folder per category, named after it."),
    ] = None,
    gender_head: Annotated[
        Path | None,
        typer.Option("--gender-head", help="A gender head .npz (fairsets annotate train) for --generated."),
    ] = None,
    generate: Annotated[
        str | None,
        typer.Option(
            help="Generate the --generated images first with this diffusers model (folder or hub id; "
            "needs CUDA and diffusers)."
        ),
    ] = None,
    images_per_category: Annotated[
        int, typer.Option(help="Images --generate makes per kept category.", min=1)
    ] = 100,
    steps: Annotated[int, typer.Option(help="Denoising steps for --generate.", min=1)] = 50,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
    batch_size: Annotated[int, typer.Option(help="Images per forward pass.", min=1)] = 32,
    cache_dir: Annotated[
        Path | None,
        typer.Option(help="Embedding cache (default: the probe's own, ANN/.fairsets/embeddings)."),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars or summary.")] = False,
) -> None:
    """Data bias of social categories in the alt-texts vs CLIP (and text-to-image) gender bias, and
    per race group when ANN has race labels: Pearson ρ, R² of the line, Chebyshev gains in-sample and
    cross-validated, a definitions block, a scatter plot and a self-contained report."""
    from fairsets.annotate.cli.options import library_errors
    from fairsets.core.progress import Progress

    from .. import transfer as T
    from ..transfer import run as R
    from ..transfer.data import exclusions_record
    from ..transfer.summary import summary_lines

    setup_logging(False, quiet)
    errors = library_errors()
    head: Any = None
    try:
        R.check_template(template)
        cats = T.load_categories(categories)
        if exclusions is not None and no_exclusions:
            raise ValueError("--exclusions FILE and --no-exclusions contradict each other; give one")
        phrases, _ = exclusions_record(exclusions, use=not no_exclusions)
        _check_gender_labels(ann, "ANN")
        if race:
            _check_race_labels(ann)
        if probe is not None:
            if R.probe_kind(probe) == "annotations":
                _check_gender_labels(probe, "--probe")
            else:
                R.check_probe_dataset(probe, probe_attribute)
        if generate is not None and generated is None:
            raise ValueError("--generate writes into --generated DIR; give the folder")
        if generated is not None and gender_head is None:
            raise ValueError(
                "--generated images are classified with --gender-head HEAD.npz (fairsets annotate train)"
            )
        if gender_head is not None:
            head = R.load_gender_head(gender_head)
        if generated is not None and generate is None:
            R.check_generated(generated, cats)
    except errors as exc:
        die(exc)
    check_out(out, folder=True)
    progress = Progress(False if quiet else None)
    generation = None
    if generate is not None and generated is not None:
        try:
            from ..tables import connect

            con = connect(ann)
            try:
                found = T.data_bias(con, cats, min_count=min_count, exclusions=phrases)
                kept = [r["category"] for r in found["categories"]]
            finally:
                con.close()
            if not kept:
                raise ValueError(
                    f"no category is named in {min_count} single-gender images; nothing to generate"
                )
            generation = R.generate_images(
                generate,
                kept,
                generated,
                template=template,
                per_category=images_per_category,
                seed=seed,
                steps=steps,
                device=device,
                progress=progress,
            )
            R.check_generated(generated, cats)
        except errors as exc:
            die(exc)
    vlm = load_vlm_or_die(model, pretrained, device)
    classify = None
    if head is not None and generated is not None:
        same = (head.encoder, head.pretrained or None) == (model, pretrained or None)
        encoder = vlm if same else load_vlm_or_die(head.encoder, head.pretrained, device)
        classify = R.gender_classifier(head, encoder)
    try:
        doc = R.run_transfer_audit(
            ann,
            vlm,
            out,
            categories=cats,
            categories_source=categories.name if categories else "default",
            template=template,
            min_count=min_count,
            exclusions=exclusions,
            use_exclusions=not no_exclusions,
            race=race,
            cv_folds=cv_folds,
            probe=probe,
            probe_attribute=probe_attribute,
            max_probe=max_probe,
            seed=seed,
            generated=generated,
            classify=classify,
            gender_head=head.describe() if head is not None else None,
            generation=generation,
            batch_size=batch_size,
            cache_dir=cache_dir,
            progress=progress,
        )
    except errors as exc:
        die(exc)
    if quiet:
        return
    for line in summary_lines(doc):
        typer.echo(line)
    typer.echo(f"wrote {out / R.JSON_FILE}, {out / R.PLOT_FILE} and {out / R.REPORT_FILE}")
