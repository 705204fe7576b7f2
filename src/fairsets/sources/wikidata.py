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
"""

from __future__ import annotations

import csv
import http.client
import io
import logging
import math
import re
import time
import urllib.error
import urllib.parse
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from fairsets.core.short_text import clip
from fairsets.core.textfile import read_text

from ..fetch.answers import BadAnswer, loads_json, read_capped_stream
from ..fetch.cache import DiskCache
from ..fetch.retry import HttpStatusError, RetryPolicy, call_with_deadline, call_with_retry, user_agent

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

log = logging.getLogger(__name__)

WIKIDATA_ENDPOINT = "https://query.wikidata.org/sparql"
GENDERS: dict[str, str] = {"male": "Q6581097", "female": "Q6581072"}
#: Associations in priority order (first wins in :func:`assign_states`).
ASSOCIATIONS: tuple[str, ...] = ("birth", "residence", "work", "education", "constituency")
COMMONS_FILEPATH = "http://commons.wikimedia.org/wiki/Special:FilePath/"
INSTALL_HINT = "pip install 'fairsets[fetch]'"
#: One whole query may take two timeouts and this many seconds (the timeout is per socket operation).
DEADLINE_MARGIN = 30.0
MAX_ANSWER_BYTES = 256 * 1024 * 1024  # one SPARQL answer (a page of 5000 rows is a few MB)
MAX_LABEL_CHARS = 400
MAX_ROWS_PER_QUERY = 1_000_000  # rows of one (state, gender, association) query over all its pages

QID_RE = re.compile(r"^Q[1-9][0-9]*$")
_ENTITY_RE = re.compile(r"^https?://www\.wikidata\.org/entity/(Q[1-9][0-9]*)$")
_COMMONS_RE = re.compile(
    r"^https?://commons\.(?:m\.)?wikimedia\.org/wiki/(?:Special:FilePath/|File:)(?P<name>[^?#]+)", re.I
)
_FILE_PREFIX_RE = re.compile(r"^(?:file|image):\s*", re.I)

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

#: Columns of the Parquet file written by :func:`fetch_to_parquet`, in order.
OUTPUT_SCHEMA = pa.schema(
    [
        pa.field("person", pa.string()),
        pa.field("label", pa.string()),
        pa.field("gender", pa.string()),
        pa.field("state", pa.string()),
        pa.field("state_name", pa.string()),
        pa.field("association", pa.string()),
        pa.field("primary", pa.bool_()),
        pa.field("image", pa.string()),
        pa.field("file", pa.string()),
        pa.field("associations", pa.string()),
    ]
)


class SparqlResponseError(ValueError):
    """The endpoint answered 200 with something that is not a complete SPARQL JSON result."""


@dataclass(frozen=True)
class State:
    """A state or union territory: canonical QID, name, kind and alias QIDs."""

    qid: str
    name: str
    kind: str = "state"
    aliases: tuple[str, ...] = ()
    note: str = ""

    @property
    def area_qids(self) -> list[str]:
        """The canonical QID followed by its aliases (what ``build_query`` takes)."""
        return [self.qid, *self.aliases]


# --------------------------------------------------------------------------- states table


def _qnum(qid: str) -> int:
    return int(qid[1:]) if QID_RE.match(qid) else 1 << 62


def load_states(path: str | Path | None = None) -> list[State]:
    """Read the states table (default: the shipped ``builders/india_states.csv``).

    A user CSV needs the columns ``qid`` and ``name``; ``kind`` (default ``"state"``),
    ``aliases`` (space-separated QIDs) and ``note`` are optional.

    Raises:
        ValueError: naming the file and row, for a missing column, a malformed QID, an empty
            name, or a QID/alias/name that occurs twice.
        FileNotFoundError: if the file does not exist.
    """
    if path is None:
        from fairsets.core.datafiles import find_data_file

        path = find_data_file("builders", "india_states.csv")
    path = Path(path)
    with io.StringIO(read_text(path), newline="") as f:  # TextFileError (a ValueError) names the file
        reader = csv.DictReader(f)
        fields = [h.strip() for h in (reader.fieldnames or [])]
        if twice := sorted({h for h in fields if fields.count(h) > 1}):
            raise ValueError(f"{path}: column(s) {', '.join(twice)} appear more than once in the header")
        missing = [c for c in ("qid", "name") if c not in fields]
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(missing)} (have: {', '.join(fields)})")
        states: list[State] = []
        owner: dict[str, str] = {}  # QID (canonical or alias) -> where it was first seen
        names: dict[str, int] = {}
        for raw in reader:
            line = reader.line_num  # the physical line (quoted values may span several)
            where = f"{path}, row {line}"
            if None in raw:  # csv.DictReader puts the fields beyond the header under None
                raise ValueError(
                    f"{where}: {len(fields) + len(raw[None])} fields where the header has {len(fields)}; "
                    "quote values that contain commas"
                )
            row = {(k or "").strip(): (v or "").strip() for k, v in raw.items()}
            if not any(row.values()):
                continue  # a line of empty fields
            qid, name = row.get("qid", ""), row.get("name", "")
            if not QID_RE.match(qid):
                raise ValueError(f"{where}: qid {qid!r} is not a Wikidata item id (Q followed by digits)")
            if not name:
                raise ValueError(f"{where}: empty name for {qid}")
            aliases = tuple(row.get("aliases", "").split())
            for a in aliases:
                if not QID_RE.match(a):
                    raise ValueError(f"{where}: alias {a!r} of {qid} is not a Wikidata item id")
            for q in (qid, *aliases):
                if q in owner:
                    raise ValueError(f"{where}: {q} already appears at {owner[q]}")
                owner[q] = f"row {line}"
            key = name.casefold()
            if key in names:
                raise ValueError(f"{where}: name {name!r} already used at row {names[key]}")
            names[key] = line
            states.append(State(qid, name, row.get("kind") or "state", aliases, row.get("note", "")))
    if not states:
        raise ValueError(f"{path}: no states")
    return states


def resolve_states(selectors: Iterable[str] | None, table: Sequence[State]) -> list[State]:
    """Map user selectors (QIDs or names, case-insensitive) to states of ``table``.

    ``None`` or empty selects the whole table. A QID that is an alias selects its canonical
    state. A well-formed QID that is not in the table is accepted as a unit of its own (name =
    QID, no aliases) with a warning, so any Wikidata item can be queried. Duplicates are dropped.

    Raises:
        ValueError: for a name not in the table.
    """
    selectors = [s.strip() for s in (selectors or []) if s and s.strip()]
    if not selectors:
        return list(table)
    by_qid = {s.qid: s for s in table}
    by_alias = {a: s for s in table for a in s.aliases}
    by_name = {s.name.casefold(): s for s in table}
    out: list[State] = []
    for sel in selectors:
        if QID_RE.match(sel):
            if sel in by_qid:
                st = by_qid[sel]
            elif sel in by_alias:
                st = by_alias[sel]
                log.info("%s is an alias of %s (%s); querying that", sel, st.qid, st.name)
            else:
                log.warning("%s is not in the states table; querying it without aliases", sel)
                st = State(sel, sel, kind="", aliases=())
        elif sel.casefold() in by_name:
            st = by_name[sel.casefold()]
        else:
            known = ", ".join(s.name for s in table)
            raise ValueError(f"unknown state {sel!r}: give a QID (Q…) or one of: {known}")
        if st not in out:
            out.append(st)
    return out


# --------------------------------------------------------------------------- query


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


# --------------------------------------------------------------------------- HTTP


def _http_error_in(exc: BaseException) -> urllib.error.HTTPError | None:
    """The ``HTTPError`` that ``exc`` is or was raised while handling (SPARQLWrapper re-wraps)."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, urllib.error.HTTPError):
            return e
        e = e.__cause__ or e.__context__
    return None


def _detail(exc: BaseException, herr: urllib.error.HTTPError) -> str:
    if herr is exc:
        try:
            body = herr.read()
        except Exception:  # the body is only for the message
            body = b""
        text = body.decode("utf-8", "replace") if body else str(herr.reason or "")
    else:  # SPARQLWrapper already read the body into its own exception
        text = str(exc)
    text = " ".join(text.split())
    return text[:300] + ("…" if len(text) > 300 else "")


def _request(endpoint: str, query: str, agent: str, timeout: float) -> bytes:
    """POST one query with SPARQLWrapper; return the raw body or raise a retry-aware error."""
    try:
        from SPARQLWrapper import JSON, POST, SPARQLWrapper
        from SPARQLWrapper.SPARQLExceptions import SPARQLWrapperException
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(f"the wikidata source needs SPARQLWrapper: {INSTALL_HINT}") from exc

    sparql = SPARQLWrapper(endpoint, agent=agent)
    sparql.setQuery(query)
    sparql.setMethod(POST)
    sparql.setReturnFormat(JSON)
    sparql.setOnlyConneg(True)
    sparql.setTimeout(max(1, math.ceil(timeout)))

    host = urllib.parse.urlsplit(endpoint).netloc

    def query() -> bytes:
        result = sparql.query()
        try:  # capped: an endless or huge answer must not take all the memory
            return read_capped_stream(result.response, MAX_ANSWER_BYTES, f"query service {host}")
        finally:
            result.response.close()

    try:  # the timeout is per socket operation: the deadline bounds the whole request (a drip)
        return call_with_deadline(query, 2 * timeout + DEADLINE_MARGIN, what=f"query service {host}")
    except BadAnswer as exc:
        raise SparqlResponseError(f"{exc}: ask smaller pages (page_size)") from None
    except (urllib.error.HTTPError, SPARQLWrapperException) as exc:
        herr = _http_error_in(exc)
        if herr is None:
            raise
        retry_after = herr.headers.get("Retry-After") if herr.headers is not None else None
        raise HttpStatusError(herr.code, retry_after, endpoint, _detail(exc, herr)) from exc
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, TimeoutError):
            raise TimeoutError(f"{endpoint}: {reason}") from exc
        if isinstance(reason, OSError):
            raise ConnectionError(f"{endpoint}: {reason}") from exc
        raise
    except http.client.HTTPException as exc:  # e.g. IncompleteRead, a dropped connection
        raise ConnectionError(f"{endpoint}: {exc!r}") from exc


def _parse(body: bytes, endpoint: str) -> list[dict[str, Any]]:
    try:
        data = loads_json(body, endpoint)
        bindings = data["results"]["bindings"]
        if not isinstance(bindings, list):
            raise TypeError("bindings is not a list")
    except (BadAnswer, KeyError, TypeError) as exc:
        snippet = body[:200].decode("utf-8", "replace")
        raise SparqlResponseError(
            f"{endpoint} did not return a complete SPARQL JSON result ({exc}); the query may have hit "
            f"the service's time limit: try a smaller page size. Start of the answer: {snippet!r}"
        ) from None
    return bindings


# --------------------------------------------------------------------------- rows


def normalise_image(value: str) -> tuple[str, str]:
    """Return ``(url, "File:<name>")`` for a ``P18`` value (a Special:FilePath IRI or a file name)."""
    value = value.strip()
    m = _COMMONS_RE.match(value)
    if m:
        raw = m.group("name")
    elif "://" in value:  # some other URL: its last path segment
        raw = urllib.parse.urlsplit(value).path.rsplit("/", 1)[-1]
    else:  # a bare file name
        raw = value
    name = urllib.parse.unquote(raw).replace("_", " ")
    name = " ".join(_FILE_PREFIX_RE.sub("", name).split())
    return COMMONS_FILEPATH + urllib.parse.quote(name, safe=""), f"File:{name}"


def _value(binding: dict[str, Any], var: str) -> str | None:
    cell = binding.get(var)
    value = cell.get("value") if isinstance(cell, dict) else None
    return value if isinstance(value, str) else None


# Control characters, and the bidirectional embeddings, overrides and isolates that make a label
# display as something else (right-to-left *text* is kept: many Indian names are written in it).
_LABEL_JUNK = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]+")


def clean_label(text: str) -> str:
    """A label as one line: control and bidi-override characters and runs of white space become one
    space, and more than :data:`MAX_LABEL_CHARS` characters are cut (with ``…``)."""
    return clip(" ".join(_LABEL_JUNK.sub(" ", text).split()), MAX_LABEL_CHARS)


def _rows_of(bindings: list[dict[str, Any]], state: State, gender: str, association: str) -> list[dict]:
    rows = []
    for b in bindings:
        if not isinstance(b, dict):
            log.debug("skipping a binding that is not an object: %.200r", b)
            continue
        m = _ENTITY_RE.match(_value(b, "person") or "")
        image = _value(b, "image")
        if not m or not image:
            log.debug("skipping a binding without a Wikidata item or image: %s", b)
            continue
        person = m.group(1)
        label = clean_label(_value(b, "labelEn") or _value(b, "labelMul") or _value(b, "labelAny") or "")
        label = label or person
        url, file = normalise_image(image)
        rows.append(
            {
                "person": person,
                "label": label,
                "image": url,
                "file": file,
                "state": state.qid,
                "state_name": state.name,
                "gender": gender,
                "association": association,
            }
        )
    return rows


def _row_order(row: dict[str, Any]) -> tuple:
    assoc = row["association"]
    return (
        _qnum(row["person"]),
        row["person"],
        _qnum(row["state"]),
        row["state"],
        ASSOCIATIONS.index(assoc) if assoc in ASSOCIATIONS else len(ASSOCIATIONS),
        row["image"],
    )


def fetch_people(
    states: Sequence[State],
    genders: Sequence[str],
    *,
    endpoint: str = WIKIDATA_ENDPOINT,
    cache_dir: str | Path | None = None,
    page_size: int = 5000,
    policy: RetryPolicy | None = None,
    contact: str | None = None,
    timeout: float = 65,
    progress: Callable[[int, int], None] | None = None,
    associations: Sequence[str] = ASSOCIATIONS,
    sleep: Callable[[float], None] = time.sleep,
    stats: dict[str, int] | None = None,
) -> list[dict[str, Any]]:
    """Query every (state, gender, association) and return one row per (person, image, state, association).

    Args:
        states: units to query (see :func:`load_states` / :func:`resolve_states`).
        genders: names from :data:`GENDERS` (``"male"``, ``"female"``).
        endpoint: SPARQL endpoint URL (default: the public Wikidata Query Service).
        cache_dir: folder of the raw-response cache (``None``: no cache).
        page_size: rows per query page; the next page is asked for while a page is full.
        policy: retry policy for 429/5xx and connection errors (default :class:`RetryPolicy`).
        contact: e-mail or URL for the User-Agent (default ``FAIRSETS_CONTACT``).
        timeout: seconds per HTTP request.
        progress: called as ``progress(done, total)`` after each (state, gender, association).
        associations: subset of :data:`ASSOCIATIONS` to query (default all).
        sleep: the wait used between retries (injectable for tests).
        stats: if given, filled with ``pages``, ``requests`` (HTTP requests made, retries
            included) and ``cache_hits``.

    Returns:
        Rows with ``person, label, image, file, state, state_name, gender, association``,
        sorted by person (numeric QID), state, association priority and image.

    Raises:
        ValueError: for a malformed state QID, an unknown gender or association, or a bad
            page size.
        HttpStatusError: when the endpoint keeps failing (or answers 4xx).
        SparqlResponseError: when an answer is not complete SPARQL JSON, or the endpoint answers
            the same full page again for the next offset (it ignores OFFSET).
    """
    if page_size < 1:
        raise ValueError(f"page_size must be at least 1, got {page_size}")
    for st in states:
        for q in st.area_qids:
            if not QID_RE.match(q):
                raise ValueError(f"state {st.name!r}: {q!r} is not a Wikidata item id (Q followed by digits)")
    for g in genders:
        if g not in GENDERS:
            raise ValueError(f"unknown gender {g!r} (known: {', '.join(GENDERS)})")
    for a in associations:
        if a not in ASSOCIATIONS:
            raise ValueError(f"unknown association {a!r} (known: {', '.join(ASSOCIATIONS)})")
    genders = list(dict.fromkeys(genders))
    associations = list(dict.fromkeys(associations))

    cache = DiskCache(cache_dir, namespace="wikidata")
    agent = user_agent(contact)
    counts = {"pages": 0, "requests": 0, "cache_hits": 0}
    total = len(states) * len(genders) * len(associations)
    done = 0
    found: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    genders_of: dict[tuple[str, str, str, str], set[str]] = defaultdict(set)

    def attempt(query: str) -> bytes:
        counts["requests"] += 1
        return _request(endpoint, query, agent, timeout)

    for st in states:
        for gender in genders:
            for assoc in associations:
                n_rows = 0
                offset = 0
                previous: bytes | None = None
                while True:
                    query = build_query(st.area_qids, GENDERS[gender], assoc, limit=page_size, offset=offset)
                    key = {"endpoint": endpoint, "query": query}
                    body = cache.get(key)
                    bindings = None
                    if body is not None:
                        try:
                            bindings = _parse(body, endpoint)
                            counts["cache_hits"] += 1
                        except SparqlResponseError:  # a broken cache entry: ask again
                            log.warning(
                                "ignoring a broken cache entry for %s %s %s; asking again",
                                st.qid,
                                gender,
                                assoc,
                            )
                    if bindings is None:
                        body = call_with_retry(
                            lambda q=query: attempt(q),
                            policy,
                            what=f"wikidata {st.qid} {gender} {assoc} offset {offset}",
                            sleep=sleep,
                        )
                        bindings = _parse(body, endpoint)  # only complete answers are cached
                        cache.put(key, body)
                    counts["pages"] += 1
                    for row in _rows_of(bindings, st, gender, assoc):
                        k = (row["person"], row["image"], row["state"], row["association"])
                        found.setdefault(k, row)
                        genders_of[k].add(gender)
                    n_rows += len(bindings)
                    if len(bindings) < page_size:
                        break
                    if n_rows >= MAX_ROWS_PER_QUERY:  # new full pages forever: a broken or hostile endpoint
                        raise SparqlResponseError(
                            f"{endpoint} answered {n_rows} rows for {st.name} {gender} {assoc} and more "
                            f"full pages: more than any state has (at most {MAX_ROWS_PER_QUERY} are read)"
                        )
                    if body == previous:  # full pages forever: the endpoint ignores OFFSET
                        raise SparqlResponseError(
                            f"{endpoint} answered offset {offset} with the same full page as offset "
                            f"{offset - page_size}: it ignores OFFSET, so paging would never end; "
                            "use an endpoint that pages, or a page_size larger than any answer"
                        )
                    previous = body
                    offset += page_size
                done += 1
                log.info("%s (%s) %s %s: %d rows", st.qid, st.name, gender, assoc, n_rows)
                if progress is not None:
                    progress(done, total)

    both = sorted({k[0] for k, g in genders_of.items() if len(g) > 1}, key=_qnum)
    if both:
        log.warning("%d people have several genders (%s); their rows say so", len(both), ", ".join(both[:10]))
    rows = []
    for k, row in found.items():
        row = dict(row, gender=";".join(sorted(genders_of[k])))
        rows.append(row)
    rows.sort(key=_row_order)
    if stats is not None:
        stats.update(counts)
    return rows


# --------------------------------------------------------------------------- assignment


def _assignment(pairs: set[tuple[str, str]]) -> tuple[str, str]:
    """The (state, association) a person is assigned from all their (state, association) pairs."""
    prio = {a: i for i, a in enumerate(ASSOCIATIONS)}
    best = min(prio.get(a, len(prio)) for _, a in pairs)
    assoc = next(a for _, a in pairs if prio.get(a, len(prio)) == best)
    candidates = {s for s, a in pairs if a == assoc}
    n_assoc = defaultdict(int)
    for s, _ in pairs:
        n_assoc[s] += 1
    state = min(candidates, key=lambda s: (-n_assoc[s], _qnum(s), s))
    return state, assoc


def assign_states(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Assign each person exactly one state (rule in the module docstring).

    Args:
        rows: rows of :func:`fetch_people` (one per person, image, state, association).

    Returns:
        For each person, the rows of the assigned state and winning association (one per
        image), each with an extra ``associations`` column: every ``state:association`` found
        for that person, sorted and ``;``-joined. Sorted like :func:`fetch_people`.
    """
    by_person: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_person[r["person"]].append(r)
    out: list[dict[str, Any]] = []
    for person_rows in by_person.values():
        pairs = {(r["state"], r["association"]) for r in person_rows}
        state, assoc = _assignment(pairs)
        joined = ";".join(sorted(f"{s}:{a}" for s, a in pairs))
        seen: set[str] = set()
        for r in sorted(person_rows, key=_row_order):
            if r["state"] == state and r["association"] == assoc and r["image"] not in seen:
                seen.add(r["image"])
                out.append(dict(r, associations=joined))
    out.sort(key=_row_order)
    return out


# --------------------------------------------------------------------------- output


def fetch_to_parquet(
    out: str | Path, rows: Sequence[dict[str, Any]], assigned: Sequence[dict[str, Any]]
) -> dict:
    """Write every association row with ``primary`` and ``associations`` columns, atomically.

    ``primary`` is true exactly on the rows :func:`assign_states` returned (the assigned state
    and winning association: one row per person and image), so ``WHERE primary`` gives the
    build's candidates and the other rows keep the full picture. Columns: :data:`OUTPUT_SCHEMA`.

    Returns:
        ``{"path", "sha256", "bytes", "rows"}`` (see :func:`fairsets.core.tables.write_table`).
    """
    from fairsets.core.tables import write_table

    chosen = {(r["person"], r["image"], r["state"], r["association"]) for r in assigned}
    pairs: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        pairs[r["person"]].add(f"{r['state']}:{r['association']}")
    table_rows = []
    for r in sorted(rows, key=_row_order):
        table_rows.append(
            {
                **{c: r.get(c) for c in OUTPUT_SCHEMA.names},
                "primary": (r["person"], r["image"], r["state"], r["association"]) in chosen,
                "associations": ";".join(sorted(pairs[r["person"]])),
            }
        )
    return write_table(out, table_rows, schema=OUTPUT_SCHEMA)


def fetch_wikidata_cli(
    out: str | Path,
    endpoint: str = WIKIDATA_ENDPOINT,
    states: Sequence[str] | None = None,
    genders: Sequence[str] | None = None,
    cache_dir: str | Path | None = None,
    states_file: str | Path | None = None,
    *,
    no_cache: bool = False,
    page_size: int = 5000,
    contact: str | None = None,
    policy: RetryPolicy | None = None,
    timeout: float = 65,
    progress: Callable[[int, int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """``fairsets fetch wikidata``: query, assign one state per person, write ``out`` (Parquet).

    Args:
        out: output Parquet path.
        endpoint: SPARQL endpoint.
        states: QIDs or names (see :func:`resolve_states`); default every unit of the table.
        genders: ``male``/``female``; default both.
        cache_dir: raw-response cache folder; default ``<out folder>/.wikidata-cache``.
        states_file: a CSV like ``builders/india_states.csv`` instead of the shipped one.
        no_cache: do not read or write any cache.
        page_size, contact, policy, timeout, progress, sleep: see :func:`fetch_people`.

    Returns:
        ``{"out", "sha256", "rows", "primary_rows", "people", "states", "genders", "pages",
        "requests", "cache_hits", "cache_dir", "per_state"}`` where ``per_state`` maps each
        queried QID to ``{"name", "people": {gender: n}}`` counted over the primary rows.
    """
    out = Path(out)
    table = load_states(states_file)
    chosen = resolve_states(states, table)
    genders = list(genders) if genders else list(GENDERS)
    if no_cache:
        cache: Path | None = None
    else:
        cache = Path(cache_dir) if cache_dir is not None else out.parent / ".wikidata-cache"
    stats: dict[str, int] = {}
    rows = fetch_people(
        chosen,
        genders,
        endpoint=endpoint,
        cache_dir=cache,
        page_size=page_size,
        policy=policy,
        contact=contact,
        timeout=timeout,
        progress=progress,
        sleep=sleep,
        stats=stats,
    )
    assigned = assign_states(rows)
    written = fetch_to_parquet(out, rows, assigned)
    per_state: dict[str, dict[str, Any]] = {st.qid: {"name": st.name, "people": {}} for st in chosen}
    seen: set[str] = set()
    for r in assigned:
        if r["person"] in seen:
            continue
        seen.add(r["person"])
        counter = per_state[r["state"]]["people"]
        counter[r["gender"]] = counter.get(r["gender"], 0) + 1
    return {
        "out": str(out),
        "sha256": written["sha256"],
        "rows": len(rows),
        "primary_rows": len(assigned),
        "people": len(seen),
        "states": [st.qid for st in chosen],
        "genders": genders,
        "cache_dir": str(cache) if cache is not None else None,
        **stats,
        "per_state": per_state,
    }
