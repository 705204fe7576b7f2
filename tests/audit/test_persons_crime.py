"""Crime-word association: planted over-association recovered, every rate and Δ against plain
Python over the planted specs, the matching rule case by case, hostile texts and word files."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from person_tables import ImageSpec, write_person_tables

from fairsets.annotate.layout import AnnotationError
from fairsets.audit.persons.crime import crime_association, load_crime_words, word_forms, word_pattern
from fairsets.audit.persons.tables import connect

CRIME = ["police arrested the thief", "two robbers in a mugshot", "a convicted criminal"]
CLEAN = ["a man at the beach", "thiefdom of the realm", "an arrestable offence?", "portrait"]


def _image_gender(gs: list) -> str:
    if "mixed" in gs or ("female" in gs and "male" in gs):
        return "mixed"
    return "female" if "female" in gs else "male" if "male" in gs else "unclear"


def _expected(units: list[tuple[str | None, list[str], bool]], min_count: int) -> dict:
    """Rates and Δ per group from (gender, races, hit) units, in plain Python."""
    n, k = len(units), sum(h for _, _, h in units)
    base = k / n
    out = {}
    for attr in ("gender", "race"):
        groups = sorted({g for u in units for g in ([u[0]] if attr == "gender" else u[1]) if g is not None})
        for g in groups:
            mine = [h for gg, rr, h in units if (gg == g if attr == "gender" else g in rr)]
            rate = sum(mine) / len(mine)
            delta = 100 * (rate / base - 1) if len(mine) >= min_count and k else None
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
        units.append((_image_gender([b[0] for b in boxes]), sorted({b[1] for b in boxes} - {None}), hit))
    specs += [ImageSpec([("male", "white", 0.1)], alt=None), ImageSpec([("male", "white", 0.1)], alt="  ")]
    specs += [ImageSpec([], alt="a thief with nobody in the picture")]  # no person: not counted
    ann = write_person_tables(tmp_path / "ann", specs, shard_size=300)
    got = crime_association(connect(ann), min_count=20, texts=("alt",))
    alt = got["alt"]
    assert (alt["overall"]["matches"], alt["overall"]["n"], alt["no_text"]) == (100, 1000, 2)
    me = alt["race"]["middle_eastern"]
    assert (me["matches"], me["n"]) == (30, 100)
    assert abs(me["delta_pct"] - 200.0) <= 5.0
    assert me["delta_pct"] == pytest.approx(200.0)
    want = _expected(units, 20)
    seen = {(a, g) for a in ("gender", "race") for g in alt[a] if alt[a][g]["n"]}
    assert seen == set(want)
    for (attr, g), (k, n, delta) in want.items():
        entry = alt[attr][g]
        assert (entry["matches"], entry["n"]) == (k, n)
        assert entry["delta_pct"] == (None if delta is None else pytest.approx(delta))
    assert alt["gender_missing"] == 0  # every image has a group by the rule
    assert alt["race_missing"] == sum(not rr for _, rr, _ in units)
    assert "person" not in got


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
    assert got["gender"]["mixed"] == mixed | {"reason": "fewer than 10 texts (0)"}
    assert got["race"]["white"]["delta_pct"] == pytest.approx(0.0)
    got = crime_association(con, ["burglar"], min_count=1, texts=["alt"])["alt"]
    assert got["overall"]["matches"] == 0
    assert got["gender"]["male"]["delta_pct"] is None and "baseline" in got["gender"]["male"]["reason"]


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
            units.append((g, [race], hit))
        specs.append(ImageSpec(boxes, alt="a street scene", person_captions=caps))
    ann = write_person_tables(tmp_path / "ann", specs, shard_size=150, captioner="capA")
    got = crime_association(connect(ann), min_count=50)
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
    assert person["gender_missing"] == sum(u[0] is None for u in units)
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


def test_word_forms() -> None:
    assert word_forms("Thief") == ["thief", "thiefs", "thieves"]
    assert word_forms("knife") == ["knife", "knives"]
    assert word_forms("robbery") == ["robbery", "robberies"]
    assert word_forms("drug  dealer") == ["drug dealer", "drug dealers"]
    assert word_forms("policeman")[:2] == ["policeman", "policemen"]
    assert word_forms("c++") == ["c++"]
    assert word_forms("missing person") == ["missing person", "missing persons", "missing people"]


def test_crime_words_and_categories_share_one_plural_rule() -> None:
    from fairsets.audit.persons import transfer

    for entry in ("thief", "knife", "robbery", "policeman", "person", "child", "coach", "police officer"):
        last = entry.split()[-1]
        assert transfer._token_forms(entry) == word_forms(last)


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
