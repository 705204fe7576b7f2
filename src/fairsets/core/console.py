"""Data and install hints on the terminal, never read as Rich markup.

Rich reads ``[...]`` in a printed string as markup: a class label ``[/]`` raises a ``MarkupError``
(after the command wrote its outputs, so it "fails" with exit 2), ``[bold red]x`` prints ``x``, and
the install hint ``pip install 'fairsets[geo]'`` loses its extra. Table titles, headers and cells
are read the same way. So every line fairsets prints that may carry data (labels, paths, captions,
model ids, server answers) or an install hint goes through this module: markup and highlighting
off, and control and format characters (terminal escapes, bidi overrides, line separators) shown as
escapes (``\\x1b``, ``\\u202e``), so that a label cannot rewrite the screen. ``\\n`` and ``\\t`` stay.

Styles are given as arguments (``style="yellow"``), never inside the text; they disappear when
the output is not a terminal.

API:
    * ``say(*values, err=False, style="", wrap=False, console=None)`` — one line of data (values
      joined by a space) on stdout, or stderr with ``err``
    * ``labelled(label, message, style, err=True)`` — ``warning: …``: the label styled, the message data
    * ``show(renderable, err=False, console=None)`` — a :class:`DataTable` (or any Rich renderable)
    * ``DataTable`` — a Rich table whose title, headers and string cells are text, never markup
    * ``text(value, style="") -> rich.text.Text`` and ``visible(value) -> str`` — the pieces
"""

from __future__ import annotations

import os
import unicodedata
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

__all__ = ["DataTable", "labelled", "say", "show", "text", "visible"]

#: Unicode categories shown as escapes: controls, format characters (bidi overrides, zero-width
#: characters), line and paragraph separators.
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp"})
_CONSOLES: dict[tuple[bool, str | None], Console] = {}


def visible(value: object) -> str:
    """``str(value)`` with control and format characters written as escapes (``\\n``, ``\\t`` kept)."""
    s = str(value)
    if s.isprintable():
        return s
    return "".join(
        c
        if c in "\n\t" or unicodedata.category(c) not in _HIDDEN
        else c.encode("unicode_escape").decode("ascii")
        for c in s
    )


def text(value: object, style: str = "") -> Text:
    """``value`` as Rich :class:`~rich.text.Text`: printed as written, whatever brackets it holds."""
    return value if isinstance(value, Text) else Text(visible(value), style=style)


class DataTable(Table):
    """A :class:`rich.table.Table` for data: a string title, header or cell is text, never markup.

    Other renderables (``Text`` one made with a style, a nested table) and ``None`` (an empty cell)
    are kept as they are.
    """

    def __init__(self, *headers: Any, title: object = None, **options: Any) -> None:
        super().__init__(*headers, title=None if title is None else text(title), **options)

    def add_column(self, header: Any = "", *args: Any, **kwargs: Any) -> None:
        # a cell wider than its column wraps, never cut with "…": a pipe (80 columns) gets every value
        kwargs.setdefault("overflow", "fold")
        super().add_column(text(header) if isinstance(header, str) else header, *args, **kwargs)

    def add_row(self, *cells: Any, **kwargs: Any) -> None:
        super().add_row(*(text(c) if isinstance(c, str | int | float) else c for c in cells), **kwargs)


def _console(err: bool) -> Console:
    """One console per stream and ``COLUMNS`` value; it writes to ``sys.stdout`` / ``sys.stderr`` as
    they are at print time. Rich reads ``COLUMNS`` only when a console is made, so a console made
    under another value (an earlier command in the same process) would keep the old width."""
    key = (err, os.environ.get("COLUMNS"))
    if key not in _CONSOLES:
        from rich.console import Console

        _CONSOLES[key] = Console(stderr=err)
    return _CONSOLES[key]


def say(
    *values: object, err: bool = False, style: str = "", wrap: bool = False, console: Console | None = None
) -> None:
    """Print ``values`` (joined by a space) as one line of text, never markup; ``wrap`` folds a long
    line at the console's width (else the terminal does, and a pipe gets it whole)."""
    line = Text(" ").join(text(v, style) for v in values)
    (console or _console(err)).print(line, markup=False, highlight=False, soft_wrap=not wrap)


def labelled(label: str, message: object, style: str, *, err: bool = True) -> None:
    """``label: message`` with ``label`` in ``style`` (``warning``, ``yellow``) and the message as data."""
    _console(err).print(
        Text.assemble((f"{label}:", style), " ", text(message)), markup=False, highlight=False, soft_wrap=True
    )


def show(renderable: RenderableType, *, err: bool = False, console: Console | None = None) -> None:
    """Print a :class:`DataTable` (or another renderable built from :func:`text`)."""
    (console or _console(err)).print(renderable, markup=False, highlight=False)
