"""Markdown written safely: :class:`Md` (structure written here) versus data, which is escaped by
:func:`md_text`; tables, code spans, fences and JSON/Python literals that no data can break out of.
"""

from __future__ import annotations

import html
import json
import re
import unicodedata
from collections.abc import Mapping
from typing import Any


class Md(str):
    """Markdown written by this module: emitted as is. Every other value is data and is escaped."""


#: Characters that Markdown (CommonMark/GFM) or a table would interpret inside a line of text.
_MD_PUNCT = re.compile(r"([\\`*_\[\]#|~$])")
_BLOCK_START = re.compile(r"^(\d+)([.)])(?=\s|$)")


def _printable(value: Any) -> str:
    """``str(value)`` without control or format characters (bidi overrides, zero-width spaces, NUL);
    whitespace is kept (callers collapse it)."""
    return "".join(c for c in str(value) if c.isspace() or unicodedata.category(c) not in ("Cc", "Cf"))


def md_text(value: Any) -> Md:
    """``value`` as one line of inert Markdown text: whitespace (newlines included) collapsed to single
    spaces, ``&``, ``<`` and ``>`` HTML-escaped, Markdown punctuation (backticks, ``|``, brackets,
    emphasis, ``#``...) backslash-escaped, and a leading list/quote/heading marker neutralised.

    Safe anywhere a line of text goes: a paragraph, a list item, a heading or a table cell.
    """
    text = html.escape(" ".join(_printable(value).split()), quote=False)
    text = _MD_PUNCT.sub(r"\\\1", text)
    text = _BLOCK_START.sub(r"\1\\\2", text)
    if text[:1] in ("-", "+", "="):  # a list marker or a setext underline ("&gt;" is no quote marker)
        text = "\\" + text
    return Md(text)


def _json_inline(value: Any) -> str:
    """JSON for a code span or block: same value, but ``<``, ``>``, ``&``, backticks and ``|`` written as
    ``\\uXXXX`` escapes so that no HTML tag, code fence or table column can be formed."""
    return _escape_json(json.dumps(value, sort_keys=True, ensure_ascii=False), "<>&`|")


def _escape_json(text: str, specials: str, python: bool = False) -> str:
    """Write ``specials`` and every control or format character (bidi overrides, zero-width
    spaces; not the newlines of an indented dump) of JSON/Python literal ``text`` as escapes.

    Such characters only ever occur inside string literals there, where an escape keeps the value.
    """

    def esc(c: str) -> str:
        n = ord(c)
        if n <= 0xFFFF:
            return f"\\u{n:04x}"
        if python:
            return f"\\U{n:08x}"
        n -= 0x10000
        return f"\\u{0xD800 + (n >> 10):04x}\\u{0xDC00 + (n & 0x3FF):04x}"

    return "".join(
        esc(c) if c in specials or (c != "\n" and unicodedata.category(c) in ("Cc", "Cf")) else c
        for c in text
    )


def md_code(value: Any) -> Md:
    """``value`` as an inline code span if it is a plain name (letters, digits, ``_.-``), else as text."""
    text = str(value)
    if re.fullmatch(r"[A-Za-z0-9_.\-]+", text):
        return Md(f"`{text}`")
    return md_text(text)


def _md_cell(value: Any) -> str:
    """A table cell: :class:`Md` as is (structure written here), anything else as escaped text."""
    if isinstance(value, Md):
        return " ".join(value.split())
    return md_text(value)


def _table(head: list[Any], rows: list[list[Any]], align: list[str] | None = None) -> Md:
    align = align or ["---"] * len(head)
    lines = ["| " + " | ".join(_md_cell(h) for h in head) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in rows]
    return Md("\n".join(lines))


def _params(params: Mapping[str, Any] | None) -> Md:
    if not params:
        return Md("")

    def name(k: Any) -> str:
        return str(k) if re.fullmatch(r"[A-Za-z0-9_]+", str(k)) else _json_inline(str(k))

    return Md(", ".join(f"`{name(k)}={_json_inline(params[k])}`" for k in sorted(params)))


def _json_block(value: Any) -> str:
    """Indented JSON for a fenced block, with ``<``, ``>``, ``&`` and backticks as ``\\uXXXX`` escapes."""
    return _escape_json(json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False), "<>&`")


def _fenced(text: str, lang: str) -> str:
    """``text`` in a code fence longer than any run of backticks inside it (so it cannot close it)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


def _py(value: Any) -> str:
    """A Python string literal for ``value``: JSON's escapes are Python's, and ``<``, ``>``, ``&`` and
    backticks are escaped too, so no tag or fence can appear in the card's text."""
    return _escape_json(json.dumps(str(value), ensure_ascii=False), "<>&`", python=True)
