"""Inert Markdown text and numbers for the persons audit's card block (:mod:`.card`).

Every value taken from an audit is data (group names, words, captioner and scorer names, reasons
may be anything a folder or a user file held): it is escaped as one line of Markdown text
(:func:`fairsets.publish.card.md_text`), or shown as a code span when it is a plain name; braces and
a bare ``None`` are written as HTML entities, so no value can form a link, an HTML tag, a table
column, template syntax or what the card check reads as a missing value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["_ci_num", "_ci_pct", "_fixed", "_int", "_is_num", "_map", "_name", "_pct", "_signed_pct", "_t"]

_NONE = re.compile(r"(?<!\S)None(?!\S)")
_PLAIN = re.compile(r"[A-Za-z0-9_.:/@+\-]+")


def _text(value: Any) -> str:
    """One line of inert Markdown text (:func:`fairsets.publish.card.md_text`)."""
    from fairsets.publish.card import md_text

    return str(md_text(value))


def _inert(md: str) -> str:
    """Escaped Markdown with braces and a bare ``None`` word as entities (the card refuses both)."""
    md = md.replace("{", "&#123;").replace("}", "&#125;")
    return _NONE.sub("&#78;one", md)


def _t(value: Any) -> str:
    """A value as one line of inert Markdown text."""
    return _inert(_text(value)) or "“”"


def _name(value: Any) -> str:
    """A name (group, captioner, scorer, model): a code span when plain (letters, digits, ``_.:/@+-``),
    else escaped text (braces would show as entities inside a code span)."""
    s = str(value)
    return f"`{s}`" if _PLAIN.fullmatch(s) else _t(s)


def _int(value: Any) -> str:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else "–"


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x and abs(x) != float("inf")


def _pct(x: Any) -> str:
    return f"{100.0 * x:.1f} %" if _is_num(x) else "–"


def _ci_pct(ci: Any) -> str:
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_is_num(v) for v in ci):
        return f"{100.0 * ci[0]:.1f}–{100.0 * ci[1]:.1f} %"
    return "–"


def _ci_num(ci: Any, digits: int) -> str:
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_is_num(v) for v in ci):
        return f"{_fixed(ci[0], digits)} to {_fixed(ci[1], digits)}"
    return "–"


def _fixed(x: Any, digits: int, sign: str = "") -> str:
    """``x`` with ``digits`` decimals ("–" if not a number); no "-0.000" for a value that rounds to 0."""
    if not _is_num(x):
        return "–"
    s = f"{x:{sign}.{digits}f}"
    return f"{0.0:.{digits}f}" if float(s) == 0 else s


def _signed_pct(x: Any) -> str:
    return f"{_fixed(x, 1, '+')} %" if _is_num(x) else "–"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
