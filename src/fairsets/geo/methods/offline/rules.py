"""The rules of ``offline``: the mentions of places in a caption, their strength and their countries.

Steps 1–6 of the pipeline in :mod:`fairsets.geo.methods.offline` — tokens and casing, false friends,
gazetteer entities, the evidence of each mention (names that are also English words, given names,
titles, styles, address evidence), organisations and brands, and the ambiguity policy that spreads a
mention over its countries (:meth:`MentionRules._distribute`). :class:`MentionRules` is the part of
:class:`~fairsets.geo.methods.offline.method.OfflineMethod` that reads a caption; the learned decision
on top of it is in :mod:`~fairsets.geo.methods.offline.method` and
:mod:`~fairsets.geo.methods.offline.scorer`. The word lists the rules apply are in
:mod:`~fairsets.geo.methods.offline.lexicon`, the word sets they load in
:mod:`~fairsets.geo.methods.offline.wordsets`.
"""

from __future__ import annotations

import math

from ...gazetteer import Gazetteer, Place, Token, gazetteer, name_key, tokenize
from .evidence import admin_code_countries, is_slug, loose_uk, postcodes
from .lexicon import (
    _GLUE,
    BRANDS,
    COLOUR_WORDS,
    CONTAINERS,
    COUNTRY_PRIOR,
    DEMONYM_BLOCKERS,
    FLAG_WORDS,
    KIND_STRENGTH,
    KNOWN_CITY,
    LANGUAGE_WORDS,
    MONTHS,
    NATIONAL_KINDS,
    PEOPLE_NOUNS,
    PLACE_NOUNS,
    PREPOSITIONS,
    PRODUCT_NOUNS,
    REGION_POPULATION,
    STOPWORDS,
    STREET_NOUNS,
    STYLE_WORDS,
    TITLES,
    WEAK,
)
from .mentions import Mention, case_mode, is_word, token_span
from .neighbours import real_places_first, same_division, settle_neighbours
from .organisations import find_organisations
from .postal import pair_postcodes
from .scorer import COMMERCIAL
from .wordsets import _english_words, _false_friends, _first_names, _given_names, _zipf

__all__ = ["MentionRules"]

_FEDERAL = frozenset({"USA", "CAN", "AUS"})  # countries whose states/provinces captions name alone


class MentionRules:
    """The rules that find a caption's mentions and score them, with the gazetteer and word sets they use.

    A base of :class:`~fairsets.geo.methods.offline.method.OfflineMethod`: :meth:`_init_rules` loads
    what the rules need (``coupling``, ``prominence``, the gazetteer, the word sets).
    """

    def _init_rules(self, min_population: int, coupling: float, prominence: float) -> None:
        self.coupling = float(coupling)
        self.prominence = float(prominence)
        self.gaz: Gazetteer = gazetteer(int(min_population))
        self.words = _english_words()
        self.given = _given_names()
        self.first_names = _first_names()
        self.false_friends = _false_friends()
        self.zipf = _zipf()
        self._common_cache: dict[str, bool] = {}
        self.admin_shared = {k: v for k, v in admin_code_countries().items() if len(v) > 1}

    def _person_first_name(self, key: str, text: str, prose: bool = False) -> bool:
        """Is this word a first name before a surname rather than a place: a census first name,
        written "Frederic" (not FREDERIC), that is no dictionary word and names no country, state,
        province or county ("Florida Miami", "Devon Exeter") and no city of 100,000 ("Florence
        Nightingale" is not read as a person's name: Florence is a city)?

        ``prose``: the word stands capitalised inside a sentence-case caption, where a dictionary
        word would be written in lower case ("a tribute to Victor Hugo", "Thomas Henry Huxley"):
        there a first name that is also a word ("victor", "henry") is the name."""
        if key not in self.first_names or text.isupper() or (is_word(self.words, key) and not prose):
            return False
        return not self._contains(key) and all(p.population < KNOWN_CITY for p in self.gaz.lookup(key))

    def _contains(self, key: str) -> bool:
        """Does the single word ``key`` name a country, a state or a nationality ("Florence Italy",
        "Austin Texas"), so that a first name before it is a place after all?"""
        return any(p.kind in CONTAINERS or p.kind in NATIONAL_KINDS for p in self.gaz.lookup(key))

    def _is_common(self, key: str, places: tuple[Place, ...]) -> bool:
        """Is this name (also) an ordinary English word, more often than a place name?

        Single words: in the dictionary, and used more than a place of that size would be
        (``wordfreq`` Zipf frequency above what the population predicts; without wordfreq the
        dictionary alone decides). Multi-word names: every word is a dictionary word
        ("Mountain View", "East Side", "the village"). Names of cities of a million or more are
        never common ("Berlin" is a dictionary word too).
        """
        hit = self._common_cache.get(key)
        if hit is not None:
            return hit
        biggest = max((p.population for p in places if p.kind == "city"), default=0)
        toks = key.split(" ")
        if biggest >= 1_000_000:
            hit = False
        elif len(toks) > 1:
            # "berlin wall" (a city of a million first), "panama city" (a country first), "nova
            # scotia" (a state or province) are names even when every word is also in the dictionary.
            named = any(p.kind == "region" and p.iso3 in _FEDERAL for p in places) or any(
                (p.kind == "city" and p.population >= 1_000_000) or p.kind in ("country", "alias")
                for p in self.gaz.lookup(toks[0])
            )
            hit = not named and all(t in self.words or t in _GLUE for t in toks)
        elif key not in self.words:
            hit = False
        elif self.zipf is None:
            hit = True
        else:
            # A country's name is as common as its population predicts ("Finland", "Japan"); only
            # a word used far beyond that is common ("jersey", "turkey").
            pop = max([biggest] + [REGION_POPULATION for p in places if p.kind in ("region", "place")])
            expected = 1.6 + 0.65 * (math.log10(max(pop, 1000)) - 3.5)
            hit = self.zipf(key) >= max(3.0, expected + 0.8)
        self._common_cache[key] = hit
        return hit

    def _blocked(self, tokens: list[Token]) -> set[int]:
        blocked: set[int] = set()
        keys = [t.key for t in tokens]
        ff = self.false_friends
        for i, k in enumerate(keys):
            for phrase in ff.get(k, ()):
                n = len(phrase)
                if tuple(keys[i : i + n]) == phrase:
                    blocked.update(range(i, i + n))
                    break
        return blocked

    def _city_strength(self, pop: int) -> float:
        if pop <= 0:
            return 1.0
        return min(2.4, max(0.9, 0.9 + 0.35 * (math.log10(pop) - 3)))

    def _mention(
        self, tokens: list[Token], caption: str, mode: str, i: int, j: int, key: str, cues: tuple[bool, bool]
    ) -> Mention | None:
        """The mention of ``tokens[i:j]`` (``key``) after the rules, or None where it is no place.

        ``cues``: does the caption have a flag word, and a commercial word (:data:`.scorer.COMMERCIAL`).
        """
        places = self.gaz.lookup(key)
        first = tokens[i]
        prev = tokens[i - 1].key if i > 0 else ""
        nxt = tokens[j] if j < len(tokens) else None
        nxt_key = nxt.key if nxt else ""
        capital = first.text[:1].isupper()
        top_kind = places[0].kind

        if key in MONTHS or key in STOPWORDS:
            return None
        # Exact-case abbreviations only: "US"/"UK" yes, "us" never.
        if top_kind == "code" and not (
            first.text.isupper() or "." in caption[first.start : tokens[j - 1].end + 1]
        ):
            places = tuple(p for p in places if p.kind != "code")
            if not places:
                return None
            top_kind = places[0].kind

        flag, commercial = cues
        # A flag shows its country, "traditional" + demonym names a national dress or house: the
        # country named is the answer even where the name is also a word ("Chad flag").
        national = top_kind in NATIONAL_KINDS and (flag or prev == "traditional")
        if national and top_kind == "demonym_ambiguous":
            top_kind = "demonym"  # "Polish flag": the flag says which reading
        if top_kind in ("city", "region") and not national:
            after2 = tokens[j + 1].key if j + 1 < len(tokens) else ""
            # A model or product line: "Camden armchair", "the Hampton bedroom range", "Denver 3
            # seater sofa".
            if nxt_key in PRODUCT_NOUNS or (
                nxt is not None and (nxt.text.islower() or nxt_key.isdigit()) and after2 in PRODUCT_NOUNS
            ):
                return None
            # A street: "4 Kingston Road", "27 Albany Avenue".
            if nxt_key in STREET_NOUNS and prev[:1].isdigit():
                return None
        # A colour of a paint or fabric, among other product words: "Santorini white paint".
        if (
            top_kind in ("city", "region", "place")
            and not national
            and nxt_key in COLOUR_WORDS
            and any(t.key in COMMERCIAL for t in tokens if t.key != nxt_key)
        ):
            return None
        strength = KIND_STRENGTH.get(top_kind, 0.0)
        if top_kind == "city":
            strength = self._city_strength(max(p.population for p in places if p.kind == "city"))

        note = top_kind
        # Styles, dishes, breeds and languages are not places ("Spanish colonial style",
        # "Thai green curry", "Santa Fe style"); nor are "Latin American", "pan-African".
        after = [t.key for t in tokens[j : j + 2]]
        demonym = top_kind in ("demonym", "region_demonym", "demonym_ambiguous")
        if (demonym and (any(a in STYLE_WORDS for a in after) or prev in DEMONYM_BLOCKERS)) or (
            nxt_key in ("style", "styled", "inspired", "themed")
        ):
            return None
        # A language: "the French name", "British English" (the next word only: "Welsh village
        # name sign" is a Welsh village).
        if demonym and nxt_key in LANGUAGE_WORDS:
            return None
        # A gloss in another language: "(Russian: Первый день)", "Spanish: La Casa".
        if demonym and caption[tokens[j - 1].end : tokens[j - 1].end + 1] == ":":
            return None
        if demonym and nxt_key in PEOPLE_NOUNS:
            strength *= 0.5  # "German tourists in Mallorca": where they are beats who they are
        # An acronym: a small town's own name written in capitals inside a caption that is not
        # shouting, between words that are not in capitals ("TAI, from the French name", "a loose
        # ABA format", "GOTO telescopes"): "CDMX" stays (not the city's own name), and so do
        # "HOLIDAY COTTAGE" (shouted words), big cities ("a week in ROME") and a town after a
        # preposition or before a place noun.
        if (
            mode in ("normal", "title")
            and j - i == 1
            and first.text.isupper()
            and first.text.isalpha()
            and 2 <= len(first.text) <= 5
            and top_kind == "city"
            and not any(
                t.text.isupper() and t.text.isalpha() and len(t.text) > 1
                for t in tokens[max(0, i - 1) : i] + tokens[j : j + 1]
            )
            and any(p.kind == "city" and name_key(p.name) == key for p in places)
            and all(p.population < KNOWN_CITY for p in places if p.kind == "city")
            and prev not in PREPOSITIONS  # "a trip to BRAY", "BRAY harbour": a town after all
            and nxt_key not in PLACE_NOUNS
        ):
            return None
        # People: "Queen Victoria", "Sydney Sweeney", "Jordan Peterson"; car models: "Hyundai Tucson".
        words = key.split(" ", 2)
        # ... but "Queen Street, Auckland", "King Street" are streets: a place noun after the title.
        titled = words[0] in TITLES and not (len(words) > 1 and words[1] in PLACE_NOUNS)
        if (prev in TITLES or titled) and top_kind not in (
            "country",
            "alias",
            "code",
        ):
            return None
        # A make before its model ("Hyundai Tucson"), or a make that is also a town ("Lincoln",
        # "Dodge"): not where the name is a state or country ("Lincoln Nebraska"), or the make is
        # the town, after a preposition or before its state ("house in Lincoln, Nebraska").
        sep_before = caption[tokens[i - 1].end : first.start] if i > 0 else ""
        if prev in BRANDS and sep_before == " " and top_kind not in CONTAINERS:
            return None
        if key in BRANDS and prev not in PREPOSITIONS and not (nxt is not None and self._contains(nxt_key)):
            return None
        sep_after = caption[tokens[j - 1].end : nxt.start] if nxt else ""
        # capitalised inside a sentence-case caption, not at its start: a name, not a word
        prose = mode == "normal" and i > 0
        prose_prev = mode == "normal" and i > 1 and prev in self.first_names
        if (
            j - i == 1
            and (key in self.given or (capital and self._person_first_name(key, first.text, prose)))
            and nxt is not None
            and not self._contains(nxt_key)
            and sep_after == " "
            and nxt.text[:1].isupper()
            and not nxt.text.isupper()
            and nxt_key not in PLACE_NOUNS
            and not is_word(self.words, nxt_key)
        ):
            return None

        # "Kawhi Leonard": a capitalised non-word before a single-word town is a first name; so
        # is a given name that is also a place, or a census first name that is no word and no big
        # place, before a town under 100,000 ("Savannah Guthrie", "Frederic Warburg"; not
        # "Florida Miami").
        if (
            top_kind == "city"
            and j - i == 1
            and i > 0
            and capital
            and mode != "upper"
            and sep_before == " "
            and tokens[i - 1].text[:1].isupper()
            and (not is_word(self.words, prev) or prose_prev)
            and (
                prev not in self.gaz.first_tokens
                or (
                    (
                        (prev in self.given and not self._contains(prev))  # not "Devon Torquay"
                        or self._person_first_name(prev, tokens[i - 1].text, prose_prev)
                    )
                    and max(p.population for p in places if p.kind == "city") < KNOWN_CITY
                )
            )
        ):
            return None
        # A national mention is no word: "Chad flag", "Turkey flag towel".
        common = (
            not national
            and top_kind not in ("code", "demonym", "region_demonym")
            and (self._is_common(key, places) or top_kind == "demonym_ambiguous")
        )
        lower_in_cased = not capital and mode in ("normal", "title")
        # A single lower-case common word among the product words of a listing ("green", "train",
        # "gold"), unless a preposition makes it a place ("car boot sale in essex"); a name of
        # several words stays ("toilet at the grand canyon visitor center", "royal mile").
        listing_word = commercial and not capital and j - i == 1 and prev not in PREPOSITIONS
        if common and (lower_in_cased or listing_word):
            # "nice view", "for sale", "china plates", "at sunset" in a cased caption
            return None
        # Evidence for names that are also ordinary words (or given names, or in lower case).
        evidence = 0.0
        if prev in PREPOSITIONS:
            evidence += 1.0
        if nxt_key in PLACE_NOUNS and not common:
            evidence += 1.0 if capital else 0.5
        multi_cap = j - i > 1 and all(t.text[:1].isupper() for t in tokens[i:j])
        if mode == "normal" and capital and multi_cap and not common:
            evidence += 1.0  # a capitalised multi-word name in a sentence: "Key West", "Gold Coast"
        elif mode == "normal" and capital and i > 0:
            evidence += 0.5
        needed = 0.5 if top_kind in ("country", "alias") else 1.0
        if (common or lower_in_cased) and evidence < needed and not national:
            strength *= WEAK
            note += ":weak"
        elif top_kind == "city" and evidence >= 1.0:
            strength = max(strength, 1.2)  # "in Hokitika": small places need a little context

        weights = self._weights(places)
        if nxt_key == "state" and any(p.kind == "region" and p.iso3 == "USA" for p in places):
            weights = {"USA": 1.0}  # "Georgia state flag", "Washington State": the US state
        ctx = {
            "common": float(common),
            "lower_in_cased": float(lower_in_cased),
            "evidence": evidence,
            "capital": float(capital),
            "given": float(key in self.given),
            "is_word": float(all(is_word(self.words, t) for t in key.split())),
            "national": float(national),
        }
        return Mention(i, j, key, places, strength, weights, note, ctx=ctx)

    def _weights(self, places: tuple[Place, ...]) -> dict[str, float]:
        """Each candidate country's share: population × prior, cities also by their prominence.

        ``prominence`` (learned, see :mod:`.training`) weighs a city by how many alternate names
        GeoNames lists for it relative to a typical city's 20, so the Sorrento of the Amalfi coast
        outweighs its namesakes of similar size.
        """
        best: dict[str, float] = {}
        b = self.prominence
        for p in places:
            if p.kind == "city":
                pop = (p.population or 1000) * (((1 + p.names) / 21.0) ** b if b else 1.0)
            elif p.kind in ("country", "alias", "code", "demonym", "demonym_ambiguous"):
                pop = max(p.population, REGION_POPULATION) * 10
            else:
                pop = REGION_POPULATION
            w = pop * COUNTRY_PRIOR.get(p.iso3, 1.0)
            if w > best.get(p.iso3, 0.0):
                best[p.iso3] = w
        total = sum(best.values()) or 1.0
        return {k: v / total for k, v in best.items()}

    def _admin_code(self, tokens: list[Token], caption: str, i: int, after_place: bool) -> Mention | None:
        tok = tokens[i]
        if not (tok.text.isupper() and 2 <= len(tok.text) <= 3 and i > 0):
            return None
        iso3 = self.gaz.admin_codes.get(tok.text)
        if iso3 is None:
            return None
        shared = self.admin_shared.get(tok.text, (iso3,))
        sep = caption[tokens[i - 1].end : tok.start]
        prev = tokens[i - 1]
        loose = sep == " " and prev.text[:1].isupper() and prev.key not in self.words
        if "," not in sep and not (sep == " " and after_place) and not loose:
            return None
        # "WA" is Washington and Western Australia: spread over both, the town next to it decides.
        places = tuple(Place(c, "admin_code", 0, tok.text) for c in shared)
        weights = {c: 1.0 / len(shared) for c in shared}
        return Mention(i, i + 1, tok.key, places, KIND_STRENGTH["admin_code"], weights, "admin_code")

    def _mentions(self, caption: str) -> list[Mention]:
        return self._analyse(caption)[2]

    def _analyse(self, caption: str) -> tuple[list[Token], str, list[Mention]]:
        """Tokens, the caption's case mode and its mentions after the rules."""
        tokens = tokenize(caption)
        if not tokens:
            return tokens, "lower", []
        mode = "slug" if is_slug(caption) else case_mode(tokens)  # a slug's case says nothing
        mentions = self._find(caption, tokens, "lower" if mode == "slug" else mode)
        return tokens, mode, mentions

    def _find(self, caption: str, tokens: list[Token], mode: str) -> list[Mention]:
        mentions: list[Mention] = []
        taken: set[int] = set()
        posts: list[Mention] = []
        # Teams, universities, stadiums and institutions of one country, before the false friends
        # are masked: "Manchester United" is not the city, but it is English.
        for s, e, iso3, _kind in find_organisations(tokens):
            text = caption[tokens[s].start : tokens[e - 1].end]
            place = Place(iso3, "organisation", 0, text)
            strength = KIND_STRENGTH["organisation"]
            key = " ".join(t.key for t in tokens[s:e])
            posts.append(Mention(s, e, key, (place,), strength, {iso3: 1.0}, "organisation"))
            taken.update(range(s, e))
        blocked = self._blocked(tokens)  # false friends and brands ("Kia Sorento"): not places
        keys = {t.key for t in tokens}
        cues = (not keys.isdisjoint(FLAG_WORDS), not keys.isdisjoint(COMMERCIAL))
        for s, e, iso3 in postcodes(caption):
            span = token_span(tokens, s, e)
            if span:
                place = Place(iso3, "postcode", 0, caption[s:e])
                strength = KIND_STRENGTH["postcode"]
                key = name_key(caption[s:e])
                posts.append(Mention(*span, key, (place,), strength, {iso3: 1.0}, "postcode"))
                taken.update(range(*span))
        for i, j, key in self.gaz.matches(tokens, blocked):
            if taken and not taken.isdisjoint(range(i, j)):
                continue
            if key == "uk" and loose_uk(caption, tokens[i].start, tokens[i].end):
                place = Place("GBR", "code", 0, tokens[i].text)  # "Coats Uk", "tweed, uk"
                mentions.append(Mention(i, j, key, (place,), KIND_STRENGTH["code"], {"GBR": 1.0}, "code"))
                taken.add(i)
                continue
            if j - i == 1 and mode != "upper" and i > 0 and mentions and mentions[-1].end == i:
                m = self._admin_code(tokens, caption, i, True)  # "Birmingham, AL", "Lancaster PA"
                if m is not None:
                    mentions.append(m)
                    taken.add(i)
                    continue
            m = self._mention(tokens, caption, mode, i, j, key, cues)
            if m is not None:
                mentions.append(m)
                taken.update(range(i, j))
        mentions.extend(posts)
        ends = {m.end for m in mentions}
        for i in range(1, len(tokens)):
            if i not in taken and i not in blocked and mode != "upper":
                m = self._admin_code(tokens, caption, i, i in ends)
                if m is not None:
                    mentions.append(m)
        mentions = real_places_first(mentions)
        mentions.sort(key=lambda m: m.start)
        paired = pair_postcodes(caption, tokens, mentions)  # "79102 Freiburg", "Hamilton 3204"
        if paired:
            mentions = sorted(mentions + paired, key=lambda m: m.start)
        settle_neighbours(caption, tokens, mentions)
        return mentions

    def _score(self, caption: str) -> tuple[dict[str, float], list[Mention]]:
        """The rules' country scores (before the learned scorer) and the mentions."""
        mentions = self._mentions(caption)
        scores, _ = self._distribute(mentions)
        return scores, mentions

    def _distribute(self, mentions: list[Mention]) -> tuple[dict[str, float], list[dict[str, float]]]:
        """Rule scores per country, and each mention's distribution over its countries.

        Mentions that support the same country reinforce each other; an adjacent pair ("Reading,
        Berkshire", "Paris, Texas") lends its neighbour the evidence it lacks.
        """
        scores: dict[str, float] = {}
        dists: list[dict[str, float]] = []
        for idx, m in enumerate(mentions):
            support: dict[str, float] = {}
            for jdx, o in enumerate(mentions):
                if jdx == idx:
                    continue
                adjacent = o.start == m.end or o.end == m.start
                near = abs(o.start - m.end) <= 2 or abs(m.start - o.end) <= 2
                factor = 1.0 + (1.0 if adjacent else 0.5 if near else 0.0)
                first, second = (m, o) if m.start < o.start else (o, m)
                for c, w in o.weights.items():
                    # neighbours lend more only where they can be one place: "Kingston, Surrey"
                    # is not a Canadian pair (an Ontario town and a British Columbia city)
                    f = factor if factor == 1.0 or same_division(first, second, c) else 1.0
                    support[c] = support.get(c, 0.0) + o.strength * w * f
            strength = m.strength
            if m.note.endswith(":weak") and any(support.get(c, 0) >= 1.0 for c in m.weights):
                strength /= WEAK  # a neighbour of the same country is the evidence it lacked
            elif m.note.endswith(":weak") and m.listed:
                strength /= WEAK  # "Petra, Jordan": a comma-separated list of places
            raw = {c: w * (1.0 + self.coupling * support.get(c, 0.0)) for c, w in m.weights.items()}
            total = sum(raw.values()) or 1.0
            dist = {c: v / total for c, v in raw.items()}
            dists.append(dist)
            for c, v in dist.items():
                scores[c] = scores.get(c, 0.0) + strength * v
        return scores, dists
