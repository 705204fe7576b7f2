"""The MediaWiki API requests: one capped, deadline-bound, retried POST (:func:`_post`), the
``continue`` loop of a batch, and the merging of its answers' title moves and pages.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

from ...fetch.answers import MAX_ANSWER_BYTES, BadAnswer, loads_json, read_capped
from ...fetch.retry import HttpStatusError, RetryPolicy, call_with_deadline, call_with_retry

log = logging.getLogger(__package__)  # one logger for the whole source, as before the split


COMMONS_API = "https://commons.wikimedia.org/w/api.php"


EXTMETADATA_FIELDS = (
    "LicenseShortName",
    "LicenseUrl",
    "License",
    "Artist",
    "Credit",
    "AttributionRequired",
    "UsageTerms",
)
TIMEOUT = (10.0, 60.0)  # connect, read (seconds)
DEADLINE = 150.0  # seconds for one whole request (TIMEOUT is per socket operation: a drip never trips it)


MAXLAG = 5  # seconds; Wikimedia's recommended maxlag for non-interactive clients
_RETRYABLE_API_ERRORS = {"maxlag": 503, "ratelimited": 429}


class CommonsError(RuntimeError):
    """The MediaWiki API answered with something unusable (a non-retryable error, not JSON)."""


def _request_params(titles: list[str], width: int | None) -> dict[str, str]:
    params = {
        "action": "query",
        "format": "json",
        "formatversion": "2",
        "prop": "imageinfo",
        "iiprop": "url|extmetadata|size|mime|sha1",
        "iiextmetadatafilter": "|".join(EXTMETADATA_FIELDS),
        "iiextmetadatalanguage": "en",
        "redirects": "1",
        "maxlag": str(MAXLAG),
        "titles": "|".join(titles),
    }
    if width:
        params["iiurlwidth"] = str(int(width))
    return params


def _post(
    session: Any,
    api_url: str,
    params: dict[str, str],
    headers: dict[str, str],
    policy: RetryPolicy,
    sleep: Callable[[float], None],
) -> dict[str, Any]:
    """One API request (retried); returns the decoded JSON answer."""
    import requests

    def once() -> dict[str, Any]:
        what = f"MediaWiki API {urllib.parse.urlsplit(api_url).netloc}"

        def post() -> tuple[Any, bytes]:
            # streamed and capped: requests would inflate a gzip bomb whole (resp.json, resp.text)
            r = session.post(api_url, data=params, headers=headers, timeout=TIMEOUT, stream=True)
            return r, read_capped(r, MAX_ANSWER_BYTES, what)

        try:
            resp, body = call_with_deadline(post, DEADLINE, what=what)
        except requests.Timeout as exc:
            raise TimeoutError(f"MediaWiki API {api_url}: {exc}") from exc
        except requests.ConnectionError as exc:
            raise ConnectionError(f"MediaWiki API {api_url}: {exc}") from exc
        except BadAnswer as exc:  # a decompression bomb, an endless answer
            raise CommonsError(str(exc)) from None
        except requests.RequestException as exc:  # e.g. a broken Content-Encoding
            raise CommonsError(f"{what}: {type(exc).__name__}: {exc}") from None
        if resp.status_code in policy.statuses:
            raise HttpStatusError(resp.status_code, resp.headers.get("Retry-After"), api_url)
        if resp.status_code != 200:
            text = body[:200].decode("utf-8", "replace")
            raise CommonsError(f"MediaWiki API {api_url} answered HTTP {resp.status_code}: {text!r}")
        try:
            data = loads_json(body, what)
        except BadAnswer as exc:
            raise CommonsError(f"{exc} (not JSON)") from None
        if not isinstance(data, dict):
            raise CommonsError(f"MediaWiki API {api_url} answered an unexpected JSON value: {data!r:.200}")
        err = data.get("error")
        if err:
            code = str(err.get("code", "")) if isinstance(err, dict) else str(err)
            info = str(err.get("info", "")) if isinstance(err, dict) else ""
            if code in _RETRYABLE_API_ERRORS:
                retry_after = resp.headers.get("Retry-After") or (str(MAXLAG) if code == "maxlag" else None)
                raise HttpStatusError(_RETRYABLE_API_ERRORS[code], retry_after, api_url, f"{code}: {info}")
            raise CommonsError(f"MediaWiki API error {code!r}: {info}")
        warnings = data.get("warnings")
        for module, warning in warnings.items() if isinstance(warnings, dict) else ():
            log.debug("MediaWiki API warning (%s): %s", module, warning)
        return data

    return call_with_retry(once, policy, what="commons api", sleep=sleep)


def _fetch_batch(
    session: Any,
    api_url: str,
    titles: list[str],
    width: int | None,
    headers: dict[str, str],
    policy: RetryPolicy,
    sleep: Callable[[float], None],
) -> list[dict[str, Any]]:
    """All answers of one batch, following ``continue`` until the batch is complete."""
    base = _request_params(titles, width)
    answers: list[dict[str, Any]] = []
    cont: dict[str, Any] = {}
    for _ in range(1000):  # a guard against an API that never stops continuing
        data = _post(
            session, api_url, {**base, **{k: str(v) for k, v in cont.items()}}, headers, policy, sleep
        )
        answers.append(data)
        cont = data.get("continue") or {}
        if not isinstance(cont, dict):
            raise CommonsError(
                f"MediaWiki API {api_url} answered a 'continue' that is not an object: {cont!r:.100}"
            )
        if not cont:
            return answers
    raise CommonsError(f"MediaWiki API {api_url} kept answering 'continue' for {len(titles)} titles")


def _merge(answers: Iterable[dict[str, Any]]) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """Title mapping (normalized/redirects/converted, from → to) and pages by title."""
    mapping: dict[str, str] = {}
    pages: dict[str, dict[str, Any]] = {}
    for data in answers:
        query = data.get("query") if isinstance(data, dict) else None
        if not isinstance(query, dict):  # a broken answer: its titles get "no answer"
            continue
        for kind in ("normalized", "converted", "redirects"):
            moves = query.get(kind)
            for m in moves if isinstance(moves, list) else ():
                if isinstance(m, dict) and "from" in m and "to" in m:
                    mapping[str(m["from"])] = str(m["to"])
        raw_pages = query.get("pages") or []
        if isinstance(raw_pages, dict):  # formatversion=1 shape, just in case
            raw_pages = list(raw_pages.values())
        if not isinstance(raw_pages, list):
            continue
        for page in raw_pages:
            if not isinstance(page, dict):
                continue
            title = str(page.get("title", ""))
            seen = pages.get(title)
            if seen is None or (not seen.get("imageinfo") and page.get("imageinfo")):
                pages[title] = page
    return mapping, pages


def _resolve(title: str, mapping: dict[str, str]) -> str:
    seen = {title}
    while title in mapping:
        title = mapping[title]
        if title in seen:  # a redirect loop: stop where we are
            break
        seen.add(title)
    return title
