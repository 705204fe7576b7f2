"""Licence texts recognised whole: a licence name, SPDX id, Commons short name or Creative Commons
deed URL → its SPDX id, or unknown with the reason.

API (re-exported by :mod:`fairsets.publish.attribution`):
    * ``normalise_license(text) -> str | None`` — SPDX id (``"CC-BY-SA-4.0"``, ``"CC0-1.0"``,
      ``"PDM-1.0"`` for public domain, ported ``"CC-BY-SA-3.0-DE"``, also NC/ND ids so they can
      be rejected with a reason) or ``None`` unless the WHOLE text is understood.
    * ``parse_license(text) -> tuple[str | None, str]`` — ``(spdx, "")`` or ``(None, why)``.
"""

from __future__ import annotations

import functools
import re
import unicodedata
import urllib.parse
from collections.abc import Mapping
from html.parser import HTMLParser
from typing import Any

__all__ = ["NOTHING_NAMED", "RESTRICTING_PREFIX", "normalise_license", "parse_license"]

# # A licence string is recognised WHOLE: it is tokenised, and every token must be consumed by the
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


NOTHING_NAMED = frozenset({_NO_LICENSE, _NO_NAME, _ONLY_OTHER})
"""``parse_license`` reasons that say no licence was named at all (not that one was refused)."""
