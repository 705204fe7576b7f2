"""Licence, author and URLs of many files, in cached batches of the API (:func:`file_info`)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...fetch.answers import cached_json
from ...fetch.cache import DiskCache
from ...fetch.retry import RetryPolicy, user_agent
from .api import COMMONS_API, _fetch_batch, _merge, _resolve
from .pages import _empty, _parse_page
from .titles import file_title

log = logging.getLogger(__package__)  # one logger for the whole source, as before the split


MAX_BATCH = 50  # titles per request: the API scales at most 50 images per request (iiurlwidth)


def file_info(
    titles: list[str],
    *,
    api_url: str = COMMONS_API,
    width: int | None = 1024,
    cache_dir: Path | None = None,
    policy: RetryPolicy | None = None,
    contact: str | None = None,
    batch_size: int = 50,
    session: Any = None,
    sleep: Callable[[float], None] = time.sleep,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Licence, author and URLs of Commons files, asked in batches of the MediaWiki API.

    Args:
        titles: file titles or Commons URLs (anything :func:`file_title` accepts); duplicates
            are asked once.
        api_url: the ``api.php`` endpoint.
        width: thumbnail width in pixels (``iiurlwidth``); ``None`` asks for no thumbnail.
        cache_dir: folder of the raw-answer cache (``None``: no cache). Keys are the endpoint,
            the sorted titles of a batch and the width.
        policy: retry policy for 429/5xx answers and ``maxlag``/``ratelimited`` API errors.
        contact: contact for the User-Agent (default ``$FAIRSETS_CONTACT``).
        batch_size: titles per request, 1-50.
        session: a ``requests.Session``-like object (``post(url, data=, headers=, timeout=)``);
            a new session is made (and closed) when ``None``.
        sleep: the sleep used between retries (tests pass a recorder).
        progress: called as ``progress(titles_done, titles_total)`` after each batch.

    Returns:
        For every input title (the string as given), a dict with ``title`` (the title the API
        resolved), ``license_short`` (raw ``LicenseShortName``), ``license`` (SPDX id or
        ``None``), ``license_url``, ``author`` (``Artist`` as plain text, else the ``Credit``
        text), ``credit``, ``attribution_required`` (bool or ``None``), ``usage_terms``, ``url``
        (original file), ``thumb_url`` (``width`` pixels wide; ``""`` without ``width``),
        ``source_url`` (the file page), ``width``, ``height``, ``mime``, ``sha1`` and ``error``
        (``""``, ``"missing file"``, ``"invalid title: …"``, …).

    Raises:
        CommonsError: the API answered a non-retryable error or something that is not JSON.
        HttpStatusError: a retryable HTTP status persisted through every retry.
        ValueError: ``batch_size`` outside 1-50.
    """
    if not 1 <= batch_size <= MAX_BATCH:
        raise ValueError(f"batch_size must be between 1 and {MAX_BATCH}, not {batch_size}")
    policy = policy or RetryPolicy()
    cache = DiskCache(cache_dir, namespace="commons-imageinfo")
    results: dict[str, dict[str, Any]] = {}
    wanted: dict[str, str] = {}  # input title -> canonical title
    for t in titles:
        if t in wanted or t in results:
            continue
        try:
            wanted[t] = file_title(t)
        except ValueError as exc:
            results[t] = _empty(str(t), f"invalid title: {exc}")
    order = list(dict.fromkeys(wanted.values()))
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    headers = {"User-Agent": user_agent(contact), "Accept": "application/json"}

    own_session = session is None
    if own_session:
        import requests

        session = requests.Session()
    answers: dict[str, dict[str, Any]] = {}  # canonical title -> parsed answer
    done = 0
    try:
        for batch in batches:
            key = {"api": api_url, "titles": sorted(batch), "width": width}
            raw = cached_json(cache.get(key), "the Commons cache")
            if raw is None or not all(isinstance(a, dict) for a in raw):
                raw = _fetch_batch(session, api_url, batch, width, headers, policy, sleep)
                cache.put(key, json.dumps(raw, sort_keys=True, ensure_ascii=False).encode("utf-8"))
            mapping, pages = _merge(raw)
            for title in batch:
                final = _resolve(title, mapping)
                page = pages.get(final)
                answers[title] = (
                    _parse_page(page, width)
                    if page is not None
                    else _empty(final, "no answer from the API for this title")
                )
            done += len(batch)
            log.debug("commons: %d/%d titles", done, len(order))
            if progress is not None:
                progress(done, len(order))
    finally:
        if own_session:
            session.close()
    for t, canonical in wanted.items():
        results[t] = dict(answers[canonical])
    bad = sum(1 for r in results.values() if r["error"])
    if bad:
        log.info("commons: %d of %d files have no usable answer (missing or invalid)", bad, len(results))
    return {t: results[t] for t in dict.fromkeys(titles)}
