"""The ``fairsets`` command line (typer)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import _cli_util
from ._cli_util import die, report_unexpected, report_usage


class FairsetsApp(typer.Typer):
    """The app, with the entry point's catch-all: an exception no command handled is one line on
    stderr and exit 2 (``--debug`` adds the traceback); ``typer.Exit``/``SystemExit`` keep their
    codes and Ctrl-C exits 130."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import signal

        from . import _startup_sigint

        if signal.getsignal(signal.SIGINT) is _startup_sigint:  # started: Ctrl-C is KeyboardInterrupt again
            signal.signal(signal.SIGINT, signal.default_int_handler)
        no_args, usage, abort = _click_exceptions()
        if kwargs.get("standalone_mode", True) is False:  # the caller handles click's exceptions
            return super().__call__(*args, **kwargs)
        kwargs["standalone_mode"] = False  # so a usage error reaches us, not typer's boxed panel
        argv = kwargs.get("args", args[0] if args else None)
        try:
            _refuse_blank_values(list(sys.argv[1:] if argv is None else argv))
        except typer.Exit as exc:
            sys.exit(exc.exit_code)
        try:
            rv = super().__call__(*args, **kwargs)
        except (SystemExit, KeyboardInterrupt):
            raise
        except no_args as exc:  # `fairsets audit`: its help, as before
            exc.show()
            sys.exit(exc.exit_code)
        except usage as exc:  # a wrong/missing option or argument: one line + where to look
            report_usage(exc)
        except abort:
            console.print("Aborted!", highlight=False)
            sys.exit(1)
        except Exception as exc:  # the one place that turns any error into one line
            report_unexpected(exc)
        # standalone_mode=False returns the exit code of a typer.Exit, else the command's value
        sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)


def _refuse_blank_values(argv: list[str]) -> None:
    """An empty or blank value (``--out ""``) is one line, exit 2: click would read it as the
    current folder for a path option, and no fairsets option or argument means anything blank."""
    for i, tok in enumerate(argv):
        if tok.strip():
            if tok.startswith("--") and "=" in tok and not tok.split("=", 1)[1].strip():
                name = tok.split("=", 1)[0]
                die(f"{name} is empty: give it a value (see: fairsets COMMAND --help)")
            continue
        prev = argv[i - 1] if i else ""
        what = prev if prev.startswith("-") and "=" not in prev else "an argument"
        die(f"{what} is empty: give it a value (see: fairsets COMMAND --help)")


def _click_exceptions() -> tuple[tuple[type[BaseException], ...], ...]:
    """(no-args-is-help, usage/click errors, abort) of click and of the copy typer vendors."""
    import contextlib
    import importlib

    mods: list[Any] = []
    # typer >= 0.24 ships its own click (and no longer installs click); an older typer uses click
    for name in ("typer._click", "click"):
        with contextlib.suppress(ImportError):
            mods.append(importlib.import_module(name))

    def found(name: str) -> tuple[type[BaseException], ...]:
        kinds = (getattr(m.exceptions, name, None) or getattr(m, name, None) for m in mods)
        return tuple({k for k in kinds if isinstance(k, type)})

    return found("NoArgsIsHelpError"), found("ClickException"), (*found("Abort"), typer.Abort)


def main() -> None:
    """``fairsets`` (the console script and ``python -m fairsets``)."""
    app()


app = FairsetsApp(
    name="fairsets",
    help="Build, annotate, audit and publish image(-text) datasets for fairness research.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)
_die = die


def _setup_logging(verbose: bool, quiet: bool) -> None:
    """The ``fairsets`` loggers' level for a command: DEBUG under ``fairsets -v`` (given before the
    command, it wins over the command's defaults and its ``--quiet``), else WARNING with ``--quiet``,
    else INFO."""
    verbose = verbose or _cli_util.VERBOSE
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    # Other libraries (open_clip logs to the root logger) speak only at WARNING and above, or INFO
    # under -v (their DEBUG, e.g. Pillow's chunk-by-chunk trace, would drown fairsets' own).
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("fairsets").setLevel(level)


@app.callback()
def _root(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Debug logging (before the command: fairsets -v build …).")
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the traceback of an error (also FAIRSETS_DEBUG=1).")
    ] = False,
) -> None:
    """fairsets: balanced, documented datasets for fairness research."""
    _cli_util.DEBUG = debug
    _cli_util.VERBOSE = verbose
    if verbose:
        _setup_logging(True, False)


@app.command("build")
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
    from fairsets.pipeline.config import RecipeError, load_recipe

    from .pipeline.build import BuildError, BuildStopped, build
    from .pipeline.executors import TaskFailed
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
            force=force,
        )
    except BuildError as exc:  # says --force and --out, not force=True
        _die(exc.cli)
    except (RecipeError, SourceError, TaskFailed, MissingDependency, FileNotFoundError) as exc:
        _die(exc)
    except BuildStopped as exc:
        _die(str(exc), code=int(exc.code or 1))
    if not quiet:
        _print_summary(result.summary, Path(out))
    for w in result.warnings:
        console.print(f"[yellow]warning:[/] {escape(str(w))}", highlight=False, soft_wrap=True)


def _print_summary(summary: dict[str, Any], out: Path) -> None:
    c = Console()
    steps = Table(title="per-sample steps", show_lines=False)
    steps.add_column("step")
    steps.add_column("rejected", justify="right")
    steps.add_column("failed", justify="right")
    for s in summary["steps"]:
        steps.add_row(s["name"], str(s["rejected"]), str(s["failed"]))
    c.print(steps)
    if not summary["variants"]:
        c.print(f"{summary['candidates']} candidates → nothing published to {out} (see the warning below)")
        return
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
    from fairsets.core.step import MissingDependency
    from fairsets.pipeline.config import RecipeError, load_recipe

    from .pipeline.build import check_sources
    from .sources import SourceError

    try:
        rec = load_recipe(recipe)
        check_sources(rec)
    except (RecipeError, MissingDependency, SourceError) as exc:
        _die(exc)
    typer.echo(f"ok: {rec.name}: {len(rec.steps)} steps, groups {', '.join(rec.groups)}, quota {rec.quota}")


@app.command("steps")
def steps_cmd() -> None:
    """List the registered per-sample steps and their parameters."""
    from fairsets.core.registry import STEPS
    from fairsets.pipeline.config import _import_components

    _import_components()
    for name in STEPS.names():
        cls = STEPS.get(name)
        fields = ", ".join(f"{k}={v.default!r}" for k, v in cls.Params.model_fields.items())
        typer.echo(f"{name}: {fields}")


# ------------------------------------------------------------------------------------------ fetch
fetch_app = typer.Typer(help="Fetch candidate listings from web sources.", no_args_is_help=True)
app.add_typer(fetch_app, name="fetch")


@fetch_app.command("wikidata")
def fetch_wikidata_cmd(
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Output Parquet (one row per person, image, state, association)."),
    ],
    endpoint: Annotated[str, typer.Option(help="SPARQL endpoint.")] = "https://query.wikidata.org/sparql",
    state: Annotated[
        list[str] | None, typer.Option("--state", help="State/UT QID or name; repeat. Default: all of them.")
    ] = None,
    gender: Annotated[
        list[str] | None, typer.Option("--gender", help="male or female; repeat. Default: both.")
    ] = None,
    states_file: Annotated[
        Path | None,
        typer.Option(help="CSV of units (qid,name,kind,aliases); default builders/india_states.csv."),
    ] = None,
    cache_dir: Annotated[
        Path | None, typer.Option(help="Cache of raw answers (default OUT's folder/.wikidata-cache).")
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the cache.")] = False,
    page_size: Annotated[
        int, typer.Option(help="Rows per query page (the public service stops queries at 60 s).")
    ] = 5000,
    contact: Annotated[
        str | None, typer.Option(help="Contact for the User-Agent (default $FAIRSETS_CONTACT).")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary.")] = False,
) -> None:
    """People with images per state and gender from Wikidata (IndicFairFace appendix 7).

    Each person is also assigned to one state (birth > residence > work > education > constituency):
    the rows of that state have primary = true.
    """
    from fairsets.core.step import MissingDependency

    from .fetch.retry import HttpStatusError
    from .sources.wikidata import fetch_wikidata_cli

    _setup_logging(False, quiet)
    for g in gender or []:
        if g not in ("male", "female"):
            _die(f"--gender must be male or female, not {g!r}")
    try:
        res = fetch_wikidata_cli(
            out,
            endpoint=endpoint,
            states=state or None,
            genders=gender or None,
            cache_dir=cache_dir,
            states_file=states_file,
            no_cache=no_cache,
            page_size=page_size,
            contact=contact,
        )
    except (ValueError, OSError, HttpStatusError, MissingDependency) as exc:
        _die(exc)
    if not quiet:
        c = Console()
        t = Table(title=f"{res['people']} people → {out}")
        t.add_column("state")
        for g in res["genders"]:
            t.add_column(g, justify="right")
        for info in res["per_state"].values():
            t.add_row(info["name"], *(str(info["people"].get(g, 0)) for g in res["genders"]))
        c.print(t)
        c.print(f"{res['rows']} rows, {res['requests']} requests, {res['cache_hits']} answers from the cache")


# ----------------------------------------------------------------------------------------- review
review_app = typer.Typer(
    help="Manual review of candidates that need it (web-search results): export a contact sheet, "
    "import the decisions, build again.",
    no_args_is_help=True,
)
app.add_typer(review_app, name="review")


def _workdir(out: Path) -> Path:
    from .pipeline.build import WORKDIR

    workdir = out / WORKDIR
    if not workdir.is_dir():
        _die(f"{out}: not a fairsets build folder (no {WORKDIR}/)")
    return workdir


def _pending(out: Path) -> tuple[Path, list[dict[str, Any]], list[str]]:
    import json

    import pyarrow.parquet as pq

    workdir = _workdir(out)
    path = workdir / "review" / "pending.parquet"
    if not path.is_file():
        _die(f"{out}: no review listing; run fairsets build first")
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
        _die(exc)
    write_decisions(workdir / "review" / "decisions.parquet", decisions)
    n = {d: sum(1 for x in decisions if x["decision"] == d) for d in ("accept", "reject")}
    typer.echo(f"{n['accept']} accepted, {n['reject']} rejected; run fairsets build again to apply them")


# ---------------------------------------------------------------------------------------- publish
@app.command("publish")
def publish_cmd(
    out: Annotated[Path, typer.Argument(help="A built dataset folder (fairsets build --out).")],
    repo_id: Annotated[str, typer.Option("--repo-id", help="Hub dataset repository, ORG/NAME.")],
    private: Annotated[bool, typer.Option("--private", help="Create the repository as private.")] = False,
    revision: Annotated[str | None, typer.Option(help="Branch to upload to (default main).")] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be uploaded; upload nothing.")
    ] = False,
) -> None:
    """Verify the layout against manifest.json, then upload it to the Hugging Face Hub.

    The token comes from HF_TOKEN or the login cache (hf auth login) and is never printed.
    """
    from .publish.hub import PublishError, format_plan, publish

    _setup_logging(False, False)
    try:
        report = publish(out, repo_id, private=private, revision=revision, dry_run=dry_run)
    except PublishError as exc:
        _die(exc)
    typer.echo(format_plan(report))


# ------------------------------------------------------------------------------------------ audit
audit_app = typer.Typer(help="Audit models on a published dataset.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")

_MODEL_HELP = (
    "Model: an open_clip name (ViT-B-32, hf-hub:ORG/NAME) or hf:HUB_ID / hf:LOCAL_DIR for transformers."
)
_PRETRAINED_HELP = (
    "Weights: an open_clip tag (openai, laion2b_s34b_b79k, ...) or a local weights file; "
    "'none' = random weights (tests, dry runs)."
)


def _check_out(out: Path | None, *, folder: bool) -> None:
    """Fail before any work when OUT cannot be written as a folder (or as a file)."""
    if out is None:
        return
    if folder:
        blocked = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
        if blocked is not None:
            _die(f"{blocked}: a file is where the output folder {out} must be; choose another --out")
    elif out.is_dir():
        _die(f"{out}: a folder, but the output is a file; choose a file name for --out")
    elif out.parent.exists() and not out.parent.is_dir():
        _die(f"{out.parent}: a file, not a folder; choose another --out")


def _check_dataset(
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

    from .audit.dataset import DatasetError, open_dataset

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
        _die(exc)


def _load_vlm(model: str, pretrained: str | None, device: str) -> Any:
    from fairsets.core.step import MissingDependency

    from .models import ModelUnavailable, load_vlm

    try:
        return load_vlm(model, pretrained, device=device)
    except (ModelUnavailable, MissingDependency, ValueError) as exc:
        _die(exc)


@audit_app.command("vlm")
def audit_vlm_cmd(
    dataset: Annotated[Path, typer.Argument(help="A published dataset folder (fairsets build --out).")],
    model: Annotated[str, typer.Option("--model", "-m", help=_MODEL_HELP)],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for audit.json and report.html.")],
    pretrained: Annotated[str | None, typer.Option(help=_PRETRAINED_HELP)] = None,
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
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
    batch_size: Annotated[int, typer.Option(help="Images per forward pass.", min=1)] = 32,
    cache_dir: Annotated[
        Path | None, typer.Option(help="Embedding cache (default DATASET/.fairsets/embeddings).")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars or summary.")] = False,
) -> None:
    """Top-k group distributions, JSD from uniform, per-group similarity, robustness, job simulation."""
    import dataclasses

    from fairsets.core.progress import Progress
    from fairsets.core.step import MissingDependency

    from .audit.dataset import DatasetError
    from .audit.prompts import default_prompts, load_prompts
    from .audit.vlm import AUDIT_FILE, REPORT_FILE, run_vlm_audit

    _setup_logging(False, quiet)
    try:
        spec = load_prompts(prompts) if prompts else default_prompts()
        if job_prompts:
            spec = dataclasses.replace(spec, job=(job_prompts[0], job_prompts[1]))
    except (OSError, ValueError) as exc:
        _die(exc)
    _check_dataset(dataset, variant, split, attribute, prefer="test")
    _check_out(out, folder=True)
    if debias is not None:
        from .debias.transform import DebiasTransform

        try:
            DebiasTransform.load(debias)
        except (OSError, ValueError) as exc:
            _die(exc)
    vlm = _load_vlm(model, pretrained, device)
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
            batch_size=batch_size,
            cache_dir=cache_dir,
            progress=Progress(False if quiet else None),
        )
    except (DatasetError, MissingDependency, ValueError, OSError) as exc:
        _die(exc)
    if quiet:
        return
    table = Table(title=f"{doc['model_id']} on {doc['dataset']} ({doc['variant']}/{','.join(doc['splits'])})")
    for col in ("prompt", "embeddings", f"JSD top-{doc['k']}", "std of group means", "mean sim"):
        table.add_column(col)
    for r in doc["results"]:
        if r["primary"]:
            m = r["metrics"]
            table.add_row(
                r["prompt"],
                r["embeddings"],
                f"{m['jsd_uniform']:.4f}",
                f"{m['mean_similarity_std']:.4f}",
                f"{m['mean_similarity']:.4f}",
            )
    Console().print(table)
    if doc.get("skipped"):
        typer.echo(f"{len(doc['skipped'])} image(s) skipped (see audit.json 'skipped')")
    typer.echo(f"wrote {out / AUDIT_FILE} and {out / REPORT_FILE}")


@audit_app.command("utility")
def audit_utility_cmd(
    data: Annotated[Path, typer.Argument(help="Labelled images: a folder of class folders, or Parquet.")],
    model: Annotated[str, typer.Option("--model", "-m", help=_MODEL_HELP)],
    pretrained: Annotated[str | None, typer.Option(help=_PRETRAINED_HELP)] = None,
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

    from fairsets.core.atomic import atomic_write_text
    from fairsets.core.progress import Progress

    from .audit.utility import evaluate_utility
    from .debias.transform import DebiasTransform

    _setup_logging(False, quiet)
    try:
        transform = DebiasTransform.load(debias) if debias else None
    except (OSError, ValueError) as exc:
        _die(exc)
    from .audit.utility import iter_labelled

    try:  # the data's shape (and its first image) before any model loads
        first = next(iter_labelled(data, label_column=label_column, image_column=image_column), None)
    except (OSError, ValueError) as exc:
        _die(exc)
    if first is None:
        _die(f"{data}: no labelled image found; give a folder of class sub-folders of images, or Parquet")
    _check_out(out, folder=True)
    vlm = _load_vlm(model, pretrained, device)
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
        _die(exc)
    text = json.dumps(res, indent=2, ensure_ascii=False) + "\n"
    if out:
        atomic_write_text(out / "utility.json", text)
    table = Table(title=f"{res['model_id']}: {res['n_images']} images, {len(res['classes'])} classes")
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
    Console().print(table)
    if res["skipped"]:
        typer.echo(
            f"{len(res['skipped'])} item(s) skipped: {res['skipped'][0]['id']}: {res['skipped'][0]['reason']}"
        )


# ----------------------------------------------------------------------------------------- debias
debias_app = typer.Typer(help="Remove a group attribute from embeddings (INLP, LEACE).", no_args_is_help=True)
app.add_typer(debias_app, name="debias")


@debias_app.command("fit")
def debias_fit_cmd(
    dataset: Annotated[Path, typer.Argument(help="A published dataset folder.")],
    model: Annotated[str, typer.Option("--model", "-m", help=_MODEL_HELP)],
    out: Annotated[Path, typer.Option("--out", "-o", help="The transform file to write (.npz).")],
    pretrained: Annotated[str | None, typer.Option(help=_PRETRAINED_HELP)] = None,
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
    from fairsets.audit.debiasing import fit_on_dataset
    from fairsets.core.progress import Progress
    from fairsets.core.step import MissingDependency

    from .audit.dataset import DatasetError

    _setup_logging(False, quiet)
    from .debias.transform import METHODS

    if method not in METHODS:
        _die(f"--method must be one of {', '.join(sorted(METHODS))}, not {method!r}")
    _check_dataset(dataset, variant, split, attribute, prefer="train", min_groups=2)
    _check_out(out, folder=False)
    vlm = _load_vlm(model, pretrained, device)
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
        _die(exc)
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
    """Apply a saved transform to embeddings (numpy only; the same input gives the same bytes)."""
    from fairsets.audit.debiasing import apply_to_file

    try:
        apply_to_file(transform, embeddings, out)
    except (OSError, ValueError) as exc:
        _die(exc)
    typer.echo(f"wrote {out}")


# ------------------------------------------------------------------------------------------- card
card_app = typer.Typer(help="Dataset card maintenance.", no_args_is_help=True)
app.add_typer(card_app, name="card")


@card_app.command("update")
def card_update_cmd(
    dataset: Annotated[Path, typer.Argument(help="A published dataset folder.")],
    audit: Annotated[Path, typer.Option("--audit", help="An audit folder (fairsets audit vlm --out).")],
) -> None:
    """Add an audit's tables to the card's bias section (and update manifest.json)."""
    from fairsets.audit.card import update_card

    try:
        path = update_card(dataset, audit)
    except (OSError, ValueError) as exc:
        _die(exc)
    typer.echo(f"updated {path}")


geo_app = typer.Typer(
    help="Geo-profile captions: caption → country, evaluation, entity filter, analyses.", no_args_is_help=True
)
app.add_typer(geo_app, name="geo")


def _register_geo() -> None:
    from .geo import _cli_analyze, _cli_entity, _cli_profile

    for module in (_cli_profile, _cli_entity, _cli_analyze):
        module.register(geo_app)


_register_geo()


if __name__ == "__main__":  # pragma: no cover - after every command is registered
    main()
