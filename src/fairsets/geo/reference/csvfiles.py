"""Reading reference CSVs: country columns resolved to ISO 3166-1 alpha-3 codes, numeric cells
checked, and errors that list what is wrong."""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from fairsets.core.textfile import read_text

from ..countries import countries, is_none_answer, normalize_country

__all__ = ["resolve_countries"]

_KEY_COLUMNS = ("iso3", "country", "name")
_MISSING = frozenset({"", "na", "nan", "n/a", "null", "none", "..", "-"})
_SHOW = 12  # unknown names listed in an error


def _listing(values: Sequence[str]) -> str:
    shown = ", ".join(repr(v) for v in values[:_SHOW])
    return shown + (f", … ({len(values) - _SHOW} more)" if len(values) > _SHOW else "")


def resolve_countries(values: Iterable[Any], *, what: str, codes_only: bool = False) -> list[str]:
    """Map country codes or names to ISO 3166-1 alpha-3 codes, failing on any unknown one.

    Args:
        values: codes (``"FRA"``) or, unless ``codes_only``, names, aliases and other codes
            (``"France"``, ``"the UK"``, ``"US"``).
        what: what the values are, for the error message (``"reference CSV column 'country'"``).
        codes_only: accept ISO alpha-3 codes only.

    Returns:
        The codes, in the order of ``values``.

    Raises:
        ValueError: some values are empty or name no known country; the message lists them.
    """
    table = countries()
    out: list[str] = []
    unknown: list[str] = []
    for v in values:
        text = "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v).strip()
        code = text.upper() if text.upper() in table else None
        if code is None and not codes_only and not is_none_answer(text):
            code = normalize_country(text)
        if code is None:
            if text not in unknown:
                unknown.append(text)
            continue
        out.append(code)
    if unknown:
        kind = "ISO 3166-1 alpha-3 codes" if codes_only else "country codes or names"
        raise ValueError(f"{what}: {len(unknown)} value(s) are not known {kind}: {_listing(unknown)}")
    return out


def _number(text: str) -> float | None:
    """A float from a CSV cell; ``nan`` for an empty/NA cell; ``None`` when not a number."""
    t = text.strip().replace(",", "").replace("_", "")
    if t.casefold() in _MISSING:
        return math.nan
    try:
        return float(t)
    except ValueError:
        return None


def _read_csv_rows(path: str | os.PathLike[str], what: str) -> tuple[list[str], list[dict[str, str]]]:
    """Header (lower-cased, stripped) and rows of a CSV file, with clear errors."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{what} not found: {p}")
    text = read_text(p)  # TextFileError (a ValueError) names the file, line and byte offset
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip().lower() for h in next(reader)]
    except StopIteration:
        raise ValueError(f"{what} {p} is empty") from None
    if len(set(header)) != len(header):
        raise ValueError(f"{what} {p}: duplicate column names in {header}")
    rows = []
    for line_no, cells in enumerate(reader, start=2):
        if not cells or all(not c.strip() for c in cells):
            continue
        if len(cells) > len(header):
            raise ValueError(f"{what} {p}, line {line_no}: {len(cells)} cells for {len(header)} columns")
        cells = [c.strip() for c in cells] + [""] * (len(header) - len(cells))
        rows.append(dict(zip(header, cells, strict=True)))
    return header, rows


def _key_column(header: Sequence[str], what: str, path: Path) -> str:
    for col in _KEY_COLUMNS:
        if col in header:
            return col
    raise ValueError(f"{what} {path} needs an iso3, country or name column (it has: {', '.join(header)})")


def _country_rows(
    path: Path, what: str, columns: tuple[str, ...]
) -> tuple[list[str], list[dict[str, str]], str, list[str]]:
    """Header, rows, country column and each row's ISO alpha-3 code of a CSV of countries that needs
    one of ``columns``; an error names what is missing (no country column, none of ``columns``, no
    rows) or the countries not known."""
    header, rows = _read_csv_rows(path, what)
    key = _key_column(header, what, path)
    if not any(col in header for col in columns):
        raise ValueError(f"{what} {path} needs a {' or '.join(columns)} column (it has: {', '.join(header)})")
    if not rows:
        raise ValueError(f"{what} {path} has no rows")
    codes = resolve_countries(
        [r[key] for r in rows], what=f"{what} {path} column {key!r}", codes_only=key == "iso3"
    )
    return header, rows, key, codes


def _numeric_column(rows: list[dict[str, str]], col: str, what: str, key: str) -> list[float]:
    values, bad = [], []
    for r in rows:
        v = _number(r.get(col, ""))
        if v is None or (not math.isnan(v) and (v < 0 or math.isinf(v))):
            bad.append(f"{r.get(key, '?')}={r.get(col, '')!r}")
            values.append(math.nan)
        else:
            values.append(v)
    if bad:
        raise ValueError(f"{what}: column {col!r} must hold non-negative numbers; bad: {_listing(bad)}")
    return values
