"""The SPARQL query of one (state, gender, association) page (:func:`build_query`)."""

from __future__ import annotations

from collections.abc import Sequence

from .terms import (
    ASSOCIATIONS,
    QID_RE,
)

_PREFIXES = """\
PREFIX wd: <http://www.wikidata.org/entity/>
PREFIX wdt: <http://www.wikidata.org/prop/direct/>
PREFIX p: <http://www.wikidata.org/prop/>
PREFIX pq: <http://www.wikidata.org/prop/qualifier/>
PREFIX wikibase: <http://wikiba.se/ontology#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
"""

_LOCATED = "?{var} wdt:P131* ?area ."
_BRANCHES: dict[str, str] = {
    "birth": "?person wdt:P19 ?loc .\n      " + _LOCATED.format(var="loc"),
    "residence": "?person wdt:P551 ?loc .\n      " + _LOCATED.format(var="loc"),
    "work": "?person wdt:P937 ?loc .\n      " + _LOCATED.format(var="loc"),
    "education": "?person wdt:P69 ?inst .\n      " + _LOCATED.format(var="inst"),
    "constituency": (
        "{ ?person wdt:P39 ?pos . ?pos wdt:P768 ?const . }\n      UNION\n"
        "      { ?person p:P39 ?st . ?st pq:P768 ?const .\n"
        "        FILTER NOT EXISTS { ?st wikibase:rank wikibase:DeprecatedRank } }\n      "
        + _LOCATED.format(var="const")
    ),
}


def build_query(
    state_qids: Sequence[str], gender_qid: str, association: str, *, limit: int, offset: int
) -> str:
    """Return the SPARQL query of one (state, gender, association) page.

    Args:
        state_qids: the canonical state QID first, then its aliases; every row's ``?state`` is
            the canonical QID, whichever of them matched.
        gender_qid: ``Q6581097`` (male) or ``Q6581072`` (female) — any item QID is accepted.
        association: one of :data:`ASSOCIATIONS`.
        limit: page size (``LIMIT``).
        offset: rows to skip (``OFFSET``).

    The query returns one row per (person, image) with ``?person ?image ?state`` and the label
    candidates ``?labelEn ?labelMul ?labelAny``, ordered by ``?state ?person ?image``.

    Raises:
        ValueError: for a malformed QID, an unknown association or a bad limit/offset.
    """
    qids = list(state_qids)
    if not qids:
        raise ValueError("build_query needs at least one state QID")
    for q in [*qids, gender_qid]:
        if not isinstance(q, str) or not QID_RE.match(q):
            raise ValueError(f"{q!r} is not a Wikidata item id (Q followed by digits)")
    if association not in _BRANCHES:
        raise ValueError(f"unknown association {association!r} (known: {', '.join(ASSOCIATIONS)})")
    if limit < 1 or offset < 0:
        raise ValueError(f"bad page: limit={limit} offset={offset}")
    state = qids[0]
    areas = list(dict.fromkeys(qids))
    values = " ".join(f"(wd:{a} wd:{state})" for a in areas)
    return (
        f"{_PREFIXES}"
        "SELECT ?person ?image ?state (SAMPLE(?en) AS ?labelEn) (SAMPLE(?mul) AS ?labelMul)\n"
        "       (MIN(STR(?anyLabel)) AS ?labelAny)\n"
        "WHERE {\n"
        "  {\n"
        "    SELECT DISTINCT ?person ?state WHERE {\n"
        f"      VALUES (?area ?state) {{ {values} }}\n"
        f"      {_BRANCHES[association]}\n"
        f"      ?person wdt:P31 wd:Q5 ; wdt:P21 wd:{gender_qid} ; wdt:P18 ?anyImage .\n"
        "    }\n"
        "  }\n"
        "  ?person wdt:P18 ?image .\n"
        '  OPTIONAL { ?person rdfs:label ?en . FILTER(LANG(?en) = "en") }\n'
        '  OPTIONAL { ?person rdfs:label ?mul . FILTER(LANG(?mul) = "mul") }\n'
        "  OPTIONAL { ?person rdfs:label ?anyLabel . }\n"
        "}\n"
        "GROUP BY ?person ?image ?state\n"
        "ORDER BY ?state ?person ?image\n"
        f"LIMIT {int(limit)} OFFSET {int(offset)}\n"
    )
