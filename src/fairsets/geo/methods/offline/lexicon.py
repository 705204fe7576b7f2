"""The ``offline`` method's policy: small closed word lists and the strength of each kind of mention.

Bigger lists (false friends, given names) live in ``data/`` and are read by
:mod:`fairsets.geo.methods.offline.wordsets`.
"""

from __future__ import annotations

# -- small closed word lists (the policy; bigger lists live in data/) ----------------------------
PREPOSITIONS = frozenset(
    [
        "in",
        "at",
        "near",
        "from",
        "to",
        "visit",
        "visiting",
        "around",
        "across",
        "outside",
        "inside",
        "downtown",
        "via",
        "into",
        "throughout",
        "across",
        "toward",
        "towards",
        "within",
    ]
)
# Nouns that follow a place name and confirm it ("Nice airport", "Florence cathedral").
PLACE_NOUNS = frozenset(
    [
        "flag",
        "flags",
        "map",
        "national",
        "airport",
        "beach",
        "beaches",
        "bay",
        "harbour",
        "harbor",
        "port",
        "city",
        "town",
        "village",
        "downtown",
        "skyline",
        "cathedral",
        "church",
        "temple",
        "mosque",
        "castle",
        "palace",
        "station",
        "university",
        "college",
        "museum",
        "zoo",
        "park",
        "street",
        "road",
        "avenue",
        "boulevard",
        "highway",
        "bridge",
        "river",
        "lake",
        "island",
        "islands",
        "coast",
        "coastline",
        "county",
        "province",
        "state",
        "region",
        "district",
        "suburb",
        "neighbourhood",
        "neighborhood",
        "centre",
        "center",
        "mall",
        "market",
        "square",
        "old",
        "valley",
        "mountains",
        "mountain",
        "hills",
        "waterfront",
        "marina",
        "pier",
        "promenade",
        "metro",
        "subway",
        "stadium",
        "campus",
        "province",
        "capital",
        "countryside",
        "resort",
        "area",
        "hotel",
        "hotels",
    ]
)
# Words after a demonym that make it a style, a dish or a breed rather than a place.
STYLE_WORDS = frozenset(
    [
        "style",
        "styled",
        "styles",
        "inspired",
        "themed",
        "theme",
        "design",
        "designs",
        "decor",
        "look",
        "looks",
        "fashion",
        "food",
        "foods",
        "cuisine",
        "cuisines",
        "recipe",
        "recipes",
        "dish",
        "dishes",
        "dessert",
        "desserts",
        "cooking",
        "cook",
        "cookbook",
        "meal",
        "meals",
        "breed",
        "breeds",
        "puppy",
        "puppies",
        "dog",
        "dogs",
        "cat",
        "cats",
        "kitten",
        "restaurant",
        "restaurants",
        "takeaway",
        "dressing",
        "sauce",
        "salad",
        "soup",
        "bread",
        "cheese",
        "language",
        "lessons",
        "lesson",
        "class",
        "classes",
        "course",
        "courses",
        "grammar",
        "alphabet",
        "letters",
        "letter",
        "word",
        "words",
        "text",
        "translation",
        "subtitles",
        "speaking",
        "speaker",
        "teacher",
        "tutor",
        "keyboard",
        "font",
        "script",
        "calligraphy",
        "numerals",
    ]
)
# Right after a demonym, a language, not a place: "the French name", "British English".
LANGUAGE_WORDS = frozenset(
    [
        "name",
        "names",
        "term",
        "terms",
        "english",
        "spelling",
        "spellings",
        "pronunciation",
        "dialect",
        "dialects",
        "accent",
        "transliteration",
    ]
)
STYLE_WORDS |= frozenset(
    [
        "curry",
        "curries",
        "noodles",
        "noodle",
        "takeout",
        "chic",
        "colonial",
        "revival",
        "cottage",
        "farmhouse",
        "modern",
    ]
)
# Kinds that contain places: "<place>, <container>" reads the place inside the container.
CONTAINERS = frozenset({"country", "alias", "code", "region", "admin_code", "postcode"})
PEOPLE_NOUNS = frozenset(
    [
        "tourist",
        "tourists",
        "visitor",
        "visitors",
        "traveller",
        "travellers",
        "traveler",
        "travelers",
        "student",
        "students",
        "expat",
        "expats",
        "couple",
        "couples",
        "family",
        "families",
        "man",
        "men",
        "woman",
        "women",
        "girl",
        "girls",
        "boy",
        "boys",
        "people",
        "friends",
        "backpackers",
        "team",
        "players",
        "fans",
    ]
)
# Words before a demonym that change what it means ("Latin American", "pan-African").
DEMONYM_BLOCKERS = frozenset(
    ["latin", "south", "north", "central", "pan", "anglo", "afro", "euro", "meso", "sub"]
)
TITLES = frozenset(
    [
        "queen",
        "king",
        "prince",
        "princess",
        "lady",
        "lord",
        "mr",
        "mrs",
        "ms",
        "miss",
        "dr",
        "sir",
        "madame",
        "duke",
        "duchess",
        "empress",
        "emperor",
    ]
)
# Car makers: the word after one is a model ("Hyundai Tucson", "Seat Ibiza", "Dodge Durango").
BRANDS = frozenset(
    [
        "hyundai",
        "kia",
        "nissan",
        "dodge",
        "chevrolet",
        "chevy",
        "seat",
        "toyota",
        "honda",
        "ford",
        "jeep",
        "gmc",
        "buick",
        "lincoln",
        "mercury",
        "volkswagen",
        "vw",
        "renault",
        "peugeot",
        "citroen",
        "fiat",
        "mazda",
        "subaru",
        "mitsubishi",
        "suzuki",
        "skoda",
        "opel",
        "chrysler",
        "pontiac",
        "plymouth",
        "oldsmobile",
        "cadillac",
        "tesla",
        "lexus",
        "acura",
        "infiniti",
        "porsche",
        "audi",
        "bmw",
        "mercedes",
        "volvo",
        "nokia",
        "samsung",
    ]
)
# Function words that are also (tiny) places somewhere: never a place on their own.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "on",
        "in",
        "at",
        "to",
        "by",
        "for",
        "from",
        "with",
        "and",
        "or",
        "but",
        "as",
        "is",
        "it",
        "its",
        "be",
        "we",
        "us",
        "me",
        "my",
        "no",
        "so",
        "up",
        "do",
        "go",
        "if",
        "all",
        "one",
        "two",
        "our",
        "your",
        "his",
        "her",
        "their",
        "this",
        "that",
        "these",
        "those",
        "are",
        "was",
        "were",
        "has",
        "have",
        "had",
        "not",
    ]
)
MONTHS = frozenset(
    [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ]
)

# Base strength of one mention, by kind.
KIND_STRENGTH = {
    "country": 3.0,
    "alias": 3.0,
    "code": 3.0,
    "demonym": 2.2,
    "region": 2.2,
    "place": 2.5,
    "admin_code": 1.6,
    "postcode": 2.0,
    "organisation": 2.0,
    "region_demonym": 1.8,
    "demonym_ambiguous": 0.7,
}
# Mild prior for the countries English web captions talk about most (breaks near-ties between
# namesakes of similar size, e.g. Cambridge GBR/CAN/USA); everything else is 1.
COUNTRY_PRIOR = {"USA": 1.6, "GBR": 1.5, "CAN": 1.25, "AUS": 1.25, "IND": 1.15, "IRL": 1.1, "NZL": 1.1}
WEAK = 0.3  # factor for a mention that lacks the evidence it needs
REGION_POPULATION = 1_000_000  # subdivisions and named places have no population: assume a big one
#: A city this big is known as a city: never read as a surname, a first name or an acronym.
KNOWN_CITY = 100_000

_GLUE = frozenset({"the", "of", "de", "la", "le", "and", "on", "upon", "in"})

# Words that make a country named in the caption the answer: a flag shows its country ("Chad flag
# sticker", "helmet in Brazilian flag colours"), "traditional" + demonym names a national dress or
# building ("traditional Japanese yukata", "traditional Korean hanok").
FLAG_WORDS = frozenset({"flag", "flags"})
NATIONAL_KINDS = frozenset({"country", "alias", "code", "demonym", "demonym_ambiguous", "region_demonym"})
# Nouns of furniture and product lines: a town name right before one names the model, not a place
# ("the Ashford dining table" has "dining" between; "Camden armchair", "Oslo range").
PRODUCT_NOUNS = frozenset(
    """
    sofa sofas couch couches settee settees armchair armchairs chair chairs recliner recliners
    loveseat sectional ottoman footstool stool stools table tables desk desks bookcase bookcases
    bookshelf sideboard dresser dressers wardrobe wardrobes cabinet cabinets headboard bedframe
    vanity vanities mattress chandelier lamp lamps mirror mirrors rug rugs faucet faucets
    pillowcase duvet quilt bedspread collection range seater
    """.split()  # noqa: SIM905 - a word list reads best as text
)
# Street nouns: "4 Kingston Road", "27 Albany Avenue" name a street, not the town.
STREET_NOUNS = frozenset(
    """
    street st road rd avenue ave lane ln drive dr close way crescent terrace boulevard blvd court
    gardens grove place mews parade row walk
    """.split()  # noqa: SIM905 - a word list reads best as text
)
# Colours a paint, fabric or finish is named with: "Santorini white paint", "Nantucket grey".
COLOUR_WORDS = frozenset(
    "white black grey gray blue red green pink beige ivory navy cream brown gold silver teal".split()  # noqa: SIM905
)
