"""How neighbouring mentions settle each other: "town, county", "town, city", and common words
that a real place in the caption outranks.

* :func:`settle_neighbours` — adjacent names ("Paris, Texas", "Windsor, Melbourne", "Kingston,
  Surrey") read in the country they can share;
* :func:`same_division` — whether a town can lie in the larger place after it in a country
  (GeoNames ``admin1``);
* :func:`real_places_first` — common words read weakly as places never compete with a real one.
"""

from __future__ import annotations

import itertools

from ...gazetteer import Token
from .lexicon import CONTAINERS
from .mentions import Mention

__all__ = ["LOCAL", "SUBNATIONAL", "anchors", "real_places_first", "same_division", "settle_neighbours"]


def settle_neighbours(caption: str, tokens: list[Token], mentions: list[Mention]) -> None:
    """Adjust the weights of adjacent mentions (sorted by position) in place."""
    for k, (a, b) in enumerate(itertools.pairwise(mentions)):
        sep = caption[tokens[a.end - 1].end : tokens[b.start].start].strip()
        if b.start == a.end and sep in ("", ",", "-", "|", "(", "/"):
            if sep:
                a.listed = b.listed = True
            # "Paris, Texas", "Athens, Georgia", "Perth, Scotland": read both names as
            # the country they share, when they share one.
            # (in a fixed order: the same float sums in every process)
            shared = sorted(set(a.weights) & set(b.weights))
            b_kind = b.note.split(":", 1)[0]
            container = b_kind in CONTAINERS and not a.note.endswith(":weak")
            if container and b.note != b_kind:
                # A container that is also a word ("Canterbury, Kent": Kent is a US town too)
                # contains only where it is a container: the county.
                held = {p.iso3 for p in b.places if p.kind in CONTAINERS}
                shared = sorted(set(a.weights) & held)
            elif container:
                # In a country where the container is only a city, the town must be in that
                # city's state or province: not "Yardley, Birmingham" read as two US places.
                shared = [c for c in shared if same_division(a, b, c)]
            if container and shared and (len(a.weights) > 1 or len(b.weights) > 1):
                for m in (a, b):
                    total = sum(m.weights[c] for c in shared) or 1.0
                    m.weights = {c: m.weights[c] / total for c in shared}
            elif container and not shared and sep == ",":
                # "Kingston, Surrey": a town the gazetteer knows only abroad, then a county or
                # state: the town is a locality there that the data lacks. Not a list of places
                # ("London, Bavaria and Tuscany").
                there = _unknown_locality(a, b)
                if there is not None and not _listed_after(caption, tokens, mentions, k + 1):
                    a.weights = {there: 1.0}
            elif sep == "," and anchors(a, b):
                # "Windsor, Melbourne", "Moseley, Birmingham": a town, then the city it is in.
                a.weights = {_top(b.weights): 1.0}


def anchors(a: Mention, b: Mention) -> bool:
    """Does city ``b`` settle the country of the town ``a`` before it ("Windsor, Melbourne")?

    ``b`` is a city mostly of one country, ``a`` a town (no city of a million: "Paris, London"
    is a list) with a namesake in that country among others.
    """
    if b.note != "city" or a.note.split(":", 1)[0] != "city" or len(a.weights) < 2:
        return False
    top = _top(b.weights)
    big = max((p.population for p in a.places if p.kind == "city"), default=0)
    return b.weights[top] >= 0.8 and top in a.weights and big < 1_000_000 and same_division(a, b, top)


#: Kinds of a name that can be a locality inside a larger place ("town, county").
LOCAL = frozenset({"city", "place", "region"})
#: Containers below a country: a county, a state, a state's code.
SUBNATIONAL = frozenset({"region", "admin_code"})


def _top(weights: dict[str, float]) -> str:
    """The country with the largest weight (the later code on a tie, as everywhere in the rules)."""
    return max(weights, key=lambda c: (weights[c], c))


def _unknown_locality(a: Mention, b: Mention) -> str | None:
    """The country of container ``b`` where ``a``, a name the gazetteer knows only abroad, may be a
    locality; None where it may not.

    ``a`` can be a locality (a town, a place, a region) and is no famous place in its own right: no
    city of a million (London, Rome, Barcelona), nor a city of 250,000 in the one country that holds
    over 90 % of its readings (Lisbon is Lisbon; Kingston is shared by Jamaica, Ontario and many
    towns); ``b`` is a county or state (below a country) of one country.
    """
    if a.note.split(":", 1)[0] not in LOCAL:
        return None
    cities = [p for p in a.places if p.kind == "city"]
    if max((p.population for p in cities), default=0) >= 1_000_000:
        return None
    if a.weights:
        top = _top(a.weights)
        if (
            a.weights[top] > 0.9
            and max((p.population for p in cities if p.iso3 == top), default=0) >= 250_000
        ):
            return None
    held = {p.iso3 for p in b.places if p.kind in SUBNATIONAL}
    return held.pop() if len(held) == 1 else None


def _listed_after(caption: str, tokens: list[Token], mentions: list[Mention], k: int) -> bool:
    """Is mention ``k`` followed by another place in a list ("Bavaria and Tuscany", "Bavaria, Tyrol")?"""
    if k + 1 >= len(mentions):
        return False
    b, c = mentions[k], mentions[k + 1]
    between = caption[tokens[b.end - 1].end : tokens[c.start].start].strip().lower()
    return between in (",", "and", "&", "or", "/", ", and", "&amp;")


def same_division(a: Mention, b: Mention, iso3: str) -> bool:
    """Can town ``a`` lie in ``b`` ("town, larger place") in country ``iso3``?

    Yes where ``b`` is a container there (a state, a county, the country) or where either name's
    cities there carry no division; otherwise only when a city named ``a`` and a city named ``b``
    share a first-level division (GeoNames ``admin1``): "Windsor, Melbourne" (both in Victoria)
    but not Cardiff in New South Wales with a Riverside in Tasmania.
    """
    if any(p.iso3 == iso3 and p.kind in CONTAINERS for p in b.places):
        return True
    in_a = {d for p in a.places if p.iso3 == iso3 and p.kind == "city" for d in p.admin1}
    in_b = {d for p in b.places if p.iso3 == iso3 and p.kind == "city" for d in p.admin1}
    return not in_a or not in_b or not in_a.isdisjoint(in_b)


def real_places_first(mentions: list[Mention]) -> list[Mention]:
    """Without the common words that a real place in the caption outranks.

    A common word read weakly as a place ("best", "buy", "wedding") never competes with a name that
    is a place on its own evidence, and no common word competes with a country named outright; it
    stays only where it names the same country (the "Reading" of "Reading, Berkshire", the "Nice"
    of "Nice, France").
    """
    real = [m for m in mentions if not m.ctx.get("common") and not m.note.endswith(":weak")]
    if not real or len(real) == len(mentions):
        return mentions
    countries = {c for m in real for c in m.weights}
    # A country named outright outranks even a common word with evidence: "yacht moored at Casino
    # Square in Monaco harbour" (Casino is a town in Australia).
    named = {
        c for m in real if m.note in ("country", "alias", "code") for c, w in m.weights.items() if w >= 0.5
    }
    return [
        m
        for m in mentions
        if not m.ctx.get("common")
        or (
            (not m.note.endswith(":weak") or not countries.isdisjoint(m.weights))
            and (not named or not named.isdisjoint(m.weights))
        )
    ]
