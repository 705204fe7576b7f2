"""Wikimedia Commons: licence, author and image URLs of files, through the MediaWiki API.

For each file the MediaWiki API (``action=query&prop=imageinfo``) gives the original URL, a
thumbnail URL at a requested width, the file page (``descriptionurl``), size, MIME type, SHA-1
and the *extmetadata* that Commons derives from the file page's licence templates:
``LicenseShortName`` (``"CC BY-SA 4.0"``), ``LicenseUrl``, ``Artist`` (HTML), ``Credit``
(HTML), ``AttributionRequired`` (``"true"``/``"false"``) and ``UsageTerms``.

:func:`file_info` asks for up to 50 titles per request (the API returns at most 50 scaled
image URLs per request), follows ``continue``, maps ``normalized`` and ``redirects`` titles back
to the caller's titles, reports ``missing``/``invalid`` files as per-file errors, retries 429/5xx
answers and ``maxlag``/``ratelimited`` API errors (honouring ``Retry-After``) and caches the raw
answers on disk. Every request carries the project User-Agent (Wikimedia's User-Agent policy).

Licences are normalised to SPDX ids with :func:`fairsets.publish.attribution.normalise_license`
(each licence field recognised whole; the fields must agree and none may name a restriction);
the ``license`` step then applies ``licenses/policy.toml`` (CC0, public domain, CC BY, CC BY-SA
allowed; NC, ND and unknown rejected with a reason). :func:`license_row_fields` turns one
answer into the metadata fields a candidate row needs (``license``, ``author``, ``source_url``,
``url``, ``title``, ``attribution_required``).

API:
    * ``COMMONS_API`` — the Commons API endpoint.
    * ``file_title(url_or_title) -> str`` — ``"File:Foo bar.jpg"`` from a title or a Commons URL.
    * ``file_info(titles, *, api_url, width, cache_dir, policy, contact, batch_size, session,
      sleep, progress) -> dict[str, dict]`` — one dict per input title (see :func:`file_info`).
    * ``license_row_fields(info) -> dict`` — the candidate-row fields of one answer.
    * ``commons_image_url(title, width=None) -> str`` — a ``Special:FilePath`` URL, the fallback
      when no API answer exists.

Requires ``requests`` (imported when :func:`file_info` runs without a ``session``).
"""

from __future__ import annotations

import json
import logging
import re
import time
import urllib.parse
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from fairsets.core.licenses import RESTRICTING_PREFIX, normalise_license, parse_license
from fairsets.core.short_text import clip, strip_html

from ..fetch.answers import MAX_ANSWER_BYTES, BadAnswer, cached_json, loads_json, read_capped
from ..fetch.cache import DiskCache
from ..fetch.retry import HttpStatusError, RetryPolicy, call_with_deadline, call_with_retry, user_agent

__all__ = [
    "COMMONS_API",
    "EXTMETADATA_FIELDS",
    "CommonsError",
    "commons_image_url",
    "file_info",
    "file_title",
    "license_row_fields",
]

log = logging.getLogger(__name__)

COMMONS_API = "https://commons.wikimedia.org/w/api.php"
COMMONS_FILEPATH = "https://commons.wikimedia.org/wiki/Special:FilePath/"
MAX_BATCH = 50  # titles per request: the API scales at most 50 images per request (iiurlwidth)
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
MAX_TEXT_CHARS = 1000  # an author, credit, licence name or usage terms (Commons' are far shorter)
MAXLAG = 5  # seconds; Wikimedia's recommended maxlag for non-interactive clients
_RETRYABLE_API_ERRORS = {"maxlag": 503, "ratelimited": 429}

# Characters MediaWiki never allows in a title.
_ILLEGAL = re.compile(r"[#<>\[\]|{}\x00-\x1f\x7f]")
_OTHER_NAMESPACES = {
    "category",
    "user",
    "user talk",
    "template",
    "special",
    "commons",
    "help",
    "creator",
    "institution",
    "talk",
    "file talk",
    "media",
}
_FILE_PREFIX = re.compile(r"^(?:file|image)\s*:\s*", re.IGNORECASE)


class CommonsError(RuntimeError):
    """The MediaWiki API answered with something unusable (a non-retryable error, not JSON)."""


# --------------------------------------------------------------------------- titles


def _canonical(name: str, original: str) -> str:
    name = urllib.parse.unquote(name).replace("_", " ")
    name = " ".join(name.split())
    if not name:
        raise ValueError(f"not a Commons file title or URL: {original!r} (empty file name)")
    if _ILLEGAL.search(name):
        raise ValueError(f"not a Commons file title or URL: {original!r} (illegal character in title)")
    head, sep, _ = name.partition(":")
    if sep and head.strip().lower() in _OTHER_NAMESPACES:
        raise ValueError(f"not a Commons file title or URL: {original!r} (namespace {head!r})")
    first = name[0].upper()
    if len(first) == 1:  # MediaWiki upper-cases the first letter ("ß".upper() is "SS": keep it)
        name = first + name[1:]
    return f"File:{name}"


def file_title(url_or_title: str) -> str:
    """Return the canonical file title (``"File:Foo bar.jpg"``) of a Commons file.

    Accepts a title (``"File:Foo_bar.jpg"``, ``"Image:foo bar.jpg"``, ``"Foo%20bar.jpg"``), a
    ``…/wiki/Special:FilePath/Foo%20bar.jpg`` URL (what Wikidata's P18 gives), a
    ``…/wiki/File:Foo_bar.jpg`` file-page URL, an ``index.php?title=File:…`` URL or an
    ``upload.wikimedia.org`` original or thumbnail URL. Underscores become spaces, the name is
    URL-decoded and its first letter upper-cased, as MediaWiki does.

    Raises:
        ValueError: for an empty value, a URL that does not name a Commons file, a title in
            another namespace or one with characters MediaWiki forbids.
    """
    text = (url_or_title or "").strip()
    if not text:
        raise ValueError("not a Commons file title or URL: empty value")
    if re.match(r"^(?:https?:)?//", text, re.IGNORECASE):
        parts = urllib.parse.urlsplit(text if not text.startswith("//") else "https:" + text)
        path = parts.path
        m = re.search(r"/wiki/Special:FilePath/(.+)$", path, re.IGNORECASE)
        if m:
            return _canonical(m.group(1), text)
        m = re.search(r"/wiki/(?:File|Image):(.+)$", path, re.IGNORECASE)
        if m:
            return _canonical(m.group(1), text)
        title = urllib.parse.parse_qs(parts.query).get("title", [""])[0]
        if path.endswith("/index.php") and _FILE_PREFIX.match(title):
            return _canonical(_FILE_PREFIX.sub("", title), text)
        if parts.hostname == "upload.wikimedia.org":
            segs = [s for s in path.split("/") if s]
            # /wikipedia/commons/a/ab/Name.jpg  or  /wikipedia/commons/thumb/a/ab/Name.jpg/320px-Name.jpg
            if "thumb" in segs:
                i = segs.index("thumb")
                if len(segs) > i + 3:
                    return _canonical(segs[i + 3], text)
            elif len(segs) >= 5:
                return _canonical(segs[4], text)
        raise ValueError(f"not a Commons file title or URL: {text!r}")
    return _canonical(_FILE_PREFIX.sub("", text), text)


def commons_image_url(title: str, width: int | None = None) -> str:
    """``https://commons.wikimedia.org/wiki/Special:FilePath/<file>?width=W`` for a title or URL.

    Commons redirects this to the original file, or to a thumbnail ``width`` pixels wide. It is
    the fallback when no API answer (hence no ``thumb_url``) exists.
    """
    name = file_title(title)[len("File:") :].replace(" ", "_")
    url = COMMONS_FILEPATH + urllib.parse.quote(name, safe="")
    if width:
        url += f"?width={int(width)}"
    return url


# --------------------------------------------------------------------------- API


def _ext_value(ext: dict[str, Any], name: str) -> str:
    entry = ext.get(name)
    if not isinstance(entry, dict):
        return ""
    value = entry.get("value")
    if isinstance(value, dict):  # iiextmetadatamultilang: {"en": ..., "_default": ...}
        value = value.get("en") or value.get("_default") or next(iter(value.values()), "")
    if value is None:
        return ""
    return str(value).strip()


def _bool(text: str) -> bool | None:
    t = text.strip().lower()
    if t in ("true", "1", "yes"):
        return True
    if t in ("false", "0", "no"):
        return False
    return None


def _str(value: Any) -> str:
    """A string field of an answer: a hostile or broken API may put anything there."""
    return value if isinstance(value, str) else ""


def _text(html_value: str) -> str:
    """The visible text of an extmetadata field, at most :data:`MAX_TEXT_CHARS` characters.

    A longer text is cut and ends with ``…``, so a cut licence name is never read as a licence.
    """
    return clip(strip_html(html_value), MAX_TEXT_CHARS)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _abs_url(url: Any) -> str:
    """An absolute http(s) URL from the answer, else ``""`` (never ``javascript:``, ``data:``, relative)."""
    url = _str(url).strip()
    url = "https:" + url if url.startswith("//") else url
    scheme = urllib.parse.urlsplit(url).scheme.lower() if url else ""
    return url if scheme in ("http", "https") and "\n" not in url else ""


def _empty(title: str, error: str) -> dict[str, Any]:
    return {
        "title": title,
        "license_short": "",
        "license": None,
        "license_url": "",
        "author": "",
        "credit": "",
        "attribution_required": None,
        "usage_terms": "",
        "url": "",
        "thumb_url": "",
        "source_url": "",
        "width": None,
        "height": None,
        "mime": "",
        "sha1": "",
        "error": error,
    }


def _agreed_license(*texts: str) -> str | None:
    """The SPDX id the licence fields agree on (``LicenseShortName``, ``License``, ``LicenseUrl``).

    Each field is recognised whole; empty and unrecognised fields are skipped (Commons' ``License``
    holds template names such as ``cc-by-sa-3.0-migrated``), but a field that names a restriction,
    or two fields naming different licences, give ``None``: never the first field that parses.
    """
    ids: set[str] = set()
    for text in texts:
        if not text:
            continue
        spdx, why = parse_license(text)
        if spdx is None and why.startswith(RESTRICTING_PREFIX):
            return None
        if spdx is not None:
            ids.add(spdx)
    return ids.pop() if len(ids) == 1 else None


def _parse_page(page: dict[str, Any], width: int | None) -> dict[str, Any]:
    title = str(page.get("title", ""))
    if page.get("invalid"):
        return _empty(title, f"invalid title: {page.get('invalidreason') or 'rejected by the API'}")
    infos = page.get("imageinfo") or []
    if page.get("missing") and not infos:
        return _empty(title, "missing file")
    if not infos:
        return _empty(title, "no file information (file hidden or not a file page)")
    ii = infos[0] if isinstance(infos, list) else None
    if not isinstance(ii, dict):
        return _empty(title, "no usable file information in the API answer")
    if ii.get("filehidden"):
        return _empty(title, "file hidden (revision deleted)")
    ext = ii.get("extmetadata")
    if not isinstance(ext, dict):
        ext = {}
    short = _text(_ext_value(ext, "LicenseShortName"))
    license_url = _abs_url(strip_html(_ext_value(ext, "LicenseUrl")))
    spdx = _agreed_license(short, _ext_value(ext, "License"), license_url)
    credit = _text(_ext_value(ext, "Credit"))
    author = _text(_ext_value(ext, "Artist")) or credit
    url = _abs_url(ii.get("url"))
    thumb_url = _abs_url(ii.get("thumburl")) if width else ""
    if not url and not thumb_url:
        return _empty(title, "no http(s) file URL in the API answer")
    return {
        "title": title,
        "license_short": short,
        "license": spdx,
        "license_url": license_url,
        "author": author,
        "credit": credit,
        "attribution_required": _bool(_ext_value(ext, "AttributionRequired")),
        "usage_terms": _text(_ext_value(ext, "UsageTerms")),
        "url": url,
        "thumb_url": thumb_url,
        "source_url": _abs_url(ii.get("descriptionurl", "")),
        "width": _int(ii.get("width")),
        "height": _int(ii.get("height")),
        "mime": _str(ii.get("mime")),
        "sha1": _str(ii.get("sha1")),
        "error": "",
    }


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


def license_row_fields(info: dict[str, Any]) -> dict[str, Any]:
    """The candidate-row fields of one :func:`file_info` answer.

    ``license`` is the SPDX id when known, else the raw ``LicenseShortName`` (or ``""``), so
    the ``license`` step rejects unknown licences with a reason naming them (a short name that
    would pass on its own, while the other licence fields disagree, is marked so that it does
    not); ``author`` is plain
    text; ``source_url`` is the file page (credited in ``ATTRIBUTION.md``); ``url`` is the
    thumbnail URL when there is one, else the original; ``title`` is the file name without the
    ``File:`` namespace; ``attribution_required`` is the flag Commons states (bool or ``None``).
    """
    title = str(info.get("title") or "")
    if title.startswith("File:"):
        title = title[len("File:") :]
    text = info.get("license") or info.get("license_short") or ""
    if not info.get("license") and normalise_license(text):  # the short name alone would pass
        text = f"{text} (the file's licence fields disagree or restrict it)"
    return {
        "license": text,
        "author": info.get("author") or "",
        "source_url": info.get("source_url") or "",
        "url": info.get("thumb_url") or info.get("url") or "",
        "title": title,
        "attribution_required": info.get("attribution_required"),
    }
