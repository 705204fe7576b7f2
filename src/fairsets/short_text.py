"""Text from outside (server answers, API fields, reject reasons) made short enough to show."""

from __future__ import annotations

__all__ = ["clip", "printable_line"]


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
