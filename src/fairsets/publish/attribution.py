"""Licence policy, licence-name normalisation and ``ATTRIBUTION.md``.

The policy lives in ``licenses/policy.toml`` (see ``licenses/README.md``): it lists the SPDX ids
that may be published, which of them require attribution or share-alike, their deed URLs and
their Hugging Face licence ids. It is found at ``<repo>/licenses/policy.toml`` in a checkout and
at ``fairsets/_licenses/policy.toml`` (package data) in an installed wheel.

API:
    * ``normalise_license(text) -> str | None`` — SPDX id (``"CC-BY-SA-4.0"``, ``"CC0-1.0"``,
      ``"PDM-1.0"`` for public domain, ported ``"CC-BY-SA-3.0-DE"``, also NC/ND ids so they can
      be rejected with a reason) or ``None`` when unrecognised.
    * ``load_policy(path=None) -> dict`` — the parsed TOML (cached for the default path).
    * ``license_info(spdx, policy=None) -> dict | None`` — ``{"id", "name", "url", "allowed",
      "attribution", "share_alike", "hf"}``; ported ids resolve to their base entry with the
      ported URL.
    * ``license_decision(text, policy=None) -> tuple[str | None, bool, str]`` —
      ``(spdx, allowed, reason)``; ``reason`` is ``""`` when allowed.
    * ``requires_attribution(spdx) -> bool``
    * ``strip_html(text) -> str`` — author fields from Commons often hold HTML.
    * ``render_attribution(rows, policy=None) -> str`` and
      ``write_attribution(path, rows, policy=None) -> dict`` (``{"path","sha256","bytes",
      "lines"}``); ``rows`` are metadata rows (``key``, ``license``, ``author``,
      ``source_url``, optional ``title``/``file``, ``augmented_from``). Credit lines are sorted
      by key; augmented rows inherit missing licence/author/source from their source row.
"""

from __future__ import annotations

import functools
import html
import importlib.resources
import os
import re
import urllib.parse
from collections import Counter
from collections.abc import Iterable, Mapping
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10 needs the tomli backport
    import tomli as tomllib  # type: ignore[no-redef]

from fairsets.publish.atomic import atomic_write_text, sha256_file

__all__ = [
    "find_data_file",
    "license_decision",
    "license_info",
    "load_policy",
    "normalise_license",
    "render_attribution",
    "requires_attribution",
    "strip_html",
    "write_attribution",
]

_REPO = Path(__file__).resolve().parents[3]


def find_data_file(kind: str, name: str) -> Path:
    """Locate a data file shipped with fairsets (``kind`` is ``"licenses"`` or ``"cards"``).

    Looks first in the repository checkout (``<repo>/<kind>/<name>``), then in the installed
    package (``fairsets/_<kind>/<name>``, wired as package data in pyproject).

    Raises:
        FileNotFoundError: naming both places looked in.
    """
    repo_path = _REPO / kind / name
    if repo_path.is_file():
        return repo_path
    try:
        res = importlib.resources.files("fairsets") / f"_{kind}" / name
        if res.is_file():
            return Path(str(res))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover
        pass
    raise FileNotFoundError(f"{name} not found in {repo_path.parent} nor in package data fairsets/_{kind}/")


# --------------------------------------------------------------------------- normalisation

_WORDS = [
    (r"creative\s*commons", "cc"),
    (r"\bshare[\s-]*alike\b", "sa"),
    (r"\bnon[\s-]*commercial\b", "nc"),
    (r"\bno[\s-]*deriv(?:ative)?s?\b", "nd"),
    (r"\battribution\b", "by"),
    (r"\blicen[cs]e[sd]?\b", " "),
    (r"\b(?:international|unported|generic)\b", " "),
]
_CC_RE = r"(?:cc-)?by((?:-(?:sa|nc|nd))*)-(\d)(?:\.(\d))?(?:-([a-z]{2,3}))?"
_CC_FULL = re.compile(rf"^{_CC_RE}$")
_CC_SEARCH = re.compile(r"(?:^|-)cc-by((?:-(?:sa|nc|nd))*)-(\d)(?:\.(\d))?(?:-([a-z]{2,3}))?(?=-|$)")
_CC_URL = re.compile(
    r"creativecommons\.org/licenses/(by(?:-(?:sa|nc|nd))*)/(\d)\.(\d)(?:/([a-z]{2,3})(?=[/?#]|$))?",
    re.IGNORECASE,
)
_CC0 = re.compile(r"(?:^|-)(?:cc-?0|cc-?zero)(?:-1(?:\.0)?)?(?:-|$)")
_CC0_URL = re.compile(r"creativecommons\.org/publicdomain/zero/", re.IGNORECASE)
_PDM_URL = re.compile(r"creativecommons\.org/publicdomain/mark/", re.IGNORECASE)
_PD = re.compile(r"(?:^|-)(?:public-?domain|pdm|pd)(?:-|$)")
_NOT_PORTS = {"by", "sa", "nc", "nd", "cc"}


def _cc_id(parts: str, major: str, minor: str | None, port: str | None) -> str | None:
    mods = [m for m in parts.split("-") if m]
    if len(set(mods)) != len(mods):
        return None
    # canonical SPDX order: BY[-NC][-ND|-SA]
    order = {"nc": 0, "nd": 1, "sa": 1}
    mods.sort(key=lambda m: order[m])
    version = f"{major}.{minor or '0'}"
    spdx = "-".join(["CC", "BY", *[m.upper() for m in mods], version])
    if port and port not in _NOT_PORTS:
        if version == "4.0":  # 4.0 licences are not ported
            return None
        spdx += f"-{port.upper()}"
    return spdx


def normalise_license(text: str | None) -> str | None:
    """Map a licence name, short name, SPDX-like id or deed URL to an SPDX id.

    Examples: ``"CC BY-SA 4.0"`` → ``"CC-BY-SA-4.0"``; ``"cc-by-4.0"`` → ``"CC-BY-4.0"``;
    ``"Attribution-ShareAlike 3.0 Unported"`` → ``"CC-BY-SA-3.0"``; ``"CC BY-SA 3.0 de"`` →
    ``"CC-BY-SA-3.0-DE"``; ``"CC0"`` / ``"cc-zero"`` → ``"CC0-1.0"``; ``"Public domain"`` /
    ``"PD-old"`` → ``"PDM-1.0"``; ``"CC BY-NC 4.0"`` → ``"CC-BY-NC-4.0"`` (rejected by the
    policy, but identified). Unversioned CC names (``"CC BY-SA"``), ``"all rights reserved"``,
    empty or unknown text → ``None``.
    """
    if not text or not text.strip():
        return None
    raw = html.unescape(text).strip()
    if m := _CC_URL.search(raw):
        return _cc_id(m.group(1).lower()[2:], m.group(2), m.group(3), m.group(4) and m.group(4).lower())
    if _CC0_URL.search(raw):
        return "CC0-1.0"
    if _PDM_URL.search(raw):
        return "PDM-1.0"
    s = raw.lower()
    for pattern, repl in _WORDS:
        s = re.sub(pattern, repl, s)
    s = re.sub(r"(?<!\d)\.|\.(?!\d)", " ", s)  # keep only dots inside version numbers
    s = re.sub(r"[^a-z0-9.]+", "-", s).strip("-")
    s = re.sub(r"(?<=[a-z])(?=\d)(?!0)", "-", s)  # "by4.0" -> "by-4.0" (but keep "cc0")
    if not s:
        return None
    if _CC0.search(s):
        return "CC0-1.0"
    m = _CC_FULL.match(s) or _CC_SEARCH.search(s)
    if m:
        return _cc_id(m.group(1), m.group(2), m.group(3), m.group(4))
    if _PD.search(s):
        return "PDM-1.0"
    return None


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
    spdx = normalise_license(text)
    reject = policy.get("reject", {})
    if spdx is None:
        return None, False, f"{reject.get('unknown_reason', 'unknown licence')}: {text!r}"
    for rule in reject.get("prefixes", []):
        if spdx.startswith(rule["prefix"]):
            return spdx, False, f"{rule['reason']} ({spdx})"
    info = license_info(spdx, policy)
    if info is None or not info.get("allowed", False):
        return spdx, False, f"licence {spdx} is not allowed by the policy"
    return spdx, True, ""


def requires_attribution(spdx: str | None, policy: Mapping[str, Any] | None = None) -> bool:
    """True if images under ``spdx`` need a credit line (unknown ids: True, to be safe)."""
    info = license_info(spdx, policy)
    return True if info is None else bool(info.get("attribution", True))


# --------------------------------------------------------------------------- ATTRIBUTION.md


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def strip_html(text: str | None) -> str:
    """Return the visible text of an HTML fragment, whitespace collapsed (``None`` → ``""``)."""
    if not text:
        return ""
    parser = _TextExtractor()
    parser.feed(str(text))
    parser.close()
    return " ".join(html.unescape("".join(parser.parts)).split())


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#])")


def _md(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", text)


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


def render_attribution(rows: Iterable[Mapping[str, Any]], policy: Mapping[str, Any] | None = None) -> str:
    """Render ``ATTRIBUTION.md`` for the published metadata ``rows`` (all variants together).

    A row may appear in several variants (same ``key``); it is credited once.
    """
    policy = policy if policy is not None else load_policy()
    unique: dict[str, Mapping[str, Any]] = {}
    for r in rows:
        unique.setdefault(str(r["key"]), r)
    resolved = _resolve([unique[k] for k in sorted(unique)])
    counts: Counter[str] = Counter()
    lines: list[str] = []
    for row in resolved:
        spdx = normalise_license(row.get("license")) or (row.get("license") or "unknown")
        counts[spdx] += 1
        if not requires_attribution(spdx, policy):
            continue
        info = license_info(spdx, policy)
        lic = f"[{_md(info['name'])}]({info['url']})" if info else _md(str(spdx))
        author = strip_html(row.get("author")) or "unknown author"
        title = _title(row)
        what = f"“{_md(title)}”" if title else "image"
        line = f"- `{row['key']}`"
        if row.get("augmented_from"):
            line += f" (augmented from `{row['augmented_from']}`)"
        line += f": {what} by {_md(author)}, licensed under {lic}"
        if row.get("source_url"):
            line += f", source: <{row['source_url']}>"
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
        "| Licence | Images | Attribution required |",
        "|---|---:|---|",
    ]
    for spdx in sorted(counts):
        info = license_info(spdx, policy)
        name = f"[{_md(info['name'])}]({info['url']})" if info else _md(spdx)
        out.append(f"| {name} | {counts[spdx]} | {'yes' if requires_attribution(spdx, policy) else 'no'} |")
    out += ["", f"## Credits ({len(lines)} images)", ""]
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
