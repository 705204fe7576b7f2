"""English plurals of word-list entries: the one rule every word list of fairsets matches with.

An entry matches in its own form and in the plural(s) of its last word, as the `inflect
<https://pypi.org/project/inflect/>`_ library gives them (``person`` → ``people``, ``salesperson`` →
``salespeople``, ``hero`` → ``heroes``, ``robbery`` → ``robberies``, ``policewoman`` →
``policewomen``, ``child`` → ``children``), with these additions inflect lacks: a ``-person``
compound also takes ``-persons`` (``salespersons``), a ``-man`` compound also ``-men`` (inflect
answers ``tradesmans``), a word in ``-o`` or ``-ch`` also ``-s`` (inflect answers ``latinoes`` as
it answers ``heroes``, and ``monarches``), and ``thief`` → ``thieves`` (inflect answers ``thiefs``;
both are kept).
A multi-word entry also matches the plural inflect gives the whole phrase (``partner in crime`` →
``partners in crime``). Extra forms that are not English words match nothing and cost nothing.

The persons audits (:mod:`fairsets.audit.persons.words`) and the recall keywords of ``annotate
vote`` (:mod:`fairsets.annotate.vote.prompts`) both use :func:`word_forms`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

__all__ = ["word_forms"]

#: A word that gets a plural: starts and ends with a letter; inside, letters, digits, ' ’ . - only.
_WORD = re.compile(r"[^\W\d_](?:[\w'’.\-]*[^\W\d_])?")
#: Plurals inflect does not give; added to inflect's, not replacing them.
_EXTRA_PLURALS = {"thief": ("thieves",)}


@lru_cache(maxsize=1)
def _engine() -> Any:
    import inflect  # lazy: only what matches words pays for it

    return inflect.engine()


def _plurals(word: str) -> list[str]:
    """Plurals of one lower-case word (no spaces): inflect's, plus the additions. A ``-man`` word is
    also asked capitalised, as inflect knows ``German`` → ``Germans`` and ``Roman`` → ``Romans``
    only so (other words are not: capitalised, inflect takes them for names, ``Robberys``)."""
    if not _WORD.fullmatch(word):
        return []
    out: list[str] = []
    if word.endswith("person"):
        out += [word[:-6] + "persons", word[:-6] + "people"]
    engine = _engine()
    variants = (word, word[:1].upper() + word[1:]) if word.endswith("man") else (word,)
    for variant in variants:
        plural = engine.plural_noun(variant)
        if isinstance(plural, str) and plural:
            out.append(plural.lower())
    if word.endswith("man"):
        out.append(word[:-3] + "men")
    if word.endswith(("o", "ch")):  # inflect answers latinoes, monarches: add latinos, monarchs
        out.append(word + "s")
    out += _EXTRA_PLURALS.get(word, ())
    return out


@lru_cache(maxsize=65536)
def _forms(low: str) -> tuple[str, ...]:
    head, _, last = low.rpartition(" ")
    prefix = head + " " if head else ""
    forms = [low, *(prefix + p for p in _plurals(last))]
    if head and low[-1].isalpha():  # inflect's plural of the whole phrase (partners in crime)
        whole = _engine().plural_noun(low)
        if isinstance(whole, str) and whole:
            forms.append(" ".join(whole.lower().split()))
    return tuple(dict.fromkeys(forms))


def word_forms(word: str) -> list[str]:
    """The lower-case forms an entry matches: itself and the plural(s) of its last word.

    Runs of whitespace become one space. An entry whose last word does not start and end with a
    letter, or holds other characters than letters, digits, apostrophes, periods and hyphens
    (``c++``, ``model 3``, ``x|y``), gets no plural. For example ``word_forms("salesperson") ==
    ["salesperson", "salespersons", "salespeople"]`` and ``word_forms("Thief") == ["thief", "thiefs",
    "thieves"]``.
    """
    low = " ".join(str(word).lower().split())
    if not low:
        return []
    return list(_forms(low))
