"""``fairsets geo`` commands: profile, explain, methods."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from fairsets._cli_util import die
from fairsets.core.console import say, text

from .options import _METHOD_HELP, _OPTION_HELP, check_min_confidence, min_confidence_option

log = logging.getLogger(__name__)


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
        # a KeyError's str() is its repr (quoted); any other message keeps its own quotes
        die(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)


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
        min_confidence: Annotated[
            float | None,
            min_confidence_option(
                "Keep a country only when its confidence is at least this (0-1; offline, hybrid)."
            ),
        ] = None,
        allow_reduced_gazetteer: Annotated[
            bool,
            typer.Option(
                "--allow-reduced-gazetteer",
                help="Run even without the geo extra's data packages (no states, provinces nor cities: "
                "fewer countries found).",
            ),
        ] = False,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    ) -> None:
        """Map captions to countries (ISO 3166-1 alpha-3, empty for none), one row per input, in order.

        Writes caption, country, confidence and evidence (+ error) then the input's columns;
        shards get country, country_confidence and country_evidence (+ geo_error). See docs/geo.md.
        """
        from fairsets.core.atomic import LayoutBusy
        from fairsets.core.progress import Progress
        from fairsets.core.step import MissingDependency
        from fairsets.geo.methods import GEO_METHODS, method_from_spec
        from fairsets.geo.profile import (
            CAPTION_FORMATS,
            ProfileError,
            check_data_packages,
            check_shard_out,
            method_spec,
            profile_file,
            profile_shards,
            shard_inputs,
            takes_option,
        )
        from fairsets.models.base import ModelUnavailable
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
            if _looks_like_file(out):
                die("several inputs or a folder: --out must be a folder")
        elif inputs[0].suffix.lower() not in CAPTION_FORMATS:
            kind = inputs[0].suffix or "(none)"
            die(f"{inputs[0]}: unsupported format {kind}; use one of {', '.join(CAPTION_FORMATS)}")
        # the spec is checked here, before any work; the method is built where it runs
        try:
            options = parse_options(option)
            GEO_METHODS.get(method)
            check_min_confidence(
                min_confidence,
                lambda: takes_option(method, "min_confidence"),
                f"method {method} gives no confidence; use offline or hybrid",
            )
            if min_confidence is not None:
                options["min_confidence"] = min_confidence
            spec = method_spec(method, options)
        except (KeyError, ValueError, TypeError) as exc:
            die(str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else exc)
        try:  # worse answers without a word: refused unless asked for
            check_data_packages(spec, allow_reduced=allow_reduced_gazetteer)
        except MissingDependency as exc:
            die(exc)
        if shard_mode:
            try:
                summary = profile_shards(
                    inputs,
                    spec,
                    out,
                    executor=executor,
                    workers=workers,
                    ray_address=ray_address,
                    caption_col=caption_column,
                    batch_size=batch_size,
                    progress=progress,
                )
            except (ProfileError, TaskFailed, MissingDependency, LayoutBusy, OSError, ValueError) as exc:
                die(exc)
            where = out / "profile.json"
        else:
            try:
                m = method_from_spec(spec)
            except (KeyError, ValueError, TypeError, ModelUnavailable, MissingDependency) as exc:
                die(str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else exc)
            target = out if _looks_like_file(out) else out / "predictions.csv"
            try:
                summary = profile_file(
                    inputs[0], m, target, caption_col=caption_column, batch_size=batch_size, progress=progress
                )
            except (ProfileError, OSError, ValueError) as exc:
                die(exc)
            finally:
                m.close()
            where = target
        n, k = summary["captions"], summary["with_country"]
        top = ", ".join(f"{c} {v}" for c, v in list(summary["countries"].items())[:5])
        share = f"{k / n:.1%}" if n else "0%"
        msg = f"{n} captions, {k} with a country ({share}); top: {top or '-'}"
        if summary.get("sent_to_llm") is not None:
            sent = summary["sent_to_llm"]
            msg += f"; {sent} sent to the LLM ({sent / n:.1%})" if n else "; none sent to the LLM"
        if summary.get("errors"):
            msg += f"; {summary['errors']} errors (see the error column)"
        say(msg, err=True)
        say(f"wrote {where}", err=True)  # a path is data: never markup

    @app.command("explain")
    def explain_cmd(
        caption: Annotated[str, typer.Argument(help="One caption.")],
    ) -> None:
        """Show how the offline method reads a caption: mentions, evidence and country scores."""
        from rich.console import Console

        from fairsets.geo.methods.offline import explain

        Console().print_json(json.dumps(explain(caption), ensure_ascii=False))

    @app.command("methods")
    def methods_cmd() -> None:
        """List the registered caption → country methods."""
        from fairsets.geo.methods import GEO_METHODS

        for name in GEO_METHODS.names():
            doc = (GEO_METHODS.get(name).__module__ or "").rsplit(".", 1)[-1]
            cls = GEO_METHODS.get(name)
            first = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else doc
            say(text(name, "bold"), f" {first}")
