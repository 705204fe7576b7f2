"""The country table, the term list and the false-friend list behind ``fairsets.geo``."""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from importlib import resources

import pytest

from fairsets.geo import countries as countries_mod
from fairsets.geo.countries import (
    CONTINENTS,
    NONE_ANSWERS,
    ambiguous_none_answers,
    countries,
    country,
    country_terms,
    fold,
    is_none_answer,
    iso_code,
    normalize_country,
)

TERM_KINDS = {"alias", "demonym", "code", "region_demonym", "demonym_ambiguous"}
NORMALIZE_KINDS = ("name", "alias", "code", "demonym")


def _data(name: str) -> str:
    return resources.files("fairsets.geo").joinpath("data", name).read_text(encoding="utf-8")


def _term_rows() -> list[dict[str, str]]:
    return list(csv.DictReader(_data("country_terms.csv").splitlines()))


def _false_friends() -> list[str]:
    return [s for line in _data("false_friends.txt").splitlines() if (s := line.split("#", 1)[0].strip())]


def _tokens(text: str) -> str:
    """Folded word tokens, the way phrase matching sees a phrase ("jiu-jitsu" = "jiu jitsu")."""
    return " ".join(re.findall(r"[^\W_]+", fold(text)))


# -- normalize_country --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "iso3"),
    [
        ("Brazil", "BRA"),
        ("brazil", "BRA"),
        ("  BRAZIL. ", "BRA"),
        ("United States of America", "USA"),
        ("The Netherlands", "NLD"),
        ("Côte d'Ivoire", "CIV"),
        ("Cote d’Ivoire", "CIV"),
        ("Türkiye", "TUR"),
        ("Bolivia (Plurinational State of)", "BOL"),
        ("Democratic Republic of the Congo", "COD"),
        ("Congo", "COG"),
        ("Guinea-Bissau", "GNB"),
        ("Vietnam", "VNM"),
        ("Viet Nam", "VNM"),
        ("Russia", "RUS"),
        ("Russian Federation", "RUS"),
        ("Czech Republic", "CZE"),
        ("Ivory Coast", "CIV"),
        ("South Korea", "KOR"),
        ("North Korea", "PRK"),
        ("Micronesia", "FSM"),
        ("Moldova", "MDA"),
        ("Hong Kong", "HKG"),
        ("Puerto Rico", "PRI"),
        ("Greenland", "GRL"),
        ("Taiwan", "TWN"),
        ("Georgia", "GEO"),
        ("Jersey", "JEY"),
    ],
)
def test_normalize_names(text: str, iso3: str) -> None:
    assert normalize_country(text) == iso3


@pytest.mark.parametrize(
    ("text", "iso3"),
    [
        ("Holland", "NLD"),
        ("Burma", "MMR"),
        ("Swaziland", "SWZ"),
        ("East Timor", "TLS"),
        ("Vatican City", "VAT"),
        ("Macedonia", "MKD"),
        ("Republic of Ireland", "IRL"),
        ("Eire", "IRL"),
        ("Korea", "KOR"),
        ("Persia", "IRN"),
        ("Congo-Brazzaville", "COG"),
        ("Congo-Kinshasa", "COD"),
        ("DR Congo", "COD"),
        ("Zaire", "COD"),
        ("Cape Verde", "CPV"),
        ("Great Britain", "GBR"),
        ("Britain", "GBR"),
        ("England", "GBR"),
        ("Scotland", "GBR"),
        ("Wales", "GBR"),
        ("Northern Ireland", "GBR"),
        ("America", "USA"),
        ("Turkey", "TUR"),
        ("Emirates", "ARE"),
        ("Palestine", "PSE"),
        ("St Lucia", "LCA"),
        ("St. Lucia", "LCA"),
        ("St. Kitts", "KNA"),
        ("Phillipines", "PHL"),
        ("Ceylon", "LKA"),
        ("Siam", "THA"),
        ("Chinese Taipei", "TWN"),
        ("Macau", "MAC"),
    ],
)
def test_normalize_aliases(text: str, iso3: str) -> None:
    assert normalize_country(text) == iso3


@pytest.mark.parametrize(
    ("text", "iso3"),
    [
        ("Deutschland", "DEU"),
        ("España", "ESP"),
        ("Espana", "ESP"),
        ("Italia", "ITA"),
        ("Nippon", "JPN"),
        ("Bharat", "IND"),
        ("Hellas", "GRC"),
        ("Éire", "IRL"),
        ("Suomi", "FIN"),
        ("Sverige", "SWE"),
        ("Norge", "NOR"),
        ("Danmark", "DNK"),
        ("Polska", "POL"),
        ("Magyarország", "HUN"),
        ("Österreich", "AUT"),
        ("Schweiz", "CHE"),
        ("Suisse", "CHE"),
        ("Brasil", "BRA"),
        ("México", "MEX"),
        ("Россия", "RUS"),
        ("中国", "CHN"),
        ("日本", "JPN"),
        ("한국", "KOR"),
        ("ประเทศไทย", "THA"),
        ("Việt Nam", "VNM"),
    ],
)
def test_normalize_native_names(text: str, iso3: str) -> None:
    assert normalize_country(text) == iso3


@pytest.mark.parametrize(
    ("text", "iso3"),
    [
        ("Brazilian", "BRA"),
        ("Brazilians", "BRA"),
        ("American", "USA"),
        ("Americans", "USA"),
        ("Filipino", "PHL"),
        ("Filipina", "PHL"),
        ("Filipinos", "PHL"),
        ("Philippine", "PHL"),
        ("British", "GBR"),
        ("Brits", "GBR"),
        ("Scottish", "GBR"),
        ("Scots", "GBR"),
        ("Welsh", "GBR"),
        ("Northern Irish", "GBR"),
        ("Irish", "IRL"),
        ("Dutch", "NLD"),
        ("Swiss", "CHE"),
        ("Thai", "THA"),
        ("Lao", "LAO"),
        ("Malagasy", "MDG"),
        ("Emirati", "ARE"),
        ("Saudi", "SAU"),
        ("Kuwaiti", "KWT"),
        ("Bahraini", "BHR"),
        ("Qatari", "QAT"),
        ("Omani", "OMN"),
        ("Yemeni", "YEM"),
        ("Iraqi", "IRQ"),
        ("Israeli", "ISR"),
        ("Palestinian", "PSE"),
        ("Lebanese", "LBN"),
        ("Chinese", "CHN"),
        ("Turkish", "TUR"),
        ("Jordanian", "JOR"),
        ("French", "FRA"),
        ("Spanish", "ESP"),
        ("Danish", "DNK"),
        ("South Korean", "KOR"),
        ("North Korean", "PRK"),
        ("Samoan", "WSM"),
        ("American Samoan", "ASM"),
        ("Puerto Rican", "PRI"),
        ("Greenlandic", "GRL"),
        ("Hong Konger", "HKG"),
        ("Taiwanese", "TWN"),
        ("Nigerien", "NER"),
        ("Nigerian", "NGA"),
    ],
)
def test_normalize_demonyms(text: str, iso3: str) -> None:
    assert normalize_country(text) == iso3


@pytest.mark.parametrize(
    ("text", "iso3"),
    [
        ("US", "USA"),
        ("U.S.", "USA"),
        ("USA", "USA"),
        ("U.S.A.", "USA"),
        ("usa", "USA"),
        ("the US", "USA"),
        ("UK", "GBR"),
        ("U.K.", "GBR"),
        ("the UK", "GBR"),
        ("UAE", "ARE"),
        ("U.A.E.", "ARE"),
        ("DRC", "COD"),
        ("D.R.C.", "COD"),
        ("PRC", "CHN"),
        ("ROK", "KOR"),
        ("KSA", "SAU"),
        ("NZ", "NZL"),
        ("RSA", "ZAF"),
        ("PNG", "PNG"),
        ("BiH", "BIH"),
        ("DPRK", "PRK"),
        ("DE", "DEU"),
        ("deu", "DEU"),
    ],
)
def test_normalize_codes(text: str, iso3: str) -> None:
    assert normalize_country(text) == iso3


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "   ",
        "No",
        "no",
        "NO.",
        "none",
        "None",
        "No country",
        "N/A",
        "n/a",
        "na",
        "Na",
        "N.A.",
        "-",
        "unknown",
        "nan",
    ],
)
def test_none_answers(text: str | None) -> None:
    assert is_none_answer(text)
    assert normalize_country(text) is None


@pytest.mark.parametrize(
    ("text", "iso3"),
    [("NO", "NOR"), ("NA", "NAM"), (" NO ", "NOR"), ("NOR", "NOR"), ("NAM", "NAM"), ("DE", "DEU")],
)
def test_upper_case_iso_codes_come_before_none_answers(text: str, iso3: str) -> None:
    # NO and NA are Norway and Namibia when written as codes; no, No, na, NO. stay "no country".
    assert iso_code(text) == iso3
    assert not is_none_answer(text)
    assert normalize_country(text) == iso3


@pytest.mark.parametrize(
    "text", ["no", "No", "nO", "na", "Na", "NO.", "N/A", "USA.", "UK", "CAR", "Nor", "ÑO"]
)
def test_iso_code_needs_exact_upper_case_iso_letters(text: str) -> None:
    assert iso_code(text) is None


def test_only_no_and_na_are_both_none_answers_and_codes() -> None:
    # The whole clash the code-first rule resolves: any new none answer that is also a code shows up here.
    assert sorted(a for a in NONE_ANSWERS if iso_code(a.upper())) == ["na", "no"]


@pytest.mark.parametrize(
    ("values", "positions"),
    [
        (["us", "no", "de", "na", "No", "NO"], [1, 3]),  # lower-case codes: no/na may be Norway/Namibia
        (["deu", " no ", None, 3.0], [1]),
        (["US", "no", "DE"], []),  # capitals: no is a none answer
        (["no", "na", "none"], []),  # no other lower-case code
        (["Germany", "no", "usa"], [1]),  # usa is an ISO3 code in lower case
        (["us", "No", "NA", "N/A"], []),  # title case and capitals are never ambiguous
    ],
)
def test_ambiguous_none_answers(values: list[object], positions: list[int]) -> None:
    assert ambiguous_none_answers(values) == positions


def test_none_answer_float_nan() -> None:
    assert is_none_answer(float("nan"))
    assert normalize_country(float("nan")) is None  # type: ignore[arg-type]


def test_none_answer_is_whole_string_only() -> None:
    # A "no" inside a longer answer is not a none answer, but it names no country either.
    assert not is_none_answer("Output: No")
    assert normalize_country("Output: No") is None
    assert not is_none_answer("Norway")
    assert not is_none_answer("Namibia")


@pytest.mark.parametrize(
    "text",
    ["Paris", "Texas", "Europe", "Africa", "Indian Ocean", "Scandinavia", "Kosovo", "CAR", "French fries"],
)
def test_normalize_not_a_country(text: str) -> None:
    assert normalize_country(text) is None


@pytest.mark.parametrize(
    ("text", "kind", "iso3"),
    [
        ("Texan", "region_demonym", "USA"),
        ("New Yorker", "region_demonym", "USA"),
        ("Hawaiian", "region_demonym", "USA"),
        ("Bavarian", "region_demonym", "DEU"),
        ("Tuscan", "region_demonym", "ITA"),
        ("Venetian", "region_demonym", "ITA"),
        ("Parisian", "region_demonym", "FRA"),
        ("Londoner", "region_demonym", "GBR"),
        ("Québécois", "region_demonym", "CAN"),
        ("Balinese", "region_demonym", "IDN"),
        ("Tasmanian", "region_demonym", "AUS"),
        ("Siberian", "region_demonym", "RUS"),
        ("Keralite", "region_demonym", "IND"),
        ("English", "demonym_ambiguous", "GBR"),
        ("Kiwi", "demonym_ambiguous", "NZL"),
        ("Korean", "demonym_ambiguous", "KOR"),
        ("Congolese", "demonym_ambiguous", "COD"),
        ("Dominican", "demonym_ambiguous", "DOM"),
        ("Guinean", "demonym_ambiguous", "GIN"),
        ("Georgian", "demonym_ambiguous", "GEO"),
        ("Polish", "demonym_ambiguous", "POL"),
    ],
)
def test_context_kinds_are_loaded_but_not_normalized(text: str, kind: str, iso3: str) -> None:
    assert country_terms()[kind][fold(text)] == iso3
    assert normalize_country(text) is None


@pytest.mark.parametrize("text", ["Punjabi", "Bengali", "Catalan", "Basque", "Tibetan", "Cantonese", "car"])
def test_terms_that_name_no_single_country_are_left_out(text: str) -> None:
    assert all(fold(text) not in mapping for mapping in country_terms().values())


def test_country_terms_kinds() -> None:
    terms = country_terms()
    assert set(terms) == {"name", *TERM_KINDS}
    assert terms["demonym"][fold("Brazilian")] == "BRA"
    assert "" not in terms["name"]


def test_country_terms_rejects_unknown_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    real = countries_mod.data_text

    def fake(name: str) -> str:
        if name == "country_terms.csv":
            return "iso3,term,kind\nFRA,Gaul,nickname\n"
        return real(name)

    monkeypatch.setattr(countries_mod, "data_text", fake)
    with pytest.raises(ValueError, match="nickname"):
        country_terms.__wrapped__()


# -- the data files -----------------------------------------------------------------------------


def test_countries_csv_codes_are_valid() -> None:
    rows = list(csv.DictReader(_data("countries.csv").splitlines()))
    assert len(rows) == len(countries()) == 249
    iso3 = [r["iso3"] for r in rows]
    iso2 = [r["iso2"] for r in rows]
    assert all(re.fullmatch(r"[A-Z]{3}", c) for c in iso3)
    assert all(re.fullmatch(r"[A-Z]{2}", c) for c in iso2)
    assert len(set(iso3)) == len(iso3)
    assert len(set(iso2)) == len(iso2)
    assert {r["continent"] for r in rows} <= set(CONTINENTS)


def test_country_terms_csv_is_well_formed() -> None:
    text = _data("country_terms.csv")
    assert text.splitlines()[0] == "iso3,term,kind"
    rows = _term_rows()
    table = countries()
    for r in rows:
        assert r["iso3"] in table, r
        assert r["kind"] in TERM_KINDS, r
        assert r["term"] == r["term"].strip() and fold(r["term"]), r
    keys = [(r["iso3"], r["kind"], r["term"].casefold()) for r in rows]
    assert keys == sorted(keys), "sort by iso3, then kind, then term"


def test_country_terms_have_no_duplicates() -> None:
    by_term: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in _term_rows():
        by_term[fold(r["term"])].append(r)
    assert {k: v for k, v in by_term.items() if len(v) > 1} == {}


def test_no_term_names_two_countries() -> None:
    # Across every kind, names and ISO codes from countries.csv included.
    seen: dict[str, set[str]] = defaultdict(set)
    for mapping in country_terms().values():
        for term, iso3 in mapping.items():
            seen[term].add(iso3)
    assert {t: s for t, s in seen.items() if len(s) > 1} == {}


def test_every_sovereign_state_has_a_demonym() -> None:
    terms = country_terms()
    have = set(terms["demonym"].values()) | set(terms["demonym_ambiguous"].values())
    # The Vatican has none in English; Dominica and the Republic of the Congo share theirs
    # ("Dominican", "Congolese") with the Dominican Republic and the DR Congo.
    missing = {c.iso3 for c in countries().values() if c.independent and c.iso3 not in have}
    assert missing == {"VAT", "DMA", "COG"}


# -- country() and the table ----------------------------------------------------------------------


def test_country_unknown_code_names_it() -> None:
    with pytest.raises(KeyError, match="XYZ"):
        country("XYZ")


def test_country_accepts_lower_case() -> None:
    assert country("ind").iso3 == "IND"


@pytest.mark.parametrize(
    ("iso3", "continent", "subregion", "income"),
    [
        ("IND", "AS", "Southern Asia", "Lower middle income"),
        ("NOR", "EU", "Northern Europe", "High income"),
        ("BRA", "SA", "Latin America and the Caribbean", "Upper middle income"),
        ("USA", "NA", "Northern America", "High income"),
        ("NZL", "OC", "Australia and New Zealand", "High income"),
    ],
)
def test_country_groups(iso3: str, continent: str, subregion: str, income: str) -> None:
    c = country(iso3)
    assert (c.continent, c.subregion, c.income) == (continent, subregion, income)
    assert c.continent_name == CONTINENTS[continent]


def test_country_details() -> None:
    bra = country("BRA")
    assert bra.intermediate_region == "South America"
    assert bra.independent and bra.population > 100_000_000
    hkg = country("HKG")
    assert not hkg.independent and hkg.subregion == "Eastern Asia"
    d = country("NOR").as_dict()
    assert d["continent_name"] == "Europe" and d["iso2"] == "NO"


# -- fold() ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "folded"),
    [
        ("Côte d’Ivoire", "cote d'ivoire"),
        ("  São Tomé & Príncipe! ", "sao tome & principe"),
        ("U.S.A.", "u s a"),
        ("Guinea-Bissau", "guinea-bissau"),
        ("Bolivia (Plurinational State of)", "bolivia plurinational state of"),
        ("ÅLAND", "aland"),
        ("Straße", "strasse"),
        ("Türkiye", "turkiye"),
        ("- 'Chad' -", "chad"),
        ("tab\tand\nnewline", "tab and newline"),
        ("", ""),
    ],
)
def test_fold(text: str, folded: str) -> None:
    assert fold(text) == folded


def test_fold_is_idempotent() -> None:
    for r in _term_rows():
        assert fold(fold(r["term"])) == fold(r["term"])


# -- false_friends.txt ----------------------------------------------------------------------------


def test_false_friends_are_lower_case_and_unique() -> None:
    phrases = _false_friends()
    assert len(phrases) >= 400
    assert [p for p in phrases if p != p.lower()] == []
    assert len(set(phrases)) == len(phrases)
    tokens: dict[str, list[str]] = defaultdict(list)
    for p in phrases:
        tokens[_tokens(p)].append(p)
    assert {k: v for k, v in tokens.items() if len(v) > 1} == {}


def test_false_friends_are_grouped_under_headings() -> None:
    headings = [line for line in _data("false_friends.txt").splitlines() if line.startswith("# --")]
    assert len(headings) >= 5


def test_no_false_friend_is_itself_a_country() -> None:
    phrases = _false_friends()
    assert [p for p in phrases if normalize_country(p) is not None] == []
    terms = country_terms()
    assert [(p, k) for p in phrases for k, m in terms.items() if fold(p) in m] == []


@pytest.mark.parametrize(
    "phrase",
    [
        "french fries",
        "turkey dinner",
        "fine china",
        "german shepherd",
        "paris hilton",
        "air jordan",
        "for sale",
    ],
)
def test_false_friends_cover_the_classics(phrase: str) -> None:
    assert phrase in _false_friends()


@pytest.mark.parametrize(
    "place", ["english channel", "swiss alps", "french riviera", "new york", "new zealand", "indian ocean"]
)
def test_false_friends_leave_real_places_out(place: str) -> None:
    assert place not in _false_friends()
