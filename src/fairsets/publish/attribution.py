"""Licence policy, licence-name normalisation and ``ATTRIBUTION.md``.

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
import importlib.resources
import os
import re
import unicodedata
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
#
# A licence string is recognised WHOLE: it is tokenised, and every token must be consumed by the
# small grammar below (licence names, SPDX ids, Commons short names, deed URLs, and harmless
# decoration such as "licensed under", "International", punctuation). Anything left over -- a
# restricting word ("NonCommercial", "only", "not", "all rights reserved"), an unknown word, a
# URL that is not a Creative Commons deed, a character outside plain text -- makes the whole
# string unknown, so the policy rejects it. Nothing is found by searching for substrings.


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_MAX_LICENSE_CHARS = 1000
"""Longer texts are not licence names: refused without parsing."""

_CC_VERSIONS = {"1": "1.0", "1.0": "1.0", "2": "2.0", "2.0": "2.0", "2.5": "2.5", "3": "3.0"}
_CC_VERSIONS |= {"3.0": "3.0", "4": "4.0", "4.0": "4.0"}
_CC0_VERSIONS = {"1": "1.0", "1.0": "1.0"}
_OTHER_VERSIONS = {v: v for v in ("1", "1.0", "1.1", "1.2", "1.3", "2", "2.0", "2.1", "3", "3.0")}
# jurisdictions of the ported Creative Commons licences (1.0-3.0); 4.0 is not ported
_PORTS = _words(
    "am ar at au az be bg br ca ch cl cn co cr cz de dk ec ee eg es fi fr ge gr gt hk hr hu ie igo "
    "il in it jp kr lu mk mt mx my nl no nz pe ph pl pr pt ro rs scotland se sg si sk th tw ug uk us "
    "ve vn za"
)
_DECORATION = _words(
    "license licence licensed licenses licences under the international generic unported universal "
    "version v deed legalcode legal code dedication"
)
# Commons public-domain template suffixes: PD-old, PD-old-70, PD-US, PD-self, PD-Art, ...
_PD_SUFFIXES = _words(
    "old auto expired us usgov gov self author user art textlogo text logo shape ineligible simple "
    "scan nasa military mark"
)
_PD_NUM = re.compile(r"1(?:\.0)?|\d{2,4}")  # "Public Domain Mark 1.0", "PD-old-70", "PD-1923"
_OTHER_FREE = frozenset({"gfdl", "gpl", "lgpl", "fal"})
"""Licences a Commons file may be offered under *as well as* a CC one ("GFDL, CC BY-SA 3.0")."""
_RESTRICTING = _words(
    "nc nd non noncommercial commercial noderivatives noderivs noderivative derivative derivatives "
    "derivs derived all no not none nor except exception exceptions excluding exclude excludes only "
    "without but restricted restriction restrictions reserved rights prohibited forbidden personal "
    "editorial permission copyright copyrighted private unless if limited research educational "
    "fair use trademark"
)
# plain ASCII plus typographic quotes and dashes (after NFKC); anything else refuses the text
_ALLOWED_CHARS = re.compile(r"[\x20-\x7e\u2010-\u2015\u2018\u2019\u201c\u201d\u00ab\u00bb\t\n\r]*")
_TOKEN = re.compile(
    r"(?P<url>(?:https?:)?//[^\s<>\"'()\[\]{}|\\^`]+|(?:www\.)?creativecommons\.org/[^\s<>\"'()\[\]{}|\\^`]*)"
    r"|(?P<num>\d+(?:\.\d+)*)"
    r"|(?P<word>[a-z]+)"
    r"|(?P<space>\s+)"
    r"|(?P<punct>[.,;:!?()\[\]{}\"'`*_/|\-\u2010-\u2015\u2018\u2019\u201c\u201d\u00ab\u00bb])"
    r"|(?P<other>.)",
    re.IGNORECASE | re.DOTALL,
)
_DEED = r"(?:/(?:deed|legalcode)(?:\.[a-z]{2,3}(?:[-_][a-z0-9]{2,4})?)?)?/?"
_CC_URL_PATH = re.compile(
    r"/licenses/(?P<mods>by(?:-(?:sa|nc|nd))*)/(?P<ver>\d\.\d)"
    r"(?:/(?!deed|legalcode)(?P<port>[a-z]{2,8}))?" + _DEED
)
_PD_URL_PATH = re.compile(r"/publicdomain/(?P<kind>zero|mark)/1\.0" + _DEED)
_CC_HOSTS = {"creativecommons.org", "www.creativecommons.org"}


RESTRICTING_PREFIX = "restricting term"
"""``parse_license`` reasons that start with this name a word that limits the licence."""


class _Unknown(Exception):
    """The licence text is not understood; the message says why."""


def _cc_id(mods: list[str], version: str, port: str | None) -> str:
    if len(set(mods)) != len(mods) or ("sa" in mods and "nd" in mods):
        raise _Unknown(f"no such Creative Commons licence (BY-{'-'.join(m.upper() for m in mods)})")
    order = {"nc": 0, "nd": 1, "sa": 1}  # canonical SPDX order: BY[-NC][-ND|-SA]
    mods = sorted(mods, key=lambda m: order[m])
    spdx = "-".join(["CC", "BY", *[m.upper() for m in mods], version])
    if port:
        if version == "4.0":
            raise _Unknown("Creative Commons 4.0 licences are not ported")
        spdx += f"-{port.upper()}"
    return spdx


def _url_id(url: str) -> str:
    """SPDX id of a creativecommons.org deed or legal-code URL (anything else: ``_Unknown``)."""
    if url.startswith("//"):
        url = "https:" + url
    elif not re.match(r"https?://", url, re.IGNORECASE):
        url = "https://" + url
    url = url.rstrip(".,;:!?")
    try:
        parts = urllib.parse.urlsplit(url)
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        raise _Unknown(f"malformed URL {url!r}") from None
    if parts.username is not None or port is not None or host not in _CC_HOSTS or parts.fragment:
        raise _Unknown(f"not a Creative Commons licence URL: {url!r}")
    if parts.query and not re.fullmatch(r"ref=[a-z0-9-]{1,40}", parts.query, re.IGNORECASE):
        raise _Unknown(f"unexpected query in licence URL: {url!r}")
    path = parts.path.lower()
    if m := _CC_URL_PATH.fullmatch(path):
        mods = m.group("mods").split("-")[1:]
        if m.group("ver") not in _CC_VERSIONS.values():
            raise _Unknown(f"no such Creative Commons version in {url!r}")
        port = m.group("port")
        if port and port not in _PORTS:
            raise _Unknown(f"unknown jurisdiction {port!r} in {url!r}")
        return _cc_id(mods, m.group("ver"), port)
    if m := _PD_URL_PATH.fullmatch(path):
        return "CC0-1.0" if m.group("kind") == "zero" else "PDM-1.0"
    raise _Unknown(f"not a Creative Commons licence URL: {url!r}")


_PRESENTATION_ATTRS = frozenset({"class", "style", "rel", "target", "id", "lang", "dir", "width", "height"})
_KNOWN_ATTRS = _PRESENTATION_ATTRS | {"href", "title"}
_KNOWN_TAGS = _words("a abbr b bdi br div em font i p small span strong sub sup u")


class _LicenseTextExtractor(HTMLParser):
    """All text of an HTML fragment, hidden or not, plus its attribute values (link targets,
    titles), so that nothing in the markup escapes judgement; only presentational attributes
    (class, style, ...) are left out. Unknown tag and attribute names count as text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _KNOWN_TAGS:
            self.parts.append(f" {tag} ")
        for k, v in attrs:
            if k not in _KNOWN_ATTRS:
                self.parts.append(f" {k} ")
            if v and k not in _PRESENTATION_ATTRS:
                self.parts.append(f" {v} ")

    def handle_endtag(self, tag: str) -> None:
        if tag not in _KNOWN_TAGS:
            self.parts.append(f" {tag} ")

    def handle_data(self, data: str) -> None:
        self.parts.append(f" {data} ")

    # comments, declarations and processing instructions are text too: nothing may hide there
    handle_comment = handle_decl = handle_pi = unknown_decl = handle_data


def _tokens(text: str) -> list[tuple[str, str]]:
    """``[(kind, value)]`` with kinds ``url`` (an SPDX id), ``num`` and ``word`` (lower case)."""
    out: list[tuple[str, str]] = []
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup or "other"
        value = m.group()
        if kind == "url":
            out.append(("url", _url_id(value)))
        elif kind in ("num", "word"):
            out.append((kind, value.lower()))
        elif kind == "other":
            raise _Unknown(f"character {value!r} not understood")
    return out


class _Parser:
    """Consume every token of a licence text; collect the licence ids it names."""

    def __init__(self, toks: list[tuple[str, str]]) -> None:
        self.toks = toks
        self.i = 0
        self.ids: list[str] = []

    def peek(self, k: int = 0) -> tuple[str, str]:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else ("end", "")

    def word(self, *choices: str) -> bool:
        kind, value = self.peek()
        if kind == "word" and value in choices:
            self.i += 1
            return True
        return False

    def skip_decoration(self) -> None:
        while self.peek()[0] == "word" and self.peek()[1] in _DECORATION:
            self.i += 1

    def fail(self) -> None:
        kind, value = self.peek()
        if kind == "end":
            raise _Unknown("incomplete licence name")
        if value in _RESTRICTING:
            raise _Unknown(f"{RESTRICTING_PREFIX} {value!r}")
        raise _Unknown(f"{value!r} not understood")

    def versions(self, table: Mapping[str, str]) -> str | None:
        """One or more version numbers ("3.0,2.5,2.0" offers all: the first is taken)."""
        found: list[str] = []
        while True:
            self.word("version", "v")
            kind, value = self.peek()
            if kind != "num":
                break
            if value not in table:
                raise _Unknown(f"no such licence version {value!r}")
            found.append(value)
            self.i += 1
        if not found:
            return None
        return table[found[0]]

    def cc_by(self) -> str:
        """After "by"/"attribution": modifiers, version(s), optional jurisdiction."""
        mods: list[str] = []
        while True:
            if self.word("sa", "sharealike"):
                mods.append("sa")
            elif self.peek() == ("word", "share") and self.peek(1) == ("word", "alike"):
                self.i += 2
                mods.append("sa")
            elif self.word("nc", "noncommercial"):
                mods.append("nc")
            elif self.peek() == ("word", "non") and self.peek(1) == ("word", "commercial"):
                self.i += 2
                mods.append("nc")
            elif self.word("nd", "noderivatives", "noderivs"):
                mods.append("nd")
            elif self.peek() == ("word", "no") and self.peek(1)[1] in ("derivatives", "derivs"):
                self.i += 2
                mods.append("nd")
            else:
                break
        self.word("license", "licence")
        version = self.versions(_CC_VERSIONS)
        if version is None:
            raise _Unknown("Creative Commons licence without a version")
        port = None
        kind, value = self.peek()
        if kind == "word" and value in _PORTS and value != "no":  # Norway only in URLs: "no" restricts
            port = value
            self.i += 1
        return _cc_id(mods, version, port)

    def public_domain(self) -> str:
        """After "public domain"/"pd"/"pdm": "mark", version, Commons template suffixes."""
        while True:
            kind, value = self.peek()
            if (kind == "word" and value in _PD_SUFFIXES) or (kind == "num" and _PD_NUM.fullmatch(value)):
                self.i += 1
            else:
                return "PDM-1.0"

    def mention(self) -> None:
        kind, value = self.peek()
        if kind == "url":
            self.i += 1
            self.ids.append(value)
            return
        if self.word("cczero"):
            self.versions(_CC0_VERSIONS)
            self.ids.append("CC0-1.0")
            return
        cc = self.word("cc")
        if not cc and self.peek() == ("word", "creative") and self.peek(1) == ("word", "commons"):
            self.i += 2
            cc = True
        if cc:
            self.word("license", "licence")
            if self.peek() in (("num", "0"), ("word", "zero")):  # "CC0", "CC-0", "CC Zero"
                self.i += 1
                self.versions(_CC0_VERSIONS)
                self.ids.append("CC0-1.0")
                return
            if self.word("pddc"):
                self.ids.append("PDM-1.0")
                return
        if self.word("by", "attribution") if cc else self.word("attribution"):
            self.ids.append(self.cc_by())
            return
        if self.peek() == ("word", "public") and self.peek(1) == ("word", "domain"):
            self.i += 2
            self.ids.append(self.public_domain())
            return
        if self.word("publicdomain", "pd", "pdm"):
            self.ids.append(self.public_domain())
            return
        if not cc and self.word(*_OTHER_FREE):
            self.versions(_OTHER_VERSIONS)
            self.ids.append("other")
            return
        self.fail()

    def parse(self) -> list[str]:
        while True:
            self.skip_decoration()
            self.word("or")  # alternatives: "GFDL or CC BY-SA 3.0"
            self.skip_decoration()
            if self.peek()[0] == "end":
                return self.ids
            self.mention()


def _clean_license_text(text: Any) -> str:
    raw = str(text)
    if len(raw) > _MAX_LICENSE_CHARS:
        raise _Unknown(f"longer than {_MAX_LICENSE_CHARS} characters")
    if "<" in raw or "&" in raw:
        parser = _LicenseTextExtractor()
        parser.feed(raw)
        parser.close()
        raw = "".join(parser.parts)
    raw = unicodedata.normalize("NFKC", raw)
    if not _ALLOWED_CHARS.fullmatch(raw):
        bad = next(c for c in raw if not _ALLOWED_CHARS.fullmatch(c))
        raise _Unknown(f"character U+{ord(bad):04X} ({unicodedata.name(bad, 'unnamed')}) not allowed")
    return raw


_NO_LICENSE = "no licence given"
_NO_NAME = "no licence named"
_ONLY_OTHER = "no Creative Commons or public-domain licence named"


def parse_license(text: Any) -> tuple[str | None, str]:
    """``(spdx, "")`` for a recognised licence text, ``(None, why)`` otherwise.

    The whole text must be understood (see the comment above); ``why`` names what was not (a
    restricting term, an unknown word, conflicting licences, a character, ...).
    """
    if text is None or (isinstance(text, str) and not text.strip()):
        return None, _NO_LICENSE
    if not isinstance(text, str):
        return None, f"a licence is text, not {type(text).__name__}"
    return _parse_text(str(text))


@functools.lru_cache(maxsize=4096)  # a build sees few distinct licence texts, many times each
def _parse_text(text: str) -> tuple[str | None, str]:
    try:
        ids = _Parser(_tokens(_clean_license_text(text))).parse()
    except _Unknown as e:
        return None, str(e)
    known = sorted(set(ids) - {"other"})
    if set(known) == {"CC0-1.0", "PDM-1.0"}:
        known = ["CC0-1.0"]  # "CC0 1.0 Universal Public Domain Dedication"
    if not known:
        return None, _ONLY_OTHER if ids else _NO_NAME
    if len(known) > 1:
        return None, f"conflicting licences {' and '.join(known)}"
    return known[0], ""


def normalise_license(text: Any) -> str | None:
    """Map a licence name, short name, SPDX id or deed URL, recognised whole, to an SPDX id.

    Examples: ``"CC BY-SA 4.0"`` → ``"CC-BY-SA-4.0"``; ``"cc-by-4.0"`` → ``"CC-BY-4.0"``;
    ``"Attribution-ShareAlike 3.0 Unported"`` → ``"CC-BY-SA-3.0"``; ``"CC BY-SA 3.0 de"`` →
    ``"CC-BY-SA-3.0-DE"``; ``"CC0"`` / ``"cc-zero"`` → ``"CC0-1.0"``; ``"Public domain"`` /
    ``"PD-old"`` → ``"PDM-1.0"``; ``"CC BY-NC 4.0"`` → ``"CC-BY-NC-4.0"`` (identified so that
    the policy rejects it by name). Anything with words the grammar does not consume --
    ``"CC BY 4.0 NonCommercial"``, ``"CC0 (non-commercial use only)"``, ``"Not public
    domain"`` --, unversioned CC names (``"CC BY-SA"``), conflicting licences, characters
    outside plain text (after NFKC), empty or unknown text → ``None``.
    """
    return parse_license(text)[0]


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


_NOTHING_NAMED = {_NO_LICENSE, _NO_NAME, _ONLY_OTHER}
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


class _TextExtractor(HTMLParser):
    _HIDDEN = frozenset({"script", "style", "template", "noscript"})  # content that is never shown

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self._HIDDEN:
            self._hidden += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self._HIDDEN and self._hidden:
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


def strip_html(text: str | None) -> str:
    """Return the visible text of an HTML fragment, whitespace collapsed (``None`` → ``""``)."""
    if not text:
        return ""
    parser = _TextExtractor()
    parser.feed(str(text))
    parser.close()
    return " ".join("".join(parser.parts).split())  # the parser decoded entities once (not twice)


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
