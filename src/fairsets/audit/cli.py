"""``fairsets audit`` (audit models on a published dataset: ``vlm``, ``utility``; the audits of
annotation folders, ``persons`` and ``transfer``, are in :mod:`fairsets.audit.persons.cli`) and
``fairsets card`` (add an audit's tables to a dataset card).

:mod:`fairsets.cli` adds :data:`audit_app` and :data:`card_app` as the ``audit`` and ``card`` groups.
The checks that fail before any work or model load (:func:`check_out`, :func:`check_dataset`,
:func:`load_vlm_or_die`) and the model options' help are shared with ``fairsets debias``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fairsets._cli_util import die, setup_logging

audit_app = typer.Typer(help="Audit models on a published dataset.", no_args_is_help=True)

MODEL_HELP = (
    "Model: an open_clip name (ViT-B-32, hf-hub:ORG/NAME) or hf:HUB_ID / hf:LOCAL_DIR for transformers."
)
PRETRAINED_HELP = (
    "Weights: an open_clip tag (openai, laion2b_s34b_b79k, ...) or a local weights file; "
    "'none' = random weights (tests, dry runs)."
)


def check_out(out: Path | None, *, folder: bool) -> None:
    """Fail before any work when OUT cannot be written as a folder (or as a file)."""
    if out is None:
        return
    if folder:
        blocked = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
        if blocked is not None:
            die(f"{blocked}: a file is where the output folder {out} must be; choose another --out")
    elif out.is_dir():
        die(f"{out}: a folder, but the output is a file; choose a file name for --out")
    elif out.parent.exists() and not out.parent.is_dir():
        die(f"{out.parent}: a file, not a folder; choose another --out")


def check_dataset(
    dataset: Path,
    variant: str | None,
    splits: list[str] | None,
    attribute: str,
    prefer: str,
    min_groups: int = 0,
) -> None:
    """Fail before any model loads: DATASET must be a published dataset whose variant and splits
    exist, hold samples and have the ATTRIBUTE column (with at least ``min_groups`` values)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fairsets.audit.dataset import DatasetError, open_dataset

    try:
        ds = open_dataset(dataset)
        name = variant or ds.default_variant()
        chosen = list(splits) if splits else ds.default_splits(name, prefer=prefer)
        have = ds.splits(name)
        missing = [s for s in chosen if s not in have]
        if missing:
            raise DatasetError(
                f"{dataset}: variant {name!r} has no split {missing[0]!r} (splits: {', '.join(have)}); "
                "choose one with --split"
            )
        rows = 0
        for split in chosen:
            path = ds.root / "metadata" / name / f"{split}.parquet"
            try:
                meta = pq.read_metadata(path)
                columns = pq.read_schema(path).names
            except (pa.ArrowException, OSError) as exc:
                why = " ".join(str(exc).split())
                raise DatasetError(f"{path}: not readable Parquet ({why}); rebuild the dataset") from None
            if attribute not in columns:
                raise DatasetError(
                    f"{path}: no column {attribute!r} (columns: {', '.join(columns)}); choose one with "
                    "--attribute"
                )
            rows += meta.num_rows
        if rows == 0:
            raise DatasetError(
                f"{dataset}: {name}/{'+'.join(chosen)} holds no samples; choose another --variant or --split"
            )
        if min_groups:
            groups: set[Any] = set()
            for split in chosen:
                path = ds.root / "metadata" / name / f"{split}.parquet"
                column = pq.read_table(path, columns=[attribute]).column(0)
                groups.update(column.drop_null().unique().to_pylist())
            if len(groups) < min_groups:
                raise DatasetError(
                    f"{dataset}: {attribute!r} has {len(groups)} group(s) in {name}/{'+'.join(chosen)}; "
                    f"need at least {min_groups}: choose another --attribute or --split"
                )
    except DatasetError as exc:
        die(exc)


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


def load_vlm_or_die(model: str, pretrained: str | None, device: str) -> Any:
    """The model, or one line saying why it cannot load (exit 2)."""
    from fairsets.core.step import MissingDependency
    from fairsets.models import ModelUnavailable, load_vlm

    try:
        return load_vlm(model, pretrained, device=device)
    except (ModelUnavailable, MissingDependency, ValueError) as exc:
        die(exc)


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


# ------------------------------------------------------------------------------------------- card
card_app = typer.Typer(help="Dataset card maintenance.", no_args_is_help=True)


@card_app.command("update")
def card_update_cmd(
    dataset: Annotated[
        Path,
        typer.Argument(
            help="A published dataset folder, or an annotation folder (fairsets annotate persons --out) "
            "for a persons audit."
        ),
    ],
    audit: Annotated[
        Path,
        typer.Option(
            "--audit",
            help="An audit folder (fairsets audit vlm --out; fairsets audit persons --out for an "
            "annotation folder).",
        ),
    ],
) -> None:
    """Add an audit's tables to a card's bias section: a VLM audit to a published face dataset
    (manifest.json updated), a persons audit to an annotation folder's card (kept for fairsets
    publish; a prepared card is updated in place)."""
    from fairsets.audit.card import update_card

    try:
        path = update_card(dataset, audit)
    except (OSError, ValueError) as exc:
        die(exc)
    typer.echo(f"updated {path}")
