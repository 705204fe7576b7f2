"""``string``: gazetteer substring matching, the paper's baseline (no context, no demonyms).

Every word sequence of the caption that is a place name in the gazetteer (countries, ISO
3166-2 subdivisions, named places, GeoNames cities of ≥ ``min_population`` inhabitants) is a hit,
case-insensitively; the leftmost hit decides, and an ambiguous name goes to its strongest
reading (a country before a region before a city; the most populous city). As in the paper, it
finds most places and tags many ordinary words ("Stock", "Century", "Sale") as places.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..gazetteer import gazetteer, tokenize
from .base import GEO_METHODS, GeoMethod

__all__ = ["StringMethod"]

_NOT_PLACES = frozenset({"demonym", "region_demonym", "demonym_ambiguous", "code"})


@GEO_METHODS.register("string")
class StringMethod(GeoMethod):
    """Leftmost gazetteer match wins."""

    name = "string"

    def __init__(self, *, min_population: int = 15000, **options: Any) -> None:
        super().__init__(min_population=min_population, **options)
        self.gaz = gazetteer(int(min_population))

    def predict(self, captions: Sequence[str]) -> list[str | None]:
        return [self.predict_one(c) for c in captions]

    def predict_one(self, caption: str) -> str | None:
        tokens = tokenize(caption)
        for _, _, key in self.gaz.matches(tokens):
            places = [p for p in self.gaz.lookup(key) if p.kind not in _NOT_PLACES]
            if places:
                return places[0].iso3
        return None

    def provenance(self) -> dict[str, Any]:
        return {**super().provenance(), "gazetteer": self.gaz.provenance()}
