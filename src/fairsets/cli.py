"""The ``fairsets`` command line (typer)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(
    name="fairsets",
    help="Build, annotate, audit and publish image(-text) datasets for fairness research.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)


def _die(message: str, code: int = 2) -> NoReturn:
    """One line on stderr, non-zero exit."""
    first = str(message).strip().splitlines()[0] if str(message).strip() else "unknown error"
    console.print(f"[bold red]error:[/] {first}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _setup_logging(verbose: bool, quiet: bool) -> None:
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


@app.callback()
def main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """fairsets: balanced, documented datasets for fairness research."""
    if verbose:
        logging.getLogger("fairsets").setLevel(logging.DEBUG)


@app.command("build")
def build_cmd(
    recipe: Annotated[Path, typer.Argument(help="Recipe TOML (see builders/).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (the published layout).")],
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
) -> None:
    """Build a dataset from RECIPE into OUT: steps → dedup → balance → shards → card."""
    from .config import RecipeError, load_recipe
    from .pipeline.build import BuildError, build
    from .pipeline.executors import TaskFailed
    from .pipeline.progress import Progress
    from .pipeline.step import MissingDependency
    from .sources import SourceError

    _setup_logging(False, quiet)
    if executor is not None and executor not in ("local", "ray"):
        _die(f"--executor must be 'local' or 'ray', not {executor!r}")
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
        )
    except (RecipeError, SourceError, BuildError, TaskFailed, MissingDependency, FileNotFoundError) as exc:
        _die(str(exc))
    if not quiet:
        _print_summary(result.summary, out)
    for w in result.warnings:
        console.print(f"[yellow]warning:[/] {w}", highlight=False)


def _print_summary(summary: dict[str, Any], out: Path) -> None:
    c = Console()
    steps = Table(title="per-sample steps", show_lines=False)
    steps.add_column("step")
    steps.add_column("rejected", justify="right")
    steps.add_column("failed", justify="right")
    for s in summary["steps"]:
        steps.add_row(s["name"], str(s["rejected"]), str(s["failed"]))
    c.print(steps)
    t = Table(title=f"published to {out}")
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
    c.print(t)
    c.print(
        f"{summary['candidates']} candidates → {summary['accepted']} accepted "
        f"({summary['duplicates']['exact']} exact + {summary['duplicates']['near']} near duplicates removed)"
    )


@app.command("validate")
def validate_cmd(recipe: Annotated[Path, typer.Argument(help="Recipe TOML.")]) -> None:
    """Check a recipe (schema, step names and parameters) without building."""
    from .config import RecipeError, load_recipe
    from .pipeline.step import MissingDependency

    try:
        rec = load_recipe(recipe)
    except (RecipeError, MissingDependency) as exc:
        _die(str(exc))
    typer.echo(f"ok: {rec.name}: {len(rec.steps)} steps, groups {', '.join(rec.groups)}, quota {rec.quota}")


@app.command("steps")
def steps_cmd() -> None:
    """List the registered per-sample steps and their parameters."""
    from .config import _import_components
    from .registry import STEPS

    _import_components()
    for name in STEPS.names():
        cls = STEPS.get(name)
        fields = ", ".join(f"{k}={v.default!r}" for k, v in cls.Params.model_fields.items())
        typer.echo(f"{name}: {fields}")


if __name__ == "__main__":  # pragma: no cover
    app()
