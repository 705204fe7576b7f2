"""The ``offline`` method: the rules' mentions of places in a caption, and the learned decision.

The pipeline is described in :mod:`fairsets.geo.methods.offline`. :class:`OfflineMethod` reads a
caption with the rules of :class:`~fairsets.geo.methods.offline.rules.MentionRules` (mentions, their
evidence and countries) and decides with the learned models of
:mod:`~fairsets.geo.methods.offline.scorer` (the confidence); :func:`explain` shows both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...gazetteer import Token
from ..base import GEO_METHODS, GeoMethod, Prediction
from .mentions import Mention, mention_text
from .rules import MentionRules
from .scorer import (
    COMMERCIAL,
    Scorer,
    caption_features,
    load_scorer,
    mention_features,
    place_probs,
    scorer_from_file,
)

__all__ = ["Mention", "OfflineMethod", "explain"]


class OfflineMethod(MentionRules, GeoMethod):
    """Gazetteer entities + population priors + context rules; see the module docstring."""

    name = "offline"

    def __init__(
        self,
        *,
        min_confidence: float | None = None,
        threshold: float = 0.0,
        min_population: int = 1000,
        coupling: float = 1.5,
        scorer: str | None = None,
        **options: Any,
    ) -> None:
        opts: dict[str, Any] = {"min_population": min_population, "coupling": coupling}
        if min_confidence is not None:
            opts["min_confidence"] = min_confidence
        if threshold:
            opts["threshold"] = threshold
        if scorer is not None:
            opts["scorer"] = scorer
        super().__init__(**opts, **options)
        self.threshold = float(threshold)
        self.scorer: Scorer = load_scorer() if scorer is None else scorer_from_file(scorer)
        mc = self.scorer.min_confidence if min_confidence is None else float(min_confidence)
        if not 0.0 <= mc <= 1.0 or math.isnan(mc):
            raise ValueError(f"offline: min_confidence must be between 0 and 1, not {min_confidence!r}")
        self.min_confidence = mc
        self._init_rules(min_population, coupling, self.scorer.prominence)

    @classmethod
    def rules_only(
        cls, *, min_population: int = 1000, coupling: float = 1.5, prominence: float = 0.0
    ) -> OfflineMethod:
        """The rules without a scorer: what ``scripts/train_geo_scorer.py`` learns the scorer on."""
        self = cls.__new__(cls)
        GeoMethod.__init__(self, min_population=min_population, coupling=coupling)
        self.threshold = 0.0
        self._init_rules(min_population, coupling, prominence)
        return self

    # -- public ---------------------------------------------------------------------------------
    def predict(self, captions: Sequence[str]) -> list[str | None]:
        return [self.predict_one(c) for c in captions]

    def predict_one(self, caption: str) -> str | None:
        return self.decide(caption).country

    def predict_detailed(self, captions: Sequence[str]) -> list[Prediction]:
        return [self.decide(c) for c in captions]

    def decide(self, caption: str) -> Prediction:
        """The caption's :class:`~fairsets.geo.methods.base.Prediction` with its confidence."""
        d = self._decision(caption)
        return d.prediction

    def provenance(self) -> dict[str, Any]:
        return {
            **super().provenance(),
            "gazetteer": self.gaz.provenance(),
            "false_friends": sum(len(v) for v in self.false_friends.values()),
            "scorer": self.scorer.provenance,
            "min_confidence": self.min_confidence,
        }

    def _decision(self, caption: str) -> _Decision:
        tokens, mode, mentions = self._analyse(caption)
        if not mentions:
            conf = self.scorer.no_mention_confidence
            return _Decision(Prediction(None, conf, "", None, 0.0), tokens, mentions, [], {})
        scores, dists = self._distribute(mentions)
        commercial, feats = self._features(tokens, mode, mentions)
        probs = place_probs(self.scorer.mention, mentions, feats)
        best, shares, cfeats = self._caption_view(mentions, probs, dists, scores, commercial)
        score = self.scorer.caption.prob(cfeats)
        used = [k for k, s in enumerate(shares) if s > 0.0]
        words = "; ".join(
            f"{mention_text(caption, tokens, mentions[k])} "
            f"({mentions[k].note.split(':', 1)[0]} {probs[k]:.2f})"
            for k in sorted(used, key=lambda k: -probs[k] * shares[k])
        )
        keep = score >= self.min_confidence and sum(scores.values()) >= self.threshold
        if keep:
            pred = Prediction(best, score, words, best, score)
        else:
            pred = Prediction(None, 1.0 - score, f"rejected: {words}" if words else "", best, score)
        return _Decision(pred, tokens, mentions, probs, scores)

    def _features(
        self, tokens: list[Token], mode: str, mentions: list[Mention]
    ) -> tuple[int, list[list[float]]]:
        """The caption's commercial-word count and each mention's scorer features: what the
        scorer sees at prediction time and :mod:`.training` learns from."""
        commercial = sum(1 for t in tokens if t.key in COMMERCIAL)
        return commercial, [
            mention_features(tokens, mode, mentions, k, commercial, words=self.words, zipf=self.zipf)
            for k in range(len(mentions))
        ]

    @staticmethod
    def _caption_view(
        mentions: list[Mention],
        probs: list[float],
        dists: list[dict[str, float]],
        scores: dict[str, float],
        commercial: int,
    ) -> tuple[str, list[float], list[float]]:
        """The best country by learned evidence, each mention's share on it, the caption features."""
        learned: dict[str, float] = {}
        for p, dist in zip(probs, dists, strict=True):
            for c, v in dist.items():
                learned[c] = learned.get(c, 0.0) + p * v
        # Which country: the learned evidence, the rules' scores breaking ties, then the code.
        best = max(learned, key=lambda c: (round(learned[c], 9), scores.get(c, 0.0), c))
        shares = [dist.get(best, 0.0) for dist in dists]
        total = sum(learned.values()) or 1.0
        kinds = [m.note.split(":", 1)[0] for m in mentions]
        return best, shares, caption_features(probs, shares, kinds, learned[best] / total, commercial)


@dataclass
class _Decision:
    prediction: Prediction
    tokens: list[Token]
    mentions: list[Mention]
    probs: list[float]
    scores: dict[str, float]


def explain(caption: str, method: OfflineMethod | None = None) -> dict[str, Any]:
    """Why ``offline`` decided what it did: mentions, their place probabilities, the confidence."""
    method = method or OfflineMethod()
    d = method._decision(caption)
    tokens = d.tokens
    pred = d.prediction
    return {
        "caption": caption,
        "prediction": pred.country,
        "confidence": None if pred.confidence is None else round(pred.confidence, 4),
        "candidate": pred.candidate,
        "candidate_probability": None if pred.score is None else round(pred.score, 4),
        "min_confidence": method.min_confidence,
        "evidence": pred.evidence,
        "rule_scores": {k: round(v, 3) for k, v in sorted(d.scores.items(), key=lambda kv: -kv[1])[:5]},
        "mentions": [
            {
                "text": mention_text(caption, tokens, m),
                "kind": m.note,
                "place_probability": round(p, 4),
                "rule_strength": round(m.strength, 3),
                "weights": {k: round(v, 3) for k, v in sorted(m.weights.items(), key=lambda kv: -kv[1])[:5]},
            }
            for m, p in zip(d.mentions, d.probs, strict=True)
        ],
    }


GEO_METHODS.register("offline")(OfflineMethod)
