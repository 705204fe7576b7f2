"""``fairsets audit vlm`` and ``fairsets audit utility``: audit models on a published dataset.

:mod:`fairsets.cli` adds :data:`audit_app` as the ``audit`` group (with the annotation-folder
audits, ``persons`` and ``transfer``, from :mod:`fairsets.audit.persons.cli`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fairsets._cli_util import die, setup_logging

from .checks import MODEL_HELP, PRETRAINED_HELP, check_dataset, check_out, load_vlm_or_die

audit_app = typer.Typer(help="Audit models on a published dataset.", no_args_is_help=True)


def _check_groups(
    dataset: Path, variant: str | None, splits: list[str] | None, attribute: str, groups: str | None
) -> list[str] | None:
    """``--groups`` parsed, and (before any model loads) every value present among the declared
    groups; one line and exit 2 otherwise."""
    from fairsets.audit.dataset import DatasetError, open_dataset
    from fairsets.audit.reference import check_labels, parse_groups, present_values, resolve_reference

    try:
        names = parse_groups(groups) if groups is not None else None
        ds = open_dataset(dataset)
        name = variant or ds.default_variant()
        present = present_values(
            ds.root, name, list(splits) if splits else ds.default_splits(name), attribute
        )
        check_labels(resolve_reference(ds.root, attribute, names, present), present, attribute)
    except (DatasetError, ValueError) as exc:
        die(exc)
    return names


@audit_app.command("vlm")
def audit_vlm_cmd(
    dataset: Annotated[Path, typer.Argument(help="A published dataset folder (fairsets build --out).")],
    model: Annotated[str, typer.Option("--model", "-m", help=MODEL_HELP)],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for audit.json and report.html.")],
    pretrained: Annotated[str | None, typer.Option(help=PRETRAINED_HELP)] = None,
    attribute: Annotated[str, typer.Option(help="Metadata column whose groups are compared.")] = "state",
    k: Annotated[int, typer.Option("--k", help="Top-k retrieval size.", min=1)] = 500,
    prompts: Annotated[
        Path | None,
        typer.Option(help="Prompt file (TOML/JSON sets, or .txt one per line); default: the paper's."),
    ] = None,
    job_prompts: Annotated[
        tuple[str, str] | None,
        typer.Option(
            "--job-prompts",
            help="Job simulation: POSITIVE NEGATIVE (default 'Indian candidate' 'foreign candidate').",
        ),
    ] = None,
    variant: Annotated[str | None, typer.Option(help="Dataset variant (default balanced).")] = None,
    split: Annotated[
        list[str] | None, typer.Option("--split", help="Split(s) to evaluate (default test, else all).")
    ] = None,
    debias: Annotated[
        Path | None,
        typer.Option("--debias", help="A debias transform (fairsets debias fit) to evaluate too."),
    ] = None,
    groups: Annotated[
        str | None,
        typer.Option(
            "--groups",
            help="The expected groups, a,b,c: the reference set of the JSD and the std (default: the "
            "recipe's cells in DATASET/manifest.json, empty ones included).",
        ),
    ] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
    batch_size: Annotated[int, typer.Option(help="Images per forward pass.", min=1)] = 32,
    cache_dir: Annotated[
        Path | None, typer.Option(help="Embedding cache (default DATASET/.fairsets/embeddings).")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars or summary.")] = False,
) -> None:
    """Top-k group distributions, JSD from uniform, per-group similarity, robustness, job simulation.

    The groups are the declared ones (--groups, else the recipe's cells): a declared group with no
    image counts as zero retrievals and is named in the output."""
    import dataclasses

    from fairsets.audit.dataset import DatasetError
    from fairsets.audit.prompts import default_prompts, load_prompts
    from fairsets.audit.vlm import AUDIT_FILE, REPORT_FILE, run_vlm_audit
    from fairsets.core.progress import Progress
    from fairsets.core.step import MissingDependency

    setup_logging(False, quiet)
    try:
        spec = load_prompts(prompts) if prompts else default_prompts()
        if job_prompts:
            spec = dataclasses.replace(spec, job=(job_prompts[0], job_prompts[1]))
    except (OSError, ValueError) as exc:
        die(exc)
    check_dataset(dataset, variant, split, attribute, prefer="test")
    declared = _check_groups(dataset, variant, split, attribute, groups)
    check_out(out, folder=True)
    if debias is not None:
        from fairsets.debias.transform import DebiasTransform

        try:
            DebiasTransform.load(debias)
        except (OSError, ValueError) as exc:
            die(exc)
    vlm = load_vlm_or_die(model, pretrained, device)
    try:
        doc = run_vlm_audit(
            dataset,
            vlm,
            attribute=attribute,
            k=k,
            out=out,
            prompts=spec,
            variant=variant,
            splits=split,
            transform=debias,
            groups=declared,
            batch_size=batch_size,
            cache_dir=cache_dir,
            progress=Progress(False if quiet else None),
        )
    except (DatasetError, MissingDependency, ValueError, OSError) as exc:
        die(exc)
    if quiet:
        return
    from fairsets.core.console import DataTable, show

    title = f"{doc['model_id']} on {doc['dataset']} ({doc['variant']}/{','.join(doc['splits'])})"
    table = DataTable(title=title)  # model ids, paths and prompts are data: never markup
    for col in ("prompt", "embeddings", f"JSD top-{doc['k']}", "std of group means", "mean sim"):
        table.add_column(col)
    for r in doc["results"]:
        if r["primary"]:
            m = r["metrics"]
            table.add_row(
                r["prompt"],
                r["embeddings"],
                f"{m['jsd_uniform']:.4f}",
                "undefined (empty group)"
                if m["mean_similarity_std"] is None
                else f"{m['mean_similarity_std']:.4f}",
                f"{m['mean_similarity']:.4f}",
            )
    show(table)
    ref = doc["reference"]
    typer.echo(f"reference set: {len(doc['groups'])} {attribute} group(s) from {ref['source']}")
    for warning in doc.get("warnings") or []:
        typer.echo(f"warning: {warning}")
    if doc.get("skipped"):
        typer.echo(f"{len(doc['skipped'])} image(s) skipped (see audit.json 'skipped')")
    typer.echo(f"wrote {out / AUDIT_FILE} and {out / REPORT_FILE}")


@audit_app.command("utility")
def audit_utility_cmd(
    data: Annotated[Path, typer.Argument(help="Labelled images: a folder of class folders, or Parquet.")],
    model: Annotated[str, typer.Option("--model", "-m", help=MODEL_HELP)],
    pretrained: Annotated[str | None, typer.Option(help=PRETRAINED_HELP)] = None,
    debias: Annotated[
        Path | None, typer.Option("--debias", help="A debias transform to compare with.")
    ] = None,
    template: Annotated[str, typer.Option(help="Class prompt template.")] = "a photo of a {}.",
    k: Annotated[
        list[int] | None, typer.Option("--k", help="recall@k values; repeat (default 1 5 10).")
    ] = None,
    label_column: Annotated[str, typer.Option(help="Parquet label column.")] = "label",
    image_column: Annotated[str, typer.Option(help="Parquet image column.")] = "image",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write utility.json here.")] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """Zero-shot accuracy and text-to-image recall@k, before vs after debiasing."""
    import json

    from fairsets.audit.utility import evaluate_utility
    from fairsets.core.atomic import atomic_write_text
    from fairsets.core.progress import Progress
    from fairsets.debias.transform import DebiasTransform

    setup_logging(False, quiet)
    try:
        transform = DebiasTransform.load(debias) if debias else None
    except (OSError, ValueError) as exc:
        die(exc)
    from fairsets.audit.utility import iter_labelled

    try:  # the data's shape (and its first image) before any model loads
        first = next(iter_labelled(data, label_column=label_column, image_column=image_column), None)
    except (OSError, ValueError) as exc:
        die(exc)
    if first is None:
        die(f"{data}: no labelled image found; give a folder of class sub-folders of images, or Parquet")
    check_out(out, folder=True)
    vlm = load_vlm_or_die(model, pretrained, device)
    try:
        res = evaluate_utility(
            vlm,
            data,
            transform=transform,
            template=template,
            ks=k or (1, 5, 10),
            label_column=label_column,
            image_column=image_column,
            progress=Progress(False if quiet else None),
        )
    except (ValueError, OSError) as exc:
        die(exc)
    text = json.dumps(res, indent=2, ensure_ascii=False) + "\n"
    if out:
        atomic_write_text(out / "utility.json", text)
    from fairsets.core.console import DataTable, show

    table = DataTable(title=f"{res['model_id']}: {res['n_images']} images, {len(res['classes'])} classes")
    table.add_column("metric")
    table.add_column("original")
    if "debiased" in res:
        table.add_column("debiased")
        table.add_column("drop")
    for name, value in res["original"].items():
        row = [name, f"{value:.4f}"]
        if "debiased" in res:
            row += [f"{res['debiased'][name]:.4f}", f"{res['drop'][name]:+.4f}"]
        table.add_row(*row)
    show(table)
    if res["skipped"]:
        typer.echo(
            f"{len(res['skipped'])} item(s) skipped: {res['skipped'][0]['id']}: {res['skipped'][0]['reason']}"
        )
