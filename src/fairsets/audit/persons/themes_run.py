"""The themes step of ``fairsets audit persons``: sample the texts, mask their identity words, embed
them, train the SAE and measure PMI per identity (:func:`run_themes`).

* **Sample** — at most ``max_texts`` non-blank texts: person captions of the captioner with the
  most captions, or alt-texts of person images; the ones with the smallest hash of their row key
  and the seed (the same sample on every run, whatever the thread count or file order).
* **Identities** — a person caption has its box's perceived gender and race (``unlabelled`` when
  the box has none); an alt-text has its image's groups by the one image-level rule of
  :mod:`.tables` (``group_rule``: one group per attribute under ``exclusive``, several under
  ``any``), the same groups as composition, crime words and sentiment.
* **Mask** — the identity words that define the groups are replaced before embedding
  (:mod:`.identity`); ``identity_mask=False`` embeds the texts as they are.
* **Embed, train, measure** — :func:`.themes.embed_texts`, :func:`.sae.train_sae` (checkpointed in
  ``work``, resumed bit for bit) and :func:`.themes.themes` with ``pmi`` ``binary`` or ``weighted``.

The embeddings are cached in ``work`` by (model, texts as embedded), so a re-run embeds nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
from pathlib import Path
from typing import Any

from fairsets.core.atomic import atomic_write_bytes

from .tables import UNLABELLED, blank_sql, group_rule_definition, groups_sql

__all__ = ["run_themes"]

logger = logging.getLogger(__name__)


def _identity_sql(text: str, con: Any, group_rule: str) -> tuple[str, str]:
    """The (SQL, source) that selects ``(rk, caption, g, r)`` of the theme texts (g, r: lists)."""
    if text == "person":
        cols = {r[0] for r in con.execute("DESCRIBE captions").fetchall()}
        g, r = (
            f"[coalesce(perceived_{a}, '{UNLABELLED}')]" if f"perceived_{a}" in cols else "NULL::VARCHAR[]"
            for a in ("gender", "race")
        )
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
    sql = (
        "SELECT shard || '/' || key AS rk, caption, "
        f"{groups_sql('gender', group_rule)} AS g, {groups_sql('race', group_rule)} AS r "
        f"FROM person_images WHERE NOT {blank_sql('caption')}"
    )
    return sql, "alt-text"


def _sample(
    con: Any, text: str, max_texts: int, seed: int, group_rule: str
) -> tuple[list[str], list, list, str, int]:
    """The theme sample: texts, gender and race identities, the source, and how many texts exist."""
    sql, source = _identity_sql(text, con, group_rule)
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
    buf = io.BytesIO()
    np.save(buf, emb, allow_pickle=False)
    atomic_write_bytes(path, buf.getvalue())
    return emb


def _stage(progress: Any, what: str, total: int) -> Any:
    if progress is None:
        return contextlib.nullcontext(lambda *a, **k: None)
    return progress.stage(what, total)


def run_themes(
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
    group_rule: str = "exclusive",
    identity_mask: bool = True,
    pmi: str = "binary",
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(themes section, its settings); raises ValueError when there are too few texts."""
    from .identity import load_identity_mask
    from .sae import train_sae
    from .themes import themes

    views = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    kind = text or ("person" if "captions" in views else "alt")
    if kind == "person" and "captions" not in views:
        raise ValueError(
            "the folder has no person captions for --themes-text person; run fairsets annotate caption"
        )
    texts, genders, races, source, total = _sample(con, kind, max_texts, seed, group_rule)
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
        "identity_mask": identity_mask,
        "pmi": pmi,
    }
    if kind == "alt":
        settings["group_rule"] = group_rule
    if len(texts) < 2 * min_support:
        raise ValueError(
            f"only {len(texts)} non-empty {source or kind} texts; themes need at least {2 * min_support} "
            "(lower --min-support or annotate more images)"
        )
    if identity_mask:
        mask = load_identity_mask()
        embedded, counts = mask.mask(texts)
        masking = {"masked": True, **mask.describe(), **counts}
    else:
        embedded, masking = texts, {"masked": False, "reason": "not asked for (--no-identity-mask)"}
    emb = _embeddings(embedded, model, work, device)
    sae_settings = {k: v for k, v in settings.items() if k not in ("pmi", "min_support", "n_boot")}
    key = hashlib.sha256(json.dumps([sae_settings, emb.shape], sort_keys=True).encode()).hexdigest()[:16]
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
            by_attr[attr] = themes(
                acts, ids, embedded, min_support=min_support, n_boot=n_boot, seed=seed, pmi=pmi
            )
    section = {
        "text": kind,
        "source": source,
        "n_texts": len(texts),
        "n_available": total,
        "sampled": total > len(texts),
        "group_rule": group_rule if kind == "alt" else None,
        "pmi": pmi,
        "identity_mask": masking,
        "sae": {"latents": sae.latents, "k": sae.k, "steps": sae.steps, "metrics": sae.metrics},
        "by_attribute": by_attr,
        "definitions": _definitions(kind, max_texts, group_rule, identity_mask, pmi),
    }
    return section, settings


def _definitions(kind: str, max_texts: int, group_rule: str, masked: bool, pmi: str) -> dict[str, str]:
    if kind == "alt":
        identity = f"alt-texts: the image's groups by the group rule — {group_rule_definition(group_rule)}"
    else:
        identity = "person captions: the box's perceived gender and race ('unlabelled' when it has none)"
    mask = (
        "identity words (the gender words of identity_words.toml and the race keywords that define the "
        "race groups, with plurals) are replaced by a neutral word before embedding; the latents are "
        "named from the masked texts"
        if masked
        else "texts embedded as they are (--no-identity-mask): identity words are not masked, so latents "
        "may stand for the identity words themselves"
    )
    return {
        "sample": f"at most {max_texts} non-empty texts, the ones with the smallest hash of their "
        "row key and the seed (the same sample on every run)",
        "identity": identity,
        "identity_mask": mask,
        "pmi": "binary: a latent counts on a text when its activation is > 0 (the default)"
        if pmi == "binary"
        else "weighted: a latent counts on a text with its activation (--pmi weighted)",
    }
