"""Table cells of the geographic report: numbers, percentages, p-values and country names."""

from __future__ import annotations

from typing import Any

from ...audit.report.formatting import format_number
from ..countries import countries

__all__ = ["country_name", "num", "p_value", "pct"]


def num(x: Any, digits: int = 3) -> str:
    return format_number(x, digits)


def pct(x: Any, digits: int = 1) -> str:
    return "–" if not isinstance(x, (int, float)) or isinstance(x, bool) else f"{100.0 * x:.{digits}f}"


def p_value(x: Any) -> str:
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return "–"
    return "< 0.001" if x < 1e-3 else f"{x:.3f}"


def country_name(code: str) -> str:
    c = countries().get(code)
    return c.name if c else code
