"""``offline``: the best caption → country mapping without a language model.

Pipeline per caption (rules find the candidates, two small learned models decide; ~9k captions/s
on one core, see ``docs/geo-offline.md``):

1. **Tokens and casing.** Words with their original case; the caption's case mode (``normal``
   sentence case, ``title`` case, ``upper``, ``lower``) decides how much a capital letter says.
2. **False friends.** Phrases from ``data/false_friends.txt`` (French fries, turkey dinner,
   Paris Hilton, Air Jordan, stock photo, …) are masked before any lookup.
3. **Entities.** Longest gazetteer matches (countries, aliases, demonyms, ISO 3166-2
   subdivisions, English names of regions/landmarks/islands, GeoNames cities ≥ 1,000
   inhabitants, exonyms) — the "entities" are the spans the gazetteer knows.
4. **Evidence per mention.** A base strength by kind (a country name says more than a village
   name; a city's strength grows with log population). Names that are also English words
   (Nice, Reading, Sale, Split, Mobile, Victoria, Jordan…) need evidence: a capital letter in a
   sentence-case caption, a preposition before (in, at, near, from, visit…), a place noun
   after (beach, hotel, airport…), or another mention of the same country next to them
   ("Reading, Berkshire"). Given names followed by a surname-like word ("Sydney Sweeney"), a
   town after a census first name ("Frederic Warburg"; ``data/first_names.txt``) and names after a
   title ("Queen Victoria") are people. Demonyms followed by style/food words
   ("Italian style", "Mexican recipe") are not places.
   Address evidence (:mod:`~fairsets.geo.methods.offline.evidence`): full Canadian and UK postal
   codes, a US ZIP or Australian postcode after a state code, abbreviations two countries share
   ("Perth, WA" → AUS, "Seattle, WA" → USA), a postcode beside a town in the shape and on the side
   its country writes it (:mod:`~fairsets.geo.methods.offline.postal`: "14001 Córdoba" → ESP,
   "X5000 Córdoba" → ARG), "Uk" standing apart, slugs read without case
   ("IMG_paris_2019.jpg"), and US states / Canadian provinces named alone ("Nova Scotia
   lighthouse", "Georgia state flag").
5. **Ambiguity policy.** Each mention spreads its strength over its candidate countries in
   proportion to population × a mild prior for the countries English web captions talk about
   most; mentions that support the same country reinforce each other, so "Paris, Texas" →
   USA, "Cambridge, MA" → USA, "Victoria, BC" → CAN, "Perth, Scotland" → GBR, "Tbilisi,
   Georgia" → GEO. Neighbours (:mod:`~fairsets.geo.methods.offline.neighbours`): "town, county"
   and "town, city" are one place only in a country where they can be (a container there, or
   cities sharing a GeoNames ``admin1``: "Windsor, Melbourne" → AUS, "Yardley, Birmingham" →
   GBR); a town known only abroad before a county takes the county's country.
6. **Organisations and brands.** Teams, universities, stadiums and national institutions of one
   country (``data/organisations.csv``) are mentions of that country; brand and product-line
   phrases (``data/brands.txt``: "kia sorento", "hampton bay") are masked like false friends.
7. **Decision (learned).** :mod:`~fairsets.geo.methods.offline.scorer`: a logistic model gives
   each mention the probability that it is a place in the caption's country (from its kind,
   population, commonness, case, neighbouring words, the caption's commercial vocabulary and the
   other mentions); a second one turns the best country's mentions into the caption's
   ``confidence``. The country is kept when the confidence reaches ``min_confidence``. Both are
   trained by ``scripts/train_geo_scorer.py`` (:mod:`~fairsets.geo.methods.offline.training`) and
   shipped as ``data/offline_scorer.json``; ``-O scorer=FILE`` loads another.
"""

from __future__ import annotations

from .lexicon import (  # noqa: F401  (the policy's word lists and strengths stay importable from here)
    BRANDS,
    CONTAINERS,
    COUNTRY_PRIOR,
    DEMONYM_BLOCKERS,
    KIND_STRENGTH,
    MONTHS,
    PEOPLE_NOUNS,
    PLACE_NOUNS,
    PREPOSITIONS,
    REGION_POPULATION,
    STOPWORDS,
    STYLE_WORDS,
    TITLES,
    WEAK,
)
from .method import Mention, OfflineMethod, explain  # noqa: F401  (importing registers ``offline``)

__all__ = ["OfflineMethod", "explain"]
