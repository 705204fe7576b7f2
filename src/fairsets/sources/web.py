"""Web sources for recipes: ``wikidata`` (people + Commons images) and ``serpapi`` (image search).

Both list URL candidates on the driver; the build downloads them (``fairsets.pipeline.download``)
before the per-sample steps, and :meth:`Source.read` returns the downloaded bytes.

``wikidata`` (IndicFairFace §3.1, appendix §7): people per state × gender from a SPARQL endpoint
(:mod:`fairsets.sources.wikidata`), each assigned to one state by the documented priority, then
their Commons files' licence, author and a thumbnail URL at ``width`` from the MediaWiki API
(:mod:`fairsets.sources.commons`). One candidate per (person, image); ``identity`` is the person's
QID, so a person's images never straddle the train/test split.

``serpapi`` (a supplement): Google Images through SerpAPI with the paper's per-cell queries
(:mod:`fairsets.sources.serpapi`), asked only for cells below quota. Its candidates await manual
review (``review = "pending"``): see :mod:`fairsets.pipeline.review`.

Raw answers of every service are cached under ``cache_dir`` (default: the build's
``.fairsets/cache``), so a re-run asks nothing again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from fairsets.core.data import make_key
from fairsets.core.registry import SOURCES

from .base import Source, SourceError, SourceParams

__all__ = ["SerpApiSource", "UrlsSource", "WikidataSource"]


def _cache_dir(source: Source, value: str | None) -> Path | None:
    if value:
        return source.resolve_path(value)
    return source.workdir / "cache" if source.workdir is not None else None


class _CellParams(SourceParams):
    """What the web sources share: the answer cache and which group attributes are state and gender."""

    cache_dir: str | None = None
    state_attr: str = "state"
    gender_attr: str = "gender"


class WikidataParams(_CellParams):
    endpoint: str = "https://query.wikidata.org/sparql"
    commons_api: str = "https://commons.wikimedia.org/w/api.php"
    states_file: str | None = None
    """CSV of the geographic units (qid,name,kind,aliases); default: builders/india_states.csv."""
    states: list[str] = Field(default_factory=list)
    """Subset of the units, by QID or name (default: all of them)."""
    genders: list[str] = Field(default_factory=lambda: ["male", "female"])
    width: int = Field(default=1024, ge=64, description="width of the Commons thumbnails fetched")
    page_size: int = Field(default=5000, ge=1)
    contact: str | None = None
    """Contact for the User-Agent (default: $FAIRSETS_CONTACT)."""


def _service_failed(service: str, url: str, exc: BaseException, cache: Path | None) -> str:
    """One line for a web service that could not answer: what, why, and what to do."""
    from ..fetch.retry import unreachable

    reason = " ".join(str(getattr(exc, "reason", None) or exc).split()) or type(exc).__name__
    kept = f"; answers already received are cached in {cache}, so a re-run resumes" if cache else ""
    if unreachable(exc):
        fix = "check the network connection (and any proxy), or the address in the recipe"
    else:
        fix = "try again later, or check the address in the recipe"
    return f"source wikidata: {service} at {url} failed ({reason}); {fix}{kept}"


@SOURCES.register("wikidata")
class WikidataSource(Source):
    Params = WikidataParams
    downloads = True

    def _states(self) -> list[Any]:
        from .wikidata import load_states

        path = self.resolve_path(self.params.states_file) if self.params.states_file else None
        try:
            states = load_states(path)
        except (OSError, ValueError) as exc:
            raise SourceError(f"source wikidata: {exc}") from None
        if not self.params.states:
            return states
        wanted = set(self.params.states)
        chosen = [s for s in states if s.qid in wanted or s.name in wanted]
        unknown = wanted - {s.qid for s in chosen} - {s.name for s in chosen}
        if unknown:
            raise SourceError(f"source wikidata: unknown states {', '.join(sorted(unknown))}")
        return chosen

    def scan(self) -> list[dict[str, Any]]:
        from ..fetch.retry import HttpStatusError
        from .commons import CommonsError, file_info, license_row_fields
        from .wikidata import SparqlResponseError, assign_states, fetch_people

        p = self.params
        for attr in (p.state_attr, p.gender_attr):
            if attr not in self.groups:
                raise SourceError(f"source wikidata: the recipe's groups must include {attr!r}")
        cache = _cache_dir(self, p.cache_dir)
        states = self._states()
        try:
            people = fetch_people(
                states,
                list(p.genders),
                endpoint=p.endpoint,
                cache_dir=cache,
                page_size=p.page_size,
                contact=p.contact,
            )
        except (OSError, HttpStatusError, SparqlResponseError) as exc:
            raise SourceError(_service_failed("the Wikidata query service", p.endpoint, exc, cache)) from None
        assigned = assign_states(people)
        try:
            infos = file_info(
                sorted({r["file"] for r in assigned}),
                api_url=p.commons_api,
                width=p.width,
                cache_dir=cache,
                contact=p.contact,
            )
        except (OSError, HttpStatusError, CommonsError) as exc:
            raise SourceError(_service_failed("the Commons API", p.commons_api, exc, cache)) from None
        rows = []
        for r in assigned:
            info = infos[r["file"]]
            fields = license_row_fields(info)
            row: dict[str, Any] = {
                "key": make_key("wikidata", f"{r['person']}/{r['file']}"),
                "source": "wikidata",
                p.state_attr: r["state_name"],
                p.gender_attr: r["gender"],
                "identity": r["person"],
                "person": r["person"],
                "label": r["label"],
                "state_qid": r["state"],
                "association": r["association"],
                "associations": r.get("associations"),
                "file": r["file"],
                **fields,
                "license_url": info.get("license_url") or None,
            }
            if info.get("error"):
                row.update(_rejected=f"Commons: {info['error']}", _rejected_step="commons")
            rows.append(row)
        return rows


class SerpApiParams(_CellParams):
    templates: dict[str, str] = Field(
        default_factory=lambda: {"male": "{state} man face", "female": "{state} woman face"}
    )
    per_query: int = Field(default=100, ge=1, le=100)
    licenses: str | None = "cl"
    """Google Images usage-rights filter (``cl``: Creative Commons licences)."""
    backend: str | None = None
    """SerpAPI base URL (default https://serpapi.com)."""
    api_key_env: str = "SERPAPI_API_KEY"


@SOURCES.register("serpapi")
class SerpApiSource(Source):
    Params = SerpApiParams
    downloads = True

    def scan(self) -> list[dict[str, Any]]:
        raise SourceError(
            "source serpapi searches only for cells below quota: use it as a [[supplement]] of a recipe"
        )

    def scan_for(self, need: dict[tuple[str, ...], int]) -> list[dict[str, Any]]:
        from .serpapi import SerpApiError, api_key_from_env, supplement_rows

        p = self.params
        try:
            key = api_key_from_env(p.api_key_env)
        except SerpApiError as exc:
            raise SourceError(f"source serpapi: {exc}") from None
        cells = [dict(zip(self.groups, cell, strict=True)) for cell in sorted(need) if need[cell] > 0]
        try:
            return supplement_rows(
                cells,
                need,
                templates=p.templates,
                state_attr=p.state_attr,
                gender_attr=p.gender_attr,
                per_query=p.per_query,
                api_key=key,
                backend=p.backend,
                licenses=p.licenses,
                cache_dir=_cache_dir(self, p.cache_dir),
            )
        except SerpApiError as exc:
            raise SourceError(f"source serpapi: {exc}") from None


class UrlsParams(SourceParams):
    path: str
    """CSV or Parquet listing (relative to the recipe): a URL column, the group attributes, license."""
    url_column: str = "url"
    rename: dict[str, str] = Field(default_factory=dict)
    defaults: dict[str, str] = Field(default_factory=dict)


@SOURCES.register("urls")
class UrlsSource(Source):
    """A listing of image URLs with metadata (img2dataset's input shape), downloaded by the build.

    Required columns: the URL column, every group attribute and ``license``; optional:
    ``identity`` (person id; default: each URL its own identity), ``author``, ``source_url``,
    ``title``; other columns are kept as metadata. ``rename``/``defaults`` as for ``local``.
    """

    Params = UrlsParams
    downloads = True

    def scan(self) -> list[dict[str, Any]]:
        from .listing import check_columns, keep_other_columns, listing_value, read_listing

        p = self.params
        listing = self.resolve_path(p.path)
        if not listing.exists():  # read_listing refuses what is not a regular file (a FIFO would hang)
            raise SourceError(f"source urls: no such listing: {listing}")
        raw = read_listing(listing)
        theirs = dict(p.rename)
        check_columns(
            raw, [p.url_column, *self.groups, "license"], theirs, p.defaults, f"source urls {listing}"
        )
        rows, seen = [], set()
        for i, r in enumerate(raw):

            def get(name: str, r: dict[str, Any] = r) -> Any:
                return listing_value(r, name, theirs, p.defaults)

            url = get(p.url_column)
            if not url:
                raise SourceError(f"source urls {listing}: row {i + 1} has no {p.url_column!r}")
            key = make_key("urls", str(url))
            if key in seen:
                raise SourceError(f"source urls {listing}: URL listed twice: row {i + 1}")
            seen.add(key)
            row: dict[str, Any] = {"key": key, "source": "urls", "url": str(url)}
            for g in self.groups:
                if get(g) is None:
                    raise SourceError(f"source urls {listing}: row {i + 1} has no value for {g!r}")
                row[g] = str(get(g))
            row["license"] = get("license")
            row["identity"] = str(get("identity") or key)
            for name in ("author", "source_url", "title"):
                row[name] = get(name)
            keep_other_columns(row, r, theirs, skip=p.url_column)
            rows.append(row)
        return rows
