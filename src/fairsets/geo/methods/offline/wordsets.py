"""Word sets the ``offline`` method loads once: false friends and given names (``data/``), the
English dictionary (``english-words``) and English word frequencies (``wordfreq``)."""

from __future__ import annotations

import functools
import math
from typing import Any

from ...countries import data_text, fold
from ...gazetteer import name_key


@functools.cache
def _lines(name: str) -> tuple[str, ...]:
    try:
        text = data_text(name)
    except FileNotFoundError:
        return ()
    return tuple(s for line in text.splitlines() if (s := line.split("#", 1)[0].strip()))


@functools.cache
def _false_friends() -> dict[str, tuple[tuple[str, ...], ...]]:
    """First token → token tuples of false-friend phrases (longest first)."""
    by_first: dict[str, list[tuple[str, ...]]] = {}
    for phrase in _lines("false_friends.txt"):
        toks = tuple(name_key(phrase).split())
        if toks:
            by_first.setdefault(toks[0], []).append(toks)
    return {k: tuple(sorted(v, key=len, reverse=True)) for k, v in by_first.items()}


@functools.cache
def _given_names() -> frozenset[str]:
    return frozenset(fold(x) for x in _lines("given_names.txt"))


@functools.cache
def _english_words() -> frozenset[str]:
    """Lower-case English dictionary words (Webster's 2nd, public domain, via ``english-words``)."""
    try:
        from english_words import get_english_words_set
    except ImportError:  # pragma: no cover - a dependency of the geo extra
        return frozenset()
    words = get_english_words_set(["web2"], lower=False)
    return frozenset(w for w in words if w.islower())


@functools.cache
def _zipf() -> Any:
    """wordfreq's English Zipf frequency, or None when wordfreq is not installed."""
    try:
        from wordfreq import get_frequency_dict
    except ImportError:  # pragma: no cover - a dependency of the geo extra
        return None
    freq = get_frequency_dict("en")

    def zipf(word: str) -> float:
        f = freq.get(word, 0.0)
        return math.log10(f * 1e9) if f > 0 else 0.0

    return zipf
