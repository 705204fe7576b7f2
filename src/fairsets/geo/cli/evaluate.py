"""``fairsets geo evaluate``: score caption → country methods against labelled captions.

Each method runs on every labelled caption (``predict_detailed``). The table shows, per method,
precision and recall at the method's own operating point (its ``min_confidence`` where it has
one, column ``t``) with bootstrap intervals, F1 and the none confusion; for a method that gives
scores it adds the lowest threshold whose precision reaches ``--target-precision`` and the recall
kept there ("P≥0.86 at t=0.62 → R=0.81"). ``hybrid`` also reports the share of captions it sent
to the LLM.

With ``--threshold-from VAL``: for each method that takes a threshold, it is chosen on the other
labelled file ``VAL`` (``--threshold-rule best-f1``: the best F1 there; ``target``: the lowest
threshold whose precision there reaches ``--target-precision``) and applied unchanged to the
evaluated file; the choice and its scores on ``VAL`` are printed and kept in ``evaluation.json``
(``threshold_chosen_on``).

With ``--out``: ``evaluation.json`` (every method's scores, plus the precision–recall curve and
the operating points for methods with scores), ``errors-<method>.csv`` (the wrongly answered
captions with their confidence, evidence and any failure), and ``pr-<method>.png`` per method
with a curve (plus ``pr.png`` with one line per method when several have one; skipped with a
log line when matplotlib is missing).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from fairsets._cli_util import die
from fairsets.core.console import DataTable, say, show

from .options import _METHOD_HELP, _OPTION_HELP, check_min_confidence, min_confidence_option
from .profile import build_method, parse_options

log = logging.getLogger(__name__)


def _takes(name: str, option: str) -> bool:
    """Whether the registered method ``name`` names ``option`` in its constructor."""
    from fairsets.geo.methods.base import takes_option

    try:
        return takes_option(name, option)
    except KeyError:
        return False  # an unknown name: build_method reports it


def _target_cell(r: dict[str, Any]) -> str:
    """``t=0.62 → R=0.810``: the lowest threshold reaching the target precision and its recall."""
    ops = r.get("operating_points")
    if ops is None:
        return "-"
    at = ops["at_target"]
    if at is None:
        return "not reached"
    return f"t={at['threshold']:.2f} → R={at['recall']:.3f}"


def _sent_line(name: str, r: dict[str, Any]) -> str | None:
    if "sent_to_llm" not in r:
        return None
    return (
        f"{name}: {r['sent_to_llm']} of {r['n']} captions sent to the LLM ({r['share_sent_to_llm']:.1%}, "
        f"confidence below {r['llm_below']:g})"
    )


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
            typer.Option(
                "--out",
                "-o",
                help="Folder for evaluation.json, errors-<method>.csv and pr-<method>.png.",
            ),
        ] = None,
        bootstrap: Annotated[
            int, typer.Option(help="Bootstrap resamples for 95% intervals (0 = none).")
        ] = 1000,
        seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
        min_confidence: Annotated[
            float | None,
            min_confidence_option(
                "Operating threshold (0-1) for the methods that take one (offline, hybrid)."
            ),
        ] = None,
        target_precision: Annotated[
            float,
            typer.Option(
                "--target-precision",
                help="Report the lowest threshold whose precision reaches this, with its recall.",
            ),
        ] = 0.86,
        threshold_from: Annotated[
            Path | None,
            typer.Option(
                "--threshold-from",
                help="Other labelled captions (a validation split): the threshold of the methods "
                "that take one (offline, hybrid) is chosen there, then applied here unchanged.",
            ),
        ] = None,
        threshold_rule: Annotated[
            str,
            typer.Option(
                "--threshold-rule",
                help="How --threshold-from chooses: best-f1 (the best F1 there) or target (the "
                "lowest threshold whose precision there reaches --target-precision).",
            ),
        ] = "best-f1",
    ) -> None:
        """Precision/recall as in the paper (Table 9), F1, the none confusion, per-continent scores,
        and precision–recall curves for methods with a confidence."""
        import time

        from fairsets.geo.evaluate import (
            THRESHOLD_RULES,
            LabelError,
            choose_threshold,
            evaluate_predictions,
            load_labelled,
            plot_pr,
            write_evaluation,
        )
        from fairsets.geo.profile import ProfileError

        names = list(dict.fromkeys(method or ["offline"]))
        from fairsets.geo.methods import GEO_METHODS

        for n in names:  # an unknown name is that, before any question of its options
            try:
                GEO_METHODS.get(n)
            except KeyError as exc:
                die(exc.args[0] if exc.args else exc)
        if not 0.0 < target_precision <= 1.0:
            die(f"--target-precision must be in (0, 1], not {target_precision}")
        check_min_confidence(
            min_confidence,
            lambda: any(_takes(n, "min_confidence") for n in names),
            f"{', '.join(names)} give no confidence; use -m offline or -m hybrid (or drop the option)",
        )
        if bootstrap < 0:
            die(f"--bootstrap must be 0 or more, not {bootstrap}")
        if threshold_rule not in THRESHOLD_RULES:
            die(f"--threshold-rule must be {' or '.join(THRESHOLD_RULES)}, not {threshold_rule!r}")
        if threshold_from is not None:
            try:
                given = "min_confidence" in parse_options(option)
            except ValueError as exc:
                die(exc)
            if min_confidence is not None or given:
                die(
                    "--threshold-from chooses the threshold: drop --min-confidence and "
                    "-O min_confidence (or --threshold-from)"
                )
            if not any(_takes(n, "min_confidence") for n in names):
                die(
                    f"--threshold-from: {', '.join(names)} give no confidence; use -m offline or "
                    "-m hybrid (or drop the option)"
                )
            if threshold_from.resolve() == labelled.resolve():
                die(
                    "--threshold-from names the evaluated file itself; choose the threshold on "
                    "another labelled set (a validation split)"
                )
        try:
            captions, gold = load_labelled(labelled)
            chooser = load_labelled(threshold_from) if threshold_from is not None else None
        except (LabelError, ProfileError, OSError) as exc:
            die(exc)
        results: dict[str, dict[str, Any]] = {}
        thresholds: dict[str, float | None] = {}
        for name in names:
            opts = list(option or []) if len(names) <= 1 else []
            if min_confidence is not None and _takes(name, "min_confidence"):
                opts.append(f"min_confidence={min_confidence}")
            chosen = None
            if chooser is not None and threshold_from is not None and _takes(name, "min_confidence"):
                m = build_method(name, opts)
                try:
                    # hybrid: the threshold is its first method's, chosen on that method's curve
                    # (no LLM call is needed to choose it)
                    chosen_preds = getattr(m, "first", m).predict_detailed(chooser[0])
                finally:
                    m.close()
                try:
                    chosen = choose_threshold(
                        chooser[1], chosen_preds, rule=threshold_rule, target_precision=target_precision
                    )
                except ValueError as exc:
                    hint = "; try --threshold-rule best-f1" if threshold_rule == "target" else ""
                    die(f"--threshold-from {threshold_from.name}: {name}: {exc}{hint}")
                opts.append(f"min_confidence={chosen['threshold']!r}")
            m = build_method(name, opts)
            t0 = time.perf_counter()
            try:
                preds = m.predict_detailed(captions)
            finally:
                m.close()
            r = evaluate_predictions(
                gold,
                preds,
                captions=captions,
                bootstrap=bootstrap,
                seed=seed,
                target_precision=target_precision,
            )
            r["seconds"] = time.perf_counter() - t0
            t = getattr(m, "min_confidence", None)
            if t is None and hasattr(m, "first"):
                t = getattr(m.first, "min_confidence", None)
            thresholds[name] = t
            if t is not None:
                r["min_confidence"] = t
            if chosen is not None:
                r["threshold_chosen_on"] = {"file": threshold_from.name if threshold_from else "", **chosen}
            prov = m.provenance()
            if "sent_to_llm" in prov:
                r["sent_to_llm"] = prov["sent_to_llm"]
                r["share_sent_to_llm"] = prov["share_sent_to_llm"]
                r["llm_below"] = prov["llm_below"]
            if r.get("pr_curve_skipped"):
                log.info("%s: no precision–recall curve (%s)", name, r["pr_curve_skipped"])
            results[name] = r
        n_gold = sum(g is not None for g in gold)
        table = DataTable(title=f"{labelled.name}: {len(captions)} captions, {n_gold} with a country")
        columns = (
            "method",
            "t",
            "precision",
            "recall",
            "F1",
            "none→country",
            "country→none",
            "wrong country",
        )
        for col in columns:
            table.add_column(col, justify="right" if col != "method" else "left", no_wrap=col == "method")
        curves = any("operating_points" in r for r in results.values())
        if curves:
            table.add_column(f"P≥{target_precision:g} at", justify="left", no_wrap=True)
        for name, r in results.items():
            c = r["none_confusion"]
            ci_p = r.get("precision_ci95")
            ci_r = r.get("recall_ci95")
            t = thresholds[name]
            row = [
                name,
                "-" if t is None else f"{t:.2f}",
                f"{r['precision']:.3f}" + (f" [{ci_p[0]:.2f}, {ci_p[1]:.2f}]" if ci_p else ""),
                f"{r['recall']:.3f}" + (f" [{ci_r[0]:.2f}, {ci_r[1]:.2f}]" if ci_r else ""),
                f"{r['f1']:.3f}",
                str(c["none→country"]),
                str(c["country→none"]),
                str(c["country→other country"]),
            ]
            if curves:
                row.append(_target_cell(r))
            table.add_row(*row)
        show(table)  # file names are data: never markup
        for name, r in results.items():
            ch = r.get("threshold_chosen_on")
            if ch:
                rule = (
                    "best F1" if ch["rule"] == "best-f1" else f"lowest reaching P≥{ch['target_precision']:g}"
                )
                say(
                    f"{name}: threshold {ch['threshold']:.3f} chosen on {ch['file']} ({rule} there: "
                    f"P {ch['precision']:.3f}, R {ch['recall']:.3f}, {ch['n']} captions)",
                    err=True,
                )
            line = _sent_line(name, r)
            if line:
                say(line, err=True)
            if r.get("method_errors"):
                say(f"{name}: failed on {r['method_errors']} captions (see errors-{name}.csv)", err=True)
        if out is not None:
            try:
                write_evaluation(results, out)
                plots = [
                    plot_pr({n: r}, out / f"pr-{n}.png", title=f"{labelled.name}: {n}")
                    for n, r in results.items()
                ]
                if sum(1 for r in results.values() if r.get("pr_curve")) > 1:
                    plots.append(plot_pr(results, out / "pr.png", title=labelled.name))
            except OSError as exc:
                die(f"{out}: cannot write the evaluation ({exc}); choose a writable folder with --out")
            say(f"wrote {out / 'evaluation.json'}", err=True)
            for p in plots:
                if p is not None:
                    say(f"wrote {p}", err=True)
