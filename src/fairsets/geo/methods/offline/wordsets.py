"""Word sets the ``offline`` method loads once: false friends, given names and first names (``data/``), the
English dictionary (``english-words``) and English word frequencies (``wordfreq``).

The dictionary and the frequencies are kept in the user cache beside the gazetteer
(``words-{digest}.marshal``, keyed by both packages' versions, with a checksum): importing
wordfreq and decoding its tables takes longer than the rest of the method's start-up.
"""

from __future__ import annotations

import functools
import hashlib
import logging
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
def _first_names() -> frozenset[str]:
    """US Census 1990 first names (``first_names.txt``, folded): a capitalised one before a surname
    is a person's name ("Frederic Warburg")."""
    return frozenset(fold(line.split()[0]) for line in _lines("first_names.txt"))


@functools.cache
def _false_friends() -> dict[str, tuple[tuple[str, ...], ...]]:
    """First token → token tuples of the phrases masked before any lookup (longest first):
    ``false_friends.txt`` and the brand and product-line phrases of ``brands.txt``."""
    from .organisations import brand_phrases

    by_first: dict[str, list[tuple[str, ...]]] = {}
    for phrase in _lines("false_friends.txt"):
        toks = tuple(name_key(phrase).split())
        if toks:
            by_first.setdefault(toks[0], []).append(toks)
    for first, phrases in brand_phrases().items():
        by_first.setdefault(first, []).extend(phrases)
    return {k: tuple(sorted(v, key=len, reverse=True)) for k, v in by_first.items()}


@functools.cache
def _given_names() -> frozenset[str]:
    return frozenset(fold(x) for x in _lines("given_names.txt"))


log = logging.getLogger(__name__)
_WORDS_FORMAT = 1


def _build_words() -> dict[str, Any]:
    words: list[str] | None = None
    freq: dict[str, float] | None = None
    try:
        from english_words import get_english_words_set
    except ImportError:  # pragma: no cover - a dependency of the geo extra
        pass
    else:
        words = sorted(w for w in get_english_words_set(["web2"], lower=False) if w.islower())
    try:
        from wordfreq import get_frequency_dict
    except ImportError:  # pragma: no cover - a dependency of the geo extra
        pass
    else:
        freq = dict(get_frequency_dict("en"))
    return {"format": _WORDS_FORMAT, "words": words, "freq": freq}


@functools.cache
def _word_tables() -> dict[str, Any]:
    """``{"words": [...] | None, "freq": {...} | None}``, from the user cache when it is there."""
    import importlib.metadata as md

    from ...gazetteer import cache_dir, read_sealed, write_sealed

    versions = []
    for pkg in ("english-words", "wordfreq"):
        try:
            versions.append(f"{pkg}={md.version(pkg)}")
        except md.PackageNotFoundError:
            versions.append(f"{pkg}=-")
    digest = hashlib.sha256(repr((_WORDS_FORMAT, versions)).encode()).hexdigest()[:20]
    try:
        path = cache_dir() / f"words-{digest}.marshal"
    except OSError:  # no home folder to cache in
        return _build_words()
    try:
        doc = read_sealed(path)
        if isinstance(doc, dict) and doc.get("format") == _WORDS_FORMAT:
            return doc
        log.warning("%s: not a word-list cache of this format; reading the word lists again", path)
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as e:
        log.warning("%s: %s; reading the word lists again", path, e)
    doc = _build_words()
    write_sealed(path, doc, "word-list")
    return doc


@functools.cache
def _english_words() -> frozenset[str]:
    """Lower-case English dictionary words (Webster's 2nd, public domain, via ``english-words``)."""
    words = _word_tables().get("words")
    return frozenset(words) if isinstance(words, list) else frozenset()


@functools.cache
def _zipf() -> Any:
    """wordfreq's English Zipf frequency, or None when wordfreq is not installed."""
    freq = _word_tables().get("freq")
    if not isinstance(freq, dict):
        return None

    def zipf(word: str) -> float:
        f = freq.get(word, 0.0)
        return math.log10(f * 1e9) if f > 0 else 0.0

    return zipf
