"""Numbers for report and card tables (metrics with a fixed number of decimals, relative changes), and
the Markdown pieces every card section uses (block marker ids, tables of escaped cells)."""

from __future__ import annotations

from typing import Any

__all__ = ["format_change", "format_number", "markdown_table", "marker_id"]


def format_change(before: Any, after: Any) -> str:
    """Relative change ``(after - before) / |before|`` as a signed percentage ("–" if either is missing)."""
    if not isinstance(before, (int, float)) or not isinstance(after, (int, float)):
        return "–"
    if before == 0:
        return "+0.0%" if after == 0 else "n/a"
    return f"{(after - before) / abs(before) * 100.0:+.1f}%"


def format_number(x: Any, digits: int = 4, text: Any = str) -> str:
    """A metric for a table: ``digits`` decimals, scientific when tiny; non-numbers through ``text``."""
    if x is None:
        return "–"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return text(x)
    if isinstance(x, int):
        return str(x)
    if x != 0 and abs(x) < 10 ** (-digits + 1):
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}f}"


def marker_id(ident: str) -> str:
    """``ident`` made safe inside an HTML comment and on one line (no spaces, no ``--``, no ``>``):
    the id of a card block's ``<!-- fairsets:audit:ID start -->`` marker."""
    out = []
    for ch in str(ident):
        if ch.isalnum() or ch in "._:/@+=,~-":
            out.append(ch)
        else:
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8")))
    s = "".join(out)
    while "--" in s:
        s = s.replace("--", "-%2D")
    return s or "unknown"


def markdown_table(head: list[str], rows: list[list[str]], align: list[str]) -> list[str]:
    """The lines of a Markdown table whose cells are already escaped."""
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]
