"""Organisations that place a photo in one country, and brand names that only look like places.

Two word lists in ``fairsets/geo/data`` add evidence the gazetteer cannot give:

* ``organisations.csv`` (``name,iso3,kind``): sports clubs and their stadiums, leagues tied to
  one country, universities and colleges, national institutions (police forces, parliaments,
  armed forces) and national teams known by a nickname. "Boca Juniors flag" says ARG, "Harvard
  Business School" USA, "All Blacks" NZL, "University of Georgia" USA (not GEO) and "Sheffield
  Shield" AUS (not GBR), though no place name in them says so. Names are specific enough never
  to mean anything else: several words, or one word that is not English ("Juventus",
  "Galatasaray", "Knesset"); bare country names and landmarks are the gazetteer's.
  ``kind`` is one of :data:`ORG_KINDS`.
* ``brands.txt``: brands, product lines, car models, colours and titles that carry a place name
  but do not say where a photo was taken ("Kia Rio", "Hampton Bay ceiling fan", "Canadian Club",
  "Bangkok Post"), in the format of ``false_friends.txt`` (one lower-case phrase a line, ``#``
  comments). They are masked like false friends.

Both lists are read once per process (:func:`functools.cache`) and matched on folded word tokens
(:func:`~fairsets.geo.gazetteer.tokenize`), so case, accents and punctuation do not matter
("FENERBAHÇE", "fenerbahce"). A name is also known with "St" for "Saint" and the other way round
("St. Louis Cardinals" = "Saint Louis Cardinals"), and without a leading "the" when two words or
more remain.

A name listed for two countries says neither: it is dropped and counted
(:func:`organisation_stats`), as are rows with an unknown country code or kind, each with its line
number and reason in the log; a bad row never stops the rest from loading.

:func:`find_organisations` scans a caption's tokens left to right, longest match first, without
overlaps, at a cost of a dictionary lookup per token plus a comparison per phrase sharing that
token as first word. Brand phrases are scanned in the same pass and win when they are at least as
long as the organisation found at the same token: "Oxford University Press" is a publisher, not
the university, and "Yale University Press" no evidence for the USA.
"""

from __future__ import annotations

import csv
import functools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ...countries import countries, data_text
from ...gazetteer import Token, name_key

__all__ = [
    "ORG_KINDS",
    "OrganisationTable",
    "brand_phrases",
    "find_brands",
    "find_organisations",
    "organisation_kinds",
    "organisation_phrases",
    "organisation_stats",
    "organisation_table",
    "organisations",
    "parse_organisations",
]

log = logging.getLogger(__name__)

#: The kinds an ``organisations.csv`` row may have.
ORG_KINDS = frozenset({"club", "stadium", "league", "university", "institution", "national_team"})

_HEADER = ("name", "iso3", "kind")

Phrases = dict[str, tuple[tuple[str, ...], ...]]


@dataclass(frozen=True)
class OrganisationTable:
    """A parsed ``organisations.csv``.

    ``entries`` maps a name key (:func:`~fairsets.geo.gazetteer.name_key`) to ``(iso3, kind)``;
    ``phrases`` maps a first token to the token tuples of the names that start with it, longest
    first. ``ambiguous`` holds the keys dropped because rows gave them two countries;
    ``rejected`` holds ``(line, reason)`` for rows that could not be used.
    """

    entries: dict[str, tuple[str, str]]
    phrases: Phrases
    rows: int
    ambiguous: tuple[str, ...] = ()
    rejected: tuple[tuple[int, str], ...] = field(default=())


def _variants(key: str) -> set[str]:
    """Other spellings of a name key: St ↔ Saint, and no leading "the" (two words or more left)."""
    toks = key.split(" ")
    out: set[str] = set()
    if "st" in toks:
        out.add(" ".join("saint" if t == "st" else t for t in toks))
    if "saint" in toks:
        out.add(" ".join("st" if t == "saint" else t for t in toks))
    if toks[0] == "the" and len(toks) >= 3:
        out.add(" ".join(toks[1:]))
    out.discard(key)
    return out


def _by_first(keys: Iterable[str]) -> Phrases:
    by_first: dict[str, list[tuple[str, ...]]] = {}
    for key in keys:
        toks = tuple(key.split(" "))
        if toks and toks[0]:
            by_first.setdefault(toks[0], []).append(toks)
    return {k: tuple(sorted(set(v), key=lambda t: (-len(t), t))) for k, v in by_first.items()}


def parse_organisations(text: str, known_iso3: Iterable[str] | None = None) -> OrganisationTable:
    """Parse the text of an ``organisations.csv``.

    ``known_iso3`` is the set of country codes a row may use (all of
    :func:`~fairsets.geo.countries.countries` when None). A row with an empty name, an unknown
    code or an unknown kind is rejected with its line number and reason; a name given two
    countries is dropped (both rows); the same name twice for one country is kept once, with the
    first row's kind. Raises ``ValueError`` only when the header is not ``name,iso3,kind``.
    """
    known = frozenset(known_iso3) if known_iso3 is not None else frozenset(countries())
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if header is None or tuple(h.strip().lower() for h in header) != _HEADER:
        raise ValueError(f"organisations.csv: the header must be name,iso3,kind, not {header!r}")
    explicit: dict[str, tuple[str, str]] = {}
    conflicts: set[str] = set()
    rejected: list[tuple[int, str]] = []
    rows = 0
    for line, row in enumerate(reader, start=2):
        if not row or not "".join(row).strip():
            continue
        rows += 1
        if len(row) != 3:
            rejected.append((line, f"{len(row)} fields, not 3"))
            continue
        name, iso3, kind = (c.strip() for c in row)
        key = name_key(name)
        if not key:
            rejected.append((line, "empty name"))
            continue
        if iso3 not in known:
            rejected.append((line, f"unknown country code {iso3!r} for {name!r}"))
            continue
        if kind not in ORG_KINDS:
            rejected.append((line, f"unknown kind {kind!r} for {name!r}"))
            continue
        if key in explicit and explicit[key][0] != iso3:
            conflicts.add(key)
            continue
        explicit.setdefault(key, (iso3, kind))
    for key in conflicts:
        del explicit[key]
    entries = dict(explicit)
    # Spelling variants fill only keys no row names; two variants that disagree say nothing.
    variant_conflicts: set[str] = set()
    for key, value in explicit.items():
        for v in _variants(key):
            if v in explicit or v in conflicts:
                continue
            if v in entries and entries[v][0] != value[0]:
                variant_conflicts.add(v)
            else:
                entries.setdefault(v, value)
    for v in variant_conflicts:
        del entries[v]
    return OrganisationTable(
        entries=entries,
        phrases=_by_first(entries),
        rows=rows,
        ambiguous=tuple(sorted(conflicts | variant_conflicts)),
        rejected=tuple(rejected),
    )


@functools.cache
def organisation_table() -> OrganisationTable:
    """The packaged ``organisations.csv``, parsed once per process (empty when it is missing)."""
    try:
        text = data_text("organisations.csv")
    except FileNotFoundError:
        log.warning("organisations.csv is not installed: no organisation evidence")
        return OrganisationTable(entries={}, phrases={}, rows=0)
    table = parse_organisations(text)
    for line, reason in table.rejected:
        log.warning("organisations.csv line %d: %s; row skipped", line, reason)
    if table.ambiguous:
        log.debug("organisations.csv: %d names given two countries dropped", len(table.ambiguous))
    return table


@functools.cache
def organisations() -> dict[str, str]:
    """Name key → ISO alpha-3 of every usable organisation name (shared: do not modify)."""
    return {k: v[0] for k, v in organisation_table().entries.items()}


@functools.cache
def organisation_kinds() -> dict[str, str]:
    """Name key → kind (:data:`ORG_KINDS`) of every usable organisation name (do not modify)."""
    return {k: v[1] for k, v in organisation_table().entries.items()}


def organisation_phrases() -> Phrases:
    """First token → token tuples of organisation names, longest first (``_false_friends`` form)."""
    return organisation_table().phrases


@functools.cache
def brand_phrases() -> Phrases:
    """First token → token tuples of ``brands.txt`` phrases, longest first (``_false_friends`` form)."""
    try:
        text = data_text("brands.txt")
    except FileNotFoundError:
        log.warning("brands.txt is not installed: brand names are not masked")
        return {}
    keys = (name_key(s) for line in text.splitlines() if (s := line.split("#", 1)[0].strip()))
    return _by_first(k for k in keys if k)


def organisation_stats() -> dict[str, int]:
    """Counts for provenance: rows read, names usable, names dropped as ambiguous, rows
    rejected, and brand phrases."""
    t = organisation_table()
    return {
        "rows": t.rows,
        "names": len(t.entries),
        "ambiguous_dropped": len(t.ambiguous),
        "rejected": len(t.rejected),
        "brand_phrases": sum(len(v) for v in brand_phrases().values()),
    }


def _keys(tokens: Sequence[Token] | Sequence[str]) -> list[str]:
    return [t if isinstance(t, str) else t.key for t in tokens]


def _longest(phrases: Phrases, keys: list[str], i: int, blocked: set[int] | frozenset[int]) -> int:
    """Length of the longest phrase starting at token ``i`` that touches no blocked token (0: none)."""
    n = len(keys)
    for p in phrases.get(keys[i], ()):
        m = len(p)
        if i + m <= n and tuple(keys[i : i + m]) == p and not any(j in blocked for j in range(i, i + m)):
            return m
    return 0


def find_organisations(
    tokens: Sequence[Token] | Sequence[str], blocked: set[int] | frozenset[int] | None = None
) -> list[tuple[int, int, str, str]]:
    """Organisations named in a caption: ``(start, end, iso3, kind)`` over token indices.

    ``tokens`` are :func:`~fairsets.geo.gazetteer.tokenize` tokens or their keys. Matches are the
    longest, left to right, and never overlap each other, a blocked token (``blocked``: token
    indices, e.g. false friends already masked) or a brand phrase at least as long.
    """
    keys = _keys(tokens)
    table = organisation_table()
    orgs, entries = table.phrases, table.entries
    brands = brand_phrases()
    blocked = blocked or frozenset()
    out: list[tuple[int, int, str, str]] = []
    i, n = 0, len(keys)
    while i < n:
        k = keys[i]
        if i in blocked or (k not in orgs and k not in brands):
            i += 1
            continue
        org = _longest(orgs, keys, i, blocked) if k in orgs else 0
        brand = _longest(brands, keys, i, blocked) if k in brands else 0
        if brand and brand >= org:
            i += brand
        elif org:
            iso3, kind = entries[" ".join(keys[i : i + org])]
            out.append((i, i + org, iso3, kind))
            i += org
        else:
            i += 1
    return out


def find_brands(tokens: Sequence[Token] | Sequence[str]) -> list[tuple[int, int]]:
    """Brand phrases in a caption: ``(start, end)`` token spans, longest first, not overlapping.

    For inspection; the offline method masks these phrases through its false-friend table.
    """
    keys = _keys(tokens)
    brands = brand_phrases()
    out: list[tuple[int, int]] = []
    i, n = 0, len(keys)
    empty: frozenset[int] = frozenset()
    while i < n:
        m = _longest(brands, keys, i, empty) if keys[i] in brands else 0
        if m:
            out.append((i, i + m))
            i += m
        else:
            i += 1
    return out
