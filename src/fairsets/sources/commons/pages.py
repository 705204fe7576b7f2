"""One file's API answer read defensively: licence (the fields must agree), author, URLs, size and
hash of an ``imageinfo`` page (:func:`_parse_page`), and the candidate-row fields made from it
(:func:`license_row_fields`).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from fairsets.core.licenses import RESTRICTING_PREFIX, normalise_license, parse_license
from fairsets.core.short_text import clip, strip_html

MAX_TEXT_CHARS = 1000  # an author, credit, licence name or usage terms (Commons' are far shorter)


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
