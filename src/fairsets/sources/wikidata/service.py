"""Talking to the query service: one POSTed query with SPARQLWrapper, capped and under a deadline,
with HTTP errors turned into retry-aware ones, and the parsing of its JSON answer.
"""

from __future__ import annotations

import http.client
import math
import urllib.error
import urllib.parse
from typing import Any

from ...fetch.answers import BadAnswer, loads_json, read_capped_stream
from ...fetch.retry import HttpStatusError, call_with_deadline
from .terms import (
    SparqlResponseError,
)

INSTALL_HINT = "pip install 'fairsets[fetch]'"
#: One whole query may take two timeouts and this many seconds (the timeout is per socket operation).
DEADLINE_MARGIN = 30.0
MAX_ANSWER_BYTES = 256 * 1024 * 1024  # one SPARQL answer (a page of 5000 rows is a few MB)


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
