"""``fairsets audit persons``: every audit of an annotation folder, into one ``audit.json`` and one
``report.html``.

:func:`run_persons_audit` opens the folder's views (:func:`.tables.connect`) and runs, in order:

1. **composition** (:func:`.composition.composition`) — always;
2. **crime words** (:func:`.crime.crime_association`) over alt-texts and, when the folder has them,
   person captions — always (the default word list, or ``crime_words``);
3. **sentiment** (:func:`.sentiment.sentiment`) — VADER by default, a transformer NEG/NEU/POS model
   when one is named, none with ``sentiment=None``. Left out, with the reason in
   ``skipped.sentiment``, when VADER is the default and not installed;
4. **themes** (:func:`.themes_run.run_themes`) — a sample of at most ``themes_max_texts`` texts
   (person captions of one captioner, or alt-texts when the folder has no person captions), their
   identity words masked (:mod:`.identity`; ``identity_mask=False`` keeps them), embedded with a
   sentence-transformers model, a TopK sparse autoencoder trained on them and the PMI of each
   perceived gender and race with each latent (``pmi``: binary or activation-weighted). Left out,
   with the reason, when the embedding model cannot load and was not named explicitly
   (``themes="auto"``), or with ``themes=None``.

**One set of rules.** Every section groups images by the one image-level rule of :mod:`.tables`
(``group_rule``, ``exclusive`` by default) and states it; crime-word Δ is against
``delta_reference`` (``all`` by default; the other reference is under ``crime.alternative``). The
document's ``definitions`` states the shared rules; each section has its own ``definitions``.
With ``correct_with`` (``annotate verify`` reports), the box shares are also given corrected for
the classifier's confusion (:mod:`.correction`) in ``composition.corrected``.

Every aggregation runs in DuckDB over the Parquet tables, streamed.

**Resuming.** The work that costs time is kept under ``OUT/.work/``: the embeddings of the sample
(keyed by the model and the sample's texts) and the SAE checkpoints (:func:`.sae.train_sae`
resumes from them bit for bit). An interrupted run started again with the same arguments skips
what is done and writes the same ``audit.json``, byte for byte. Both output files are written
atomically, ``audit.json`` first.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fairsets.core.atomic import atomic_write_text

from .tables import DEFAULT_GROUP_RULE, UNLABELLED, group_rule_definition

__all__ = ["AUDIT_FILE", "REPORT_FILE", "SCHEMA", "WORK_DIR", "run_persons_audit"]

logger = logging.getLogger(__name__)

SCHEMA = "fairsets.audit.persons/1"
AUDIT_FILE = "audit.json"
REPORT_FILE = "report.html"
WORK_DIR = ".work"
#: ``themes="auto"``: run the themes with this model when it loads, else record why not.
AUTO_THEMES_MODEL = "minilm"


def run_persons_audit(
    ann: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    crime_words: str | os.PathLike[str] | None = None,
    exclusions: str | os.PathLike[str] | None = None,
    min_count: int = 100,
    group_rule: str = DEFAULT_GROUP_RULE,
    delta_reference: str = "all",
    sentiment: str | None = "vader",
    sentiment_workers: int = 1,
    themes: str | None = "auto",
    themes_text: str | None = None,
    themes_max_texts: int = 20_000,
    sae_latents: int = 512,
    sae_k: int = 16,
    sae_steps: int = 2_000,
    min_support: int = 20,
    n_boot: int = 200,
    seed: int = 0,
    device: str = "cpu",
    threads: int | None = None,
    memory_limit: str | None = None,
    report: bool = True,
    progress: Any = None,
    identity_mask: bool = True,
    pmi: str = "binary",
    correct_with: Sequence[str | os.PathLike[str]] = (),
) -> dict[str, Any]:
    """Audit the annotation folder ``ann`` into ``out`` (see the module docstring).

    Args:
        ann: the annotation folder (``fairsets annotate persons --out``, then ``classify``).
        out: the output folder (``audit.json``, ``report.html``, ``.work/``).
        crime_words: a TOML word list (``words = [...]``); default: the list that ships.
        exclusions: a file of innocent-sense phrases (:func:`.words.load_exclusions`); default:
            the table that ships.
        min_count: the fewest texts (or images) behind a reported ratio.
        group_rule: the image-level group rule of every section, ``exclusive`` or ``any``.
        delta_reference: the reference set of crime-word Δ, ``all`` or ``complement``.
        sentiment: ``"vader"``, a transformer model (local folder or hub id), or None.
        sentiment_workers: processes scoring VADER in parallel (the same numbers for any count).
        themes: ``"auto"`` (MiniLM when it loads), a sentence-transformers model, or None.
        themes_text: ``"person"`` or ``"alt"`` (default: person captions when there are any).
        themes_max_texts, sae_latents, sae_k, sae_steps, min_support, n_boot, seed: the themes' settings.
        device: torch device of the embedding and sentiment models.
        threads, memory_limit: DuckDB's (default: its own).
        report: also write ``report.html``.
        progress: a :class:`fairsets.core.progress.Progress`.
        identity_mask: mask the identity words of the theme texts before embedding them.
        pmi: ``binary`` or ``weighted`` theme PMI.
        correct_with: ``annotate verify`` reports (``verify_{attr}.json`` or their folder); the box
            shares of each attribute they verify are also given corrected (``composition.corrected``).

    Returns:
        The audit document (what ``audit.json`` holds).

    Raises:
        AnnotationError: not an annotation folder or nothing annotated.
        ValueError / OSError: bad settings or word list; a named model that does not load
            (:class:`fairsets.models.ModelUnavailable`), a missing extra
            (:class:`fairsets.core.step.MissingDependency`).
    """
    from fairsets.core.step import MissingDependency
    from fairsets.core.version import __version__
    from fairsets.models import ModelUnavailable

    from . import tables
    from .composition import composition
    from .crime import DELTA_REFERENCES, crime_association, load_crime_words
    from .themes import PMI_MODES
    from .themes_run import run_themes
    from .words import load_exclusions

    tables.check_group_rule(group_rule)
    if delta_reference not in DELTA_REFERENCES:
        raise ValueError(
            f"delta reference must be one of {', '.join(DELTA_REFERENCES)}; got {delta_reference!r}"
        )
    if pmi not in PMI_MODES:
        raise ValueError(f"pmi must be one of {', '.join(PMI_MODES)}; got {pmi!r}")
    if themes_text not in (None, "person", "alt"):
        raise ValueError(f"themes text must be 'person' or 'alt'; got {themes_text!r}")
    for name, value, least in (
        ("min_count", min_count, 1),
        ("themes_max_texts", themes_max_texts, 2),
        ("sae_latents", sae_latents, 1),
        ("sae_k", sae_k, 1),
        ("sae_steps", sae_steps, 0),
        ("min_support", min_support, 1),
        ("n_boot", n_boot, 0),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"{name} must be an integer ≥ {least}; got {value!r}")
    folder, out = Path(ann), Path(out)
    words = load_crime_words(crime_words) if crime_words is not None else load_crime_words()
    excluded = load_exclusions(exclusions) if exclusions is not None else load_exclusions()
    con = tables.connect(
        folder, threads=threads, memory_limit=memory_limit, cache=out / WORK_DIR / "facts", progress=progress
    )
    try:
        attributes = [a for a in tables.attributes(folder) if a in ("gender", "race")]
        n_shards = len(tables.finished_shards(folder))
        doc: dict[str, Any] = {
            "schema": SCHEMA,
            "annotations": folder.resolve().name,
            "fairsets_version": __version__,
            "attributes": attributes,
            "n_shards": n_shards,
            "settings": {
                "min_count": min_count,
                "group_rule": group_rule,
                "delta_reference": delta_reference,
                "crime_words": Path(crime_words).name if crime_words is not None else "default",
                "exclusions": Path(exclusions).name if exclusions is not None else "default",
                "sentiment": None,
                "themes": None,
                "correct_with": [Path(p).name for p in correct_with],
            },
            "definitions": _definitions(group_rule, delta_reference),
        }
        with _stage(progress, "composition and crime words", 2) as step:
            doc["composition"] = composition(con, group_rule=group_rule)
            if correct_with:
                doc["composition"]["corrected"] = _corrected(
                    doc["composition"], correct_with, attributes, seed
                )
            step(1)
            doc["crime"] = crime_association(
                con,
                words,
                min_count=min_count,
                group_rule=group_rule,
                delta_reference=delta_reference,
                exclusions=excluded,
            )
            step(1)
        skipped: dict[str, str | None] = {"sentiment": None, "themes": None}
        doc["sentiment"] = None
        if sentiment is None:
            skipped["sentiment"] = "not asked for (--sentiment none)"
        else:
            try:
                section = _sentiment(
                    con, sentiment, min_count, device, sentiment_workers, progress, group_rule
                )
                doc["sentiment"] = section
                doc["settings"]["sentiment"] = section["scorer"]["name"]
            except MissingDependency as exc:
                if sentiment != "vader":
                    raise
                skipped["sentiment"] = f"VADER is not installed ({exc})"
        doc["themes"] = None
        if themes is None:
            skipped["themes"] = "not asked for (--themes none)"
        else:
            model = AUTO_THEMES_MODEL if themes == "auto" else themes
            try:
                section, settings = run_themes(
                    con,
                    attributes,
                    out / WORK_DIR,
                    model=model,
                    text=themes_text,
                    max_texts=themes_max_texts,
                    latents=sae_latents,
                    k=sae_k,
                    steps=sae_steps,
                    min_support=min_support,
                    n_boot=n_boot,
                    seed=seed,
                    device=device,
                    progress=progress,
                    group_rule=group_rule,
                    identity_mask=identity_mask,
                    pmi=pmi,
                )
                doc["themes"], doc["settings"]["themes"] = section, settings
            except (ModelUnavailable, MissingDependency, ValueError) as exc:
                if themes != "auto" or (isinstance(exc, ValueError) and themes_text is not None):
                    raise
                skipped["themes"] = " ".join(str(exc).split())
        doc["skipped"] = skipped
    finally:
        con.close()
    text = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    atomic_write_text(out / AUDIT_FILE, text)
    if report:
        from .report import render_persons_report

        render_persons_report(doc, out / REPORT_FILE)
    return doc


def _sentiment(
    con: Any, name: str, min_count: int, device: str, workers: int, progress: Any, group_rule: str
) -> dict[str, Any]:
    from . import sentiment as s

    scorer = s.VaderScorer(workers=workers) if name == "vader" else s.TransformerScorer(name, device=device)
    return s.sentiment(con, scorer=scorer, min_count=min_count, progress=progress, group_rule=group_rule)


def _verified_attribute(path: Path, attributes: list[str]) -> list[tuple[str, Path]]:
    """``(attribute, report)`` pairs of one ``--correct-with`` path: a folder gives each
    ``verify_{attr}.json`` it holds; a file gives the attribute it verifies."""
    if path.is_dir():
        found = [(a, path / f"verify_{a}.json") for a in attributes if (path / f"verify_{a}.json").is_file()]
        if not found:
            names = " or ".join(f"verify_{a}.json" for a in attributes)
            raise ValueError(
                f"{path}: holds no {names}; give the folder fairsets annotate verify --out wrote"
            )
        return found
    try:
        attr = json.loads(path.read_text(encoding="utf-8")).get("attribute")
    except (OSError, ValueError, AttributeError):
        attr = None
    return [(attr if attr in attributes else (attributes[0] if attributes else "gender"), path)]


def _corrected(
    comp: dict[str, Any], paths: Sequence[Any], attributes: list[str], seed: int
) -> dict[str, Any]:
    """Box shares per attribute corrected for the classifier's confusion (:mod:`.correction`),
    from the labelled boxes' counts (``unlabelled`` left out: no label to correct)."""
    from .correction import corrected_shares, load_confusion

    out: dict[str, Any] = {}
    for path in paths:
        for attr, report in _verified_attribute(Path(path), attributes):
            confusion = load_confusion(report, attr)
            table = (comp.get("boxes") or {}).get(attr)
            if table is None:
                raise ValueError(f"{report}: verifies {attr}, but the folder has no {attr} labels to correct")
            counts = {g: e["count"] for g, e in table["groups"].items() if g != UNLABELLED}
            out[attr] = {"source": report.name, "of": "labelled kept boxes"} | corrected_shares(
                counts, confusion, seed=seed
            )
    return out


def _definitions(group_rule: str, delta_reference: str) -> dict[str, str]:
    """The rules every section shares (each section adds its own ``definitions``)."""
    return {
        "perceived": "every group is a classifier's perceived label of a person's appearance, not how "
        "anyone identifies",
        "group_rule": f"--group-rule {group_rule}: " + group_rule_definition(group_rule),
        "unclear_vs_unlabelled": "'unclear' is a label (the classifier could not tell); 'unlabelled' is no "
        "label at all; they are different groups everywhere",
        "delta_reference": f"--delta-reference {delta_reference}: crime-word delta_pct divides the group's "
        + (
            "rate by the rate over all texts of that kind (the paper's reading)"
            if delta_reference == "all"
            else "rate by the rate over the texts not in the group"
        )
        + "; the other reading is under crime.alternative",
        "texts": "alt-texts of person images (images with at least one kept box) and person captions per "
        "captioner; NULL or blank texts are left out and counted as no_text",
        "min_count": "ratios of groups with fewer texts than settings.min_count are null, with the reason",
    }


def _stage(progress: Any, what: str, total: int) -> Any:
    """``progress.stage(what, total)``, or a context whose ``advance`` does nothing."""
    if progress is None:
        return contextlib.nullcontext(lambda *a, **k: None)
    return progress.stage(what, total)
