"""The learned part of ``offline``: is a mention a place, and how sure is the caption's answer?

The rules in :mod:`~fairsets.geo.methods.offline.rules` find *candidate* mentions and read their
context (a capital letter, a preposition before, a place noun after, a dictionary word, a given
name, the neighbouring mentions, postal codes). Two small logistic models, learned from labelled
captions and shipped as ``fairsets/geo/data/offline_scorer.json``, turn that into probabilities:

1. **Mention model** — P(this mention is a place in the caption's country) from
   :data:`MENTION_FEATURES`: the kind of name (country, demonym, city, state code, postcode, …),
   GeoNames population and how many countries share the name, how common the word is in English
   (wordfreq Zipf) and whether it is a given name, capitalisation and the caption's case, the words
   around it (prepositions, place nouns, ``by``, a capitalised word that looks like a surname,
   a model number), the commercial vocabulary of the caption (dress, ring, sofa, colour, cut,
   size, SKU, price…), and the support of other mentions for the same country.
2. **Caption model** — P(the best country is right) from the mention probabilities combined by
   noisy-OR over the mentions that support that country, how much of the evidence it holds, and
   how many mentions there are. This is the ``confidence`` of a prediction; ``min_confidence``
   picks the operating point.

Training (``scripts/train_geo_scorer.py``, deterministic, a few seconds): the rules run on the
labelled captions; a mention is a positive example when the caption's country is among its
candidate countries, a negative one otherwise (every mention in a caption that names no place is
negative). Features are standardised and the weights fitted by Newton's method with an L2
penalty (the mention model with an offset per training file while fitting, see :mod:`.training`);
the file records the training sets' digests, so the shipped model can be rebuilt and checked byte
for byte.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...countries import data_text
from .mentions import is_word

if TYPE_CHECKING:  # pragma: no cover
    from ...gazetteer import Token
    from .mentions import Mention

__all__ = [
    "CAPTION_FEATURES",
    "COMMERCIAL",
    "MENTION_FEATURES",
    "NATIONAL_PROB",
    "Logistic",
    "caption_features",
    "fit_logistic",
    "load_scorer",
    "mention_features",
    "mixed_groups",
    "national_floor",
    "place_probs",
    "scorer_from_file",
    "scorer_from_json",
]

SCORER_FILE = "offline_scorer.json"
SCHEMA = "fairsets.geo.offline-scorer/1"

KINDS = (
    "country",
    "alias",
    "code",
    "demonym",
    "region_demonym",
    "demonym_ambiguous",
    "region",
    "place",
    "city",
    "admin_code",
    "postcode",
    "organisation",
)

#: Words of product listings, shops and property ads: a place-like word among them is more often
#: a colour, cut, style, brand or product line than a place ("Capri ring", "Milano sofa").
COMMERCIAL = frozenset(
    """
    dress dresses gown gowns bridal bride bridesmaid veil lace sleeve sleeves neckline bodice mermaid
    ring rings necklace necklaces pendant earring earrings bracelet bracelets bangle chain chains
    jewelry jewellery jewel carat ct karat gold silver sterling platinum diamond diamonds sapphire
    emerald ruby pearl pearls gemstone engagement solitaire halo cut cuts stud studs charm
    sofa couch chair chairs table tables vanity faucet sink toilet toilets bidet cabinet cabinets
    bed beds mattress dresser rug rugs curtain curtains lamp lamps pillow pillows cushion throw
    wallpaper tile tiles paint color colour colors colours shade finish white black grey gray blue
    red green pink beige ivory navy cream brown
    size sizes sku model item items price prices buy sale sales shop store online shipping free
    new used collection series edition set sets pack kit brand designer design designs pattern
    print prints fabric cotton wool linen leather velvet silk satin polyester
    women womens men mens kids girls boys unisex vintage retro modern style styles inspired
    x cm mm inch inches ft oz lb pcs piece pieces
    """.split()  # noqa: SIM905 - a word list reads best as text
)

#: The place probability of a national mention (a country on a flag, a "traditional" demonym: the
#: rules' ``national``) is at least this: 96 of the 100 such mentions of the training captions name
#: the caption's country. A rule, not a feature, so the cue only adds: a feature would let the model
#: lower every country and demonym named without it.
NATIONAL_PROB = 0.9

MENTION_FEATURES: tuple[str, ...] = (
    *(f"kind={k}" for k in KINDS),
    "kind=other",
    "rule_strength",
    "weak",
    "common_word",
    "dictionary_word",
    "zipf",
    "zipf_name",
    "given_name",
    "log_population",
    "small_town",
    "log_countries",
    "top_country_share",
    "capital",
    "lower_in_cased",
    "rule_evidence",
    "mode=normal",
    "mode=title",
    "mode=upper",
    "mode=lower",
    "mode=slug",
    "first_token",
    "last_token",
    "multi_token",
    "prev_preposition",
    "prev_by",
    "prev_capital_nonword",
    "next_capital_nonword",
    "next_place_noun",
    "next_number",
    "next_commercial",
    "prev_commercial",
    "commercial_after3",
    "commercial_before3",
    "lead_name_commercial",
    "prep_no_commercial",
    "prep_small_town",
    "commercial_words",
    "caption_tokens",
    "other_mentions",
    "support_same_country",
    "adjacent_mention",
    "listed",
)

CAPTION_FEATURES: tuple[str, ...] = (
    "logit_noisy_or",
    "best_mention_logit",
    "country_share",
    "mentions",
    "strong_kinds",
    "commercial_words",
)


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@dataclass(frozen=True)
class Logistic:
    """A standardised logistic regression: ``sigmoid(bias + Σ w·(x − mean)/scale)``."""

    names: tuple[str, ...]
    weights: tuple[float, ...]
    bias: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]

    def prob(self, x: Sequence[float]) -> float:
        z = self.bias
        for w, v, m, s in zip(self.weights, x, self.mean, self.scale, strict=True):
            z += w * (v - m) / s
        return _sigmoid(z)

    def to_json(self) -> dict[str, object]:
        return {
            "features": list(self.names),
            "weights": [round(w, 6) for w in self.weights],
            "bias": round(self.bias, 6),
            "mean": [round(m, 6) for m in self.mean],
            "scale": [round(s, 6) for s in self.scale],
        }

    @classmethod
    def from_json(cls, d: dict[str, object], expected: tuple[str, ...]) -> Logistic:
        names = tuple(d["features"])  # type: ignore[arg-type]
        if names != expected:
            raise ValueError(
                "offline scorer: the model's features do not match this version of fairsets; "
                "retrain it with scripts/train_geo_scorer.py"
            )
        return cls(
            names,
            tuple(float(x) for x in d["weights"]),  # type: ignore[union-attr]
            float(d["bias"]),  # type: ignore[arg-type]
            tuple(float(x) for x in d["mean"]),  # type: ignore[union-attr]
            tuple(float(x) for x in d["scale"]),  # type: ignore[union-attr]
        )


def mixed_groups(groups: Sequence[int], labels: Sequence[int]) -> list[int]:
    """The groups (sorted) whose rows hold both labels: those :func:`fit_logistic` gives an offset.

    A group whose rows all share one label gets no offset of its own: unshrunk, it would run off to
    infinity and, centred, drag the bias returned with it. It shares the first mixed group's, so
    its rows still teach the features.
    """
    seen: dict[int, set[int]] = {}
    for v, y in zip(groups, labels, strict=True):
        seen.setdefault(v, set()).add(int(y))
    return sorted(v for v, ys in seen.items() if len(ys) == 2)


def fit_logistic(
    rows: Sequence[Sequence[float]],
    labels: Sequence[int],
    names: tuple[str, ...],
    *,
    l2: float = 1.0,
    groups: Sequence[int] | None = None,
) -> Logistic:
    """L2-penalised logistic regression by Newton's method on standardised features (deterministic).

    A NaN value is unknown for its row: it sits at the feature's mean, so the row says nothing
    about that weight. ``groups`` (one id per row, e.g. the row's training file): each group with
    both labels gets its own offset while fitting, dropped from the model returned (it predicts at
    the groups' mean), so a difference in base rate between groups is not learned by the features
    that happen to tell the groups apart; a group of one label shares the first such group's.
    """
    import numpy as np

    X = np.asarray(rows, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != len(names) or len(y) != len(X) or len(X) == 0:
        raise ValueError("fit_logistic: rows, labels and feature names do not line up")
    known = ~np.isnan(X)
    count = known.sum(axis=0)
    filled = np.where(known, X, 0.0)
    mean = np.divide(filled.sum(axis=0), count, out=np.zeros(X.shape[1]), where=count > 0)
    dev = np.where(known, X - mean, 0.0)
    var = np.divide((dev**2).sum(axis=0), count, out=np.zeros(X.shape[1]), where=count > 0)
    scale = np.sqrt(var)
    scale[scale < 1e-9] = 1.0
    Z = np.hstack([np.ones((len(X), 1)), dev / scale])  # an unknown value sits at the mean
    k = Z.shape[1]
    if groups is not None and len(groups) != len(X):
        raise ValueError("fit_logistic: rows and groups do not line up")
    if groups is not None:
        g = np.asarray(groups)
        mixed = mixed_groups(groups, labels)
        if len(mixed) > 1:
            # one centred indicator per mixed group but the first, not shrunk: the offsets take the
            # whole difference in base rate, none of it left to a feature telling the groups apart
            G = np.stack([(g == v).astype(np.float64) for v in mixed[1:]], axis=1)
            Z = np.hstack([Z, G - G.mean(axis=0)])
    w = np.zeros(Z.shape[1])
    penalty = np.full(Z.shape[1], l2)
    penalty[0] = 0.0  # the bias is not shrunk
    penalty[k:] = 0.0  # nor the groups' offsets
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-np.clip(Z @ w, -35, 35)))
        grad = Z.T @ (p - y) + penalty * w
        hess = (Z * (p * (1 - p))[:, None]).T @ Z + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.max(np.abs(step))) < 1e-10:
            break
    return Logistic(
        names,
        tuple(float(v) for v in w[1:k]),
        float(w[0]),
        tuple(float(v) for v in mean),
        tuple(float(v) for v in scale),
    )


@dataclass(frozen=True)
class Scorer:
    """The shipped mention and caption models, their default operating point and provenance."""

    mention: Logistic
    caption: Logistic
    min_confidence: float
    no_mention_confidence: float
    provenance: dict[str, object]
    #: exponent of a city's alternate-name count in its country weight (learned; 0 = population only)
    prominence: float = 0.0


@functools.cache
def load_scorer() -> Scorer:
    """The packaged scorer (``fairsets/geo/data/offline_scorer.json``)."""
    try:
        data = json.loads(data_text(SCORER_FILE))
    except FileNotFoundError:
        raise ValueError(
            f"offline scorer: {SCORER_FILE} is missing from the package; reinstall fairsets or "
            "build it with scripts/train_geo_scorer.py"
        ) from None
    return scorer_from_json(data)


def scorer_from_file(path: str) -> Scorer:
    """A scorer trained by ``scripts/train_geo_scorer.py --out PATH`` (the ``scorer`` option)."""
    from pathlib import Path

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"offline scorer {path}: cannot be read ({exc}); give a file written by "
            "scripts/train_geo_scorer.py"
        ) from None
    if not isinstance(data, dict):
        raise ValueError(f"offline scorer {path}: not a scorer file (a JSON object is expected)")
    return scorer_from_json(data)


def scorer_from_json(data: dict[str, object]) -> Scorer:
    if data.get("schema") != SCHEMA:
        raise ValueError(f"offline scorer: schema {data.get('schema')!r}, expected {SCHEMA!r}")
    return Scorer(
        Logistic.from_json(data["mention"], MENTION_FEATURES),  # type: ignore[arg-type]
        Logistic.from_json(data["caption"], CAPTION_FEATURES),  # type: ignore[arg-type]
        float(data["min_confidence"]),  # type: ignore[arg-type]
        float(data["no_mention_confidence"]),  # type: ignore[arg-type]
        dict(data.get("provenance", {})),  # type: ignore[call-overload]
        float(data.get("prominence", 0.0)),  # type: ignore[arg-type]
    )


def _capital_nonword(words: Container[str], tok: Token | None, mode: str) -> float:
    if tok is None or mode in ("upper", "title") or not tok.text[:1].isupper() or tok.text.isupper():
        return 0.0
    return float(not is_word(words, tok.key))


def mention_features(
    tokens: list[Token],
    mode: str,
    mentions: list[Mention],
    k: int,
    commercial: int,
    *,
    words: Container[str],
    zipf: Callable[[str], float] | None,
) -> list[float]:
    """The :data:`MENTION_FEATURES` vector of ``mentions[k]``.

    ``words`` and ``zipf``: the dictionary words and wordfreq's Zipf frequency (None without
    wordfreq) the rules used (``OfflineMethod.words`` and ``.zipf``).
    """
    from .lexicon import PLACE_NOUNS, PREPOSITIONS

    m = mentions[k]
    kind = m.note.split(":", 1)[0]
    ctx = m.ctx
    n = len(tokens)
    prev = tokens[m.start - 1] if m.start > 0 else None
    nxt = tokens[m.end] if m.end < n else None
    pop = max((p.population for p in m.places if p.kind == "city"), default=0)
    single = m.end - m.start == 1
    # How often the name is written: for a dictionary word ("Nice", "Reading") a sign of the word,
    # for any other name ("Iran", "Illinois") a sign of a well-known place: two features.
    key_zipf = zipf(m.key) if (zipf is not None and single) else 0.0
    word = bool(ctx.get("is_word", 0.0))
    support = 0.0
    adjacent = 0.0
    for j, o in enumerate(mentions):
        if j == k:
            continue
        if o.start == m.end or o.end == m.start:
            adjacent = 1.0
        support = max(support, sum(min(o.weights.get(c, 0.0), w) for c, w in m.weights.items()))
    prep = prev is not None and prev.key in PREPOSITIONS
    near_commercial = any(t.key in COMMERCIAL for t in tokens[max(0, m.start - 3) : m.end + 3])
    x = [float(kind == kk) for kk in KINDS]
    x.append(float(kind not in KINDS))
    x += [
        m.strength,
        float(m.note.endswith(":weak")),
        ctx.get("common", 0.0),
        ctx.get("is_word", 0.0),
        key_zipf if word else 0.0,
        0.0 if word else key_zipf,
        ctx.get("given", 0.0),
        math.log10(pop) if pop > 0 else 0.0,
        float(kind == "city" and 0 < pop < 20_000),
        math.log(len(m.weights) or 1),
        max(m.weights.values(), default=0.0),
        float(tokens[m.start].text[:1].isupper()),
        ctx.get("lower_in_cased", 0.0),
        ctx.get("evidence", 0.0),
        float(mode == "normal"),
        float(mode == "title"),
        float(mode == "upper"),
        float(mode == "lower"),
        float(mode == "slug"),
        float(m.start == 0),
        float(m.end == n),
        float(not single),
        float(prev is not None and prev.key in PREPOSITIONS),
        float(prev is not None and prev.key == "by"),
        _capital_nonword(words, prev, mode),
        _capital_nonword(words, nxt, mode),
        float(nxt is not None and nxt.key in PLACE_NOUNS),
        float(nxt is not None and nxt.key[:1].isdigit()),
        float(nxt is not None and nxt.key in COMMERCIAL),
        float(prev is not None and prev.key in COMMERCIAL),
        float(any(t.key in COMMERCIAL for t in tokens[m.end : m.end + 3])),
        float(any(t.key in COMMERCIAL for t in tokens[max(0, m.start - 3) : m.start])),
        # a name that opens a product listing ("Milano 3 seater sofa", "Capri 18k ring")
        float(m.start == 0 and commercial > 0 and kind not in ("country", "alias", "code", "postcode")),
        # "in Sorrento", "near Hokitika": a preposition says place unless product words surround it
        float(prep and not near_commercial),
        float(prep and kind == "city" and 0 < pop < 50_000),
        math.log1p(commercial),
        math.log1p(n),
        math.log1p(len(mentions) - 1),
        support,
        adjacent,
        float(m.listed),
    ]
    return x


def national_floor(probs: Sequence[float], mentions: Sequence[Mention]) -> list[float]:
    """The mention model's place probabilities, raised to :data:`NATIONAL_PROB` for a national
    mention (the rules' floor, at prediction and in training alike)."""
    return [
        max(p, NATIONAL_PROB) if m.ctx.get("national") else p for p, m in zip(probs, mentions, strict=True)
    ]


def place_probs(
    model: Logistic, mentions: Sequence[Mention], feats: Sequence[Sequence[float]]
) -> list[float]:
    """Each mention's place probability: the mention model's, at least :data:`NATIONAL_PROB` for a
    national mention."""
    return national_floor([model.prob(x) for x in feats], mentions)


def caption_features(
    probs: Sequence[float],
    shares: Sequence[float],
    kinds: Sequence[str],
    country_share: float,
    commercial: int,
) -> list[float]:
    """The :data:`CAPTION_FEATURES` vector of a caption's best country.

    ``probs``/``shares``: each mention's place probability and the share of its weight on the best
    country; ``country_share``: the best country's part of all country scores.
    """
    miss = 1.0
    for p, s in zip(probs, shares, strict=True):
        miss *= 1.0 - p * s
    best = max((p * s for p, s in zip(probs, shares, strict=True)), default=0.0)
    strong = sum(
        1
        for k, s in zip(kinds, shares, strict=True)
        if s > 0.5 and k in ("country", "alias", "code", "postcode", "admin_code")
    )
    return [
        _logit(1.0 - miss),
        _logit(best),
        country_share,
        math.log1p(len(probs)),
        strong,
        math.log1p(commercial),
    ]


def scorer_json(scorer: Scorer) -> str:
    """The scorer as the JSON text the package ships (stable key order, rounded weights)."""
    data = {
        "schema": SCHEMA,
        "mention": scorer.mention.to_json(),
        "caption": scorer.caption.to_json(),
        "min_confidence": round(scorer.min_confidence, 4),
        "no_mention_confidence": round(scorer.no_mention_confidence, 4),
        "prominence": scorer.prominence,
        "provenance": scorer.provenance,
    }
    return json.dumps(data, indent=1, sort_keys=True) + "\n"
