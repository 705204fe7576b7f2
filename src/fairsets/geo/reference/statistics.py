"""Statistics tables: GDP and population per country (GeoProfiler §4.1), from ``countries.csv``
or a CSV, and written back as CSV."""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fairsets.core.atomic import atomic_write_text

from ..countries import countries
from .csvfiles import _country_rows, _listing, _numeric_column

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["GEONAMES_SOURCE", "REFERENCE_COLUMNS", "default_reference", "load_reference", "write_reference"]

#: Columns of a statistics table (index: ISO alpha-3 code).
REFERENCE_COLUMNS = ("name", "year", "gdp", "population")
GEONAMES_SOURCE = "GeoNames population (fairsets countries.csv), CC BY 4.0"


def _frame(records: Mapping[str, Mapping[str, Any]], source: str) -> pd.DataFrame:
    import pandas as pd

    table = countries()
    codes = sorted(records)
    df = pd.DataFrame(
        {
            "name": [table[c].name for c in codes],
            "year": [float(records[c].get("year", math.nan)) for c in codes],
            "gdp": [float(records[c].get("gdp", math.nan)) for c in codes],
            "population": [float(records[c].get("population", math.nan)) for c in codes],
        },
        index=pd.Index(codes, name="iso3"),
    )
    df.attrs["source"] = source
    return df


def default_reference() -> pd.DataFrame:
    """Population of every country and territory from ``countries.csv`` (GeoNames); no GDP.

    Returns:
        A table indexed by ISO alpha-3 code with ``name``, ``year`` (NaN), ``gdp`` (NaN) and
        ``population``; ``attrs["source"]`` names the source.
    """
    return _frame(
        {c.iso3: {"population": float(c.population)} for c in countries().values()}, GEONAMES_SOURCE
    )


def load_reference(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a statistics CSV: a country column plus ``gdp`` and/or ``population`` (and ``year``).

    The country column is ``iso3`` (ISO alpha-3 codes), else ``country`` or ``name`` (names,
    aliases or codes, see :func:`resolve_countries`). Empty cells, ``NA`` and ``..`` are missing
    values; other cells must be non-negative numbers (thousands separators allowed).

    Args:
        path: the CSV file (e.g. written by :func:`write_reference`).

    Returns:
        A table indexed by ISO alpha-3 code with the columns of :data:`REFERENCE_COLUMNS`;
        ``attrs["source"]`` is the CSV's ``source`` column if it has one, else the path.

    Raises:
        FileNotFoundError: no such file.
        ValueError: no country column, no gdp/population column, unknown countries (listed),
            duplicate countries, or cells that are not numbers.
    """
    p = Path(path)
    what = "reference CSV"
    header, rows, key, codes = _country_rows(p, what, ("gdp", "population"))
    seen: dict[str, int] = {}
    for c in codes:
        seen[c] = seen.get(c, 0) + 1
    dup = sorted(c for c, n in seen.items() if n > 1)
    if dup:
        raise ValueError(f"{what} {p}: countries listed more than once: {_listing(dup)}")
    records: dict[str, dict[str, float]] = {c: {} for c in codes}
    for col in ("gdp", "population", "year"):
        if col in header:
            for c, v in zip(codes, _numeric_column(rows, col, f"{what} {p}", key), strict=True):
                records[c][col] = v
    sources = sorted({r["source"] for r in rows if r.get("source")})
    return _frame(records, "; ".join(sources) if sources else str(p))


def write_reference(table: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write a statistics table as CSV (atomically), with its source and licence on every row.

    Columns: ``iso3, name, year, gdp, population, source, license``; integral values are written
    without a decimal point, missing ones as empty cells. ``source`` and ``license`` come from
    ``table.attrs`` (set by :func:`fetch_worldbank`).

    Args:
        table: a table as returned by :func:`fetch_worldbank` or :func:`load_reference`.
        path: the CSV to write (parent folders are created).

    Returns:
        The path written.
    """

    def fmt(v: Any) -> str:
        if v is None:
            return ""
        f = float(v)
        if math.isnan(f):
            return ""
        return str(int(f)) if f.is_integer() and abs(f) < 1e17 else repr(f)

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["iso3", "name", "year", "gdp", "population", "source", "license"])
    source = str(table.attrs.get("source", ""))
    license_ = str(table.attrs.get("license", ""))
    for code, row in table.sort_index().iterrows():
        w.writerow(
            [
                code,
                row.get("name", ""),
                fmt(row.get("year")),
                fmt(row.get("gdp")),
                fmt(row.get("population")),
                source,
                license_,
            ]
        )
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(out, buf.getvalue())
