"""Licence policy, ``ATTRIBUTION.md``, and the licence-text grammar re-exported from
:mod:`fairsets.core.licenses`.

The policy lives in ``licenses/policy.toml`` (see ``licenses/README.md``): it lists the SPDX ids
that may be published, which of them require attribution or share-alike, their deed URLs and
their Hugging Face licence ids. It is found at ``<repo>/licenses/policy.toml`` in a checkout and
at ``fairsets/_licenses/policy.toml`` (package data) in an installed wheel.

API:
    * ``normalise_license(text) -> str | None`` — SPDX id (``"CC-BY-SA-4.0"``, ``"CC0-1.0"``,
      ``"PDM-1.0"`` for public domain, ported ``"CC-BY-SA-3.0-DE"``, also NC/ND ids so they can
      be rejected with a reason) or ``None`` unless the WHOLE text is understood (a known id,
      name or deed URL with only harmless decoration; see the grammar below).
    * ``parse_license(text) -> tuple[str | None, str]`` — ``(spdx, "")`` or ``(None, why)``.
    * ``load_policy(path=None) -> dict`` — the parsed TOML (cached for the default path).
    * ``license_info(spdx, policy=None) -> dict | None`` — ``{"id", "name", "url", "allowed",
      "attribution", "share_alike", "hf"}``; ported ids resolve to their base entry with the
      ported URL.
    * ``license_decision(text, policy=None) -> tuple[str | None, bool, str]`` —
      ``(spdx, allowed, reason)``; ``reason`` is ``""`` when allowed, and names the original
      text (and, for unknown text, what was not understood) otherwise.
    * ``requires_attribution(spdx) -> bool``
    * ``strip_html(text) -> str`` — author fields from Commons often hold HTML.
    * ``safe_link_url(url) -> str | None`` — the URL to use as a link target (http/https only,
      no credentials, percent-encoded), or ``None``: then render it as text, never as a link.
      Used for every URL from data rendered as a link (ATTRIBUTION.md, the dataset card).
    * ``license_counts(rows) -> (source_images, published_files)`` — per-licence Counters.
    * ``render_attribution(rows, policy=None) -> str`` and
      ``write_attribution(path, rows, policy=None) -> dict`` (``{"path","sha256","bytes",
      "lines"}``); ``rows`` are metadata rows (``key``, ``license``, ``author``,
      ``source_url``, optional ``title``/``file``, ``augmented_from``). Credit lines are sorted
      by key; augmented rows inherit missing licence/author/source from their source row.
"""

from __future__ import annotations

import functools
import os
import re
import unicodedata
import urllib.parse
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10 needs the tomli backport
    import tomli as tomllib  # type: ignore[no-redef]

from fairsets.core.atomic import atomic_write_text, sha256_file
from fairsets.core.datafiles import find_data_file
from fairsets.core.licenses import NOTHING_NAMED, normalise_license, parse_license
from fairsets.core.short_text import strip_html

__all__ = [
    "find_data_file",
    "license_counts",
    "license_decision",
    "license_info",
    "load_policy",
    "normalise_license",
    "parse_license",
    "redact_url",
    "render_attribution",
    "requires_attribution",
    "safe_link_url",
    "strip_html",
    "write_attribution",
]

# --------------------------------------------------------------------------- normalisation
# Licence texts are recognised whole by the grammar in core/licenses.py.

# --------------------------------------------------------------------------- policy


@functools.lru_cache(maxsize=4)
def _load(path: str) -> dict[str, Any]:
    with open(path, "rb") as f:
        return tomllib.load(f)


def load_policy(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Load the licence policy (default ``licenses/policy.toml``); results are cached per path."""
    p = Path(path) if path is not None else find_data_file("licenses", "policy.toml")
    return _load(str(p.resolve()))


_PORTED = re.compile(r"^(CC-BY(?:-SA|-NC|-ND|-NC-SA|-NC-ND)?-\d\.\d)-([A-Z]{2,3})$")


def license_info(spdx: str | None, policy: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """Return the policy entry for ``spdx`` (plus ``"id"``), or None if the policy does not list it."""
    if not spdx:
        return None
    policy = policy if policy is not None else load_policy()
    entries = policy.get("licenses", {})
    if spdx in entries:
        return {"id": spdx, "ported": False, **entries[spdx]}
    m = _PORTED.match(spdx)
    if m and m.group(1) in entries and entries[m.group(1)].get("ported"):
        base = entries[m.group(1)]
        port = m.group(2).lower()
        return {
            **base,
            "id": spdx,
            "name": f"{base['name']} {m.group(2)}",
            "url": base["url"].rstrip("/") + f"/{port}/",
            "hf": "",
        }
    return None


def license_decision(
    text: str | None, policy: Mapping[str, Any] | None = None
) -> tuple[str | None, bool, str]:
    """Normalise ``text`` and decide whether it may be published.

    Returns:
        ``(spdx_or_None, allowed, reason)``; ``reason`` is empty when allowed, otherwise the
        text to record in the rejects table.
    """
    policy = policy if policy is not None else load_policy()
    spdx, why = parse_license(text)
    reject = policy.get("reject", {})
    if spdx is None:
        unknown = reject.get("unknown_reason", "unknown licence")
        detail = "" if why in _NOTHING_NAMED else f" ({why})"
        return None, False, f"{unknown}: {_quote_license(text)}{detail}"
    given = "" if text == spdx else f": {_quote_license(text)}"  # the original text, when it differs
    for rule in reject.get("prefixes", []):
        if spdx.startswith(rule["prefix"]):
            return spdx, False, f"{rule['reason']} ({spdx}){given}"
    info = license_info(spdx, policy)
    if info is None or not info.get("allowed", False):
        return spdx, False, f"licence {spdx} is not allowed by the policy{given}"
    return spdx, True, ""


_NOTHING_NAMED = NOTHING_NAMED
_QUOTE_CHARS = 200


def _quote_license(text: Any) -> str:
    """The original licence text for a reject reason (``repr``, long texts shortened)."""
    if text is None:
        return "None"
    s = str(text)
    return repr(s if len(s) <= _QUOTE_CHARS else s[:_QUOTE_CHARS] + "…") + (
        f" ({len(s)} characters)" if len(s) > _QUOTE_CHARS else ""
    )


def requires_attribution(spdx: str | None, policy: Mapping[str, Any] | None = None) -> bool:
    """True if images under ``spdx`` need a credit line (unknown ids: True, to be safe)."""
    info = license_info(spdx, policy)
    return True if info is None else bool(info.get("attribution", True))


# --------------------------------------------------------------------------- ATTRIBUTION.md


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#~!])")
_MAX_URL = 2048
_URL_HOST = re.compile(r"[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?", re.ASCII)
_URL_KEEP = "-._~:/?#@!$&+,;=%"  # all else is percent-encoded: ( ) < > [ ] | ' " ` * backslash, non-ASCII


def _plain(text: Any) -> str:
    """``text`` on one line: control and format characters (bidi overrides, zero-width) dropped."""
    s = "".join(" " if c in "\t\n\r\f\v" else c for c in str(text))
    s = "".join(c for c in s if unicodedata.category(c) not in ("Cc", "Cf"))
    return " ".join(s.split())


def _md(text: Any) -> str:
    """Markdown-escape text that came from data (author names, titles) so it stays text."""
    return _MD_SPECIAL.sub(r"\\\1", _plain(text))


def _code(text: Any) -> str:
    """``text`` as an inline code span, whatever backticks it holds (never a link or markup)."""
    s = _plain(text)
    longest = max((len(run) for run in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def redact_url(url: Any) -> Any:
    """``url`` without the credentials of its authority (``https://user:pass@host/x`` →
    ``https://host/x``); anything else unchanged. Published URLs go through this: a password in a
    listing's URL is a secret, not provenance.
    """
    if not isinstance(url, str) or "@" not in url:
        return url
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def safe_link_url(url: Any) -> str | None:
    """``url`` made safe to render as a Markdown link target, or ``None`` if it must not be a link.

    A link is allowed only for an ``http``/``https`` URL with an ASCII host name, no
    credentials (``user:pass@``), no whitespace, control or format characters, at most
    2048 characters. The result is percent-encoded so it cannot break out of ``[text](url)``,
    ``<url>`` or a table cell. Anything else -- ``javascript:``, ``data:``, ``file:``,
    ``vbscript:``, relative or scheme-less URLs -- gives ``None``: show it as text instead.
    """
    if not isinstance(url, str) or not url or len(url) > _MAX_URL:
        return None
    if any(c.isspace() or unicodedata.category(c)[0] in "CZ" for c in url):
        return None
    if not re.match(r"https?://", url, re.IGNORECASE):
        return None
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018 -- raises ValueError on a bad port
    except ValueError:
        return None
    if "@" in parts.netloc or not _URL_HOST.fullmatch(host):
        return None
    return urllib.parse.quote(url, safe=_URL_KEEP)


def _link(text: str, url: Any) -> str:
    """``[text](url)`` when the URL is safe, else the escaped text alone."""
    safe = safe_link_url(url)
    return f"[{_md(text)}]({safe})" if safe else _md(text)


def _title(row: Mapping[str, Any]) -> str:
    for field in ("title", "file"):
        if row.get(field):
            return strip_html(str(row[field]))
    url = row.get("source_url") or ""
    if url:
        name = urllib.parse.unquote(urllib.parse.urlsplit(str(url)).path.rsplit("/", 1)[-1])
        if name:
            return name
    return ""


def _resolve(rows: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Fill licence/author/source of augmented rows from their source row when missing."""
    by_key = {r["key"]: r for r in rows}
    out = []
    for r in rows:
        row = dict(r)
        src = by_key.get(row.get("augmented_from") or "")
        if src is not None:
            for field in ("license", "author", "source_url", "title", "file"):
                if not row.get(field) and src.get(field):
                    row[field] = src[field]
        out.append(row)
    return out


def license_counts(rows: Iterable[Mapping[str, Any]]) -> tuple[Counter[str], Counter[str]]:
    """Count the published metadata ``rows`` (all variants together) per licence, two ways.

    Returns ``(source_images, published_files)``: distinct real images (rows without
    ``augmented_from``), and distinct published files (every ``key`` once, augmented copies
    included, with their source image's licence). The card and ATTRIBUTION.md both use these.
    """
    unique: dict[str, Mapping[str, Any]] = {}
    for r in rows:
        unique.setdefault(str(r["key"]), r)
    sources: Counter[str] = Counter()
    files: Counter[str] = Counter()
    for row in _resolve([unique[k] for k in sorted(unique)]):
        spdx = normalise_license(row.get("license")) or (row.get("license") or "unknown")
        files[spdx] += 1
        if not row.get("augmented_from"):
            sources[spdx] += 1
    return sources, files


def render_attribution(rows: Iterable[Mapping[str, Any]], policy: Mapping[str, Any] | None = None) -> str:
    """Render ``ATTRIBUTION.md`` for the published metadata ``rows`` (all variants together).

    A row may appear in several variants (same ``key``); it is credited once.
    """
    policy = policy if policy is not None else load_policy()
    rows = list(rows)
    unique: dict[str, Mapping[str, Any]] = {}
    for r in rows:
        unique.setdefault(str(r["key"]), r)
    resolved = _resolve([unique[k] for k in sorted(unique)])
    sources, counts = license_counts(rows)
    lines: list[str] = []
    for row in resolved:
        spdx = normalise_license(row.get("license")) or (row.get("license") or "unknown")
        if not requires_attribution(spdx, policy):
            continue
        info = license_info(spdx, policy)
        lic = _link(info["name"], info["url"]) if info else _md(str(spdx))
        author = strip_html(row.get("author")) or "unknown author"
        title = _title(row)
        what = f"“{_md(title)}”" if title else "image"
        line = f"- {_code(row['key'])}"
        if row.get("augmented_from"):
            line += f" (augmented from {_code(row['augmented_from'])})"
        line += f": {what} by {_md(author)}, licensed under {lic}"
        if row.get("source_url"):
            safe = safe_link_url(str(row["source_url"]))
            shown = f"<{safe}>" if safe else f"{_code(row['source_url'])} (not a web link)"
            line += f", source: {shown}"
        lines.append(line)
    out = [
        "# Attribution",
        "",
        "Credits for the published images whose licences require attribution (CC BY and CC BY-SA).",
        "Images were cropped and resized (and, for augmented images, transformed) from the",
        "originals linked below; augmented images credit the real image they were derived from.",
        "Images under CC0 or in the public domain are counted below but need no credit line.",
        "",
        "## Licences",
        "",
        "Source images are the distinct real photographs published; published files also count",
        "their augmented copies, each file once across all configs (the dataset card counts the same).",
        "",
        "| Licence | Source images | Published files (all configs, incl. augmented copies) "
        "| Attribution required |",
        "|---|---:|---:|---|",
    ]
    for spdx in sorted(counts):
        info = license_info(spdx, policy)
        name = _link(info["name"], info["url"]) if info else _md(spdx)
        required = "yes" if requires_attribution(spdx, policy) else "no"
        out.append(f"| {name} | {sources[spdx]} | {counts[spdx]} | {required} |")
    out += ["", f"## Credits ({len(lines)} published files)", ""]
    out += lines or ["No published image requires attribution."]
    return "\n".join(out) + "\n"


def write_attribution(
    path: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]], policy: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Write ``ATTRIBUTION.md`` atomically; returns ``{"path", "sha256", "bytes", "lines"}``."""
    text = render_attribution(rows, policy)
    target = atomic_write_text(path, text)
    n = sum(1 for line in text.splitlines() if line.startswith("- `"))
    return {"path": str(target), "sha256": sha256_file(target), "bytes": target.stat().st_size, "lines": n}
