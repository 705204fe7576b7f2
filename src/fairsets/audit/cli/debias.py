"""``fairsets debias``: fit a transform that removes a group attribute from embeddings (INLP,
LEACE) on a dataset, and apply a saved one.

:mod:`fairsets.cli` adds :data:`debias_app` as the ``debias`` group. The commands live with the
audits, not in :mod:`fairsets.debias` (pure array maths, below the datasets): fitting embeds a
published dataset (:mod:`fairsets.audit.debiasing`) and checks the dataset, the output and the
model as ``fairsets audit`` does (:mod:`.checks`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fairsets._cli_util import die, setup_logging

from .checks import MODEL_HELP, PRETRAINED_HELP, check_dataset, check_out, load_vlm_or_die

debias_app = typer.Typer(help="Remove a group attribute from embeddings (INLP, LEACE).", no_args_is_help=True)


@debias_app.command("fit")
def debias_fit_cmd(
    dataset: Annotated[Path, typer.Argument(help="A published dataset folder.")],
    model: Annotated[str, typer.Option("--model", "-m", help=MODEL_HELP)],
    out: Annotated[Path, typer.Option("--out", "-o", help="The transform file to write (.npz).")],
    pretrained: Annotated[str | None, typer.Option(help=PRETRAINED_HELP)] = None,
    attribute: Annotated[str, typer.Option(help="The group attribute to remove.")] = "state",
    method: Annotated[str, typer.Option(help="inlp or leace.")] = "inlp",
    alpha: Annotated[float, typer.Option(help="SLERP strength in [0, 1].", min=0.0, max=1.0)] = 1.0,
    target: Annotated[
        str | None, typer.Option(help="Prompt whose similarity the compensation restores.")
    ] = "An Indian person",
    no_compensation: Annotated[bool, typer.Option("--no-compensation", help="beta = 0.")] = False,
    variant: Annotated[str | None, typer.Option(help="Dataset variant (default balanced).")] = None,
    split: Annotated[
        list[str] | None, typer.Option("--split", help="Split(s) to fit on (default train).")
    ] = None,
    max_iter: Annotated[int, typer.Option(help="INLP: most iterations.", min=1)] = 50,
    seed: Annotated[int, typer.Option(help="INLP: seed of the held-out split and classifiers.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
    cache_dir: Annotated[Path | None, typer.Option(help="Embedding cache folder.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars or summary.")] = False,
) -> None:
    """Fit a debias transform on a dataset split and save it (for `debias apply` and `audit --debias`)."""
    from fairsets.audit.dataset import DatasetError
    from fairsets.audit.debiasing import fit_on_dataset
    from fairsets.core.progress import Progress
    from fairsets.core.step import MissingDependency

    setup_logging(False, quiet)
    from fairsets.debias.transform import METHODS

    if method not in METHODS:
        die(f"--method must be one of {', '.join(sorted(METHODS))}, not {method!r}")
    check_dataset(dataset, variant, split, attribute, prefer="train", min_groups=2)
    check_out(out, folder=False)
    vlm = load_vlm_or_die(model, pretrained, device)
    kwargs: dict[str, Any] = {"max_iter": max_iter, "seed": seed} if method == "inlp" else {}
    try:
        tr = fit_on_dataset(
            dataset,
            vlm,
            attribute=attribute,
            method=method,
            alpha=alpha,
            target=target,
            compensate=not no_compensation,
            variant=variant,
            splits=split,
            out=out,
            cache_dir=cache_dir,
            progress=Progress(False if quiet else None),
            **kwargs,
        )
    except (DatasetError, MissingDependency, ValueError, OSError) as exc:
        die(exc)
    if not quiet:
        meta = tr.meta
        extra = ""
        if tr.method == "inlp":
            extra = (
                f", {meta.get('iterations')} iteration(s), probe accuracy {meta.get('final_accuracy', 0):.3f}"
                f" (chance {meta.get('chance', 0):.3f})"
            )
        typer.echo(
            f"{tr.method} on {meta['n']} embeddings, {len(meta['groups'])} groups{extra}; "
            f"alpha {tr.alpha}, beta {tr.beta:.4f}; wrote {out}"
        )


@debias_app.command("apply")
def debias_apply_cmd(
    transform: Annotated[Path, typer.Argument(help="A transform file (fairsets debias fit).")],
    embeddings: Annotated[Path, typer.Argument(help="Embeddings: .npy (n, d) or Parquet with 'embedding'.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the debiased embeddings.")],
) -> None:
    """Apply a saved transform to embeddings, streamed in float32 row blocks (same input, same bytes)."""
    from fairsets.audit.debiasing import apply_to_file

    try:
        apply_to_file(transform, embeddings, out)
    except (OSError, ValueError) as exc:
        die(exc)
    typer.echo(f"wrote {out}")
