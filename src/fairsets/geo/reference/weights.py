"""Reference distributions ``p_true(c | n)`` for the geographic representativeness (GeoProfiler
§4.2): uniform, population-proportional, or weights from a CSV, optionally per entity."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..countries import countries
from .csvfiles import _country_rows, _listing, _numeric_column
from .statistics import GEONAMES_SOURCE

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CountryWeights", "gr_reference", "load_weights"]


@dataclass(frozen=True)
class CountryWeights:
    """A reference distribution ``p_true(c | n)`` over countries, optionally per entity.

    Attributes:
        name: ``"uniform"``, ``"uniform-all"``, ``"population"`` or the CSV path.
        description: one line for reports.
        default: ISO3 → probability (positive, sums to 1) for entities without their own
            distribution and for the overall analysis; ``None`` if there is none.
        by_entity: entity → its own distribution.
    """

    name: str
    description: str
    default: pd.Series | None
    by_entity: dict[str, pd.Series] = field(default_factory=dict)

    def for_group(self, entity: str | None) -> pd.Series | None:
        """The distribution for an entity (``None``: the overall one); ``None`` if there is none."""
        if entity is not None and entity in self.by_entity:
            return self.by_entity[entity]
        return self.default


def _normalised(weights: Mapping[str, float], what: str) -> pd.Series:
    import pandas as pd

    s = pd.Series(dict(weights), dtype="float64").sort_index()
    s = s[s > 0]
    total = float(s.sum())
    if not len(s) or total <= 0:
        raise ValueError(f"{what}: the weights sum to zero")
    s.index.name = "iso3"
    return s / total


def load_weights(path: str | os.PathLike[str]) -> CountryWeights:
    """Read a reference-distribution CSV: a country column, ``weight``, optional ``entity``.

    Rows with an empty (or no) ``entity`` give the default distribution; rows with an entity give
    that entity's own. Weights are normalised per distribution; countries with weight 0 are
    outside its support (their GR is not defined and they are not counted).

    Raises:
        FileNotFoundError: no such file.
        ValueError: missing columns, unknown countries (listed), duplicates, bad weights.
    """
    p = Path(path)
    what = "reference distribution CSV"
    _, rows, key, codes = _country_rows(p, what, ("weight",))
    weights = _numeric_column(rows, "weight", f"{what} {p}", key)
    missing = [f"{r[key]}" for r, w in zip(rows, weights, strict=True) if math.isnan(w)]
    if missing:
        raise ValueError(f"{what} {p}: rows without a weight: {_listing(missing)}")
    groups: dict[str, dict[str, float]] = {}
    dup: list[str] = []
    for r, code, w in zip(rows, codes, weights, strict=True):
        entity = r.get("entity", "").strip()
        g = groups.setdefault(entity, {})
        if code in g:
            dup.append(f"{entity + ':' if entity else ''}{code}")
        g[code] = w
    if dup:
        raise ValueError(f"{what} {p}: countries listed more than once: {_listing(dup)}")
    default = _normalised(groups[""], f"{what} {p}") if "" in groups else None
    by_entity = {e: _normalised(g, f"{what} {p}, entity {e!r}") for e, g in sorted(groups.items()) if e}
    desc = f"weights from {p.name}" + (f" ({len(by_entity)} entity-specific)" if by_entity else "")
    return CountryWeights(str(p), desc, default, by_entity)


def gr_reference(spec: str | os.PathLike[str]) -> CountryWeights:
    """The reference distribution for GR from a spec.

    Args:
        spec: ``"uniform"`` (every independent country of ``countries.csv`` equally likely),
            ``"uniform-all"`` (every country and territory), ``"population"`` (proportional to
            the GeoNames population in ``countries.csv``; territories included) or the path of a
            CSV read by :func:`load_weights`.

    Raises:
        ValueError: an unknown spec that is not a file either (or a bad CSV).
    """
    text = str(spec).strip()
    table = countries().values()
    if text == "uniform":
        codes = [c.iso3 for c in table if c.independent]
        return CountryWeights(
            "uniform",
            f"uniform over the {len(codes)} independent countries",
            _normalised(dict.fromkeys(codes, 1.0), text),
        )
    if text == "uniform-all":
        codes = [c.iso3 for c in table]
        return CountryWeights(
            "uniform-all",
            f"uniform over all {len(codes)} countries and territories",
            _normalised(dict.fromkeys(codes, 1.0), text),
        )
    if text == "population":
        w = {c.iso3: float(c.population) for c in table if c.population > 0}
        return CountryWeights("population", f"population share ({GEONAMES_SOURCE})", _normalised(w, text))
    if Path(text).is_file():
        return load_weights(text)
    raise ValueError(f"unknown GR reference {text!r}: use uniform, uniform-all, population or a CSV file")
