"""Address evidence the ``offline`` method reads besides names: postal codes, state and province
abbreviations shared by two countries, a loosely written "UK", and URL/file-name slugs.

All of it is exact-format evidence, so precision comes first:

* **Postal codes.** A full Canadian postal code ("K1A 0B1": letter-digit-letter digit-letter-digit
  from the letters Canada Post uses) says CAN on its own; a full UK postcode ("SW1A 1AA",
  "M1 1AE": a real postcode area, then the inward code with its restricted letters) says GBR on its
  own. A US ZIP or ZIP+4 ("75460", "75201-1234") counts only right after a US state abbreviation
  ("Paris TX 75460"), an Australian four-digit postcode only after an Australian state
  ("Perth WA 6000"), and the pair is read as one mention, even in an all-capitals caption
  ("LONDON KY 40741" → USA): a bare number is not a place. Codes must be in capitals.
* **Shared abbreviations.** "WA" is Washington and Western Australia, "NT" the Northern
  Territory and the Northwest Territories: such a code spreads over both countries and the town
  next to it decides ("Perth, WA" → AUS, "Seattle, WA" → USA).
* **"Uk" written loosely.** "Uk"/"uk" is the United Kingdom (not the Russian village) where it
  stands apart: at the end of the caption, or set off by punctuation ("Coats Uk", "tweed - uk"),
  and not as a clothing size ("size 10 uk").
* **Slugs.** A caption without spaces made of words joined by ``/``, ``_``, ``-`` or ``.``
  ("IMG_paris_2019.jpg", "holiday-homes/saint-kitts-and-nevis/villa-3") carries no sentence
  case, so its casing is read as lower case: "paris" there is a name, not a lower-case word in
  a cased sentence.
"""

from __future__ import annotations

import functools
import re

__all__ = ["POSTCODE_AREAS_GB", "admin_code_countries", "is_slug", "loose_uk", "postcodes"]

#: UK postcode areas (Royal Mail), Great Britain and Northern Ireland; Crown dependencies excluded.
_GB_AREAS = (
    "AB AL B BA BB BD BH BL BN BR BS BT CA CB CF CH CM CO CR CT CV CW DA DD DE DG DH DL DN DT DY "
    "E EC EH EN EX FK FY G GL GU HA HD HG HP HR HS HU HX IG IP IV KA KT KW KY L LA LD LE LL LN LS LU "
    "M ME MK ML N NE NG NN NP NR NW OL OX PA PE PH PL PO PR RG RH RM S SA SE SG SK SL SM SN SO SP SR "
    "SS ST SW SY TA TD TF TN TQ TR TS TW UB W WA WC WD WF WN WR WS WV YO ZE"
)
POSTCODE_AREAS_GB = frozenset(_GB_AREAS.split())
_CA_POSTCODE = re.compile(r"\b[ABCEGHJ-NPRSTVXY]\d[ABCEGHJ-NPRSTV-Z] ?\d[ABCEGHJ-NPRSTV-Z]\d\b")
_GB_POSTCODE = re.compile(r"\b([A-Z]{1,2})\d[A-Z\d]? ?\d[ABD-HJLNP-UW-Z]{2}\b")
_US_ZIP = re.compile(r"\b([A-Z]{2}),? (\d{5}(?:-\d{4})?)\b")
_AU_POSTCODE = re.compile(r"\b(NSW|QLD|VIC|TAS|SA|WA|ACT|NT),? (\d{4})\b")
_SLUG = re.compile(r"^[^\s]*[A-Za-z]{2,}[/_\-.][^\s]*[A-Za-z]{2,}[^\s]*$")
_DIGIT = re.compile(r"\d")
_AU_STATES = frozenset({"NSW", "QLD", "VIC", "TAS", "SA", "WA", "ACT", "NT"})


@functools.cache
def admin_code_countries() -> dict[str, tuple[str, ...]]:
    """State/province abbreviation → every country among USA, CAN and AUS that uses it."""
    try:
        import pycountry
    except ImportError:  # pragma: no cover - pycountry is a dependency of the geo extra
        return {}
    iso = {"US": "USA", "CA": "CAN", "AU": "AUS"}
    out: dict[str, set[str]] = {}
    for s in pycountry.subdivisions:
        if s.country_code in iso and "-" in s.code and getattr(s, "parent_code", None) is None:
            out.setdefault(s.code.split("-", 1)[1], set()).add(iso[s.country_code])
    return {k: tuple(sorted(v)) for k, v in out.items()}


def postcodes(caption: str) -> list[tuple[int, int, str]]:
    """Postal codes in a caption: ``(char_start, char_end, iso3)``, in order, not overlapping."""
    if _DIGIT.search(caption) is None:
        return []
    found: list[tuple[int, int, str]] = []
    for m in _CA_POSTCODE.finditer(caption):
        found.append((m.start(), m.end(), "CAN"))
    for m in _GB_POSTCODE.finditer(caption):
        if m.group(1) in POSTCODE_AREAS_GB:
            found.append((m.start(), m.end(), "GBR"))
    codes = admin_code_countries()
    for m in _US_ZIP.finditer(caption):
        if "USA" in codes.get(m.group(1), ()):
            found.append((m.start(1), m.end(2), "USA"))
    for m in _AU_POSTCODE.finditer(caption):
        if m.group(1) in _AU_STATES:
            found.append((m.start(1), m.end(2), "AUS"))
    found.sort()
    out: list[tuple[int, int, str]] = []
    for f in found:
        if not out or f[0] >= out[-1][1]:
            out.append(f)
    return out


def is_slug(caption: str) -> bool:
    """A URL path or file name: no spaces, words joined by ``/``, ``_``, ``-`` or ``.``."""
    return " " not in caption and bool(_SLUG.match(caption.strip()))


def loose_uk(caption: str, start: int, end: int) -> bool:
    """Is the token ``caption[start:end]`` ("Uk"/"uk") set apart as a country would be?"""
    if caption[start:end] not in ("Uk", "uk"):
        return False
    after = caption[end:].strip()
    before = caption[:start].rstrip()
    if "size" in before.lower().split()[-3:]:
        return False  # "Dress size 10 uk": a sizing convention, not where the dress is
    return not after or after[0] in ",;|)-/.!" or before.endswith((",", "-", "|", "(", "/"))
