"""Google Images through SerpAPI (``google-search-results``): web candidates for thin cells.

IndicFairFace (§3.1) supplements states with too few Wikimedia images by querying Google Images
through SerpAPI with per-state, per-gender queries (``"{state} man face"``, ``"{state} woman
face"``) and checks every result by hand for an open licence and geographic relevance. This
module runs those queries for the cells still below quota and returns candidate rows marked
``review = "pending"``; :mod:`fairsets.pipeline.review` exports them for the manual check and imports the
decisions.

Usage-rights filter: SerpAPI's ``google_images`` engine takes ``licenses`` (it overrides the
``sur`` part of ``tbs``): ``f`` free to use or share, ``fc`` … even commercially, ``fm`` free
to use, share or modify, ``fmc`` … even commercially, ``cl`` Creative Commons licences, ``ol``
commercial and other licences. The default here is ``cl``, Google's "Creative Commons licenses"
filter, the closest to the paper's "validated for open license". Google's filter is a hint, not
a licence grant: each result carries ``license_details_url`` when Google shows one, and the
reviewer confirms the actual licence on the source page.

Result fields used (``images_results[]``): ``position``, ``original`` (full-size URL),
``thumbnail``, ``link`` (the page the image is on), ``title``, ``source`` (site name),
``original_width``/``original_height``, ``license_details_url``, ``tag``. Each page
(``ijn`` = 0, 1, …) holds up to 100 results and costs one search.

Requests go through a subclass of ``serpapi.GoogleSearch`` whose ``BACKEND`` is the chosen base
URL (tests use a loopback server); its ``get_response()`` is used rather than ``get_dict()`` so
the HTTP status and ``Retry-After`` can be read (429/5xx are retried, 401/403/400 are not).

The API key comes from ``SERPAPI_API_KEY`` (or ``api_key=``). ``google-search-results`` sends
it as the ``api_key`` query parameter, so it is part of the request URL: it is never logged,
never part of a cache key or cached file, and scrubbed from every exception this module raises.

API:
    * ``DEFAULT_TEMPLATES`` — ``{"male": "{state} man face", "female": "{state} woman face"}``.
    * ``SerpApiError`` — configuration, quota and API errors (never containing the key).
    * ``api_key_from_env(var="SERPAPI_API_KEY") -> str``
    * ``search_images(query, *, api_key, backend, licenses, num, extra_params, cache_dir,
      policy, sleep) -> list[dict]``
    * ``supplement_rows(cells, need, *, templates, state_attr, gender_attr, per_query,
      **search_kwargs) -> list[dict]``
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fairsets.core.data import make_key
from fairsets.core.licenses import normalise_license
from fairsets.core.short_text import clip, printable_line

from ..fetch.answers import MAX_ANSWER_BYTES, BadAnswer, cached_json, loads_json, read_capped
from ..fetch.cache import DiskCache
from ..fetch.retry import HttpStatusError, RetryPolicy, call_with_deadline, call_with_retry, unreachable

__all__ = [
    "DEFAULT_BACKEND",
    "DEFAULT_TEMPLATES",
    "LICENSE_FILTERS",
    "SerpApiError",
    "api_key_from_env",
    "search_images",
    "supplement_rows",
]

log = logging.getLogger(__name__)

DEFAULT_TEMPLATES: dict[str, str] = {"male": "{state} man face", "female": "{state} woman face"}
DEFAULT_BACKEND = "https://serpapi.com"
ENGINE = "google_images"
PAGE_SIZE = 100  # results per google_images page (ijn)
TIMEOUT = 60.0  # seconds per request (the client's own default is 60000)
DEADLINE = 150.0  # seconds for one whole request (TIMEOUT is per socket operation: a drip never trips it)

#: Values of the ``licenses`` parameter of SerpAPI's google_images engine.
LICENSE_FILTERS: dict[str, str] = {
    "f": "Free to use or share",
    "fc": "Free to use or share, even commercially",
    "fm": "Free to use, share or modify",
    "fmc": "Free to use, share or modify, even commercially",
    "cl": "Creative Commons licences",
    "ol": "Commercial and other licences",
}
_NO_RESULTS = "hasn't returned any results"
_RESERVED = {"api_key", "engine", "q", "ijn", "output", "source", "serp_api_key"}


class SerpApiError(RuntimeError):
    """SerpAPI is misconfigured (no key), refused the request, or answered an error."""


def api_key_from_env(var: str = "SERPAPI_API_KEY") -> str:
    """Return the SerpAPI key from the environment variable ``var``.

    Raises:
        SerpApiError: the variable is unset or blank (the message names the variable only).
    """
    key = os.environ.get(var, "").strip()
    if not key:
        raise SerpApiError(
            f"set {var} to your SerpAPI key (https://serpapi.com/manage-api-key) to search Google Images"
        )
    return key


_MAX_ERROR_CHARS = 500


def _short(text: str) -> str:
    """An answer's error text as one printable line, cut to 500 characters (a hostile server may
    send megabytes, line breaks or terminal escapes); scrub the key before cutting."""
    return printable_line(text, _MAX_ERROR_CHARS)


def _scrub(text: str, key: str) -> str:
    """``text`` without ``key``: as given, URL-encoded as requests sends it (a key with ``/``, ``+``
    or ``&`` appears only encoded in requests' messages), and any ``api_key=`` URL parameter."""
    if key:
        forms = {key, urllib.parse.quote_plus(key), urllib.parse.quote(key, safe=""), urllib.parse.quote(key)}
        for form in sorted(forms, key=len, reverse=True):
            text = text.replace(form, "***")
    return _KEY_IN_URL.sub(r"\1***", text)


_KEY_IN_URL = re.compile(r"((?:api_key|serp_api_key)=)[^&\s\"']+")


class _RedactApiKey(logging.Filter):
    """Redact ``api_key=...`` from records of loggers that print request URLs (urllib3 at DEBUG)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken record is not ours to fix
            return True
        if "api_key=" in message:
            record.msg = _KEY_IN_URL.sub(r"\1***", message)
            record.args = ()
        return True


_REDACTOR = _RedactApiKey()


def _install_redactor() -> None:
    """Attach the redacting filter to urllib3's request logger (once; it only ever redacts)."""
    logger = logging.getLogger("urllib3.connectionpool")
    if _REDACTOR not in logger.filters:
        logger.addFilter(_REDACTOR)


def _client_class(backend: str) -> type:
    """A ``serpapi.GoogleSearch`` subclass talking to ``backend`` (no global state is changed)."""
    try:
        from serpapi import GoogleSearch
    except ImportError:  # pragma: no cover - depends on the environment
        raise SerpApiError(
            "the SerpAPI source needs google-search-results: pip install google-search-results"
        ) from None

    class _Search(GoogleSearch):
        BACKEND = backend.rstrip("/")
        SERP_API_KEY = None

        def get_response(self, path: str = "/search") -> Any:
            # streamed, so that the body is read capped (read_capped): requests inflates gzip whole
            import requests

            url, parameter = self.construct_url(path)
            return requests.get(url, parameter, timeout=self.timeout, stream=True)

    return _Search


def _request_page(
    client_cls: type,
    params: dict[str, Any],
    key: str,
    endpoint: str,
    policy: RetryPolicy,
    sleep: Callable[[float], None],
) -> dict[str, Any]:
    """One google_images page (retried on 429/5xx and connection errors); the key never leaks."""
    import requests

    _install_redactor()

    def once() -> dict[str, Any]:
        client = client_cls({**params, "api_key": key})
        client.timeout = TIMEOUT

        def get() -> tuple[Any, bytes]:
            r = client.get_response()
            return r, read_capped(r, MAX_ANSWER_BYTES, "SerpAPI")

        try:
            resp, body = call_with_deadline(get, DEADLINE, what="SerpAPI")
        except requests.Timeout:
            raise TimeoutError(f"SerpAPI {endpoint}: request timed out") from None
        except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
            # a dropped connection (retried); requests quotes the full URL, api_key included: scrub
            raise ConnectionError(f"SerpAPI {endpoint}: {_scrub(str(exc), key)}") from None
        except requests.RequestException as exc:  # e.g. a broken Content-Encoding: not retried
            raise SerpApiError(f"SerpAPI {endpoint}: {type(exc).__name__}: {_scrub(str(exc), key)}") from None
        except BadAnswer as exc:  # a decompression bomb, an endless answer
            raise SerpApiError(str(exc)) from None
        text = _scrub(body.decode("utf-8", "replace"), key)
        try:
            data = loads_json(text.encode("utf-8"), "SerpAPI") if text else {}
        except BadAnswer as exc:
            data = {"error": str(exc)}
        if not isinstance(data, dict):
            data = {"error": f"unexpected JSON value: {text[:200]!r}"}
        full_error = str(data.get("error") or "")
        error = _short(full_error)  # the server's text: one printable line of at most 500 characters
        if resp.status_code in policy.statuses:
            raise HttpStatusError(resp.status_code, resp.headers.get("Retry-After"), endpoint, error)
        if resp.status_code != 200:
            detail = error or repr(text[:200])
            raise SerpApiError(f"SerpAPI answered HTTP {resp.status_code}: {detail}")
        if full_error and _NO_RESULTS not in full_error:
            raise SerpApiError(f"SerpAPI error: {error}")
        return data

    try:
        return call_with_retry(once, policy, what="serpapi", sleep=sleep)
    except (HttpStatusError, ConnectionError, TimeoutError) as exc:
        how = "cannot reach the server (not retried)" if unreachable(exc) else "request failed after retries"
        raise SerpApiError(f"SerpAPI {how}: {_scrub(str(exc), key)}") from None


def _license_hint(item: Mapping[str, Any], licenses: str | None) -> str:
    details = str(item.get("license_details_url") or "").strip()
    if details:
        return details
    if licenses:
        label = LICENSE_FILTERS.get(licenses, "usage-rights filter")
        return f"{label} (filter {licenses})"
    return ""


def _http_url(value: Any) -> str:
    """An absolute http(s) URL from a result, else ``""`` (never ``javascript:``, ``data:``, relative)."""
    url = value.strip() if isinstance(value, str) else ""
    if not url or any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        return ""
    parts = urllib.parse.urlsplit(url)
    return url if parts.scheme.lower() in ("http", "https") and parts.hostname else ""


def _count(value: Any) -> int | None:
    """A size or position from a result: a non-negative int, else None (not a string, a float, a bool)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


MAX_TEXT_CHARS = 1000  # a result's title, site name or tag (Google's are far shorter)


def _text(value: Any) -> str:
    """A text field of a result on one line, at most :data:`MAX_TEXT_CHARS` characters (cut with ``…``)."""
    return clip(" ".join(value.split()), MAX_TEXT_CHARS) if isinstance(value, str) else ""


def _row(item: Mapping[str, Any], query: str, licenses: str | None) -> dict[str, Any]:
    details = _http_url(item.get("license_details_url"))
    return {
        "url": _http_url(item.get("original")),
        "thumbnail": _http_url(item.get("thumbnail")),
        "source_url": _http_url(item.get("link")),
        "title": _text(item.get("title")),
        "source": _text(item.get("source")),
        "width": _count(item.get("original_width")),
        "height": _count(item.get("original_height")),
        "license_hint": _license_hint({"license_details_url": details}, licenses),
        "license_details_url": details,
        "tag": _text(item.get("tag")),
        "position": _count(item.get("position")),
        "query": query,
    }


def search_images(
    query: str,
    *,
    api_key: str | None = None,
    backend: str | None = None,
    licenses: str | None = "cl",
    num: int = 100,
    extra_params: dict[str, Any] | None = None,
    cache_dir: Path | None = None,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> list[dict[str, Any]]:
    """Search Google Images through SerpAPI (engine ``google_images``).

    Args:
        query: the search text.
        api_key: the SerpAPI key (default: ``$SERPAPI_API_KEY``). Sent only as the API's
            ``api_key`` parameter.
        backend: SerpAPI base URL (default ``https://serpapi.com``; tests pass a loopback
            server). A subclass of ``serpapi.GoogleSearch`` carries it: no global state changes.
        licenses: the usage-rights filter (``licenses`` parameter: ``f``, ``fc``, ``fm``,
            ``fmc``, ``cl``, ``ol``; see :data:`LICENSE_FILTERS`); ``None`` or ``""`` for none.
        num: how many results to return at most; pages of 100 (``ijn``) are asked until this
            many results are found or a page comes back short. Each page costs one search.
        extra_params: more API parameters (``gl``, ``hl``, ``safe``, ``image_type`` …); may not
            set ``api_key``, ``engine``, ``q`` or ``ijn``.
        cache_dir: folder of the answer cache (``None``: no cache). Keys and files hold the
            parameters and results, never the key.
        policy: retry policy for 429/5xx answers and connection errors.
        sleep: the sleep used between retries.

    Returns:
        One dict per result, in SerpAPI's order, without duplicate URLs: ``url`` (original),
        ``thumbnail``, ``source_url`` (the page), ``title``, ``source`` (site name), ``width``,
        ``height``, ``license_hint`` (``license_details_url`` when Google gives one, else the
        filter's class, e.g. ``"Creative Commons licences (filter cl)"``),
        ``license_details_url``, ``tag``, ``position`` and ``query``.

    Raises:
        SerpApiError: no key, a refused request (401/403/400), an API error, or 429/5xx after
            every retry. The message never contains the key.
        ValueError: ``extra_params`` sets a reserved parameter, or an unknown ``licenses`` value.
    """
    key = (api_key or "").strip() or api_key_from_env()
    extra = dict(extra_params or {})
    reserved = sorted(set(extra) & _RESERVED)
    if reserved:
        raise ValueError(f"extra_params may not set {reserved}: they are set by search_images")
    if licenses and licenses not in LICENSE_FILTERS:
        raise ValueError(f"unknown licenses filter {licenses!r}; use one of {sorted(LICENSE_FILTERS)}")
    base = (backend or DEFAULT_BACKEND).rstrip("/")
    endpoint = f"{base}/search"
    policy = policy or RetryPolicy()
    cache = DiskCache(cache_dir, namespace="serpapi")
    client_cls = _client_class(base)
    params: dict[str, Any] = {"engine": ENGINE, "q": query, "output": "json", **extra}
    if licenses:
        params["licenses"] = licenses

    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    page = 0
    while len(rows) < num:
        page_params = {**params, "ijn": str(page)}
        cache_key = {"backend": base, "params": {k: str(v) for k, v in page_params.items()}}
        items = cached_json(cache.get(cache_key), "the SerpAPI cache")
        if items is None or not all(isinstance(i, dict) for i in items):
            data = _request_page(client_cls, page_params, key, endpoint, policy, sleep)
            found = data.get("images_results") or []
            items = [i for i in found if isinstance(i, dict)] if isinstance(found, list) else []
            cache.put(cache_key, _scrub(json.dumps(items, sort_keys=True), key).encode("utf-8"))
        log.info("serpapi: %r page %d: %d results", query, page, len(items))
        for item in items:
            row = _row(item, query, licenses)
            if not row["url"] or row["url"] in seen:
                continue
            seen.add(row["url"])
            rows.append(row)
            if len(rows) >= num:
                break
        if len(items) < PAGE_SIZE:
            break
        page += 1
    return rows


def supplement_rows(
    cells: list[dict[str, str]],
    need: Mapping[tuple[str, ...], int],
    *,
    templates: Mapping[str, str] = DEFAULT_TEMPLATES,
    state_attr: str = "state",
    gender_attr: str = "gender",
    per_query: int = 100,
    **search_kwargs: Any,
) -> list[dict[str, Any]]:
    """Candidate rows from templated Google Images queries for the cells below quota.

    Args:
        cells: group cells, each a dict of group attribute values in the recipe's group order
            (``{"state": "Mizoram", "gender": "female"}``).
        need: images still missing per cell, keyed by the tuple of the cell's values in that
            order (``("Mizoram", "female")``); cells with no entry or a need ≤ 0 are not searched.
        templates: query template per value of ``gender_attr``; formatted with ``state``,
            ``gender`` and every attribute of the cell (``"{state} woman face"``).
        state_attr: the attribute that fills ``{state}``.
        gender_attr: the attribute that picks the template.
        per_query: results asked per query (``num`` of :func:`search_images`).
        **search_kwargs: passed to :func:`search_images` (``api_key``, ``backend``, ``licenses``,
            ``cache_dir``, ``policy``, ``sleep``, ``extra_params``).

    Returns:
        Rows with ``key`` (``make_key("serpapi", url)``), the cell's attributes, ``identity``
        (= key: a web image has no known identity), ``url``, ``thumbnail``, ``source_url``,
        ``title``, ``author`` (the site name, or ``""``), ``license`` (the SPDX id when the API
        names a specific licence, else ``""``), ``license_hint``, ``review`` (``"pending"``),
        ``query``, ``source`` (``"serpapi"``), ``width``, ``height``, ``position``. A URL found
        for several cells is kept once, for the first cell (in ``cells`` order).

    Raises:
        ValueError: a cell lacks ``state_attr``/``gender_attr``, has no template, or its template
            names a field the cell does not have.
        SerpApiError: see :func:`search_images`.
    """
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for cell in cells:
        values = tuple(str(v) for v in cell.values())
        if need.get(values, 0) <= 0:
            continue
        if state_attr not in cell or gender_attr not in cell:
            raise ValueError(f"cell {cell} lacks {state_attr!r} or {gender_attr!r}")
        template = templates.get(str(cell[gender_attr]))
        if template is None:
            raise ValueError(
                f"no query template for {gender_attr}={cell[gender_attr]!r}; templates: {sorted(templates)}"
            )
        names = {k: str(v) for k, v in cell.items()}
        names.update(state=str(cell[state_attr]), gender=str(cell[gender_attr]))
        try:
            query = template.format(**names)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"query template {template!r}: cannot fill {exc} from {sorted(names)}") from None
        found = search_images(query, num=per_query, **search_kwargs)
        added = 0
        for r in found:
            if r["url"] in seen:
                continue
            seen.add(r["url"])
            key = make_key("serpapi", r["url"])
            spdx = normalise_license(r["license_details_url"]) if r["license_details_url"] else None
            rows.append(
                {
                    "key": key,
                    **{k: str(v) for k, v in cell.items()},
                    "identity": key,
                    "url": r["url"],
                    "thumbnail": r["thumbnail"],
                    "source_url": r["source_url"],
                    "title": r["title"],
                    "author": r["source"],
                    "license": spdx or "",
                    "license_hint": r["license_hint"],
                    "review": "pending",
                    "query": query,
                    "source": "serpapi",
                    "width": r["width"],
                    "height": r["height"],
                    "position": r["position"],
                }
            )
            added += 1
        log.info("serpapi: %r: %d new candidates (need %d)", query, added, need[values])
    return rows
