"""What the ``offline`` rules find in a caption: the :class:`Mention` of a place, and the word helpers
the rules and the learned scorer share (the caption's case mode, the words a mention covers, whether a
word is a dictionary word).

Below :mod:`~fairsets.geo.methods.offline.rules` (the rules), :mod:`~fairsets.geo.methods.offline.scorer`
(the learned models) and :mod:`~fairsets.geo.methods.offline.method` (the method), which import it.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Container
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ...gazetteer import Place, Token

__all__ = ["Mention", "case_mode", "is_word", "mention_text", "token_span"]


def case_mode(tokens: list[Token]) -> str:
    """The caption's case mode: ``normal`` sentence case, ``title`` case, ``upper`` or ``lower``."""
    words = [t.text for t in tokens if t.text[:1].isalpha()]
    if not words:
        return "lower"
    lower = sum(w[:1].islower() for w in words)
    if all(not w.islower() and w.upper() == w for w in words if len(w) > 1) and any(
        len(w) > 1 for w in words
    ):
        return "upper"
    if lower == len(words):
        return "lower"
    long_words = [w for w in words if len(w) > 3]
    if long_words and sum(w[:1].isupper() for w in long_words) / len(long_words) >= 0.75:
        return "title"
    return "normal"


@dataclass
class Mention:
    start: int  # token index
    end: int
    key: str
    places: tuple[Place, ...]
    strength: float
    weights: dict[str, float]
    note: str = ""
    listed: bool = False  # separated from another mention by a comma only
    #: What the rules saw (common word, capital, evidence, …): the learned scorer's raw context.
    ctx: dict[str, float] = field(default_factory=dict)


_start = operator.attrgetter("start")
_end = operator.attrgetter("end")


def token_span(tokens: list[Token], start: int, end: int, *, exact: bool = False) -> tuple[int, int] | None:
    """The token indices ``(first, past_last)`` of the words inside characters ``start:end`` of the
    caption; None when there are none, or (``exact``) when the words do not begin and end there."""
    # tokens come from one left-to-right scan: starts and ends both rise, so the words inside are
    # one run, found by bisection (a caption of many towns and postcodes is not scanned per code)
    first = bisect.bisect_left(tokens, start, key=_start)
    past = bisect.bisect_right(tokens, end, lo=first, key=_end)
    if first == past or (exact and (tokens[first].start != start or tokens[past - 1].end != end)):
        return None
    return first, past


def mention_text(caption: str, tokens: list[Token], m: Mention) -> str:
    """The words of the caption a mention covers, as written."""
    return caption[tokens[m.start].start : tokens[m.end - 1].end]


def is_word(words: Container[str], key: str) -> bool:
    """A dictionary word of ``words``, allowing plural and verb endings ("suppliers", "rooms", "parked")."""
    if key in words:
        return True
    for suffix, repl in (
        ("ies", "y"),
        ("es", ""),
        ("s", ""),
        ("ed", ""),
        ("ed", "e"),
        ("ing", ""),
        ("ing", "e"),
    ):
        if key.endswith(suffix) and len(key) > len(suffix) + 2 and key[: -len(suffix)] + repl in words:
            return True
    return False
