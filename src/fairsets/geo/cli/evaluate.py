"""``fairsets geo evaluate``: score caption → country methods against labelled captions."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from fairsets._cli_util import die

from .profile import _METHOD_HELP, _OPTION_HELP, build_method

out_console = Console()


def register(app: typer.Typer) -> None:
    """Add ``evaluate`` to the ``fairsets geo`` app."""

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
