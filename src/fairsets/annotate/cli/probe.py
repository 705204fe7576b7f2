"""``fairsets annotate probe``: what each chat server of an ``annotators.toml`` can do
(:mod:`fairsets.fetch.chat.probe`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fairsets._cli_util import die, setup_logging
from fairsets.core.console import say, visible

from .options import check_input_file, library_errors, names_option, split_names

if TYPE_CHECKING:
    from fairsets.fetch.chat.probe import ProbeReport

_HEAD = ("annotator", "server", "answers", "constraint", "logprobs", "latency", "concurrency")


def table(reports: list[ProbeReport], styles: dict[str, str]) -> list[str]:
    """The plain-text table, one row per annotator, then each one's details."""
    rows = [_HEAD]
    for r in reports:
        constraint = r.constraint if r.constraint == "not asked" else f"{styles[r.name]}: {r.constraint}"
        rows.append(
            (
                r.name,
                r.where,
                "yes" if r.answers else "no",
                constraint if r.error is None else "-",
                ("yes" if r.logprobs else "no") if r.error is None else "-",
                f"{r.latency:.2f} s (median of {r.samples})" if r.latency is not None else "-",
                str(r.suggested_concurrency) if r.suggested_concurrency is not None else "-",
            )
        )
    widths = [max(len(visible(row[i])) for row in rows) for i in range(len(_HEAD))]
    lines = [
        "  ".join(visible(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    for r in reports:
        if r.error is not None:
            lines.append(f"{r.name}: error: {r.error}")
            continue
        if r.constraint_detail:
            lines.append(f"{r.name}: constraint {r.constraint}: {r.constraint_detail}")
        if r.concurrency_rule:
            lines.append(f"{r.name}: concurrency {r.concurrency_rule}")
    return [visible(line) for line in lines]


def probe_cmd(
    annotators: Annotated[Path, typer.Argument(help="annotators.toml: one annotators.NAME table per model.")],
    names: Annotated[
        list[str] | None,
        names_option("--names", "The annotators.NAME tables to probe (default: every table)", "NAME,NAME"),
    ] = None,
    samples: Annotated[int, typer.Option(help="Requests sent one at a time to time one answer.")] = 3,
    burst: Annotated[
        int, typer.Option(help="Requests sent at once to measure a server without a rate limit (0: none).")
    ] = 8,
) -> None:
    """Ask each annotator's server what it can do: whether it answers, obeys its constrain setting,
    returns log-probabilities, how long one answer takes, and a max_concurrency to start from.

    Prints a table (and each number's rule); exits 1 when a server does not answer, or does not
    obey a constraint its table requires (on_ignored_constraint = "fail"); 2 for a bad file or option.
    """
    from fairsets.annotate.chat.annotators import load_annotators
    from fairsets.fetch.chat.probe import probe_endpoint

    setup_logging(False, True)
    check_input_file(annotators, "annotators.toml")
    if samples < 1:
        die(f"--samples {samples}: give 1 or more")
    if burst < 0:
        die(f"--burst {burst}: give 0 (no burst) or more")
    chosen = split_names(names, "--names", "qwen,gpt")
    try:
        found = load_annotators(annotators)
        if chosen:
            found = found.pick(chosen, "--names")
    except library_errors() as exc:
        die(exc)
    reports = [probe_endpoint(ep, samples=samples, burst=burst) for _, ep in found]
    styles = {name: ep.constrain for name, ep in found}
    for line in table(reports, styles):
        say(line)
    failing = {name for name, ep in found if ep.on_ignored_constraint == "fail"}
    bad = [
        r.name
        for r in reports
        if r.error is not None or (r.constraint not in ("obeyed", "not asked") and r.name in failing)
    ]
    if bad:
        say(f"{len(bad)} of {len(reports)} annotators need attention: {', '.join(bad)}", err=True)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``probe`` to ``app``."""
    app.command("probe")(probe_cmd)
