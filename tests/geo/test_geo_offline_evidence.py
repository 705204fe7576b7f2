"""The ``offline`` method reads address evidence: postal codes, shared state abbreviations, a loosely
written "UK", URL/file-name slugs, lower-case major places and state or province names alone.

Each test below names a caption the method got wrong before this evidence was read ("failed before:
got X"); the guards at the end hold the precision side: codes that are also words stay silent.
"""

from __future__ import annotations

from fairsets.geo.methods.offline import OfflineMethod
from fairsets.geo.methods.offline.evidence import is_slug, postcodes


def test_shared_state_abbreviation_follows_the_town(offline: OfflineMethod) -> None:
    """ "WA" is Washington and Western Australia: the town and the postcode decide.

    failed before: got USA for "Perth WA 6000", "Perth, WA" and "Bunbury WA 6230".
    """
    assert offline.predict_one("Perth WA 6000") == "AUS"
    assert offline.predict_one("Perth, WA") == "AUS"
    assert offline.predict_one("Bunbury WA 6230") == "AUS"
    assert offline.predict_one("Seattle, WA") == "USA"
    assert offline.predict_one("Spokane WA 99201") == "USA"
    assert offline.predict_one("Yellowknife NT") == "CAN"
    assert offline.predict_one("Darwin, NT") == "AUS"


def test_postal_codes_name_the_country(offline: OfflineMethod) -> None:
    """A full Canadian postal code or UK postcode is a place on its own.

    failed before: got None for all three captions.
    """
    assert offline.predict_one("Condo for sale M5V 3L9") == "CAN"
    assert offline.predict_one("Studio flat EC1A 1BB") == "GBR"
    assert offline.predict_one("Office to let M1 1AE") == "GBR"


def test_zip_after_state_code_in_capitals(offline: OfflineMethod) -> None:
    """A state code followed by a ZIP is an address even where capitals say nothing.

    failed before: got GBR for "LONDON KY 40741".
    """
    assert offline.predict_one("LONDON KY 40741") == "USA"
    assert offline.predict_one("Paris TX 75460") == "USA"
    assert offline.predict_one("Athens GA 30601") == "USA"


def test_postcode_spans() -> None:
    assert postcodes("Ottawa, ON K1A 0B1") == [(11, 18, "CAN")]
    assert postcodes("London SW1A 1AA") == [(7, 15, "GBR")]
    assert postcodes("Dallas, TX 75201-1234") == [(8, 21, "USA")]
    assert postcodes("Perth WA 6000") == [(6, 13, "AUS")]
    # A bare number, a paper size or a car model is not a postal code.
    assert postcodes("Call 555 12345") == []
    assert postcodes("A4 2PK paper") == []
    assert postcodes("BMW X5 3AB") == []
    assert postcodes("lowercase m5v 3l9") == []


def test_loosely_written_uk(offline: OfflineMethod) -> None:
    """ "Uk" at the end of a caption is the United Kingdom, not the Russian village Uk.

    failed before: got USA for "Coats Uk", RUS for "Fabric Uk".
    """
    assert offline.predict_one("Coats Uk") == "GBR"
    assert offline.predict_one("Fabric Uk") == "GBR"
    assert offline.predict_one("Dress size 10 uk") is None  # a sizing convention


def test_slug_captions_are_read_without_case(offline: OfflineMethod) -> None:
    """A file name or URL path has no sentence case: "paris" in it is a name.

    failed before: got None for "IMG_paris_2019.jpg".
    """
    assert offline.predict_one("IMG_paris_2019.jpg") == "FRA"
    assert offline.predict_one("holiday-homes/saint-kitts-and-nevis/villa-3") == "KNA"
    assert offline.predict_one("img_0042_final.png") is None
    assert is_slug("IMG_paris_2019.jpg") and is_slug("villas/saint-lucia")
    assert not is_slug("Paris in spring") and not is_slug("2019")


def test_lower_case_major_place(offline: OfflineMethod) -> None:
    """A name that begins with a city of a million is a name even when its words are words.

    failed before: got None for "berlin wall".
    """
    assert offline.predict_one("berlin wall") == "DEU"
    assert offline.predict_one("vintage paris poster") == "FRA"


def test_state_or_province_alone(offline: OfflineMethod) -> None:
    """A US state or Canadian province named alone, and "<state> state", are that country.

    failed before: got None for "Nova Scotia lighthouse", GEO for "Georgia state flag".
    """
    assert offline.predict_one("Nova Scotia lighthouse") == "CAN"
    assert offline.predict_one("Georgia state flag") == "USA"
    assert offline.predict_one("Tbilisi, Georgia") == "GEO"
    assert offline.predict_one("Ohio State Flag") == "USA"


def test_street_named_after_a_title(offline: OfflineMethod) -> None:
    """A title followed by a place noun is a street, not a person.

    failed before: got None for "Queen Street, Auckland".
    """
    assert offline.predict_one("Queen Street, Auckland") == "NZL"
    assert offline.predict_one("Queen Victoria portrait") is None


def test_abbreviations_that_are_words_stay_silent(offline: OfflineMethod) -> None:
    assert offline.predict_one("Made in CA") is None
    assert offline.predict_one("Model ON 12345") is None
    assert offline.predict_one("Paris TX 75460") == "USA"
    assert offline.predict_one("London ON") == "CAN"
