"""The vocabulary the wikidata modules share: the endpoint, genders, associations (in priority
order), QIDs and the error raised for an answer that is not SPARQL JSON.
"""

from __future__ import annotations

import re

WIKIDATA_ENDPOINT = "https://query.wikidata.org/sparql"
GENDERS: dict[str, str] = {"male": "Q6581097", "female": "Q6581072"}
#: Associations in priority order (first wins in :func:`assign_states`).
ASSOCIATIONS: tuple[str, ...] = ("birth", "residence", "work", "education", "constituency")
COMMONS_FILEPATH = "http://commons.wikimedia.org/wiki/Special:FilePath/"


QID_RE = re.compile(r"^Q[1-9][0-9]*$")


class SparqlResponseError(ValueError):
    """The endpoint answered 200 with something that is not a complete SPARQL JSON result."""


def _qnum(qid: str) -> int:
    return int(qid[1:]) if QID_RE.match(qid) else 1 << 62
