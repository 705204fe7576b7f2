"""``fairsets geo`` commands: profile, evaluate, explain, methods."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from fairsets._cli_util import die

log = logging.getLogger(__name__)
out_console = Console()

_METHOD_HELP = "Method: string, ner, offline, llm or hybrid (see 'fairsets geo methods')."
_OPTION_HELP = (
    "Method option KEY=VALUE (repeatable; VALUE is JSON or a string; dotted keys nest: "
    "-O llm.model=mixtral -O llm.base_url=http://127.0.0.1:8000/v1)."
)


def parse_options(pairs: list[str] | None) -> dict[str, Any]:
    """``["a=1", "llm.model=x"]`` → ``{"a": 1, "llm": {"model": "x"}}``."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise ValueError(f"method option {pair!r} is not KEY=VALUE")
        key, raw = pair.split("=", 1)
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        node = out
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"method option {key!r} conflicts with another option")
        node[parts[-1]] = value
    return out


def build_method(name: str, options: list[str] | None) -> Any:
    from fairsets.core.step import MissingDependency
    from fairsets.geo.methods import get_method
    from fairsets.models.base import ModelUnavailable

    try:
        return get_method(name, **parse_options(options))
    except (KeyError, ValueError, TypeError, ModelUnavailable, MissingDependency) as exc:
        die(str(exc).strip("'\""))


def _looks_like_file(out: Path) -> bool:
    return out.suffix.lower() in (".csv", ".tsv", ".parquet", ".jsonl")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the ``fairsets geo`` app."""

    @app.command("profile")
    def profile_cmd(
        inputs: Annotated[
            list[Path],
            typer.Argument(
                help="Captions: a .txt (one caption a line), .csv/.tsv/.parquet/.jsonl with a caption "
                "column, or Parquet shards / folders of them."
            ),
        ],
        out: Annotated[
            Path,
            typer.Option(
                "--out",
                "-o",
                help="Output file (.csv/.parquet/.jsonl/.tsv) for one input; otherwise a folder "
                "(predictions.csv for one caption file; <shard>.parquet + profile.json for shards).",
            ),
        ],
        method: Annotated[str, typer.Option("--method", "-m", help=_METHOD_HELP)] = "offline",
        option: Annotated[list[str] | None, typer.Option("--option", "-O", help=_OPTION_HELP)] = None,
        caption_column: Annotated[
            str | None, typer.Option("--caption-column", help="Caption column (default: caption or text).")
        ] = None,
        executor: Annotated[str, typer.Option(help="Shards: 'local' or 'ray'.")] = "local",
        workers: Annotated[int, typer.Option(help="Shards: parallel tasks (0 = inline).")] = 1,
        ray_address: Annotated[str | None, typer.Option(help="Shards: an existing Ray cluster.")] = None,
        batch_size: Annotated[int, typer.Option(help="Captions per method call.")] = 4096,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    ) -> None:
        """Map captions to countries (ISO 3166-1 alpha-3, empty for none), one row per input, in order."""
        from fairsets.core.progress import Progress
        from fairsets.geo.profile import (
            CAPTION_FORMATS,
            ProfileError,
            check_shard_out,
            profile_file,
            profile_shards,
            shard_inputs,
        )
        from fairsets.pipeline.executors import TaskFailed

        if executor not in ("local", "ray"):
            die(f"--executor must be 'local' or 'ray', not {executor!r}")
        shard_mode = len(inputs) > 1 or inputs[0].is_dir()
        progress = Progress(False) if quiet else None
        for p in inputs:  # before the method loads (a gazetteer, a model, a server check)
            if not p.exists():
                die(f"{p}: no such file or folder")
        if shard_mode:
            try:
                check_shard_out(shard_inputs(inputs), out)
            except ProfileError as exc:
                die(exc)
        elif inputs[0].suffix.lower() not in CAPTION_FORMATS:
            kind = inputs[0].suffix or "(none)"
            die(f"{inputs[0]}: unsupported format {kind}; use one of {', '.join(CAPTION_FORMATS)}")
        m = build_method(method, option)
        try:
            if shard_mode:
                if _looks_like_file(out):
                    die("several inputs or a folder: --out must be a folder")
                summary = profile_shards(
                    inputs,
                    m,
                    out,
                    executor=executor,
                    workers=workers,
                    ray_address=ray_address,
                    caption_col=caption_column,
                    batch_size=batch_size,
                    progress=progress,
                )
                where = out / "profile.json"
            else:
                target = out if _looks_like_file(out) else out / "predictions.csv"
                summary = profile_file(
                    inputs[0], m, target, caption_col=caption_column, batch_size=batch_size, progress=progress
                )
                where = target
        except (ProfileError, TaskFailed, OSError, ValueError) as exc:
            die(exc)
        finally:
            m.close()
        n, k = summary["captions"], summary["with_country"]
        top = ", ".join(f"{c} {v}" for c, v in list(summary["countries"].items())[:5])
        share = f"{k / n:.1%}" if n else "0%"
        msg = f"{n} captions, {k} with a country ({share}); top: {top or '-'}"
        if summary.get("errors"):
            msg += f"; {summary['errors']} errors (see the error column)"
        Console(stderr=True).print(f"{msg}\nwrote {where}", highlight=False)

    @app.command("evaluate")
    def evaluate_cmd(
        labelled: Annotated[
            Path, typer.Argument(help="Labelled captions: caption + country (ISO3/name/empty).")
        ],
        method: Annotated[
            list[str] | None, typer.Option("--method", "-m", help=_METHOD_HELP + " Repeat to compare.")
        ] = None,
        option: Annotated[list[str] | None, typer.Option("--option", "-O", help=_OPTION_HELP)] = None,
        out: Annotated[
            Path | None,
            typer.Option("--out", "-o", help="Folder for evaluation.json and errors-<method>.csv."),
        ] = None,
        bootstrap: Annotated[
            int, typer.Option(help="Bootstrap resamples for 95% intervals (0 = none).")
        ] = 1000,
        seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    ) -> None:
        """Precision/recall as in the paper (Table 9), F1, the none confusion and per-continent scores."""
        import time

        from fairsets.geo.evaluate import LabelError, evaluate, load_labelled, write_evaluation
        from fairsets.geo.profile import ProfileError

        try:
            captions, gold = load_labelled(labelled)
        except (LabelError, ProfileError, OSError) as exc:
            die(exc)
        results: dict[str, dict[str, Any]] = {}
        for name in method or ["offline"]:
            m = build_method(name, option if len(method or []) <= 1 else None)
            t0 = time.perf_counter()
            try:
                preds, _ = m.predict_with_errors(captions)
            finally:
                m.close()
            r = evaluate(gold, preds, captions=captions, bootstrap=bootstrap, seed=seed)
            r["seconds"] = time.perf_counter() - t0
            results[name] = r
        n_gold = sum(g is not None for g in gold)
        table = Table(title=f"{labelled.name}: {len(captions)} captions, {n_gold} with a country")
        for col in ("method", "precision", "recall", "F1", "none→country", "country→none", "wrong country"):
            table.add_column(col, justify="right" if col != "method" else "left")
        for name, r in results.items():
            c = r["none_confusion"]
            ci_p = r.get("precision_ci95")
            ci_r = r.get("recall_ci95")
            table.add_row(
                name,
                f"{r['precision']:.3f}" + (f" [{ci_p[0]:.2f}, {ci_p[1]:.2f}]" if ci_p else ""),
                f"{r['recall']:.3f}" + (f" [{ci_r[0]:.2f}, {ci_r[1]:.2f}]" if ci_r else ""),
                f"{r['f1']:.3f}",
                str(c["none→country"]),
                str(c["country→none"]),
                str(c["country→other country"]),
            )
        out_console.print(table)
        if out is not None:
            write_evaluation(results, out)
            Console(stderr=True).print(f"wrote {out / 'evaluation.json'}", highlight=False)

    @app.command("explain")
    def explain_cmd(
        caption: Annotated[str, typer.Argument(help="One caption.")],
    ) -> None:
        """Show how the offline method reads a caption: mentions, evidence and country scores."""
        from fairsets.geo.methods.offline import explain

        out_console.print_json(json.dumps(explain(caption), ensure_ascii=False))

    @app.command("methods")
    def methods_cmd() -> None:
        """List the registered caption → country methods."""
        from fairsets.geo.methods import GEO_METHODS

        for name in GEO_METHODS.names():
            doc = (GEO_METHODS.get(name).__module__ or "").rsplit(".", 1)[-1]
            cls = GEO_METHODS.get(name)
            first = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else doc
            out_console.print(f"[bold]{name}[/]  {first}", highlight=False)
