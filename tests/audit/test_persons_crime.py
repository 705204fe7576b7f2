"""Crime-word association: planted over-association recovered, every rate and Δ (against all texts
and against the complement) recomputed in plain Python over the planted specs, the one image-level
group rule, innocent senses not counted, the matched phrases, hostile texts and word files."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from person_tables import ImageSpec, write_person_tables
from person_tables import image_group as _image_group

from fairsets.annotate.layout import AnnotationError
from fairsets.audit.persons.crime import crime_association, load_crime_words, word_pattern
from fairsets.audit.persons.tables import connect

CRIME = ["police arrested the thief", "two robbers in a mugshot", "a convicted criminal"]
CLEAN = ["a man at the beach", "thiefdom of the realm", "an arrestable offence?", "portrait"]


def _expected(units: list[tuple[str, str, bool]], min_count: int, reference: str = "all") -> dict:
    """Rates and Δ per group from (gender group, race group, hit) units, in plain Python."""
    n, k = len(units), sum(h for _, _, h in units)
    out = {}
    for i, attr in enumerate(("gender", "race")):
        for g in sorted({u[i] for u in units}):
            mine = [u[2] for u in units if u[i] == g]
            rest = [u[2] for u in units if u[i] != g]
            ref = (k, n) if reference == "all" else (sum(rest), len(rest))
            rate = sum(mine) / len(mine)
            ok = len(mine) >= min_count and ref[0] and ref[1]
            delta = 100 * (rate / (ref[0] / ref[1]) - 1) if ok else None
            out[attr, g] = (sum(mine), len(mine), delta)
    return out


def test_planted_over_association_in_alt_text(tmp_path: Path) -> None:
    rng = random.Random(3)
    specs, units = [], []
    # 100 images with a middle_eastern box, 30 crime texts; 900 others, 70 crime texts: overall rate
    # 100/1000 = 0.1, middle_eastern 0.3 = 3x the base → Δ = +200 % exactly.
    for i in range(1000):
        planted = i < 100
        hit = i < 30 or 100 <= i < 170
        n = rng.choice([1, 1, 2, 3])
        boxes = [
            (
                rng.choice(["female", "male", "unclear", None]),
                rng.choice(["white", "black", "unclear", None]),
                0.1,
            )
            for _ in range(n)
        ]
        if planted:
            boxes[0] = (boxes[0][0], "middle_eastern", 0.1)
        alt = rng.choice(CRIME if hit else CLEAN)
        specs.append(ImageSpec(boxes, alt=alt))
        units.append((_image_group([b[0] for b in boxes]), _image_group([b[1] for b in boxes]), hit))
    specs += [ImageSpec([("male", "white", 0.1)], alt=None), ImageSpec([("male", "white", 0.1)], alt="  ")]
    specs += [ImageSpec([], alt="a thief with nobody in the picture")]  # no person: not counted
    ann = write_person_tables(tmp_path / "ann", specs, shard_size=300)
    got = crime_association(connect(ann), min_count=20, texts=("alt",))
    alt = got["alt"]
    assert (alt["overall"]["matches"], alt["overall"]["n"], alt["no_text"]) == (100, 1000, 2)
    assert got["group_rule"] == "exclusive" and got["delta_reference"] == "all"
    # the planted images are middle_eastern or mixed (with another race) by the exclusive rule
    me_units = [u for u in units if u[1] == "middle_eastern"]
    me = alt["race"]["middle_eastern"]
    assert (me["matches"], me["n"]) == (sum(u[2] for u in me_units), len(me_units))
    assert me["delta_pct"] > 150  # the planted over-association: about 3x the base rate
    want = _expected(units, 20)
    seen = {(a, g) for a in ("gender", "race") for g in alt[a] if alt[a][g]["n"]}
    assert seen == set(want)
    for (attr, g), (k, n, delta) in want.items():
        entry = alt[attr][g]
        assert (entry["matches"], entry["n"]) == (k, n)
        assert entry["delta_pct"] == (None if delta is None else pytest.approx(delta))
        assert entry["reference"] == {"matches": 100, "n": 1000, "rate": 0.1}
    for attr in ("gender", "race"):  # one group per image: the groups sum to overall
        assert sum(r["n"] for r in alt[attr].values()) == 1000
    for (attr, g), (_, _, delta) in _expected(units, 20, "complement").items():
        entry = got["alternative"]["alt"][attr][g]
        assert entry["delta_pct"] == (None if delta is None else pytest.approx(delta))
    assert got["alternative"]["delta_reference"] == "complement"
    assert "person" not in got


def test_delta_reference_all_and_complement_give_the_two_readings(tmp_path: Path) -> None:
    """Finding 9: the reference set changes a group's Δ on the same data (male +17.6 % against all
    texts, +100 % against the texts that are not male); both are reported, the chosen one stated."""
    specs = [ImageSpec([("male", "white", 0.1)], alt="a thief" if i < 140 else "a walk") for i in range(700)]
    specs += [
        ImageSpec([("female", "black", 0.1)], alt="a thief" if i < 30 else "a walk") for i in range(300)
    ]
    con = connect(write_person_tables(tmp_path / "ann", specs, shard_size=400))
    want_all = 100 * ((140 / 700) / (170 / 1000) - 1)  # +17.6 %
    want_complement = 100 * ((140 / 700) / (30 / 300) - 1)  # +100 %
    assert round(want_all, 1) == 17.6 and round(want_complement, 1) == 100.0
    default = crime_association(con, ["thief"], min_count=10, texts=["alt"], exclusions=[])
    assert default["delta_reference"] == "all"
    male = default["alt"]["gender"]["male"]
    assert male["delta_pct"] == pytest.approx(want_all)
    assert male["reference"] == {"matches": 170, "n": 1000, "rate": 0.17}
    assert default["alternative"]["alt"]["gender"]["male"]["delta_pct"] == pytest.approx(want_complement)
    swapped = crime_association(
        con, ["thief"], min_count=10, texts=["alt"], exclusions=[], delta_reference="complement"
    )
    male = swapped["alt"]["gender"]["male"]
    assert male["delta_pct"] == pytest.approx(want_complement)
    assert male["reference"] == {"matches": 30, "n": 300, "rate": 0.1}
    assert swapped["alternative"]["alt"]["gender"]["male"]["delta_pct"] == pytest.approx(want_all)
    assert (
        "complement" in swapped["definitions"]["delta_pct"] and "all" in default["definitions"]["delta_pct"]
    )
    with pytest.raises(ValueError, match="delta reference"):
        crime_association(con, ["thief"], delta_reference="box")


def test_one_group_rule_for_crime_sentiment_and_themes(tmp_path: Path) -> None:
    """Finding 4: race Δ counted an image in every race of its boxes, sentiment did too, and the
    alt-text themes used a third rule (a race only when the image had one, 'unclear' a race). Now an
    image is in one group per attribute by the same rule in every section, and 'any' is one flag."""
    from fairsets.audit.persons.sentiment import sentiment
    from fairsets.audit.persons.themes_run import _sample

    class Flat:
        name, kind = "flat", "vader"

        def score(self, texts):
            return [(0.0, "NEU") for _ in texts]

    rng = random.Random(9)
    labels = ["white", "black", "unclear", None]
    specs, want = [], []
    for i in range(300):
        boxes = [(rng.choice(["female", "male", "unclear", None]), rng.choice(labels), 0.1) for _ in range(3)]
        specs.append(ImageSpec(boxes, alt=f"photo {i} of a thief" if i % 3 == 0 else f"photo {i}"))
        want.append((_image_group([b[0] for b in boxes]), _image_group([b[1] for b in boxes])))
    con = connect(write_person_tables(tmp_path / "ann", specs, shard_size=120))
    crime = crime_association(con, ["thief"], min_count=1, texts=["alt"], exclusions=[])["alt"]
    sent = sentiment(con, texts=["alt"], scorer=Flat(), min_count=1)["alt"]
    _, genders, races, _, _ = _sample(con, "alt", 1000, 0, "exclusive")
    for i, attr in enumerate(("gender", "race")):
        counts = {g: sum(w[i] == g for w in want) for g in {w[i] for w in want}}
        assert {g: r["n"] for g, r in crime[attr].items() if r["n"]} == counts
        assert {g: r["n"] for g, r in sent[attr].items() if r["n"]} == counts
        ids = genders if attr == "gender" else races
        assert {g: sum(v == [g] for v in ids) for g in counts} == counts
    assert crime["race"]["mixed"]["n"] > 0 and crime["race"]["unlabelled"]["n"] > 0
    # under "any" an image counts in every race it has a box of, in every section alike
    crime_any = crime_association(con, ["thief"], min_count=1, texts=["alt"], exclusions=[], group_rule="any")
    sent_any = sentiment(con, texts=["alt"], scorer=Flat(), min_count=1, group_rule="any")
    _, _, races_any, _, _ = _sample(con, "alt", 1000, 0, "any")
    for g in ("white", "black", "unclear"):
        k = sum(any(b[1] == g for b in s.boxes) for s in specs)
        assert crime_any["alt"]["race"][g]["n"] == sent_any["alt"]["race"][g]["n"] == k
        assert sum(g in v for v in races_any) == k
    assert crime_any["group_rule"] == "any" and "several" in crime_any["definitions"]["group_rule"]


def test_innocent_senses_are_not_counted_and_matched_phrases_are_listed(tmp_path: Path) -> None:
    """The crime words are matched after the shipped innocent-sense phrases are blanked; the
    phrases each word matched are listed so a reader can audit the count."""
    innocent = ["a killer whale at sea", "cardiac arrest training", "anti-theft backpack", "true crime novel"]
    guilty = ["the killer was arrested", "a thief at night", "police arrest a thief"]
    specs = [ImageSpec([("male", "white", 0.1)], alt=t) for t in innocent * 5 + guilty * 5]
    con = connect(write_person_tables(tmp_path / "ann", specs))
    got = crime_association(con, min_count=1, texts=["alt"])
    assert got["alt"]["overall"]["matches"] == 15 and got["alt"]["overall"]["n"] == 35
    assert got["n_exclusions"] > 0 and "exclusions" in got["definitions"]
    bare = crime_association(con, min_count=1, texts=["alt"], exclusions=[])
    assert bare["alt"]["overall"]["matches"] == 35  # every innocent phrase counts without them
    phrases = got["alt"]["top_phrases"]
    assert {p["phrase"] for p in phrases["thief"]} == {"a thief at", "a thief"}
    assert sum(p["count"] for p in phrases["thief"]) == 10
    assert "killer whale" not in str(phrases) and "whale" in str(bare["alt"]["top_phrases"]["killer"])


def test_min_count_and_undefined_baseline(tmp_path: Path) -> None:
    specs = [ImageSpec([("female", "white", 0.1)], alt="a thief")] * 5
    specs += [ImageSpec([("male", "white", 0.1)], alt="a walk")] * 30
    con = connect(write_person_tables(tmp_path / "a", specs))
    result = crime_association(con, min_count=10, texts=["alt"])
    assert json.loads(json.dumps(result)) == result  # JSON-ready
    got = result["alt"]
    assert got["gender"]["female"]["delta_pct"] is None
    assert got["gender"]["female"]["reason"] == "fewer than 10 texts (5)"
    assert (
        got["gender"]["male"]["delta_pct"] == pytest.approx(-100.0)
        and got["gender"]["male"]["reason"] is None
    )
    mixed = {"matches": 0, "n": 0, "rate": None, "ci95": None, "delta_pct": None}
    assert {k: v for k, v in got["gender"]["mixed"].items() if k != "reference"} == mixed | {
        "reason": "fewer than 10 texts (0)"
    }
    assert got["race"]["white"]["delta_pct"] == pytest.approx(0.0)
    # against the complement, white (every text) has no reference set at all
    white = result["alternative"]["alt"]["race"]["white"]
    assert white["delta_pct"] is None and "no text" in white["reason"]
    got = crime_association(con, ["burglar"], min_count=1, texts=["alt"])["alt"]
    assert got["overall"]["matches"] == 0
    assert got["gender"]["male"]["delta_pct"] is None and "reference set" in got["gender"]["male"]["reason"]


def test_person_captions_each_in_its_box_group(tmp_path: Path) -> None:
    rng = random.Random(5)
    specs, units = [], []
    # black boxes: 60 of 200 captions match; others 30 of 600 → base 90/800, Δ_black = 0.3/0.1125 - 1.
    for i in range(400):
        races = ["black", "white"] if i < 200 else ["white", "east_asian"]
        boxes, caps = [], []
        for j, race in enumerate(races):
            g = rng.choice(["female", "male", None])
            hit = (race == "black" and i < 60) or (race != "black" and (i + j) % 20 == 0)
            boxes.append((g, race, 0.1))
            caps.append(rng.choice(CRIME if hit else CLEAN))
            units.append((g or "unlabelled", race, hit))
        specs.append(ImageSpec(boxes, alt="a street scene", person_captions=caps))
    ann = write_person_tables(tmp_path / "ann", specs, shard_size=150, captioner="capA")
    got = crime_association(connect(ann), min_count=50, exclusions=[])
    assert got["alt"]["overall"]["matches"] == 0
    person = got["person"]["capA"]
    assert sum(u[2] for u in units) == person["overall"]["matches"] == 90
    assert person["overall"]["n"] == 800
    black = person["race"]["black"]
    assert (black["matches"], black["n"]) == (60, 200)
    assert black["delta_pct"] == pytest.approx(100 * (0.3 / (90 / 800) - 1))
    for (attr, g), (k, n, delta) in _expected(units, 50).items():
        entry = person[attr][g]
        assert (entry["matches"], entry["n"]) == (k, n)
        assert entry["delta_pct"] == (None if delta is None else pytest.approx(delta))
    assert person["gender"]["unlabelled"]["n"] == sum(u[0] == "unlabelled" for u in units) > 0
    bare = write_person_tables(tmp_path / "bare", [ImageSpec([("male", "white", 0.1)])])
    no_caps = crime_association(connect(bare), texts=["person"])
    assert no_caps["person"] is None and "annotate caption" in no_caps["person_reason"]
    assert "alt" not in no_caps


@pytest.mark.parametrize(
    ("text", "hit"),
    [
        ("The THIEVES ran", True),
        ("a thief.", True),
        ("thiefdom", False),
        ("x_thief", False),
        ("Robberies rise", True),
        ("arrestable", False),
        ("police Arrested him", True),
        ("drug-dealers here", True),
        ("drug  dealer", True),
        ("criminals", True),
        ("criminally", False),
        ("prisoners,", True),
    ],
)
def test_matching_rule_with_the_default_words(tmp_path: Path, text: str, hit: bool) -> None:
    import duckdb

    pattern = word_pattern(load_crime_words())
    assert duckdb.connect().execute("SELECT regexp_matches(?, ?)", [text, pattern]).fetchone()[0] is hit


def test_hostile_texts_and_metacharacters(tmp_path: Path) -> None:
    words = ["c++", "a.b", "(x", "it's", "[z]*"]
    specs = [
        ImageSpec([("male", "white", 0.1)], alt="x" * 3_000_000 + " c++"),  # huge, matches at the end
        ImageSpec([("male", "white", 0.1)], alt="axb (y) it is z zz"),  # '.', '(' and '*' stay literal
        ImageSpec([("male", "white", 0.1)], alt=None),
        ImageSpec([("female", "white", 0.1)], alt="it's (x fine"),
        ImageSpec([("female", "white", 0.1)], alt="see [z]* and a.b"),
        ImageSpec([("female", "white", 0.1)], alt="'; DROP TABLE boxes; --"),
    ]
    con = connect(write_person_tables(tmp_path / "ann", specs))
    got = crime_association(con, words, min_count=1, texts=["alt"])["alt"]
    assert (got["overall"]["matches"], got["overall"]["n"], got["no_text"]) == (3, 5, 1)
    assert (got["gender"]["male"]["matches"], got["gender"]["male"]["n"]) == (1, 2)
    assert got["gender"]["female"]["delta_pct"] == pytest.approx(100 * ((2 / 3) / (3 / 5) - 1))
    got = crime_association(con, ["'; DROP TABLE boxes; --"], min_count=1, texts=["alt"])["alt"]
    assert got["overall"]["matches"] == 1
    assert con.execute("SELECT count(*) FROM boxes").fetchone()[0] == 6


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "w.toml"
    p.write_text(text, encoding="utf-8")
    return p


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("words = [", "not a readable TOML"),
        ("word = ['thief']", "unknown key 'word'"),
        ("words = []", "non-empty list"),
        ("words = ['thief', '  ']", "non-empty list"),
        ("words = 'thief'", "non-empty list"),
        ("words = [1]", "non-empty list"),
    ],
)
def test_bad_word_files_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(AnnotationError, match=message) as err:
        load_crime_words(_write(tmp_path, text))
    assert "\n" not in str(err.value)


def test_word_files(tmp_path: Path) -> None:
    with pytest.raises(AnnotationError, match="no such word file"):
        load_crime_words(tmp_path / "nope.toml")
    assert load_crime_words(_write(tmp_path, "words = [' Thief ', 'thief', 'drug   dealer']")) == [
        "Thief", "drug dealer"
    ]  # fmt: skip
    default = load_crime_words()
    assert {"thief", "criminal", "arrest", "arrested", "robber"} <= set(default)
    with pytest.raises(ValueError, match="texts"):
        crime_association(None, texts=["captions"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="min_count"):
        crime_association(None, min_count=0)  # type: ignore[arg-type]


def test_whitespace_only_texts_are_no_text(tmp_path: Path) -> None:
    """Tabs, newlines and no-break spaces alone are no text (as for sentiment), not a non-matching text."""
    blanks = ["", "   ", "\t\n", "\u00a0\u2003", "\x0b"]
    specs = [ImageSpec([("male", "white", 0.1)], alt=b) for b in blanks]
    specs.append(ImageSpec([("female", "white", 0.1)], alt="\ta thief\u00a0"))
    got = crime_association(connect(write_person_tables(tmp_path / "a", specs)), ["thief"], min_count=1)
    alt = got["alt"]
    assert (alt["overall"]["matches"], alt["overall"]["n"], alt["no_text"]) == (1, 1, len(blanks))
