"""Prompt sets: the paper's lists verbatim, user files in TOML/JSON/text, clear errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fairsets.audit.prompts import (
    DEFAULT_SOURCE,
    JOB_PROMPTS,
    PRIMARY,
    PROMPT_SETS,
    PromptSpec,
    default_prompts,
    load_prompts,
)

PAPER = Path("/work/shared/papers/indicfairface.md")

# IndicFairFace appendix §9, copied by hand.
EXPECTED = {
    "neutral": [
        "An Indian person",
        "A person from India",
        "An Indian individual",
        "A person belonging to India",
        "A portrait of an Indian person",
        "A photograph of a person from India",
        "An Indian citizen",
        "A person native to India",
        "A resident of India",
        "An Indian face portrait",
    ],
    "male": [
        "An Indian man",
        "A man from India",
        "An Indian male",
        "A portrait of an Indian man",
        "A photograph of a man from India",
        "An Indian gentleman",
        "A male person belonging to India",
        "An Indian adult man",
        "A man native to India",
        "A male citizen of India",
    ],
    "female": [
        "An Indian woman",
        "A woman from India",
        "An Indian female",
        "A portrait of an Indian woman",
        "A photograph of a woman from India",
        "An Indian lady",
        "A female person belonging to India",
        "An Indian adult woman",
        "A woman native to India",
        "A female citizen of India",
    ],
}


def test_prompt_sets_are_the_papers_lists() -> None:
    assert list(PROMPT_SETS) == ["neutral", "male", "female"]
    assert {k: list(v) for k, v in PROMPT_SETS.items()} == EXPECTED
    assert PRIMARY == {"neutral": "An Indian person", "male": "An Indian male", "female": "An Indian female"}
    assert all(PRIMARY[s] in PROMPT_SETS[s] for s in PROMPT_SETS)
    assert JOB_PROMPTS == ("Indian candidate", "foreign candidate")


@pytest.mark.skipif(not PAPER.is_file(), reason="the paper is not in this checkout")
def test_prompt_sets_match_the_paper_text() -> None:
    text = PAPER.read_text(encoding="utf-8")
    section = text[text.index("## 9 Prompt Robustness Analysis") : text.index("## 10 Debiasing")]
    bullets = [line for line in section.splitlines() if line.startswith("- **")]
    assert len(bullets) == 3
    for name, line in zip(["neutral", "male", "female"], bullets, strict=True):
        assert re.findall(r"“([^”]+)”", line) == list(PROMPT_SETS[name])
    for prompt in PRIMARY.values():
        assert f"“{prompt}”" in section


def test_default_prompts() -> None:
    spec = default_prompts()
    assert spec.source == DEFAULT_SOURCE == "default (IndicFairFace appendix §9)"
    assert spec.sets == PROMPT_SETS and spec.primary == PRIMARY and spec.job == JOB_PROMPTS
    assert spec.all_prompts() == [p for ps in EXPECTED.values() for p in ps]
    assert spec.all_prompts(include_job=True)[-2:] == list(JOB_PROMPTS)
    assert len(spec.all_prompts(include_job=True)) == 32
    spec.sets["neutral"] = ("changed",)  # a copy: the module constants stay intact
    assert PROMPT_SETS["neutral"][0] == "An Indian person"


def test_all_prompts_unique_in_stable_order() -> None:
    spec = PromptSpec(
        sets={"a": ("x", "y"), "b": ("y", "z", "x")},
        primary={"a": "x", "b": "z"},
        job=("z", "w"),
        source="test",
    )
    assert spec.all_prompts() == ["x", "y", "z"]
    assert spec.all_prompts(include_job=True) == ["x", "y", "z", "w"]


def test_load_toml(tmp_path: Path) -> None:
    path = tmp_path / "prompts.toml"
    path.write_text(
        """
[sets]
kerala = ["A person from Kerala", "A Keralite"]
assam = ["A person from Assam"]

[primary]
kerala = "A Keralite"

[job]
positive = "Indian candidate"
negative = "foreign candidate"
""",
        encoding="utf-8",
    )
    spec = load_prompts(path)
    assert spec.sets == {"kerala": ("A person from Kerala", "A Keralite"), "assam": ("A person from Assam",)}
    assert spec.primary == {"kerala": "A Keralite", "assam": "A person from Assam"}
    assert spec.job == ("Indian candidate", "foreign candidate")
    assert spec.source == str(path)


def test_load_json_defaults(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"sets": {"n": ["one", "two"]}}), encoding="utf-8")
    spec = load_prompts(path)
    assert spec.sets == {"n": ("one", "two")}
    assert spec.primary == {"n": "one"}
    assert spec.job is None


def test_load_text(tmp_path: Path) -> None:
    path = tmp_path / "north_east.txt"
    path.write_text(
        "# prompts for the north-east\n\nA person from Nagaland\n  A person from Mizoram  \n# done\n",
        encoding="utf-8",
    )
    spec = load_prompts(path)
    assert spec.sets == {"north_east": ("A person from Nagaland", "A person from Mizoram")}
    assert spec.primary == {"north_east": "A person from Nagaland"}
    assert spec.job is None and spec.source == str(path)


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("empty.json", {"sets": {"n": []}}, "set 'n' is empty"),
        ("nosets.json", {"sets": {}}, "'sets' must be a non-empty"),
        ("missing.json", {"primary": {}}, "missing 'sets'"),
        ("unknown.json", {"sets": {"n": ["a"]}, "extra": 1}, r"unknown key\(s\) \['extra'\]"),
        ("primary.json", {"sets": {"n": ["a", "b"]}, "primary": {"n": "c"}}, "'c' is not in set 'n'"),
        ("primary_set.json", {"sets": {"n": ["a"]}, "primary": {"m": "a"}}, "unknown set 'm'"),
        ("dup.json", {"sets": {"n": ["a", "b", "a"]}}, r"duplicate prompts: \['a'\]"),
        ("type.json", {"sets": {"n": "a"}}, "must be a list of strings"),
        ("type2.json", {"sets": {"n": ["a", 3]}}, "not non-empty strings"),
        ("type3.json", {"sets": ["a"]}, "'sets' must be a non-empty"),
        ("blank.json", {"sets": {"n": ["a", "  "]}}, "not non-empty strings"),
        ("job.json", {"sets": {"n": ["a"]}, "job": {"positive": "x"}}, r"missing \['negative'\]"),
        ("job2.json", {"sets": {"n": ["a"]}, "job": ["x", "y"]}, "'job' must be a table"),
        ("job3.json", {"sets": {"n": ["a"]}, "job": {"positive": "x", "negative": "x"}}, "are the same"),
        ("top.json", ["a"], "top level must be"),
    ],
)
def test_load_errors_name_file_and_problem(tmp_path: Path, name: str, content: object, match: str) -> None:
    path = tmp_path / name
    path.write_text(json.dumps(content), encoding="utf-8")
    with pytest.raises(ValueError, match=match) as info:
        load_prompts(path)
    assert str(path) in str(info.value)


def test_load_errors_other_formats(tmp_path: Path) -> None:
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("[sets\n", encoding="utf-8")
    with pytest.raises(ValueError, match="cannot parse TOML"):
        load_prompts(bad_toml)
    dup_toml = tmp_path / "dup.toml"
    dup_toml.write_text('[sets]\nn = ["a", "a"]\n', encoding="utf-8")
    with pytest.raises(ValueError, match="duplicate"):
        load_prompts(dup_toml)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match="cannot parse JSON"):
        load_prompts(bad_json)
    empty_txt = tmp_path / "empty.txt"
    empty_txt.write_text("# nothing\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no prompt found"):
        load_prompts(empty_txt)
    dup_txt = tmp_path / "dup.txt"
    dup_txt.write_text("a\nb\na\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"dup.txt: .*duplicate"):
        load_prompts(dup_txt)
    yaml_file = tmp_path / "p.yaml"
    yaml_file.write_text("sets: {}", encoding="utf-8")
    with pytest.raises(ValueError, match="unknown prompt file type"):
        load_prompts(yaml_file)
    with pytest.raises(FileNotFoundError):
        load_prompts(tmp_path / "absent.toml")


def test_prompt_spec_validates_direct_construction() -> None:
    with pytest.raises(ValueError, match="not in set"):
        PromptSpec(sets={"n": ("a",)}, primary={"n": "b"}, job=None, source="x")
    with pytest.raises(ValueError, match="no primary prompt"):
        PromptSpec(sets={"n": ("a",)}, primary={}, job=None, source="x")
    with pytest.raises(ValueError, match="job must be"):
        PromptSpec(sets={"n": ("a",)}, primary={"n": "a"}, job=("only",), source="x")  # type: ignore[arg-type]
