"""Wikidata source: people with a Commons image associated with a state or union territory of India.

The query follows the IndicFairFace paper (appendix 7): for a state ``S`` and a gender ``G``,
humans (``P31 = Q5``) with ``P21 = G`` (male ``Q6581097`` or female ``Q6581072``) and an image
(``P18``) who are associated with ``S`` by one of five *associations*:

=================  =====================================================================
association        pattern (``?area`` is the state or one of its aliases)
=================  =====================================================================
``birth``          ``?person wdt:P19 ?loc . ?loc wdt:P131* ?area``
``residence``      ``?person wdt:P551 ?loc . ?loc wdt:P131* ?area``
``work``           ``?person wdt:P937 ?loc . ?loc wdt:P131* ?area``
``education``      ``?person wdt:P69 ?inst . ?inst wdt:P131* ?area``
``constituency``   ``?person wdt:P39 ?pos . ?pos wdt:P768 ?const`` (the paper's direct form) or
                   ``?person p:P39 ?st . ?st pq:P768 ?const`` (how Wikidata models it: the
                   electoral district is a qualifier of the position-held statement; deprecated
                   statements are ignored), then ``?const wdt:P131* ?area``
=================  =====================================================================

Only SPARQL 1.1 is used (labels come from ``rdfs:label``, not ``SERVICE wikibase:label``), so the
queries run on any SPARQL server holding Wikidata-shaped RDF (Oxigraph in the tests).

Public-endpoint realities. One query per (state, gender, association), paginated with
``ORDER BY``/``LIMIT``/``OFFSET`` (``page_size``, next page while a page is full), keeps each
query well below the query service's 60 s limit even for Maharashtra. Requests carry the
project's User-Agent (Wikimedia policy; ``contact=`` or ``FAIRSETS_CONTACT``), 429/5xx answers
are retried with backoff honouring ``Retry-After`` (:func:`fairsets.fetch.retry.call_with_retry`)
and every raw JSON answer is kept in a :class:`~fairsets.fetch.cache.DiskCache` keyed on
(endpoint, query), so a re-run does not query again (delete the cache folder to refresh).

States come from ``builders/india_states.csv`` (28 states, 8 union territories; columns
``qid,name,kind,aliases,note``). ``aliases`` are former or overlapping items whose ``P131*``
descendants also belong to the unit (e.g. Daman and Diu ``Q66710`` for Dadra and Nagar Haveli
and Daman and Diu ``Q77997266``); a match through an alias is reported under the canonical QID.

Labels: the English label, else the ``mul`` (default for all languages) label, else the
smallest label string in any language, else the QID.

Images: ``image`` is normalised to ``http://commons.wikimedia.org/wiki/Special:FilePath/<name>``
with the name percent-encoded as Wikidata does (spaces ``%20``, ``safe=""``); ``file`` is
``File:<name>`` with spaces (URL-decoded, underscores as spaces).

One state per person (:func:`assign_states`). A person may be associated with several states.
For the build each person is assigned exactly one, by the priority
``birth > residence > work > education > constituency``: the person's highest-priority
association decides; if several states share it (two places of birth, say), the state with the
most distinct associations for that person wins, and if still tied, the state with the lower
numeric QID. The assigned rows keep that winning association; ``associations`` lists every
``state:association`` pair found for the person.

Genders: a person returned under both genders (both ``P21`` values present) gets
``gender = "female;male"`` on every row, so that the balancing step can leave them out.

API:
    * ``load_states(path=None) -> list[State]``
    * ``resolve_states(selectors, table) -> list[State]`` (QIDs or names)
    * ``build_query(state_qids, gender_qid, association, *, limit, offset) -> str``
    * ``fetch_people(states, genders, *, endpoint, cache_dir, page_size, policy, contact,
      timeout, progress, sleep, stats) -> list[dict]``
    * ``assign_states(rows) -> list[dict]``
    * ``fetch_to_parquet(out, rows, assigned) -> dict``
    * ``fetch_wikidata_cli(out, endpoint, states, genders, cache_dir, states_file, ...) -> dict``

Modules, one idea each: :mod:`.terms` (shared vocabulary), :mod:`.states` (the states table),
:mod:`.query` (the SPARQL text), :mod:`.service` (one request to the query service),
:mod:`.rows` (bindings to rows), :mod:`.people` (:func:`fetch_people`), :mod:`.assign`
(:func:`assign_states`) and :mod:`.output` (Parquet and the CLI entry point).
"""

from __future__ import annotations

# Settings a test may change live in the module that reads them (patch ``people.MAX_ROWS_PER_QUERY``,
# ``service.DEADLINE_MARGIN``...); the names below are copies for reading.
from .assign import assign_states
from .output import OUTPUT_SCHEMA, fetch_to_parquet, fetch_wikidata_cli
from .people import MAX_ROWS_PER_QUERY as MAX_ROWS_PER_QUERY
from .people import fetch_people
from .query import build_query
from .rows import MAX_LABEL_CHARS as MAX_LABEL_CHARS
from .rows import clean_label as clean_label
from .rows import normalise_image
from .service import DEADLINE_MARGIN as DEADLINE_MARGIN
from .service import INSTALL_HINT as INSTALL_HINT
from .service import MAX_ANSWER_BYTES as MAX_ANSWER_BYTES
from .states import State, load_states, resolve_states
from .terms import ASSOCIATIONS, COMMONS_FILEPATH, GENDERS, WIKIDATA_ENDPOINT, SparqlResponseError
from .terms import QID_RE as QID_RE

__all__ = [
    "ASSOCIATIONS",
    "COMMONS_FILEPATH",
    "GENDERS",
    "OUTPUT_SCHEMA",
    "WIKIDATA_ENDPOINT",
    "SparqlResponseError",
    "State",
    "assign_states",
    "build_query",
    "fetch_people",
    "fetch_to_parquet",
    "fetch_wikidata_cli",
    "load_states",
    "normalise_image",
    "resolve_states",
]
