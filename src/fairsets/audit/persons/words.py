"""The one plural rule of the persons audits: which words an entry of a word list matches.

Crime words (:mod:`.crime`) and social categories (:mod:`.transfer`) both match an entry in its
own form and in the plural of its last word; both use :func:`word_forms`, so ``thieves`` counts for
``thief`` in either audit.
"""

from __future__ import annotations

__all__ = ["IRREGULAR", "word_forms"]

#: Plurals no suffix rule gives.
IRREGULAR = {"person": ("persons", "people"), "child": ("children",)}


def word_forms(word: str) -> list[str]:
    """The lower-case forms an entry matches: itself and the plural of its last word.

    Plurals: :data:`IRREGULAR` (person → persons, people; child → children), ``-fe`` → ``-ves``
    (knife → knives), ``-f`` → ``-fs`` and ``-ves`` (thief → thieves), ``-s/-x/-z/-ch/-sh`` →
    ``-es``, consonant + ``-y`` → ``-ies`` (robbery → robberies), ``-man`` → ``-men`` (also
    ``-mans``), otherwise ``-s``. An entry whose last character is not a letter gets no plural.
    Runs of whitespace become one space.
    """
    low = " ".join(word.lower().split())
    if not low or not low[-1].isalpha():
        return [low] if low else []
    head, _, last = low.rpartition(" ")
    prefix = head + " " if head else ""
    if last in IRREGULAR:
        plurals = [prefix + p for p in IRREGULAR[last]]
    elif low.endswith("fe"):
        plurals = [low[:-2] + "ves"]
    elif low.endswith("f"):
        plurals = [low + "s", low[:-1] + "ves"]
    elif low.endswith(("s", "x", "z", "ch", "sh")):
        plurals = [low + "es"]
    elif len(low) > 1 and low.endswith("y") and low[-2] not in "aeiou":
        plurals = [low[:-1] + "ies"]
    elif low.endswith("man"):
        plurals = [low[:-3] + "men", low + "s"]
    else:
        plurals = [low + "s"]
    return [low, *plurals]
