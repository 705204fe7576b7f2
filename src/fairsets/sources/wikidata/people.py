"""Querying every (state, gender, association), page by page, through the cache (:func:`fetch_people`)."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...fetch.cache import DiskCache
from ...fetch.retry import RetryPolicy, call_with_retry, user_agent
from .query import build_query
from .rows import _row_order, _rows_of
from .service import _parse, _request
from .states import State
from .terms import (
    ASSOCIATIONS,
    GENDERS,
    QID_RE,
    WIKIDATA_ENDPOINT,
    SparqlResponseError,
    _qnum,
)

log = logging.getLogger(__package__)  # one logger for the whole source, as before the split


MAX_ROWS_PER_QUERY = 1_000_000  # rows of one (state, gender, association) query over all its pages


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
