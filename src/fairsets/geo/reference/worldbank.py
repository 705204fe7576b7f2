"""GDP and population from the World Bank API v2 (CC BY 4.0), downloaded page by page and cached."""

from __future__ import annotations

import logging
import math
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...fetch.answers import MAX_ANSWER_BYTES, BadAnswer, loads_json, read_capped_stream
from ...fetch.cache import DiskCache
from ...fetch.guard import metered_handlers, trusted_policy
from ...fetch.retry import HttpStatusError, RetryPolicy, call_with_retry, user_agent
from ..countries import countries
from .statistics import _frame

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "MAX_PAGES",
    "WORLD_BANK_API",
    "WORLD_BANK_INDICATORS",
    "WORLD_BANK_LICENSE",
    "default_cache_dir",
    "fetch_worldbank",
]

log = logging.getLogger(__package__)  # the package's logger, as before the split

WORLD_BANK_API = "https://api.worldbank.org/v2"
#: GDP (current US$) and total population.
WORLD_BANK_INDICATORS: tuple[str, ...] = ("NY.GDP.MKTP.CD", "SP.POP.TOTL")
WORLD_BANK_LICENSE = "CC BY 4.0 (World Bank Open Data terms of use)"
_INDICATOR_COLUMNS = {"NY.GDP.MKTP.CD": "gdp", "SP.POP.TOTL": "population"}
_ENV_CACHE = "FAIRSETS_CACHE_DIR"
MAX_PAGES = 1000  # World Bank pages asked per indicator at most (all countries fit in one)


def default_cache_dir() -> Path:
    """``$FAIRSETS_CACHE_DIR/worldbank``, else ``~/.cache/fairsets/worldbank``."""
    root = os.environ.get(_ENV_CACHE, "").strip()
    return Path(root) / "worldbank" if root else Path.home() / ".cache" / "fairsets" / "worldbank"


@dataclass
class _Fetcher:
    policy: RetryPolicy
    timeout: float
    sleep: Callable[[float], None]
    requests: int = 0

    def get(self, url: str) -> bytes:
        def once() -> bytes:
            self.requests += 1
            req = urllib.request.Request(
                url, headers={"User-Agent": user_agent(), "Accept": "application/json"}
            )
            try:
                # the timeout is per socket operation; the deadline bounds the whole request (a drip)
                opener = urllib.request.build_opener(
                    *metered_handlers(trusted_policy(timeout=self.timeout, deadline=3 * self.timeout))
                )
                with opener.open(req, timeout=self.timeout) as resp:  # capped: an endless answer
                    return read_capped_stream(resp, MAX_ANSWER_BYTES, f"World Bank API {_host(url)}")
            except urllib.error.HTTPError as e:
                raise HttpStatusError(e.code, e.headers.get("Retry-After"), _host(url), e.reason) from None
            except urllib.error.URLError as e:
                reason = e.reason
                if isinstance(reason, (TimeoutError, ConnectionError)):  # the same type, naming the host
                    raise type(reason)(f"cannot reach {_host(url)}: {reason}") from reason
                raise ConnectionError(f"cannot reach {_host(url)}: {reason}") from None

        return call_with_retry(once, self.policy, what="world bank api", sleep=self.sleep)


def _api_number(value: Any) -> float:
    """A finite number from an answer (a number or a numeric string), else NaN: never an exception."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return math.nan
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return math.nan
    return number if math.isfinite(number) else math.nan


def _host(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc


def _parse_page(body: bytes, indicator: str) -> tuple[int, list[dict[str, Any]]]:
    """``(pages, records)`` of one World Bank API v2 JSON page; ``ValueError`` on an error answer."""
    try:
        doc = loads_json(body, f"World Bank API ({indicator})")
    except BadAnswer as e:
        raise ValueError(f"World Bank API answered {indicator} with non-JSON data: {e}") from None
    if not isinstance(doc, list) or not doc or not isinstance(doc[0], dict):
        raise ValueError(f"World Bank API answered {indicator} with an unexpected document: {str(doc)[:200]}")
    meta = doc[0]
    if "message" in meta:
        msgs = meta["message"] if isinstance(meta["message"], list) else [meta["message"]]
        text = "; ".join(
            " ".join(str(m.get(k, "")) for k in ("id", "key", "value")).strip()
            if isinstance(m, dict)
            else str(m)
            for m in msgs
        )
        raise ValueError(f"World Bank API error for indicator {indicator}: {text}")
    try:
        pages = int(meta.get("pages") or 1)
    except (TypeError, ValueError):
        raise ValueError(f"World Bank API page metadata without a page count: {str(meta)[:200]}") from None
    if not 1 <= pages <= MAX_PAGES:  # one request per page: a lying count would never end
        raise ValueError(
            f"World Bank API announces {pages} pages for {indicator} (at most {MAX_PAGES} are asked): "
            "not a World Bank answer, or per_page is too small"
        )
    records = doc[1] if len(doc) > 1 and isinstance(doc[1], list) else []
    return pages, [r for r in records if isinstance(r, dict)]


def fetch_worldbank(
    year: int,
    indicators: Sequence[str] = WORLD_BANK_INDICATORS,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    cache: bool = True,
    base_url: str = WORLD_BANK_API,
    policy: RetryPolicy | None = None,
    timeout: float = 60.0,
    per_page: int = 1000,
    sleep: Callable[[float], None] = time.sleep,
) -> pd.DataFrame:
    """Download country indicators for one year from the World Bank API v2 (cached on disk).

    Reads ``{base_url}/country/all/indicator/{indicator}?format=json&date={year}&per_page=…&page=N``
    page by page (the first element of each answer is the page metadata with ``pages``). Rows whose
    ``countryiso3code`` is not a country of ``countries.csv`` (aggregates such as ``WLD``, ``EUU``,
    ``ARB``, and economies fairsets does not list, e.g. ``XKX``) are skipped; a null value is a
    missing value. Every answer is cached under ``cache_dir`` (keyed by URL) once it parsed, so a
    re-run makes no request; 429/5xx answers and connection errors are retried per ``policy``.

    Args:
        year: the data year (e.g. 2022).
        indicators: World Bank indicator codes; ``NY.GDP.MKTP.CD`` becomes the ``gdp`` column and
            ``SP.POP.TOTL`` ``population``; any other becomes a column named by its code.
        cache_dir: cache folder (default :func:`default_cache_dir`).
        cache: set False to neither read nor write the cache.
        base_url: the API root (a mirror, or a test server).
        policy: retries (default :class:`~fairsets.fetch.retry.RetryPolicy`).
        timeout: seconds per request.
        per_page: rows per page (the API allows up to 32 500; 1000 keeps answers small).
        sleep: the wait function between retries (tests pass a no-op).

    Returns:
        A table indexed by ISO alpha-3 code (``name``, ``year``, one column per indicator);
        ``attrs`` holds ``source``, ``license``, ``requests`` (HTTP requests made), ``cache_hits``
        and ``skipped`` (the codes left out).

    Raises:
        ValueError: a bad year or indicator, or an error/unexpected answer from the API.
        HttpStatusError: an HTTP error that retries did not cure.
        ConnectionError, TimeoutError: the API cannot be reached.
    """
    import pandas as pd

    if not isinstance(year, int) or not 1960 <= year <= 2100:
        raise ValueError(f"year must be an integer between 1960 and 2100, got {year!r}")
    indicators = [str(i).strip() for i in indicators]
    if not indicators or any(not i or "/" in i or "?" in i for i in indicators):
        raise ValueError(f"bad World Bank indicator codes: {indicators}")
    disk = (
        DiskCache(Path(cache_dir) if cache_dir is not None else default_cache_dir())
        if cache
        else DiskCache(None)
    )
    fetcher = _Fetcher(policy or RetryPolicy(), timeout, sleep)
    known = countries()
    records: dict[str, dict[str, float]] = {}
    skipped: set[str] = set()
    root = base_url.rstrip("/")
    for ind in indicators:
        column = _INDICATOR_COLUMNS.get(ind, ind)
        page, pages = 1, 1
        while page <= pages:
            query = urllib.parse.urlencode(
                {"format": "json", "date": str(year), "per_page": per_page, "page": page}
            )
            url = f"{root}/country/all/indicator/{urllib.parse.quote(ind)}?{query}"
            key = {"service": "worldbank-v2", "url": url}
            body = disk.get(key)
            from_cache = body is not None
            if body is None:
                body = fetcher.get(url)
            pages, rows = _parse_page(body, ind)
            if not from_cache:
                disk.put(key, body)
            for rec in rows:
                code = str(rec.get("countryiso3code") or "").strip().upper()
                if code not in known:
                    country = rec.get("country")
                    skipped.add(code or str(country.get("id", "?") if isinstance(country, dict) else "?"))
                    continue
                entry = records.setdefault(code, {})
                entry[column] = _api_number(rec.get("value"))
                when = _api_number(rec.get("date"))
                entry.setdefault("year", when if math.isfinite(when) else float(year))
            page += 1
    source = (
        f"World Bank, World Development Indicators ({', '.join(indicators)}), {year}, "
        f"{root}/country/all/indicator"
    )
    df = _frame(records, source)
    for ind in indicators:
        column = _INDICATOR_COLUMNS.get(ind, ind)
        if column not in df.columns:
            df[column] = pd.Series({c: records[c].get(column, math.nan) for c in df.index}, dtype="float64")
    df.attrs.update(
        source=source,
        license=WORLD_BANK_LICENSE,
        requests=fetcher.requests,
        cache_hits=disk.hits,
        skipped=sorted(skipped),
    )
    log.info(
        "world bank %s: %d countries, %d requests, %d cached pages",
        year,
        len(df),
        fetcher.requests,
        disk.hits,
    )
    return df
