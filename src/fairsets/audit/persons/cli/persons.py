"""``fairsets audit persons``: composition, crime words, sentiment and caption themes of an
annotation folder (:mod:`fairsets.audit.persons.run`), into ``audit.json`` and ``report.html``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fairsets._cli_util import console, die, setup_logging

__all__ = ["audit_persons_cmd", "summary_lines"]


def _pct(x: Any) -> str:
    return "—" if x is None else f"{100 * x:.1f} %"


def summary_lines(doc: dict[str, Any]) -> list[str]:
    """A few lines for the terminal: sizes, image shares by gender, the largest crime Δ, what was skipped."""
    comp = doc["composition"]
    lines = [
        f"{doc['annotations']}: {comp['n_boxes']} kept boxes, {comp['n_person_images']} person images "
        f"of {comp['n_images']} images, {doc['n_shards']} shard(s)"
    ]
    gender = (comp.get("images") or {}).get("gender")
    if gender:
        shares = ", ".join(f"{g} {_pct(v['share'])}" for g, v in gender["groups"].items() if v["count"])
        lines.append(f"images by perceived gender: {shares}")
    alt = (doc.get("crime") or {}).get("alt") or {}
    deltas = [
        (g, attr, row["delta_pct"])
        for attr in ("gender", "race")
        for g, row in (alt.get(attr) or {}).items()
        if row.get("delta_pct") is not None
    ]
    if deltas:
        g, attr, d = max(deltas, key=lambda t: abs(t[2]))
        lines.append(f"largest crime-word Δ in alt-texts: {d:+.1f} % ({attr} {g})")
    for name, why in (doc.get("skipped") or {}).items():
        if why:
            lines.append(f"{name} left out: {why}")
    return lines


def audit_persons_cmd(
    ann: Annotated[Path, typer.Argument(help="The annotation folder (fairsets annotate persons --out).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for audit.json and report.html.")],
    crime_words: Annotated[
        Path | None,
        typer.Option("--crime-words", help="A TOML file `words = [...]` replacing the default list."),
    ] = None,
    min_count: Annotated[
        int, typer.Option("--min-count", help="Fewest texts behind a reported ratio (fewer: null).")
    ] = 100,
    sentiment: Annotated[
        str,
        typer.Option(help="vader, a NEG/NEU/POS text-classification model (folder or hub id), or none."),
    ] = "vader",
    workers: Annotated[
        int, typer.Option(help="Processes scoring VADER sentiment in parallel (same numbers for any count).")
    ] = 1,
    themes: Annotated[
        str,
        typer.Option(
            help="Caption themes: auto (MiniLM when it loads), a sentence-transformers model, or none."
        ),
    ] = "auto",
    themes_text: Annotated[
        str | None, typer.Option(help="person or alt (default: person captions when there are any).")
    ] = None,
    themes_max_texts: Annotated[int, typer.Option(help="Texts sampled for the themes.")] = 20_000,
    sae_latents: Annotated[int, typer.Option(help="SAE dictionary size.")] = 512,
    sae_k: Annotated[int, typer.Option(help="Active SAE latents per text (TopK).")] = 16,
    sae_steps: Annotated[int, typer.Option(help="SAE training steps.")] = 2_000,
    min_support: Annotated[
        int, typer.Option(help="Fewest texts of an identity with a theme active for its PMI.")
    ] = 20,
    n_boot: Annotated[int, typer.Option(help="Bootstrap replicates of the PMI intervals.")] = 200,
    seed: Annotated[int, typer.Option(help="Seeds the theme sample, the SAE and the bootstrap.")] = 0,
    device: Annotated[
        str, typer.Option(help="cpu, cuda or cuda:N (embedding and sentiment models).")
    ] = "cpu",
    memory_limit: Annotated[
        str | None, typer.Option(help="DuckDB memory limit, e.g. 2GB (it spills to disk beyond).")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
) -> None:
    """Audit the perceived labels of ANN: composition, crime-word association, sentiment and caption
    themes (SAE + PMI) per perceived gender and race. Writes OUT/audit.json and OUT/report.html.

    A re-run resumes the theme embeddings and SAE training from OUT/.work/.
    """
    from fairsets.annotate.cli.options import check_ann_folder, checked_device, library_errors
    from fairsets.audit.cli import check_out
    from fairsets.core.progress import Progress

    from ..run import AUDIT_FILE, REPORT_FILE, run_persons_audit

    setup_logging(False, quiet)
    device = checked_device(device)
    check_ann_folder(ann)
    check_out(out, folder=True)
    if crime_words is not None and not crime_words.is_file():
        die(f'{crime_words}: no such file; give a TOML word list (words = ["thief", ...]) to --crime-words')
    if themes_text not in (None, "person", "alt"):
        die(f"--themes-text {themes_text!r}: use person or alt")
    none = ("none", "off", "")
    try:
        doc = run_persons_audit(
            ann,
            out,
            crime_words=crime_words,
            min_count=min_count,
            sentiment=None if sentiment.strip().lower() in none else sentiment.strip(),
            sentiment_workers=workers,
            themes=None if themes.strip().lower() in none else themes.strip(),
            themes_text=themes_text,
            themes_max_texts=themes_max_texts,
            sae_latents=sae_latents,
            sae_k=sae_k,
            sae_steps=sae_steps,
            min_support=min_support,
            n_boot=n_boot,
            seed=seed,
            device=device,
            memory_limit=memory_limit,
            progress=Progress(False if quiet else None),
        )
    except library_errors() as exc:
        die(exc)
    except Exception as exc:  # a table DuckDB cannot read (a truncated or foreign Parquet file)
        import duckdb

        if not isinstance(exc, duckdb.Error):
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        die(f"{ann}: a table cannot be read ({first}); run the fairsets annotate command that wrote it again")
    if quiet:
        return
    for line in summary_lines(doc):
        console.print(line, highlight=False, soft_wrap=True)
    console.print(f"wrote {out / AUDIT_FILE} and {out / REPORT_FILE}", highlight=False, soft_wrap=True)
