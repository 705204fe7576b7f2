"""The vote's questions (seeded per-query shuffles), answer parsing and race keyword recall."""

from __future__ import annotations

import fnmatch
import random
from collections import Counter
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10 needs the tomli backport
    import tomli as tomllib  # type: ignore[no-redef]

from fairsets.annotate.layout import AnnotationError
from fairsets.annotate.vote.prompts import (
    INVALID,
    OK,
    OPTIONS,
    REFUSED,
    build_question,
    default_keywords_path,
    load_keywords,
    parse_answer,
    recall_candidates,
)

GENDER = ("male", "female", "mixed", "unclear")
RACE = (
    "white",
    "black",
    "east_asian",
    "latino_hispanic",
    "middle_eastern",
    "south_asian",
    "southeast_asian",
    "unclear",
)


@pytest.mark.parametrize(("attribute", "labels"), [("gender", GENDER), ("race", RACE)])
def test_question_letters_every_option_once_and_ends_with_the_instruction(attribute, labels):
    q = build_question(attribute, "00001/k7/2", 3, annotator="phi")
    letters = "ABCDEFGH"[: len(labels)]
    assert q.letters == tuple(letters)
    assert sorted(q.options.values()) == sorted(labels)
    assert q.text.endswith("\n\nAnswer with a single letter.")
    lines = q.text.split("\n")
    for letter in letters:
        assert f"{letter}. {q.texts[letter]}" in lines
    assert lines[0] == OPTIONS[attribute][0]
    assert "unclear / cannot tell / no person visible" in q.text


def test_the_same_query_is_asked_again_and_others_are_shuffled_differently():
    a = build_question("race", "00001/k7/2", 3, annotator="phi")
    assert build_question("race", "00001/k7/2", 3, annotator="phi") == a
    assert build_question("race", "00001/k7/2", 3, annotator="llava").options != a.options
    assert build_question("race", "00001/k7/3", 3, annotator="phi").options != a.options
    assert build_question("race", "00001/k7/2", 4, annotator="phi").options != a.options
    # Over many items each label is shown first about equally often (no position bias).
    first = Counter(build_question("gender", f"s/k{i}/0", 0).options["A"] for i in range(800))
    assert set(first) == set(GENDER)
    assert min(first.values()) > 140, first


def test_unknown_attribute_is_a_clear_error():
    with pytest.raises(ValueError, match="gender, race"):
        build_question("age", "s/k/0", 0)


def test_the_answer_maps_back_through_that_querys_shuffle():
    questions = [build_question("gender", f"s/k{i}/0", 1) for i in range(20)]
    assert len({tuple(q.options.values()) for q in questions}) > 1
    for q in questions:
        for letter, label in q.options.items():
            assert parse_answer(letter, q) == (label, OK)
            assert parse_answer(letter.lower(), q) == (label, OK)


@pytest.mark.parametrize(
    "raw",
    [
        "{L}",
        " {l} ",
        "{L}.",
        "{l})",
        "({L})",
        "**{L}**",
        "`{L}`",
        '"{L}"',
        "'{L}'",
        "Answer: {L}",
        "answer - {l}",
        "The answer is {L}.",
        "Final answer: **{L}**",
        "Option {L}",
        "{L}. It is the best match.",
        "{L}\nThe person wears a suit.",
        "<think>two options fit</think>\n{L}",
        "<think>" + "weighing the options. " * 500 + "</think>\n\nAnswer: {L}",
        "\ufeff{L}",
        "{L}: only female person visible",
        "{L} only female person visible",
        "{L} - only female person visible",
    ],
)
def test_accepted_answer_forms(raw):
    q = build_question("gender", "s/k/0", 0)
    letter = next(x for x, t in q.texts.items() if t == "only female person visible")
    raw = raw.format(L=letter, l=letter.lower())
    assert parse_answer(raw, q) == ("female", OK), raw


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "   ",
        None,
        42,
        "A or B",
        "A/B",
        "A, B",
        "A and C",
        "A\nB",
        "A woman",
        "a man in a suit",
        "Female",
        "only female person visible",
        "Z",
        "\u0410",  # Cyrillic А
        "\uff21",  # full-width Ａ
        "É",
        "AB",
        "<think>" + "still thinking " * 500,
        "A - B",
        "A - male",
        "I cannot see a person, but it might be B",
        "x" * 200_000,
        "the person looks " * 10_000,
    ],
)
def test_anything_else_is_invalid_never_guessed(raw):
    q = build_question("gender", "s/k/0", 0)
    assert parse_answer(raw, q) == (None, INVALID)


@pytest.mark.parametrize(
    "raw",
    [
        "I can't help with that.",
        "I'm sorry, but I cannot determine the gender of people from images.",
        "Sorry, I won't identify people's race.",
        "As an AI, I do not make judgements about ethnicity.",
        "I am unable to answer this question.",
        "Sorry.",
        "I cannot.",
        "I won't label people by race",
        "I apologize, but I can't assist with this request.",
    ],
)
def test_refusals_are_told_apart(raw):
    q = build_question("race", "s/k/0", 0)
    assert parse_answer(raw, q) == (None, REFUSED)


def test_a_letter_beyond_the_options_is_invalid():
    q = build_question("gender", "s/k/0", 0)
    assert parse_answer("E", q) == (None, INVALID)
    assert parse_answer("H", build_question("race", "s/k/0", 0))[1] == OK


# --- keyword recall ------------------------------------------------------------------------------


def test_default_keywords_ship_with_the_package_and_cover_every_category():
    path = default_keywords_path()
    assert path.is_file()
    assert "Provenance" in path.read_text(encoding="utf-8")
    keywords = load_keywords()
    assert set(keywords) == set(RACE) - {"unclear"}
    assert all(keywords.values())


def test_recall_is_word_bounded_case_insensitive_and_knows_plurals():
    captions = {
        "a": "Portrait of a BLACK WOMAN smiling",
        "b": "little black dress on a white background",
        "c": "Two Filipinos at the beach",
        "d": "Our Thailand trip",
        "e": "african-american men at a rally",
        "f": "A Latina chef",
        "g": "latinas in business",
        "h": None,
        "i": "Asian people in Tokyo",
        "j": "Thai food stall",
        "k": "three white women hiking",
    }
    got = recall_candidates(captions, load_keywords())
    assert got["black"] == ["a", "e"]
    assert got["southeast_asian"] == ["c", "j"]
    assert got["latino_hispanic"] == ["f", "g"]
    assert got["white"] == ["k"]
    assert "i" in got["east_asian"] and "i" in got["south_asian"]
    recalled = {item for items in got.values() for item in items}
    assert "b" not in recalled and "d" not in recalled


def test_the_ascii_shortcut_finds_what_the_full_match_finds():
    # A non-ASCII character at the end sends a caption down the full-regex path; results must agree.
    keywords = load_keywords()
    vocab = sorted({w for words in keywords.values() for k in words for w in k.replace("-", " ").split()})
    vocab += ["men", "women", "people", "Filipinos", "Thais", "Thailand", "photo", "a", "of", "dress", "@"]
    rng = random.Random(7)
    captions = []
    for i in range(3000):
        words = [rng.choice(vocab) for _ in range(rng.randint(1, 6))]
        words = [w.upper() if rng.random() < 0.2 else w.lower() if rng.random() < 0.5 else w for w in words]
        text = "".join(w + rng.choice([" ", "-", ", ", "  ", ""]) for w in words)
        captions.append((str(i), text))
    plain = recall_candidates(captions, keywords)
    forced = recall_candidates([(i, t + " \u00b7") for i, t in captions], keywords)
    assert plain == forced
    assert sum(map(len, plain.values())) > 1000


def test_a_user_keyword_file_replaces_the_default(tmp_path: Path):
    path = tmp_path / "kw.toml"
    path.write_text('[white]\nkeywords = ["Nordic"]\n[black]\nkeywords = ["Ghanaian"]\n', encoding="utf-8")
    keywords = load_keywords(path)
    assert keywords == {"white": ["Nordic"], "black": ["Ghanaian"]}
    got = recall_candidates(
        [("1", "a Ghanaian artist"), ("2", "Nordic skiers"), ("3", "a Black man")], keywords
    )
    assert got == {"white": ["2"], "black": ["1"]}


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('[martian]\nkeywords = ["x"]\n', "unknown label"),
        ("[white]\nkeywords = []\n", "non-empty list"),
        ('[white]\nkeywords = ["ok", ""]\n', "non-empty list"),
        ('[white]\nkeywords = "Nordic"\n', "non-empty list"),
        ("[white\n", "not a readable TOML"),
        ("", "no labels"),
    ],
)
def test_bad_keyword_files_are_clear_errors(tmp_path: Path, text, match):
    path = tmp_path / "kw.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(AnnotationError, match=match):
        load_keywords(path)


def test_a_missing_keyword_file_is_a_clear_error(tmp_path: Path):
    with pytest.raises(AnnotationError, match="no such keyword file"):
        load_keywords(tmp_path / "missing.toml")


def test_the_keyword_file_is_declared_as_package_data():
    root = Path(__file__).resolve().parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"
    ]["fairsets"]
    shipped = default_keywords_path().relative_to(root / "src" / "fairsets").as_posix()
    assert any(fnmatch.fnmatch(shipped, p) for p in patterns), patterns
