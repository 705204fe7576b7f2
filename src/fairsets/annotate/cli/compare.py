"""``fairsets annotate compare-captioners``: the win rate of captioner A over B, judged by a third
model, with its 95 % interval (:mod:`fairsets.annotate.captions.compare`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from fairsets._cli_util import console, die, setup_logging

from .options import check_ann_folder, check_input_file, library_errors, read_prompt


def summary_line(result: dict[str, Any]) -> str:
    """One line: the rate and interval, the counts, what was skipped, and what this run sent."""
    a, b = result["a"]["name"], result["b"]["name"]
    c, run = result["counts"], result["run"]
    line = (
        f"{a} vs {b} (judge {result['judge']['name']}): {a} wins {100 * result['rate']:.1f} % "
        f"[{100 * result['low']:.1f}, {100 * result['high']:.1f}] ({100 * result['level']:.0f} % "
        f"{result['method']}) of {result['n_valid']} judged pairs "
        f"({c['A']} A, {c['B']} B, {c['tie']} ties; {c['invalid']} invalid verdicts left out)"
    )
    if result["skipped"]["total"]:
        reasons = ", ".join(f"{k} {r}" for r, k in result["skipped"]["by_reason"].items())
        line += f"; {result['skipped']['total']} box(es) skipped ({reasons})"
    line += (
        f"; {run['requests']['total']} request(s) sent, {run['captions_from_cache']} caption(s) "
        f"and {run['cache_hits']['judge']} verdict(s) from the cache"
    )
    where = result["out"]
    return line + (
        f" → {where}/compare.json" if result["written"] else f"; {where} already held these results"
    )


def no_verdict_line(result: dict[str, Any], out: Path) -> str:
    """The one-line error when no verdict is valid: what happened, and what a re-run can change."""
    reasons = ", ".join(f"{k} {r}" for r, k in result["skipped"]["by_reason"].items()) or "none skipped"
    refused = int(result["answers"]["judge"].get("refused", 0))
    line = (
        f"no valid verdict among {result['n_judged']} judged pair(s) of {result['n_sampled']} box(es) "
        f"({result['counts']['invalid']} invalid verdicts, {refused} of them refusals; skipped: {reasons}): "
        f"the win rate is undefined; see {out}/compare.json. Fix the endpoints or the judge and run again: "
        "failed requests, empty captions and replies that name no verdict are not cached, so they are "
        "asked again"
    )
    if refused:
        line += "; a refusal is the judge's answer (cached): use another --judge to change it"
    return line


def compare_cmd(
    ann: Annotated[Path, typer.Argument(help="The annotation folder (fairsets annotate persons --out).")],
    annotators: Annotated[
        Path, typer.Option("--annotators", help="annotators.toml naming the captioners and the judge.")
    ],
    a: Annotated[str, typer.Option("--a", help="Captioner A (a name in annotators.toml).")],
    b: Annotated[str, typer.Option("--b", help="Captioner B (a name in annotators.toml).")],
    judge: Annotated[str, typer.Option("--judge", help="The judge (best a third model).")],
    out: Annotated[
        Path, typer.Option("--out", help="Output folder: compare.json, verdicts.parquet, report.html.")
    ],
    n: Annotated[int, typer.Option("--n", help="Kept boxes to sample and compare on.")] = 500,
    seed: Annotated[int, typer.Option(help="Seed of the sample and of the caption order.")] = 0,
    prompt: Annotated[
        str | None, typer.Option("--prompt", help="Caption prompt (default: the LAION person-centric one).")
    ] = None,
    prompt_file: Annotated[
        Path | None, typer.Option("--prompt-file", help="A UTF-8 file holding the caption prompt.")
    ] = None,
    interval: Annotated[str, typer.Option(help="wilson or bootstrap.")] = "wilson",
    max_retries: Annotated[int, typer.Option(help="Retries per request (429, 5xx, timeouts).")] = 3,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
) -> None:
    """Compare two captioners on N kept boxes: both caption the red-box view, a judge picks the
    better caption of each pair (shown in a balanced order), and A's win rate is reported with its
    95 % interval (ties count half). Cached answers are reused; a re-run resumes.
    """
    from fairsets.annotate.captions.compare import compare_captioners
    from fairsets.core.progress import Progress
    from fairsets.fetch.chat import ChatServiceError

    setup_logging(False, quiet)
    check_ann_folder(ann)
    check_input_file(annotators, "annotators.toml")
    prompt = read_prompt(prompt, prompt_file)
    if interval not in ("wilson", "bootstrap"):
        die(f"--interval {interval!r}: choose wilson or bootstrap")
    try:
        result = compare_captioners(
            ann,
            annotators,
            a=a,
            b=b,
            judge=judge,
            out=out,
            n=n,
            seed=seed,
            prompt=prompt,
            interval=interval,
            max_retries=max_retries,
            progress=Progress(False if quiet else None),
        )
    except ChatServiceError as exc:
        die(exc)
    except library_errors() as exc:
        die(exc)
    if result["rate"] is None:
        die(no_verdict_line(result, out))
    if not quiet:
        for warning in result["warnings"]:
            console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
        console.print(summary_line(result), highlight=False, soft_wrap=True, markup=False)


def register(app: typer.Typer) -> None:
    """Add ``compare-captioners`` to ``app``."""
    app.command("compare-captioners")(compare_cmd)
