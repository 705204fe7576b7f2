"""``fairsets audit persons``: composition, crime words, sentiment and caption themes of an
annotation folder (:mod:`fairsets.audit.persons.run`), into ``audit.json`` and ``report.html``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fairsets._cli_util import die, setup_logging

__all__ = ["audit_persons_cmd", "summary_lines"]


def _pct(x: Any) -> str:
    return "—" if x is None else f"{100 * x:.1f} %"


def _delta(x: Any) -> str:
    return "—" if x is None else f"{x:+.1f} %"


def _columns(rows: list[list[str]], indent: str = "  ") -> list[str]:
    """Rows as aligned text columns (the first left-aligned, the others right-aligned)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        indent
        + "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]


def _groups(section: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{attr} {g}", row) for attr in ("gender", "race") for g, row in (section.get(attr) or {}).items()
    ]


def _crime_lines(
    title: str, section: dict[str, Any], alternative: dict[str, Any], other: str, min_count: int
) -> list[str]:
    rows = [["group", "texts", "matches", "rate", "Δ", f"Δ ({other})"]]
    o = section.get("overall") or {}
    rows.append(["all", str(o.get("n")), str(o.get("matches")), _pct(o.get("rate")), "", ""])
    for label, row in _groups(section):
        attr, g = label.split(" ", 1)
        alt_row = ((alternative.get(attr) or {}).get(g)) or {}
        small = row.get("n", 0) < min_count
        rows.append(
            [
                label,
                str(row.get("n")),
                str(row.get("matches")),
                _pct(row.get("rate")),
                f"n < {min_count}" if small else _delta(row.get("delta_pct")),
                "" if small else _delta(alt_row.get("delta_pct")),
            ]
        )
    return [title, *_columns(rows)]


def _sentiment_lines(title: str, section: dict[str, Any], min_count: int) -> list[str]:
    rows = [["group", "texts", "negative ratio", "mean score"]]
    for label, row in [("all", section.get("overall") or {}), *_groups(section)]:
        small = row.get("n", 0) < min_count
        neg = (row.get("negative") or {}).get("share")
        mean = row.get("mean")
        rows.append(
            [
                label,
                str(row.get("n")),
                f"n < {min_count}" if small else ("—" if neg is None else f"{neg:.3f}"),
                "" if small or mean is None else f"{mean:+.3f}",
            ]
        )
    return [title, *_columns(rows)]


_RULES = {"exclusive": "one group per image", "any": "an image in every group of its boxes"}


def summary_lines(doc: dict[str, Any]) -> list[str]:
    """The terminal summary: sizes, image shares by group, and the paper's per-group tables —
    crime-word Δ of every group (with the other reference's Δ beside it) and sentiment (negative
    ratio, mean score) — for the alt-texts and each captioner; corrected shares; what was skipped."""
    comp = doc["composition"]
    settings = doc.get("settings") or {}
    min_count = settings.get("min_count") or 1
    rule = comp.get("group_rule") or settings.get("group_rule") or "exclusive"
    lines = [
        f"{doc['annotations']}: {comp['n_boxes']} kept boxes, {comp['n_person_images']} person images "
        f"of {comp['n_images']} images, {doc['n_shards']} shard(s)",
        f"group rule: {rule} ({_RULES.get(rule, rule)}); 'unclear' is a label, 'unlabelled' is no label",
    ]
    for attr in ("gender", "race"):
        table = (comp.get("images") or {}).get(attr)
        if table:
            shares = ", ".join(f"{g} {_pct(v['share'])}" for g, v in table["groups"].items() if v["count"])
            lines.append(f"person images by perceived {attr}: {shares}")
    for attr, result in sorted((comp.get("corrected") or {}).items()):
        labels = result.get("labels") or []
        raw, fixed = result.get("raw") or {}, result.get("corrected") or {}
        pairs = ", ".join(f"{g} {_pct(fixed.get(g))} (raw {_pct(raw.get(g))})" for g in labels)
        lines.append(f"{attr} box shares corrected with {result.get('source')}: {pairs}")
    crime = doc.get("crime") or {}
    alternative = crime.get("alternative") or {}
    reference = crime.get("delta_reference", "all")
    other = alternative.get("delta_reference", "")
    what = "all texts of that kind" if reference == "all" else "the texts not in the group"
    lines.append(f"crime-word Δ = rate of the group / rate of {what} − 1 (--delta-reference {reference})")
    if crime.get("alt"):
        alt = alternative.get("alt") or {}
        lines += _crime_lines("crime words in alt-texts:", crime["alt"], alt, other, min_count)
    for captioner, section in (crime.get("person") or {}).items():
        alt = ((alternative.get("person") or {}).get(captioner)) or {}
        lines += _crime_lines(
            f"crime words in person captions by {captioner}:", section, alt, other, min_count
        )
    sent = doc.get("sentiment") or {}
    scorer = (sent.get("scorer") or {}).get("name")
    if sent.get("alt"):
        lines += _sentiment_lines(f"sentiment of alt-texts ({scorer}):", sent["alt"], min_count)
    for captioner, section in (sent.get("person") or {}).items():
        lines += _sentiment_lines(
            f"sentiment of person captions by {captioner} ({scorer}):", section, min_count
        )
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
    exclusions: Annotated[
        Path | None,
        typer.Option(
            "--exclusions",
            help="A TOML file of innocent-sense phrases masked before matching (default: the shipped table).",
        ),
    ] = None,
    group_rule: Annotated[
        str,
        typer.Option(
            "--group-rule",
            help="exclusive: one group per image (mixed, unclear, unlabelled included); any: every group "
            "of its boxes.",
        ),
    ] = "exclusive",
    delta_reference: Annotated[
        str,
        typer.Option(
            "--delta-reference",
            help="Crime-word Δ against all texts (the paper's) or the complement of the group.",
        ),
    ] = "all",
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
    identity_mask: Annotated[
        bool,
        typer.Option(
            "--identity-mask/--no-identity-mask",
            help="Mask the gender words and race keywords of the theme texts before embedding.",
        ),
    ] = True,
    pmi: Annotated[
        str, typer.Option("--pmi", help="Theme PMI with binary latents or activation-weighted.")
    ] = "binary",
    correct_with: Annotated[
        list[Path] | None,
        typer.Option(
            "--correct-with",
            help="An annotate verify report (verify_ATTR.json or its folder): box shares corrected for "
            "the classifier's confusion. Repeatable.",
        ),
    ] = None,
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
    if exclusions is not None and not exclusions.is_file():
        die(f"{exclusions}: no such file; give a TOML phrase table (phrases = [...]) to --exclusions")
    for path in correct_with or []:
        if not path.exists():
            die(f"{path}: no such file; give --correct-with the verify_ATTR.json annotate verify wrote")
    for option, value, allowed in (
        ("--group-rule", group_rule, ("exclusive", "any")),
        ("--delta-reference", delta_reference, ("all", "complement")),
        ("--pmi", pmi, ("binary", "weighted")),
    ):
        if value not in allowed:
            die(f"{option} {value!r}: use {' or '.join(allowed)}")
    if themes_text not in (None, "person", "alt"):
        die(f"--themes-text {themes_text!r}: use person or alt")
    none = ("none", "off", "")
    try:
        doc = run_persons_audit(
            ann,
            out,
            crime_words=crime_words,
            exclusions=exclusions,
            min_count=min_count,
            group_rule=group_rule,
            delta_reference=delta_reference,
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
            identity_mask=identity_mask,
            pmi=pmi,
            correct_with=list(correct_with or []),
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
    from fairsets.core.console import say

    for line in summary_lines(doc):  # group names, captioners, reasons, install hints: never markup
        say(line, err=True)
    say(f"wrote {out / AUDIT_FILE} and {out / REPORT_FILE}", err=True)
