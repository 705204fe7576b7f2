"""Country reference tables for the geo analyses: GDP and population, and reference distributions.

Two kinds of reference:

* **Statistics** (:func:`load_reference`, :func:`default_reference`, :func:`fetch_worldbank`): a
  table indexed by ISO 3166-1 alpha-3 code with ``gdp`` and ``population`` columns, correlated with
  the country frequencies (GeoProfiler §4.1). Population ships with fairsets (``countries.csv``,
  GeoNames, CC BY 4.0); GDP does not (no properly licensed offline source), so
  ``fairsets geo reference --year Y`` downloads it from the World Bank API (CC BY 4.0) once and
  writes a CSV that ``fairsets geo analyze --reference`` reads.
* **Distributions** (:func:`gr_reference`): ``p_true(c | n)`` for the geographic
  representativeness (§4.2): uniform over the independent countries (``"uniform"``) or over every
  country and territory (``"uniform-all"``), proportional to population (``"population"``,
  ``countries.csv``), or a user CSV of weights, optionally per entity.

Reference CSVs name countries in an ``iso3`` column (ISO 3166-1 alpha-3) or a ``country``/``name``
column (normalised with :func:`fairsets.geo.countries.normalize_country`); unknown codes or names
are an error that lists them.

API:
    * ``load_reference(path) -> DataFrame`` and ``default_reference() -> DataFrame``
    * ``fetch_worldbank(year, indicators=..., *, cache_dir=None, base_url=...) -> DataFrame``
    * ``write_reference(table, path) -> Path``
    * ``gr_reference(spec) -> CountryWeights`` and ``load_weights(path) -> CountryWeights``
    * ``resolve_countries(values, *, what, codes_only=False) -> list[str]``
"""

from __future__ import annotations

from .csvfiles import resolve_countries
from .statistics import GEONAMES_SOURCE, REFERENCE_COLUMNS, default_reference, load_reference, write_reference
from .weights import CountryWeights, gr_reference, load_weights
from .worldbank import (
    MAX_PAGES,  # noqa: F401  (importable from here as before)
    WORLD_BANK_API,
    WORLD_BANK_INDICATORS,
    WORLD_BANK_LICENSE,
    default_cache_dir,
    fetch_worldbank,
)

__all__ = [
    "GEONAMES_SOURCE",
    "REFERENCE_COLUMNS",
    "WORLD_BANK_API",
    "WORLD_BANK_INDICATORS",
    "WORLD_BANK_LICENSE",
    "CountryWeights",
    "default_cache_dir",
    "default_reference",
    "fetch_worldbank",
    "gr_reference",
    "load_reference",
    "load_weights",
    "resolve_countries",
    "write_reference",
]
