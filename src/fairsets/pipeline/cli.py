"""The pipeline's commands: ``fairsets build``, ``validate``, ``steps`` and the
``fairsets review`` group (export a contact sheet of the candidates awaiting review, import the
decisions).

:mod:`fairsets.cli` registers the top-level commands on the root app and adds :data:`review_app`
as the ``review`` group.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any

import typer

from fairsets._cli_util import die, setup_logging
from fairsets.core.console import DataTable, labelled, say, show
from fairsets.pipeline.recipes import RecipeCopyError, write_recipes


def build_cmd(
    recipe: Annotated[Path, typer.Argument(help="Recipe TOML (see builders/).")],
    out: Annotated[
        str, typer.Option("--out", "-o", metavar="<path>", help="Output folder (the published layout).")
    ],
    executor: Annotated[
        str | None, typer.Option(help="local (default) or ray; overrides the recipe.")
    ] = None,
    workers: Annotated[
        int | None, typer.Option(help="Worker processes (local) or CPUs (ray); 0 = inline.")
    ] = None,
    ray_address: Annotated[str | None, typer.Option(help="Address of an existing Ray cluster.")] = None,
    retry_failed: Annotated[
        bool, typer.Option("--retry-failed", help="Re-process only samples whose status is failed.")
    ] = False,
    seed: Annotated[int | None, typer.Option(help="Override the recipe's seed.")] = None,
    quota: Annotated[int | None, typer.Option(help="Override the recipe's quota per cell.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars or summary.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Build into a non-empty folder that is not a fairsets output.")
    ] = False,
) -> None:
    """Build a dataset from RECIPE into OUT: steps → dedup → balance → shards → card."""
    from fairsets.core.progress import Progress
    from fairsets.core.step import MissingDependency
    from fairsets.pipeline.build import BuildError, BuildStopped, build
    from fairsets.pipeline.config import RecipeError, load_recipe
    from fairsets.pipeline.executors import TaskFailed
    from fairsets.sources import SourceError

    setup_logging(False, quiet)
    if executor is not None and executor not in ("local", "ray"):
        die(f"--executor must be 'local' or 'ray', not {executor!r}")
    try:
        rec = load_recipe(recipe, overrides={"seed": seed, "quota": quota})
        result = build(
            rec,
            out,
            executor=executor,
            workers=workers,
            ray_address=ray_address,
            retry_failed=retry_failed,
            progress=Progress(enabled=None if not quiet else False),
            force=force,
        )
    except BuildError as exc:  # says --force and --out, not force=True
        die(exc.cli)
    except (RecipeError, SourceError, TaskFailed, MissingDependency, FileNotFoundError) as exc:
        die(exc)
    except BuildStopped as exc:
        die(str(exc), code=int(exc.code or 1))
    if not quiet:
        _print_summary(result.summary, Path(out))
    for w in result.warnings:
        labelled("warning", w, "yellow")  # paths and names are data: never markup


def _print_summary(summary: dict[str, Any], out: Path) -> None:
    steps = DataTable(title="per-sample steps", show_lines=False)
    steps.add_column("step")
    steps.add_column("rejected", justify="right")
    steps.add_column("failed", justify="right")
    for s in summary["steps"]:
        steps.add_row(s["name"], str(s["rejected"]), str(s["failed"]))
    show(steps)
    if not summary["variants"]:
        say(f"{summary['candidates']} candidates → nothing published to {out} (see the warning below)")
        return
    t = DataTable(title=f"published to {out}")  # a path is data: never markup
    t.add_column("variant")
    for split in ("train", "test"):
        t.add_column(split, justify="right")
    t.add_column("cells", justify="right")
    for variant, splits in summary["variants"].items():
        t.add_row(
            variant,
            *(str(splits.get(s, {}).get("num_samples", 0)) for s in ("train", "test")),
            str(len(summary["cells"])),
        )
    show(t)
    say(
        f"{summary['candidates']} candidates → {summary['accepted']} accepted "
        f"({summary['duplicates']['exact']} exact + {summary['duplicates']['near']} near duplicates removed)"
    )


def validate_cmd(recipe: Annotated[Path, typer.Argument(help="Recipe TOML.")]) -> None:
    """Check a recipe (schema, step names and parameters) without building."""
    from fairsets.core.step import MissingDependency
    from fairsets.pipeline.build import check_sources
    from fairsets.pipeline.config import RecipeError, load_recipe
    from fairsets.sources import SourceError

    try:
        rec = load_recipe(recipe)
        check_sources(rec)
    except (RecipeError, MissingDependency, SourceError) as exc:
        die(exc)
    typer.echo(f"ok: {rec.name}: {len(rec.steps)} steps, groups {', '.join(rec.groups)}, quota {rec.quota}")


def steps_cmd() -> None:
    """List the registered per-sample steps and their parameters."""
    from fairsets.core.registry import STEPS
    from fairsets.pipeline.config import _import_components

    _import_components()
    for name in STEPS.names():
        cls = STEPS.get(name)
        fields = ", ".join(f"{k}={v.default!r}" for k, v in cls.Params.model_fields.items())
        typer.echo(f"{name}: {fields}")


# ----------------------------------------------------------------------------------------- review
review_app = typer.Typer(
    help="Manual review of candidates that need it (web-search results): export a contact sheet, "
    "import the decisions, build again.",
    no_args_is_help=True,
)


def _workdir(out: Path) -> Path:
    from fairsets.pipeline.build import WORKDIR

    workdir = out / WORKDIR
    if not workdir.is_dir():
        die(f"{out}: not a fairsets build folder (no {WORKDIR}/)")
    return workdir


def _pending(out: Path) -> tuple[Path, list[dict[str, Any]], list[str]]:
    import json

    import pyarrow.parquet as pq

    workdir = _workdir(out)
    path = workdir / "review" / "pending.parquet"
    if not path.is_file():
        die(f"{out}: no review listing; run fairsets build first")
    rows = pq.read_table(path).to_pylist()
    try:
        groups = json.loads((out / "manifest.json").read_text())["recipe"]["groups"]
    except (OSError, ValueError, KeyError):
        groups = []
    return workdir, rows, groups


@review_app.command("export")
def review_export_cmd(
    out: Annotated[Path, typer.Argument(help="The build folder (fairsets build --out).")],
    to: Annotated[
        Path | None, typer.Option("--to", help="Folder for review.html and review.csv (default OUT-review).")
    ] = None,
) -> None:
    """Write a contact sheet (HTML) and a CSV of the candidates awaiting review."""
    import pyarrow.parquet as pq

    from fairsets.pipeline.review import export_review

    workdir, rows, groups = _pending(out)
    if not rows:
        typer.echo("nothing awaits review")
        return
    images: dict[str, bytes] = {}
    for pool in sorted({r["pool"] for r in rows}):
        keys = sorted(r["key"] for r in rows if r["pool"] == pool)
        t = pq.read_table(workdir / pool, columns=["key", "image"], filters=[("key", "in", keys)])
        images.update(zip(t["key"].to_pylist(), t["image"].to_pylist(), strict=True))
    dest = to or out.with_name(out.name + "-review")
    res = export_review(rows, images.get, dest, columns=groups)
    typer.echo(f"{res['rows']} candidates to review: open {res['html']}, decide in {res['csv']}")
    typer.echo(f"then: fairsets review import {out} {res['csv']}")


@review_app.command("import")
def review_import_cmd(
    out: Annotated[Path, typer.Argument(help="The build folder.")],
    csv_path: Annotated[Path, typer.Argument(help="The edited review.csv.")],
) -> None:
    """Apply review decisions (accept/reject, licence, author); the next build uses them."""
    from fairsets.pipeline.review import ReviewError, import_review, write_decisions

    workdir, rows, _ = _pending(out)
    try:
        decisions = import_review(csv_path, {r["key"]: r for r in rows})
    except (ReviewError, OSError) as exc:
        die(exc)
    write_decisions(workdir / "review" / "decisions.parquet", decisions)
    n = {d: sum(1 for x in decisions if x["decision"] == d) for d in ("accept", "reject")}
    typer.echo(f"{n['accept']} accepted, {n['reject']} rejected; run fairsets build again to apply them")


def example_cmd(
    out: Annotated[
        Path,
        typer.Option("--out", "-o", metavar="<path>", help="Folder to write the recipes into (made if new)."),
    ],
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite same-named files that differ from the shipped ones.")
    ] = False,
) -> None:
    """Write the shipped recipes (the offline example, the audit example, IndicFairFace) and their
    files into OUT, ready for ``fairsets build OUT/example.toml --out example-out``."""
    try:
        done = write_recipes(out, force=force)
    except (RecipeCopyError, OSError) as exc:
        die(exc)
    for path, written in done:
        typer.echo(f"{'wrote' if written else 'unchanged'} {path}")
    recipe = shlex.quote(str(out / "example.toml"))
    typer.echo(f"build the offline example: fairsets build {recipe} --out example-out")


def remove_cmd(
    out: Annotated[Path, typer.Argument(help="The build folder (fairsets build --out).")],
    reason: Annotated[
        str, typer.Option("--reason", help="Why (published in the card and CHANGELOG.md); never who.")
    ] = "",
    key: Annotated[
        list[str] | None, typer.Option("--key", help="A published sample's key (repeatable).")
    ] = None,
    source_url: Annotated[
        list[str] | None, typer.Option("--source-url", help="A source URL: every image from it (repeatable).")
    ] = None,
    identity: Annotated[
        list[str] | None,
        typer.Option("--identity", help="A person: every image of the identity (repeatable)."),
    ] = None,
    from_file: Annotated[
        Path | None,
        typer.Option("--from", help="A file of 'key|source-url|identity VALUE' lines, one selector a line."),
    ] = None,
) -> None:
    """Record a removal request in OUT's deny list (hashes only); the next build leaves those images
    out, refills their cells from the pool where it can, and says what changed (docs/removals.md)."""
    from fairsets.core.atomic import LayoutBusy
    from fairsets.pipeline.removals import RemovalError
    from fairsets.pipeline.remove import parse_selector_file, record_removal

    selectors = [("key", v) for v in key or []]
    selectors += [("source_url", v) for v in source_url or []]
    selectors += [("identity", v) for v in identity or []]
    try:
        if from_file is not None:
            selectors += parse_selector_file(from_file)
        req = record_removal(out, selectors, reason)
    except (RemovalError, LayoutBusy) as exc:
        die(exc)
    n = sum(req["published"].values())
    cells = "; ".join(f"{c}: {k}" for c, k in req["published"].items())
    typer.echo(
        f"recorded {req['id']} ({len(req['selectors'])} selector(s), against revision {req['against']}): "
        f"{n} published real image(s){f' ({cells})' if cells else ''}"
    )
    typer.echo(f"apply it: fairsets build RECIPE --out {shlex.quote(str(out))}")
