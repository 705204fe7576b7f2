"""1. Shares (Table 1): underspecified, top-k and remaining shares; continents (Table 11)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..countries import countries

__all__ = ["CONTINENT_CODES", "continent_shares", "country_counts", "share_table"]

#: The paper's continents (Table 11), GeoNames codes.
CONTINENT_CODES: tuple[str, ...] = ("NA", "SA", "EU", "AS", "AF", "OC")


def country_counts(codes: Sequence[str | None] | pd.Series) -> pd.Series:
    """Rows per country (``None`` ignored), most frequent first, ties by ISO3 code."""
    s = pd.Series(list(codes), dtype=object).dropna()
    counts = s.value_counts()
    order = sorted(counts.index, key=lambda c: (-int(counts[c]), c))
    out = pd.Series(
        [int(counts[c]) for c in order], index=pd.Index(order, name="iso3"), dtype="int64", name="count"
    )
    return out


def share_table(codes: Sequence[str | None] | pd.Series, *, top_k: int = 10) -> dict[str, Any]:
    """Table 1: underspecified, top-``k`` and remaining shares of all rows (they sum to 1).

    Args:
        codes: the ISO3 code of every row, ``None`` for underspecified rows.
        top_k: how many of the most frequent countries make the "top" share (ties at the cut
            are broken by ISO3 code).

    Returns:
        ``{"n_rows", "n_specified", "n_underspecified", "n_countries", "underspecified", "top",
        "remaining", "top_k", "top_countries"}``.

    Raises:
        ValueError: no rows or ``top_k < 1``.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    codes = list(codes)
    n = len(codes)
    if n == 0:
        raise ValueError("no rows")
    counts = country_counts(codes)
    n_spec = int(counts.sum())
    top = counts.iloc[:top_k]
    n_top = int(top.sum())
    return {
        "n_rows": n,
        "n_specified": n_spec,
        "n_underspecified": n - n_spec,
        "n_countries": len(counts),
        "underspecified": (n - n_spec) / n,
        "top": n_top / n,
        "remaining": (n_spec - n_top) / n,
        "top_k": top_k,
        "top_countries": list(top.index),
    }


def continent_shares(counts: pd.Series) -> dict[str, Any]:
    """Table 11: rows per continent and their shares of the country-specified rows.

    Args:
        counts: rows per ISO3 code (:func:`country_counts`).

    Returns:
        ``{"counts": {code: n}, "shares": {code: fraction or None}}`` for NA SA EU AS AF OC
        (and AN when it has rows); shares are ``None`` when no row names a country.
    """
    table = countries()
    by: dict[str, int] = dict.fromkeys(CONTINENT_CODES, 0)
    for code, n in counts.items():
        cont = table[str(code)].continent or "?"
        by[cont] = by.get(cont, 0) + int(n)
    by = {k: v for k, v in by.items() if k in CONTINENT_CODES or v}
    total = sum(by.values())
    return {"counts": by, "shares": {k: (v / total if total else None) for k, v in by.items()}}
