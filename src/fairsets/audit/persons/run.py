"""``fairsets audit persons``: every audit of an annotation folder, into one ``audit.json`` and one
``report.html``.

:func:`run_persons_audit` opens the folder's views (:func:`.tables.connect`) and runs, in order:

1. **composition** (:func:`.composition.composition`) — always;
2. **crime words** (:func:`.crime.crime_association`) over alt-texts and, when the folder has them,
   person captions — always (the default word list, or ``crime_words``);
3. **sentiment** (:func:`.sentiment.sentiment`) — VADER by default, a transformer NEG/NEU/POS model
   when one is named, none with ``sentiment=None``. Left out, with the reason in
   ``skipped.sentiment``, when VADER is the default and not installed;
4. **themes** — a sample of at most ``themes_max_texts`` texts (person captions of one captioner,
   or alt-texts when the folder has no person captions), embedded with a sentence-transformers
   model (:func:`.themes.embed_texts`), a TopK sparse autoencoder trained on them
   (:func:`.sae.train_sae`) and the PMI of each perceived gender and race with each latent
   (:func:`.themes.themes`). Left out, with the reason, when the embedding model cannot load and
   was not named explicitly (``themes="auto"``), or with ``themes=None``.

Every aggregation runs in DuckDB over the Parquet tables, streamed; the theme sample is the
``themes_max_texts`` texts with the smallest hash of their row key and the seed (the same sample
on every run, independent of thread count and file order).

**Resuming.** The work that costs time is kept under ``OUT/.work/``: the embeddings of the sample
(keyed by the model and the sample's texts) and the SAE checkpoints (:func:`.sae.train_sae`
resumes from them bit for bit). An interrupted run started again with the same arguments skips
what is done and writes the same ``audit.json``, byte for byte. Both output files are written
atomically, ``audit.json`` first.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from fairsets.core.atomic import atomic_write_bytes, atomic_write_text

from .tables import blank_sql

__all__ = ["AUDIT_FILE", "REPORT_FILE", "SCHEMA", "WORK_DIR", "run_persons_audit"]

logger = logging.getLogger(__name__)

SCHEMA = "fairsets.audit.persons/1"
AUDIT_FILE = "audit.json"
REPORT_FILE = "report.html"
WORK_DIR = ".work"
#: ``themes="auto"``: run the themes with this model when it loads, else record why not.
AUTO_THEMES_MODEL = "minilm"


def _identity_sql(text: str, con: Any) -> tuple[str, str]:
    """The (SQL, what) that selects ``(row_key, caption, gender, race)`` of the theme texts."""
    if text == "person":
        cols = {r[0] for r in con.execute("DESCRIBE captions").fetchall()}
        g = "perceived_gender" if "perceived_gender" in cols else "NULL::VARCHAR"
        r = "perceived_race" if "perceived_race" in cols else "NULL::VARCHAR"
        captioner = con.execute(
            f"SELECT annotator FROM captions WHERE NOT {blank_sql('caption')} "
            "GROUP BY annotator ORDER BY count(*) DESC, annotator LIMIT 1"
        ).fetchone()
        if captioner is None:
            return "", ""
        name = captioner[0].replace("'", "''")
        sql = (
            f"SELECT shard || '/' || key || '/' || box_id::VARCHAR AS rk, caption, {g} AS g, {r} AS r "
            f"FROM captions WHERE annotator = '{name}' AND NOT {blank_sql('caption')}"
        )
        return sql, captioner[0]
    sql = (  # an image is in a race group only when all its labelled boxes share that race
        "SELECT shard || '/' || key AS rk, caption, gender AS g, "
        "CASE WHEN len(races) = 1 THEN races[1] END AS r "
        f"FROM person_images WHERE NOT {blank_sql('caption')}"
    )
    return sql, "alt-text"


def _sample(con: Any, text: str, max_texts: int, seed: int) -> tuple[list[str], list, list, str, int]:
    """The theme sample: texts, gender and race identities, the source, and how many texts exist."""
    sql, source = _identity_sql(text, con)
    if not sql:
        return [], [], [], "", 0
    total = con.execute(f"SELECT count(*) FROM ({sql})").fetchone()[0]
    rows = con.execute(
        f"SELECT caption, g, r FROM ({sql}) ORDER BY md5(rk || ?), rk LIMIT ?", [f"#{seed}", max_texts]
    ).fetchall()
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], source, total


def _embeddings(texts: list[str], model: str, work: Path, device: str) -> Any:
    """Embeddings of ``texts``, cached in ``work`` by (model, texts)."""
    import numpy as np

    from .themes import embed_texts

    digest = hashlib.sha256(json.dumps([model, texts], ensure_ascii=False).encode("utf-8")).hexdigest()[:24]
    path = work / f"embeddings-{digest}.npy"
    if path.is_file():
        try:
            emb = np.load(path, allow_pickle=False)
            if emb.ndim == 2 and emb.shape[0] == len(texts):
                return emb
        except (OSError, ValueError):
            pass
        logger.warning("%s: unreadable; embedding again", path.name)
    emb = embed_texts(texts, model, device=device)
    import io

    buf = io.BytesIO()
    np.save(buf, emb, allow_pickle=False)
    atomic_write_bytes(path, buf.getvalue())
    return emb


def _themes(
    con: Any,
    attributes: list[str],
    work: Path,
    *,
    model: str,
    text: str | None,
    max_texts: int,
    latents: int,
    k: int,
    steps: int,
    min_support: int,
    n_boot: int,
    seed: int,
    device: str,
    progress: Any,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(themes section, its settings); raises ValueError when there are too few texts."""
    from .sae import train_sae
    from .themes import themes

    views = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    kind = text or ("person" if "captions" in views else "alt")
    if kind == "person" and "captions" not in views:
        raise ValueError(
            "the folder has no person captions for --themes-text person; run fairsets annotate caption"
        )
    texts, genders, races, source, total = _sample(con, kind, max_texts, seed)
    settings = {
        "model": model,
        "text": kind,
        "latents": latents,
        "k": k,
        "steps": steps,
        "min_support": min_support,
        "n_boot": n_boot,
        "seed": seed,
        "max_texts": max_texts,
    }
    if len(texts) < 2 * min_support:
        raise ValueError(
            f"only {len(texts)} non-empty {source or kind} texts; themes need at least {2 * min_support} "
            "(lower --min-support or annotate more images)"
        )
    emb = _embeddings(texts, model, work, device)
    key = hashlib.sha256(json.dumps([settings, emb.shape], sort_keys=True).encode()).hexdigest()[:16]
    with _stage(progress, "training the theme SAE", steps) as advance:
        sae = train_sae(
            emb,
            latents=latents,
            k=min(k, latents),
            steps=steps,
            seed=seed,
            checkpoint_dir=work / f"sae-{key}",
            on_step=lambda step, loss: advance(1),
        )
    acts = sae.encode(emb)
    by_attr: dict[str, Any] = {}
    for attr, ids in (("gender", genders), ("race", races)):
        if attr in attributes and any(v is not None for v in ids):
            by_attr[attr] = themes(acts, ids, texts, min_support=min_support, n_boot=n_boot, seed=seed)
    section = {
        "text": kind,
        "source": source,
        "n_texts": len(texts),
        "n_available": total,
        "sampled": total > len(texts),
        "sae": {"latents": sae.latents, "k": sae.k, "steps": sae.steps, "metrics": sae.metrics},
        "by_attribute": by_attr,
        "definitions": {
            "sample": f"at most {max_texts} non-empty texts, the ones with the smallest hash of their "
            "row key and the seed (the same sample on every run)",
            "identity": "person captions: the box's perceived gender and race; alt-texts: the image-level "
            "gender, and a race only when every labelled box of the image has that race",
        },
    }
    return section, settings


def run_persons_audit(
    ann: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    crime_words: str | os.PathLike[str] | None = None,
    min_count: int = 100,
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
) -> dict[str, Any]:
    """Audit the annotation folder ``ann`` into ``out`` (see the module docstring).

    Args:
        ann: the annotation folder (``fairsets annotate persons --out``, then ``classify``).
        out: the output folder (``audit.json``, ``report.html``, ``.work/``).
        crime_words: a TOML word list (``words = [...]``); default: the list that ships.
        min_count: the fewest texts (or images) behind a reported ratio.
        sentiment: ``"vader"``, a transformer model (local folder or hub id), or None.
        sentiment_workers: processes scoring VADER in parallel (the same numbers for any count).
        themes: ``"auto"`` (MiniLM when it loads), a sentence-transformers model, or None.
        themes_text: ``"person"`` or ``"alt"`` (default: person captions when there are any).
        themes_max_texts, sae_latents, sae_k, sae_steps, min_support, n_boot, seed: the themes' settings.
        device: torch device of the embedding and sentiment models.
        threads, memory_limit: DuckDB's (default: its own).
        report: also write ``report.html``.
        progress: a :class:`fairsets.core.progress.Progress`.

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
    from .crime import crime_association, load_crime_words

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
    con = tables.connect(
        folder, threads=threads, memory_limit=memory_limit, cache=out / WORK_DIR / "facts", progress=progress
    )
    try:
        attributes = [a for a in tables.attributes(folder) if a in ("gender", "race")]
        n_shards = len(tables._finished(folder))
        doc: dict[str, Any] = {
            "schema": SCHEMA,
            "annotations": folder.resolve().name,
            "fairsets_version": __version__,
            "attributes": attributes,
            "n_shards": n_shards,
            "settings": {
                "min_count": min_count,
                "crime_words": Path(crime_words).name if crime_words is not None else "default",
                "sentiment": None,
                "themes": None,
            },
        }
        with _stage(progress, "composition and crime words", 2) as step:
            doc["composition"] = composition(con)
            step(1)
            doc["crime"] = crime_association(con, words, min_count=min_count)
            step(1)
        skipped: dict[str, str | None] = {"sentiment": None, "themes": None}
        doc["sentiment"] = None
        if sentiment is None:
            skipped["sentiment"] = "not asked for (--sentiment none)"
        else:
            try:
                section = _sentiment(con, sentiment, min_count, device, sentiment_workers, progress)
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
                section, settings = _themes(
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
    con: Any, name: str, min_count: int, device: str, workers: int, progress: Any
) -> dict[str, Any]:
    from . import sentiment as s

    scorer = s.VaderScorer(workers=workers) if name == "vader" else s.TransformerScorer(name, device=device)
    return s.sentiment(con, scorer=scorer, min_count=min_count, progress=progress)


def _stage(progress: Any, what: str, total: int) -> Any:
    """``progress.stage(what, total)``, or a context whose ``advance`` does nothing."""
    if progress is None:
        return contextlib.nullcontext(lambda *a, **k: None)
    return progress.stage(what, total)
