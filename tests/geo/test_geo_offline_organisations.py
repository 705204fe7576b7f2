"""Organisations that place a caption in one country, and brand phrases that only look like places."""

from __future__ import annotations

import csv

import pytest

from fairsets.geo.countries import countries, data_text
from fairsets.geo.gazetteer import gazetteer, name_key, tokenize
from fairsets.geo.methods.offline import organisations as org
from fairsets.geo.methods.offline.wordsets import _english_words, _lines


def _rows() -> list[dict[str, str]]:
    return list(csv.DictReader(data_text("organisations.csv").splitlines()))


def _spans(caption: str) -> list[tuple[str, str, str]]:
    """(matched text, iso3, kind) for each organisation in a caption."""
    toks = tokenize(caption)
    return [
        (caption[toks[s].start : toks[e - 1].end], iso3, kind)
        for s, e, iso3, kind in org.find_organisations(toks)
    ]


# -- the packaged lists ----------------------------------------------------------------------------
def test_lists_load_once_with_every_row_usable():
    stats = org.organisation_stats()
    assert stats["rows"] >= 500
    assert stats["rejected"] == 0 and stats["ambiguous_dropped"] == 0
    assert stats["names"] >= stats["rows"]  # St/Saint and "the" variants add names
    assert stats["brand_phrases"] >= 300
    assert org.organisation_table() is org.organisation_table()
    assert org.organisations() is org.organisations()


def test_every_row_has_a_valid_country_and_kind():
    pycountry = pytest.importorskip("pycountry")
    rows = _rows()
    assert list(rows[0]) == ["name", "iso3", "kind"]
    table = countries()
    for r in rows:
        assert pycountry.countries.get(alpha_3=r["iso3"]) is not None, r
        assert r["iso3"] in table, r
        assert r["kind"] in org.ORG_KINDS, r
        assert r["name"] == r["name"].strip() and r["name"], r


def test_no_name_twice_and_none_a_country_or_a_common_word():
    keys = [name_key(r["name"]) for r in _rows()]
    assert len(keys) == len(set(keys)), sorted({k for k in keys if keys.count(k) > 1})
    gaz = gazetteer()
    words = _english_words()
    for key in keys:
        kinds = {p.kind for p in gaz.lookup(key)}
        assert not kinds & {"country", "alias", "code", "demonym"}, key
        if " " not in key:
            assert key not in words, f"{key!r} is an English word"


def test_lookup_tables_agree():
    names = org.organisations()
    kinds = org.organisation_kinds()
    assert names.keys() == kinds.keys()
    assert names["boca juniors"] == "ARG" and kinds["boca juniors"] == "club"
    assert names["all blacks"] == "NZL" and kinds["all blacks"] == "national_team"
    assert names["bundesliga"] == "DEU"
    phrases = org.organisation_phrases()
    for first, tuples in phrases.items():
        assert all(t[0] == first for t in tuples)
        assert [len(t) for t in tuples] == sorted((len(t) for t in tuples), reverse=True)
        assert all(" ".join(t) in names for t in tuples)


# -- matching ----------------------------------------------------------------------------------------
def test_club_and_stadium_in_a_caption():
    assert _spans("Boca Juniors flag at La Bombonera") == [
        ("Boca Juniors", "ARG", "club"),
        ("La Bombonera", "ARG", "stadium"),
    ]


@pytest.mark.parametrize(
    ("caption", "expected"),
    [
        ("harvard business school campus", [("harvard business school", "USA", "university")]),
        ("FENERBAHÇE fans in the stands", [("FENERBAHÇE", "TUR", "club")]),
        ("University of Georgia football", [("University of Georgia", "USA", "university")]),
        ("Saint Louis Cardinals cap", [("Saint Louis Cardinals", "USA", "club")]),
        ("Sorbonne University Abu Dhabi campus", [("Sorbonne University Abu Dhabi", "ARE", "university")]),
        ("the Sheffield Shield final", [("Sheffield Shield", "AUS", "league")]),
        (
            "Springboks v All Blacks",
            [("Springboks", "ZAF", "national_team"), ("All Blacks", "NZL", "national_team")],
        ),
        ("a sofa in a living room", []),
    ],
)
def test_matching(caption, expected):
    assert _spans(caption) == expected


def test_longest_match_and_no_overlap():
    # "Harvard Business School" is longer than any name starting at "Harvard"; the spans of a
    # caption never overlap and come in order.
    spans = org.find_organisations(tokenize("Harvard Business School and Yale University and MIT Sloan"))
    assert [(s, e) for s, e, *_ in spans] == [(0, 3), (4, 6), (7, 9)]
    ends = [e for _, e, *_ in spans]
    starts = [s for s, *_ in spans]
    assert all(s >= prev for s, prev in zip(starts[1:], ends[:-1], strict=True))


def test_accepts_keys_and_respects_blocked_tokens():
    keys = [t.key for t in tokenize("Boca Juniors shirt")]
    assert org.find_organisations(keys) == [(0, 2, "ARG", "club")]
    assert org.find_organisations(keys, blocked={1}) == []
    assert org.find_organisations([]) == []


def test_a_longer_brand_phrase_wins_over_an_organisation():
    assert org.find_organisations(tokenize("Oxford University Press catalogue")) == []
    assert org.find_organisations(tokenize("Oxford University library")) == [(0, 2, "GBR", "university")]


# -- brand phrases -----------------------------------------------------------------------------------
def _brand_keys() -> set[str]:
    return {" ".join(t) for tuples in org.brand_phrases().values() for t in tuples}


def test_brand_phrases_have_the_false_friends_format():
    phrases = org.brand_phrases()
    for first, tuples in phrases.items():
        assert all(t[0] == first for t in tuples)
        assert [len(t) for t in tuples] == sorted((len(t) for t in tuples), reverse=True)
    assert ("kia", "rio") in phrases["kia"]
    assert ("hampton", "bay") in phrases["hampton"]


def test_brands_are_matched_as_phrases():
    assert org.find_brands(tokenize("New Kia Rio for sale")) == [(1, 3)]
    assert org.find_brands(tokenize("Hampton Bay ceiling fan, white")) == [(0, 4)]
    assert org.find_brands(tokenize("Kia dealership in Rio")) == []
    assert org.find_brands(tokenize("a glass of Canadian Club on ice")) == [(3, 5)]


def test_every_brand_holds_a_place_name_and_none_repeats_a_false_friend():
    gaz = gazetteer()
    # the file itself: _false_friends() also holds the brand phrases it masks
    false_friends = {name_key(s) for s in _lines("false_friends.txt")}
    raw = _lines("brands.txt")
    assert all(s == s.lower() for s in raw), [s for s in raw if s != s.lower()]
    lines = [name_key(s) for s in raw]
    assert len(lines) == len(set(lines)), "a phrase is listed twice"
    for key in lines:
        toks = key.split(" ")
        spans = (" ".join(toks[i:j]) for i in range(len(toks)) for j in range(i + 1, len(toks) + 1))
        assert any(gaz.lookup(s) for s in spans), f"{key!r}: no place name in it"
        assert key not in false_friends, f"{key!r} is already in false_friends.txt"


def test_no_brand_phrase_is_also_an_organisation():
    assert not _brand_keys() & org.organisations().keys()


# -- parsing other lists -----------------------------------------------------------------------------
def test_parse_drops_ambiguous_names_and_rejects_bad_rows():
    text = "\n".join(
        [
            "name,iso3,kind",
            "Nacional,URY,club",
            "Nacional,COL,club",  # two countries: neither
            "Boca Juniors,ARG,club",
            "Boca Juniors,ARG,stadium",  # same country twice: kept once, first kind
            "Atlantis FC,XXX,club",  # unknown country
            "Gotham United,USA,team",  # unknown kind
            ",USA,club",
            "St. Mirren FC,GBR,club",
        ]
    )
    table = org.parse_organisations(text, known_iso3={"URY", "COL", "ARG", "USA", "GBR"})
    assert table.rows == 8
    assert table.ambiguous == ("nacional",)
    assert "nacional" not in table.entries
    assert table.entries["boca juniors"] == ("ARG", "club")
    assert [line for line, _ in table.rejected] == [6, 7, 8]
    assert "unknown country code 'XXX'" in table.rejected[0][1]
    assert "unknown kind 'team'" in table.rejected[1][1]
    assert table.entries["saint mirren fc"] == ("GBR", "club")  # St ↔ Saint


def test_parse_rejects_a_wrong_header_with_one_clear_error():
    with pytest.raises(ValueError, match="header must be name,iso3,kind"):
        org.parse_organisations("club,country\nBoca Juniors,ARG\n")
