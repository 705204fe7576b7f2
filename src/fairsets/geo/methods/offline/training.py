"""Learning the ``offline`` scorer from labelled captions (see :mod:`.scorer` for the models).

:func:`train_scorer` runs the rules on labelled captions and fits both models:

1. every candidate mention becomes a row of :data:`~.scorer.MENTION_FEATURES`, labelled 1 when the
   caption's country is among the mention's candidate countries, else 0. A caption labelled with no
   country that names two or more countries outright (country names, codes, demonyms: "the border
   between Peru and Bolivia") says no single country, not that its names are no places: its
   mentions' labels are unknown, so they do not train the mention model (they still train the
   caption model, which learns to abstain when the countries split).
   Two things in how the training files were put together are kept out of the mention model:
   each file gets its own offset while the model is fitted (dropped afterwards), so a file's share
   of no-place captions is not learned by whatever feature tells that file apart (trained on
   ``geo-wiki-dev.csv``, 78 % of it no-place and the one file of long prose, the scorer learned
   from caption length to turn down "Germany" named in prose); and a feature a file's captions
   were selected on (:data:`SELECTED_ON`) is unknown in that file's rows;
2. the mention model's probabilities for the caption-level model are *out of fold* (K folds by
   caption, each fold scored by a model fitted on the others), so the caption model learns how
   far to trust mention probabilities on captions the mention model has not seen;
3. the caption model is fitted on those rows, labelled 1 when the best country is the caption's
   country; its own out-of-fold probabilities give the precision–recall curve on the training
   captions, and the default ``min_confidence`` is the lowest threshold whose out-of-fold
   precision reaches ``target_precision`` (the highest recall at that precision);
4. ``no_mention_confidence`` is the share of training captions without a candidate mention that
   name no country.

Everything is deterministic (folds by caption index, Newton's method from zero weights), so the
same labelled files give the same JSON byte for byte.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .method import OfflineMethod
from .scorer import (
    CAPTION_FEATURES,
    MENTION_FEATURES,
    Logistic,
    Scorer,
    fit_logistic,
    mixed_groups,
    national_floor,
)

__all__ = ["OUTRIGHT", "CaptionRows", "collect", "named_outright", "train_scorer"]


@dataclass
class CaptionRows:
    """The rules' view of labelled captions: mention rows and what the caption model needs."""

    mention_x: list[list[float]] = field(default_factory=list)
    mention_y: list[int] = field(default_factory=list)
    mention_caption: list[int] = field(default_factory=list)  # caption index of each mention row
    #: per caption with mentions: (caption index, mention row indices, mentions, dists, scores, commercial)
    captions: list[tuple[int, list[int], list[Any], list[dict[str, float]], dict[str, float], int]] = field(
        default_factory=list
    )
    no_mention: list[bool] = field(default_factory=list)  # gold is None, for captions without mentions
    gold: list[str | None] = field(default_factory=list)
    #: per mention row: its label is unknown (see :func:`collect`), so the mention model skips it
    unknown: list[bool] = field(default_factory=list)


def collect(method: OfflineMethod, captions: Sequence[str], gold: Sequence[str | None]) -> CaptionRows:
    """Run the rules on labelled captions and gather the scorer's training rows."""
    rows = CaptionRows(gold=list(gold))
    for ci, (caption, g) in enumerate(zip(captions, gold, strict=True)):
        tokens, mode, mentions = method._analyse(caption)
        if not mentions:
            rows.no_mention.append(g is None)
            continue
        scores, dists = method._distribute(mentions)
        commercial, feats = method._features(tokens, mode, mentions)
        idx = []
        unknown = g is None and len(named_outright(mentions)) >= 2
        for m, x in zip(mentions, feats, strict=True):
            rows.unknown.append(unknown)
            idx.append(len(rows.mention_x))
            rows.mention_x.append(x)
            rows.mention_y.append(int(g is not None and g in m.weights))
            rows.mention_caption.append(ci)
        rows.captions.append((ci, idx, mentions, dists, scores, commercial))
    return rows


#: Kinds of mention that name a country outright.
OUTRIGHT = frozenset({"country", "alias", "code", "demonym"})


def named_outright(mentions: Sequence[Any]) -> set[str]:
    """The countries a caption's mentions name outright: a country name, code or demonym whose
    weight on that country is at least one half."""
    return {
        c for m in mentions if m.note.split(":", 1)[0] in OUTRIGHT for c, w in m.weights.items() if w >= 0.5
    }


def _caption_rows(
    rows: CaptionRows, probs: Sequence[float]
) -> tuple[list[list[float]], list[int], list[str], list[int]]:
    xs, ys, best_of, owners = [], [], [], []
    for ci, idx, mentions, dists, scores, commercial in rows.captions:
        p = national_floor([probs[i] for i in idx], mentions)  # as at prediction
        best, _, feats = OfflineMethod._caption_view(mentions, p, dists, scores, commercial)
        xs.append(feats)
        ys.append(int(rows.gold[ci] == best))
        best_of.append(best)
        owners.append(ci)
    return xs, ys, best_of, owners


def _prf(pairs: Sequence[tuple[str | None, str | None]]) -> tuple[float, float]:
    correct = sum(1 for g, p in pairs if p is not None and p == g)
    n_pred = sum(1 for _, p in pairs if p is not None)
    n_gold = sum(1 for g, _ in pairs if g is not None)
    return (correct / n_pred if n_pred else 0.0, correct / n_gold if n_gold else 0.0)


PROMINENCE_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)


def _fit_prominence(
    method: OfflineMethod, captions: Sequence[str], gold: Sequence[str | None]
) -> tuple[float, dict[str, Any]]:
    """The city-prominence exponent that resolves most ambiguous names to the labelled country.

    Scored on captions with a country where some mention has several candidate countries, one of
    them the label: the rules' best country must be the label. Ties go to the smaller exponent.
    """
    cases = []
    for caption, g in zip(captions, gold, strict=True):
        if g is None:
            continue
        _, _, mentions = method._analyse(caption)
        if any(len(m.weights) > 1 and g in m.weights for m in mentions):
            cases.append((caption, g))
    right: dict[float, int] = {}
    for b in PROMINENCE_GRID:
        method.prominence = b
        n = 0
        for caption, g in cases:
            scores, _ = method._score(caption)
            if scores and max(scores, key=lambda c: (scores[c], c)) == g:
                n += 1
        right[b] = n
    best = max(PROMINENCE_GRID, key=lambda b: (right[b], -b))
    return best, {
        "ambiguous_captions": len(cases),
        "right_by_prominence": {str(b): n for b, n in right.items()},
    }


#: Features a training file's captions were *selected on*, by file name: within that file they carry
#: the sampling rule, not the labels, so the mention model treats them as unknown in its rows.
#: ``geo-train-c.csv`` drew its places only among names that are no English word and have a
#: wordfreq Zipf frequency under 3 (see ``benchmarks/data/README.md``), while its no-place captions
#: use famous names: there every dictionary word or frequently written name is "no place" by
#: construction, and a scorer learning that from it turns down "France", "Germany" or "Paris".
SELECTED_ON: dict[str, tuple[str, ...]] = {
    "geo-train-c.csv": ("dictionary_word", "zipf", "zipf_name"),
}


def _mask_selected(
    rows: CaptionRows, row_files: Sequence[str], selected_on: Mapping[str, Sequence[str]]
) -> list[list[float]]:
    """The mention rows the mention model is fitted on: a feature a file's captions were selected
    on is unknown (NaN) in that file's rows (``row_files``: each mention row's file name)."""
    cols = {f: [MENTION_FEATURES.index(n) for n in names] for f, names in selected_on.items()}
    out = []
    for x, file in zip(rows.mention_x, row_files, strict=True):
        js = cols.get(file)
        if js:
            x = list(x)
            for j in js:
                x[j] = float("nan")
        out.append(x)
    return out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def train_scorer(
    labelled: Sequence[str | Path],
    *,
    l2: float = 1.0,
    folds: int = 5,
    target_precision: float = 0.9,
    method: OfflineMethod | None = None,
    selected_on: Mapping[str, Sequence[str]] | None = None,
) -> tuple[Scorer, dict[str, Any]]:
    """Fit the mention and caption models on labelled CSVs; returns the scorer and a report."""
    from ...evaluate import load_labelled

    method = method or OfflineMethod.rules_only()
    captions: list[str] = []
    gold: list[str | None] = []
    file_index: list[int] = []  # each caption's file, as an index into sources
    sources = []
    for path in labelled:
        path = Path(path)
        caps, labs = load_labelled(path)
        captions.extend(caps)
        gold.extend(labs)
        file_index.extend([len(sources)] * len(caps))
        sources.append({"file": path.name, "rows": len(caps), "sha256": _sha256(path)})
    method.prominence, which_country = _fit_prominence(method, captions, gold)
    rows = collect(method, captions, gold)
    # the shipped files' own, then the caller's (an empty tuple for a file switches its masking off)
    selected_on = {**SELECTED_ON, **(selected_on or {})}
    source = [file_index[ci] for ci in rows.mention_caption]  # the mention model's offsets
    fit_x = _mask_selected(rows, [sources[k]["file"] for k in source], selected_on)
    if not rows.mention_x or len(set(rows.mention_y)) < 2:
        raise ValueError("train_scorer: the labelled captions give no positive or no negative mentions")

    def fit_mentions(idx: list[int]) -> Logistic:
        """The mention model on these rows, an offset per training file."""
        return fit_logistic(
            [fit_x[i] for i in idx],
            [rows.mention_y[i] for i in idx],
            MENTION_FEATURES,
            l2=l2,
            groups=[source[i] for i in idx],
        )

    # 1. out-of-fold mention probabilities
    n_mentions = len(rows.mention_x)
    oof = [0.0] * n_mentions
    for f in range(folds):
        train = [i for i in range(n_mentions) if rows.mention_caption[i] % folds != f and not rows.unknown[i]]
        test = [i for i in range(n_mentions) if rows.mention_caption[i] % folds == f]
        model = fit_mentions(train)
        for i in test:
            oof[i] = model.prob(rows.mention_x[i])
    known = [i for i in range(n_mentions) if not rows.unknown[i]]
    mention = fit_mentions(known)

    # 2. caption model on out-of-fold features, and its own out-of-fold probabilities
    cx, cy, best_of, owners = _caption_rows(rows, oof)
    caption = fit_logistic(cx, cy, CAPTION_FEATURES, l2=l2)
    c_oof = [0.0] * len(cx)
    for f in range(folds):
        train = [i for i in range(len(cx)) if owners[i] % folds != f]
        test = [i for i in range(len(cx)) if owners[i] % folds == f]
        model: Logistic = fit_logistic(
            [cx[i] for i in train], [cy[i] for i in train], CAPTION_FEATURES, l2=l2
        )
        for i in test:
            c_oof[i] = model.prob(cx[i])

    # 3. the operating point: highest recall with out-of-fold precision >= target
    no_mention_gold = [g for g in gold]  # captions without mentions are predicted None at every threshold
    with_mentions = set(owners)
    base = [(no_mention_gold[i], None) for i in range(len(gold)) if i not in with_mentions]
    curve = []
    for t in sorted({round(p, 4) for p in c_oof}):
        pairs = base + [
            (gold[ci], best if p >= t else None) for ci, best, p in zip(owners, best_of, c_oof, strict=True)
        ]
        prec, rec = _prf(pairs)
        curve.append((t, prec, rec))
    ok = [(t, p, r) for t, p, r in curve if p >= target_precision]
    t_star, p_star, r_star = min(ok, key=lambda x: x[0]) if ok else max(curve, key=lambda x: x[1])
    best_f1 = max(curve, key=lambda x: 2 * x[1] * x[2] / (x[1] + x[2]) if x[1] + x[2] else 0.0)

    no_mention_conf = sum(rows.no_mention) / len(rows.no_mention) if rows.no_mention else 0.5
    trained_files = {s["file"] for s in sources}
    offsets = mixed_groups([source[i] for i in known], [rows.mention_y[i] for i in known])
    report = {
        "sources": sources,
        "captions": len(captions),
        "mention_rows": n_mentions,
        "mention_positive_share": round(sum(rows.mention_y) / n_mentions, 4),
        "mention_rows_unknown": n_mentions - len(known),
        "selected_on": {f: list(v) for f, v in selected_on.items() if v and f in trained_files},
        # the files fitted with offsets (both labels among their mention rows; the first is the base)
        "source_offsets": [sources[k]["file"] for k in offsets],
        "captions_with_mentions": len(cx),
        "l2": l2,
        "folds": folds,
        "target_precision": target_precision,
        "out_of_fold": {
            "min_confidence": t_star,
            "precision": round(p_star, 4),
            "recall": round(r_star, 4),
            "best_f1_threshold": best_f1[0],
            "best_f1_precision": round(best_f1[1], 4),
            "best_f1_recall": round(best_f1[2], 4),
        },
    }
    report["which_country"] = which_country
    scorer = Scorer(mention, caption, t_star, no_mention_conf, report, method.prominence)
    return scorer, report
