"""Text from outside (server answers, API fields, reject reasons) made short enough to show."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

__all__ = ["clip", "printable_line", "strip_html"]


def clip(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its first ``limit - 1`` and ``…``."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def printable_line(text: str, limit: int, *, empty: str = "") -> str:
    """``text`` as one printable line of about ``limit`` characters (a hostile server may send
    megabytes, line breaks or terminal escapes); ``empty`` stands in for a text with nothing
    printable. A cut line ends with ``… (cut; N characters in all)``. Scrub secrets *before*
    calling this, so that cutting cannot leave part of one.
    """
    head = text[: 4 * limit]  # whitespace runs shrink below; never walk megabytes
    line = " ".join("".join(c if c.isprintable() else " " for c in head).split()) or empty
    if len(line) > limit or len(text) > len(head):
        line = f"{line[:limit].rstrip()}… (cut; {len(text)} characters in all)"
    return line


class _TextExtractor(HTMLParser):
    _HIDDEN = frozenset({"script", "style", "template", "noscript"})  # content that is never shown

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self._HIDDEN:
            self._hidden += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self._HIDDEN and self._hidden:
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


def strip_html(text: str | None) -> str:
    """Return the visible text of an HTML fragment, whitespace collapsed (``None`` → ``""``)."""
    if not text:
        return ""
    parser = _TextExtractor()
    parser.feed(str(text))
    parser.close()
    return " ".join("".join(parser.parts).split())  # the parser decoded entities once (not twice)
