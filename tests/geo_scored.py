"""A geo method for tests that reads its answer from the caption: ``"ISO3 score"``.

``"DEU 0.6"`` is the candidate DEU with probability 0.6, kept when 0.6 ≥ ``min_confidence``;
``"none 0.9"`` is no candidate, confidently. Lets evaluation and hybrid tests choose every
confidence exactly. Register it for one test with the :func:`scored_method` context.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fairsets.geo.methods import GEO_METHODS, GeoMethod, Prediction


class ScoredMethod(GeoMethod):
    """Reads "ISO3 score" captions: the candidate and its probability (``none 0.9``: no country)."""

    name = "scored-fixture"

    def __init__(self, *, min_confidence: float = 0.5, **options: Any) -> None:
        super().__init__(min_confidence=min_confidence, **options)
        self.min_confidence = float(min_confidence)

    def predict(self, captions: Sequence[str]) -> list[str | None]:
        return [p.country for p in self.predict_detailed(captions)]

    def predict_detailed(self, captions: Sequence[str]) -> list[Prediction]:
        out = []
        for c in captions:
            code, s = c.split()
            s = float(s)
            if code == "none":
                out.append(Prediction(None, s, "", None, 0.0))
            elif s >= self.min_confidence:
                out.append(Prediction(code, s, f"{code} word", code, s))
            else:
                out.append(Prediction(None, 1 - s, f"rejected: {code} word", code, s))
        return out


def register_scored(monkeypatch: Any) -> str:
    """Register :class:`ScoredMethod` for one test (``monkeypatch`` undoes it); returns its name."""
    monkeypatch.setitem(GEO_METHODS._items, ScoredMethod.name, ScoredMethod)
    return ScoredMethod.name
