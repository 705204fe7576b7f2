"""Country reference tables for the geo analyses: GDP and population, and reference distributions.

Two kinds of reference:

* **Statistics** (:func:`load_reference`, :func:`default_reference`, :func:`fetch_worldbank`): a
  table indexed by ISO 3166-1 alpha-3 code with ``gdp`` and ``population`` columns, correlated with
  the country frequencies (GeoProfiler §4.1). Population ships with fairsets (``countries.csv``,
  GeoNames, CC BY 4.0); GDP does not (no properly licensed offline source), so
  ``fairsets geo reference --year Y`` downloads it from the World Bank API (CC BY 4.0) once and
  writes a CSV that ``fairsets geo analyze --reference`` reads.
* **Distributions** (:func:`gr_reference`): ``p_true(c | n)`` for the geographic
  representativeness (§4.2): uniform over the independent countries (``"uniform"``) or over every
  country and territory (``"uniform-all"``), proportional to population (``"population"``,
  ``countries.csv``), or a user CSV of weights, optionally per entity.

Reference CSVs name countries in an ``iso3`` column (ISO 3166-1 alpha-3) or a ``country``/``name``
column (normalised with :func:`fairsets.geo.countries.normalize_country`); unknown codes or names
are an error that lists them.

API:
    * ``load_reference(path) -> DataFrame`` and ``default_reference() -> DataFrame``
    * ``fetch_worldbank(year, indicators=..., *, cache_dir=None, base_url=...) -> DataFrame``
    * ``write_reference(table, path) -> Path``
    * ``gr_reference(spec) -> CountryWeights`` and ``load_weights(path) -> CountryWeights``
    * ``resolve_countries(values, *, what, codes_only=False) -> list[str]``
"""

from __future__ import annotations

import csv
import io
import logging
import math
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fairsets.core.atomic import atomic_write_text
from fairsets.core.textfile import read_text

from ..fetch.answers import MAX_ANSWER_BYTES, BadAnswer, loads_json, read_capped_stream
from ..fetch.cache import DiskCache
from ..fetch.guard import metered_handlers, trusted_policy
from ..fetch.retry import HttpStatusError, RetryPolicy, call_with_retry, user_agent
from .countries import countries, is_none_answer, normalize_country

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "GEONAMES_SOURCE",
    "REFERENCE_COLUMNS",
    "WORLD_BANK_API",
    "WORLD_BANK_INDICATORS",
    "WORLD_BANK_LICENSE",
    "CountryWeights",
    "default_cache_dir",
    "default_reference",
    "fetch_worldbank",
    "gr_reference",
    "load_reference",
    "load_weights",
    "resolve_countries",
    "write_reference",
]

log = logging.getLogger(__name__)

#: Columns of a statistics table (index: ISO alpha-3 code).
REFERENCE_COLUMNS = ("name", "year", "gdp", "population")
GEONAMES_SOURCE = "GeoNames population (fairsets countries.csv), CC BY 4.0"
WORLD_BANK_API = "https://api.worldbank.org/v2"
#: GDP (current US$) and total population.
WORLD_BANK_INDICATORS: tuple[str, ...] = ("NY.GDP.MKTP.CD", "SP.POP.TOTL")
WORLD_BANK_LICENSE = "CC BY 4.0 (World Bank Open Data terms of use)"
_INDICATOR_COLUMNS = {"NY.GDP.MKTP.CD": "gdp", "SP.POP.TOTL": "population"}
_KEY_COLUMNS = ("iso3", "country", "name")
_MISSING = frozenset({"", "na", "nan", "n/a", "null", "none", "..", "-"})
_ENV_CACHE = "FAIRSETS_CACHE_DIR"
MAX_PAGES = 1000  # World Bank pages asked per indicator at most (all countries fit in one)
_SHOW = 12  # unknown names listed in an error


# --------------------------------------------------------------------------- countries


def _listing(values: Sequence[str]) -> str:
    shown = ", ".join(repr(v) for v in values[:_SHOW])
    return shown + (f", … ({len(values) - _SHOW} more)" if len(values) > _SHOW else "")


def resolve_countries(values: Iterable[Any], *, what: str, codes_only: bool = False) -> list[str]:
    """Map country codes or names to ISO 3166-1 alpha-3 codes, failing on any unknown one.

    Args:
        values: codes (``"FRA"``) or, unless ``codes_only``, names, aliases and other codes
            (``"France"``, ``"the UK"``, ``"US"``).
        what: what the values are, for the error message (``"reference CSV column 'country'"``).
        codes_only: accept ISO alpha-3 codes only.

    Returns:
        The codes, in the order of ``values``.

    Raises:
        ValueError: some values are empty or name no known country; the message lists them.
    """
    table = countries()
    out: list[str] = []
    unknown: list[str] = []
    for v in values:
        text = "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v).strip()
        code = text.upper() if text.upper() in table else None
        if code is None and not codes_only and not is_none_answer(text):
            code = normalize_country(text)
        if code is None:
            if text not in unknown:
                unknown.append(text)
            continue
        out.append(code)
    if unknown:
        kind = "ISO 3166-1 alpha-3 codes" if codes_only else "country codes or names"
        raise ValueError(f"{what}: {len(unknown)} value(s) are not known {kind}: {_listing(unknown)}")
    return out


def _number(text: str) -> float | None:
    """A float from a CSV cell; ``nan`` for an empty/NA cell; ``None`` when not a number."""
    t = text.strip().replace(",", "").replace("_", "")
    if t.casefold() in _MISSING:
        return math.nan
    try:
        return float(t)
    except ValueError:
        return None


def _read_csv_rows(path: str | os.PathLike[str], what: str) -> tuple[list[str], list[dict[str, str]]]:
    """Header (lower-cased, stripped) and rows of a CSV file, with clear errors."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{what} not found: {p}")
    text = read_text(p)  # TextFileError (a ValueError) names the file, line and byte offset
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip().lower() for h in next(reader)]
    except StopIteration:
        raise ValueError(f"{what} {p} is empty") from None
    if len(set(header)) != len(header):
        raise ValueError(f"{what} {p}: duplicate column names in {header}")
    rows = []
    for line_no, cells in enumerate(reader, start=2):
        if not cells or all(not c.strip() for c in cells):
            continue
        if len(cells) > len(header):
            raise ValueError(f"{what} {p}, line {line_no}: {len(cells)} cells for {len(header)} columns")
        cells = [c.strip() for c in cells] + [""] * (len(header) - len(cells))
        rows.append(dict(zip(header, cells, strict=True)))
    return header, rows


def _key_column(header: Sequence[str], what: str, path: Path) -> str:
    for col in _KEY_COLUMNS:
        if col in header:
            return col
    raise ValueError(f"{what} {path} needs an iso3, country or name column (it has: {', '.join(header)})")


def _numeric_column(rows: list[dict[str, str]], col: str, what: str, key: str) -> list[float]:
    values, bad = [], []
    for r in rows:
        v = _number(r.get(col, ""))
        if v is None or (not math.isnan(v) and (v < 0 or math.isinf(v))):
            bad.append(f"{r.get(key, '?')}={r.get(col, '')!r}")
            values.append(math.nan)
        else:
            values.append(v)
    if bad:
        raise ValueError(f"{what}: column {col!r} must hold non-negative numbers; bad: {_listing(bad)}")
    return values


# --------------------------------------------------------------------------- statistics tables


def _frame(records: Mapping[str, Mapping[str, Any]], source: str) -> pd.DataFrame:
    import pandas as pd

    table = countries()
    codes = sorted(records)
    df = pd.DataFrame(
        {
            "name": [table[c].name for c in codes],
            "year": [float(records[c].get("year", math.nan)) for c in codes],
            "gdp": [float(records[c].get("gdp", math.nan)) for c in codes],
            "population": [float(records[c].get("population", math.nan)) for c in codes],
        },
        index=pd.Index(codes, name="iso3"),
    )
    df.attrs["source"] = source
    return df


def default_reference() -> pd.DataFrame:
    """Population of every country and territory from ``countries.csv`` (GeoNames); no GDP.

    Returns:
        A table indexed by ISO alpha-3 code with ``name``, ``year`` (NaN), ``gdp`` (NaN) and
        ``population``; ``attrs["source"]`` names the source.
    """
    return _frame(
        {c.iso3: {"population": float(c.population)} for c in countries().values()}, GEONAMES_SOURCE
    )


def load_reference(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a statistics CSV: a country column plus ``gdp`` and/or ``population`` (and ``year``).

    The country column is ``iso3`` (ISO alpha-3 codes), else ``country`` or ``name`` (names,
    aliases or codes, see :func:`resolve_countries`). Empty cells, ``NA`` and ``..`` are missing
    values; other cells must be non-negative numbers (thousands separators allowed).

    Args:
        path: the CSV file (e.g. written by :func:`write_reference`).

    Returns:
        A table indexed by ISO alpha-3 code with the columns of :data:`REFERENCE_COLUMNS`;
        ``attrs["source"]`` is the CSV's ``source`` column if it has one, else the path.

    Raises:
        FileNotFoundError: no such file.
        ValueError: no country column, no gdp/population column, unknown countries (listed),
            duplicate countries, or cells that are not numbers.
    """
    p = Path(path)
    what = "reference CSV"
    header, rows = _read_csv_rows(p, what)
    key = _key_column(header, what, p)
    if "gdp" not in header and "population" not in header:
        raise ValueError(f"{what} {p} needs a gdp or population column (it has: {', '.join(header)})")
    if not rows:
        raise ValueError(f"{what} {p} has no rows")
    codes = resolve_countries(
        [r[key] for r in rows], what=f"{what} {p} column {key!r}", codes_only=key == "iso3"
    )
    seen: dict[str, int] = {}
    for c in codes:
        seen[c] = seen.get(c, 0) + 1
    dup = sorted(c for c, n in seen.items() if n > 1)
    if dup:
        raise ValueError(f"{what} {p}: countries listed more than once: {_listing(dup)}")
    records: dict[str, dict[str, float]] = {c: {} for c in codes}
    for col in ("gdp", "population", "year"):
        if col in header:
            for c, v in zip(codes, _numeric_column(rows, col, f"{what} {p}", key), strict=True):
                records[c][col] = v
    sources = sorted({r["source"] for r in rows if r.get("source")})
    return _frame(records, "; ".join(sources) if sources else str(p))


def write_reference(table: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write a statistics table as CSV (atomically), with its source and licence on every row.

    Columns: ``iso3, name, year, gdp, population, source, license``; integral values are written
    without a decimal point, missing ones as empty cells. ``source`` and ``license`` come from
    ``table.attrs`` (set by :func:`fetch_worldbank`).

    Args:
        table: a table as returned by :func:`fetch_worldbank` or :func:`load_reference`.
        path: the CSV to write (parent folders are created).

    Returns:
        The path written.
    """

    def fmt(v: Any) -> str:
        if v is None:
            return ""
        f = float(v)
        if math.isnan(f):
            return ""
        return str(int(f)) if f.is_integer() and abs(f) < 1e17 else repr(f)

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["iso3", "name", "year", "gdp", "population", "source", "license"])
    source = str(table.attrs.get("source", ""))
    license_ = str(table.attrs.get("license", ""))
    for code, row in table.sort_index().iterrows():
        w.writerow(
            [
                code,
                row.get("name", ""),
                fmt(row.get("year")),
                fmt(row.get("gdp")),
                fmt(row.get("population")),
                source,
                license_,
            ]
        )
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(out, buf.getvalue())


# --------------------------------------------------------------------------- World Bank


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


# --------------------------------------------------------------------------- reference distributions


@dataclass(frozen=True)
class CountryWeights:
    """A reference distribution ``p_true(c | n)`` over countries, optionally per entity.

    Attributes:
        name: ``"uniform"``, ``"uniform-all"``, ``"population"`` or the CSV path.
        description: one line for reports.
        default: ISO3 → probability (positive, sums to 1) for entities without their own
            distribution and for the overall analysis; ``None`` if there is none.
        by_entity: entity → its own distribution.
    """

    name: str
    description: str
    default: pd.Series | None
    by_entity: dict[str, pd.Series] = field(default_factory=dict)

    def for_group(self, entity: str | None) -> pd.Series | None:
        """The distribution for an entity (``None``: the overall one); ``None`` if there is none."""
        if entity is not None and entity in self.by_entity:
            return self.by_entity[entity]
        return self.default


def _normalised(weights: Mapping[str, float], what: str) -> pd.Series:
    import pandas as pd

    s = pd.Series(dict(weights), dtype="float64").sort_index()
    s = s[s > 0]
    total = float(s.sum())
    if not len(s) or total <= 0:
        raise ValueError(f"{what}: the weights sum to zero")
    s.index.name = "iso3"
    return s / total


def load_weights(path: str | os.PathLike[str]) -> CountryWeights:
    """Read a reference-distribution CSV: a country column, ``weight``, optional ``entity``.

    Rows with an empty (or no) ``entity`` give the default distribution; rows with an entity give
    that entity's own. Weights are normalised per distribution; countries with weight 0 are
    outside its support (their GR is not defined and they are not counted).

    Raises:
        FileNotFoundError: no such file.
        ValueError: missing columns, unknown countries (listed), duplicates, bad weights.
    """
    p = Path(path)
    what = "reference distribution CSV"
    header, rows = _read_csv_rows(p, what)
    key = _key_column(header, what, p)
    if "weight" not in header:
        raise ValueError(f"{what} {p} needs a weight column (it has: {', '.join(header)})")
    if not rows:
        raise ValueError(f"{what} {p} has no rows")
    codes = resolve_countries(
        [r[key] for r in rows], what=f"{what} {p} column {key!r}", codes_only=key == "iso3"
    )
    weights = _numeric_column(rows, "weight", f"{what} {p}", key)
    missing = [f"{r[key]}" for r, w in zip(rows, weights, strict=True) if math.isnan(w)]
    if missing:
        raise ValueError(f"{what} {p}: rows without a weight: {_listing(missing)}")
    groups: dict[str, dict[str, float]] = {}
    dup: list[str] = []
    for r, code, w in zip(rows, codes, weights, strict=True):
        entity = r.get("entity", "").strip()
        g = groups.setdefault(entity, {})
        if code in g:
            dup.append(f"{entity + ':' if entity else ''}{code}")
        g[code] = w
    if dup:
        raise ValueError(f"{what} {p}: countries listed more than once: {_listing(dup)}")
    default = _normalised(groups[""], f"{what} {p}") if "" in groups else None
    by_entity = {e: _normalised(g, f"{what} {p}, entity {e!r}") for e, g in sorted(groups.items()) if e}
    desc = f"weights from {p.name}" + (f" ({len(by_entity)} entity-specific)" if by_entity else "")
    return CountryWeights(str(p), desc, default, by_entity)


def gr_reference(spec: str | os.PathLike[str]) -> CountryWeights:
    """The reference distribution for GR from a spec.

    Args:
        spec: ``"uniform"`` (every independent country of ``countries.csv`` equally likely),
            ``"uniform-all"`` (every country and territory), ``"population"`` (proportional to
            the GeoNames population in ``countries.csv``; territories included) or the path of a
            CSV read by :func:`load_weights`.

    Raises:
        ValueError: an unknown spec that is not a file either (or a bad CSV).
    """
    text = str(spec).strip()
    table = countries().values()
    if text == "uniform":
        codes = [c.iso3 for c in table if c.independent]
        return CountryWeights(
            "uniform",
            f"uniform over the {len(codes)} independent countries",
            _normalised(dict.fromkeys(codes, 1.0), text),
        )
    if text == "uniform-all":
        codes = [c.iso3 for c in table]
        return CountryWeights(
            "uniform-all",
            f"uniform over all {len(codes)} countries and territories",
            _normalised(dict.fromkeys(codes, 1.0), text),
        )
    if text == "population":
        w = {c.iso3: float(c.population) for c in table if c.population > 0}
        return CountryWeights("population", f"population share ({GEONAMES_SOURCE})", _normalised(w, text))
    if Path(text).is_file():
        return load_weights(text)
    raise ValueError(f"unknown GR reference {text!r}: use uniform, uniform-all, population or a CSV file")
