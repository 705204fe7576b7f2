"""Dataset card: YAML header valid for the Hub (offline checks), body sections, determinism."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import DatasetCard, DatasetCardData

from fairsets.publish.card import (
    HF_LICENSES,
    card_header,
    check_card,
    hf_license,
    render_card,
    size_category,
)


def test_card_parses_with_huggingface_hub(layout: tuple[Path, dict[str, Any]]) -> None:
    out, _ = layout
    text = (out / "README.md").read_text(encoding="utf-8")
    card = DatasetCard(text)
    data = card.data.to_dict()
    assert DatasetCardData(**data).to_dict() == data
    assert data["pretty_name"] == "Tiny Faces"
    assert data["license"] == "other" and data["license_link"] == "ATTRIBUTION.md"
    assert data["size_categories"] == ["n<1K"]
    assert set(data["task_categories"]) == {"image-classification", "zero-shot-image-classification"}
    assert {"fairness", "faces", "webdataset"} <= set(data["tags"])
    configs = {c["config_name"]: c for c in data["configs"]}
    assert configs["balanced"]["default"] is True and "default" not in configs["augmented"]
    assert configs["augmented"]["data_files"] == [
        {"split": "train", "path": "shards/augmented/train-*.tar"},
        {"split": "test", "path": "shards/augmented/test-*.tar"},
    ]
    assert check_card(text, out) == []


def test_card_sections(layout: tuple[Path, dict[str, Any]]) -> None:
    out, _ = layout
    text = (out / "README.md").read_text(encoding="utf-8")
    for heading in [
        "## Dataset summary",
        "## Curation",
        "## Sources",
        "## Groups before and after balancing",
        "### Cells with no real image",
        "### Forced imbalances and warnings",
        "## Personal and sensitive information",
        "## Bias, risks and limitations",
        "## Licences and attribution",
        "## How to load",
    ]:
        assert heading in text
    assert "`min_confidence=0.5`" in text
    assert "state=thuringia, gender=female" in text  # a cell with no real image
    assert "only 3 identities" in text
    assert "ATTRIBUTION.md" in text
    assert 'load_dataset("webdataset", data_files=' in text and "wds.WebDataset(" in text
    assert "`imbalanced`" not in text  # only variants that exist are described


def test_render_is_deterministic(layout: tuple[Path, dict[str, Any]]) -> None:
    out, info = layout
    summary = copy.deepcopy(info["summary"])
    assert render_card(summary, out_dir=out) == (out / "README.md").read_text(encoding="utf-8")


def test_single_licence_uses_hub_id(layout: tuple[Path, dict[str, Any]]) -> None:
    _, info = layout
    summary = dict(info["summary"], license=["CC-BY-SA-4.0"])
    assert card_header(summary)["license"] == "cc-by-sa-4.0"
    assert hf_license(["CC0-1.0"]) == {"license": "cc0-1.0"}
    assert hf_license(["CC-BY-SA-2.0"]) == {
        "license": "other",
        "license_name": "cc-by-sa-2.0",
        "license_link": "ATTRIBUTION.md",
    }
    assert hf_license(["PDM-1.0"])["license"] == "other"
    text = render_card(summary)
    assert DatasetCard(text).data.license == "cc-by-sa-4.0"
    for spdx in ["CC0-1.0", "CC-BY-4.0", "CC-BY-3.0", "CC-BY-SA-3.0", "CC-BY-SA-4.0"]:
        assert hf_license([spdx])["license"] in HF_LICENSES


@pytest.mark.parametrize(
    ("n", "cat"),
    [(0, "n<1K"), (999, "n<1K"), (1000, "1K<n<10K"), (99_999, "10K<n<100K"), (2_000_000, "1M<n<10M")],
)
def test_size_category(n: int, cat: str) -> None:
    assert size_category(n) == cat


def test_check_card_finds_problems(layout: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    out, _ = layout
    text = (out / "README.md").read_text(encoding="utf-8")
    bad = text.replace("license: other", "license: cc-by-sa-2.0").replace("n<1K", "tiny")
    bad = bad.replace("zero-shot-image-classification", "face-recognition")
    problems = check_card(bad)
    assert any("cc-by-sa-2.0" in p for p in problems)
    assert any("tiny" in p for p in problems)
    assert any("face-recognition" in p for p in problems)
    assert any("matches no file" in p for p in check_card(text, tmp_path))
    assert check_card("---\nlicense: [unclosed\n---\n")  # broken YAML is reported, not raised


def test_render_raises_on_bad_header(layout: tuple[Path, dict[str, Any]]) -> None:
    _, info = layout
    with pytest.raises(ValueError, match="task_categories"):
        render_card(dict(info["summary"], task_categories=["not-a-task"]))


def test_notes_are_shown(layout: tuple[Path, dict[str, Any]]) -> None:
    _, info = layout
    text = render_card(dict(info["summary"], notes="Not for research use."))
    assert "> Not for research use." in text
    text = render_card(dict(info["summary"], notes=["one", "two"]))
    assert "> one\n> two" in text


def test_custom_template(layout: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    _, info = layout
    tpl = tmp_path / "mini.md.j2"
    tpl.write_text("---\n{{ header }}\n---\n\n# {{ pretty_name }}\n")
    text = render_card(info["summary"], tpl)
    assert text.endswith("# Tiny Faces\n") and DatasetCard(text).data.pretty_name == "Tiny Faces"


HOSTILE = (
    "<script>alert(1)</script> | a`b` *c* [x](javascript:alert(1)) <img src=x onerror=alert(1)> & $y$"
    " \u202egnp.exe\x00\u200b"
)


def _tables(text: str) -> list[list[str]]:
    """The Markdown tables of ``text``: lists of consecutive lines that start with ``|``."""
    tables: list[list[str]] = []
    block: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append(line)
        elif block:
            tables.append(block)
            block = []
    return tables


def test_data_in_the_card_is_escaped(layout: tuple[Path, dict[str, Any]]) -> None:
    import re

    import yaml

    _, info = layout
    summary = copy.deepcopy(info["summary"])
    groups = list(summary["groups"])
    for cell in summary["cells"]:  # hostile group values, with newlines and pipes
        cell["cell"] = {g: f"{v}\n# heading {HOSTILE}\n| x | y |" for g, v in cell["cell"].items()}
        cell["notes"] = [*cell.get("notes", []), f"note {HOSTILE}\n- item"]
    title = f'Tiny: "Faces" #1 {HOSTILE}\n---\nlicense: mit'
    summary.update(
        pretty_name=title,
        description=f"{HOSTILE}\n\n# Not a heading\n```\nfence\n- not a list",
        notes=[f"> {HOSTILE}"],
        warnings=[f"warning {HOSTILE}"],
        sources={f"src {HOSTILE}": 3},
        contact=f"<script>x</script>@example.org {HOSTILE}",
        biases=[f"bias {HOSTILE}"],
        limitations=[f"1. limitation {HOSTILE}"],
        tags=["<script>", "a: b", "- c", "#d"],
        citation="@misc{x,\n  title = {```}\n}",
    )
    summary["recipe"] = {"publish": {"description": HOSTILE + "\n```"}, "groups": groups}
    summary["steps"] = [{"name": "select", "params": {"cells": {"state": [HOSTILE]}}, "rejected": 1}]
    text = render_card(summary)

    assert "<script" not in text and "<img" not in text and "<x" not in text.lower()
    assert not {"\u202e", "\x00", "\u200b"} & set(text)  # no bidi, zero-width or control character
    body = text.split("---\n", 2)[2]
    prose = re.sub(r"(?<!\\)`[^`]*`", "", body.split("## Licences")[0])  # code spans are literal
    assert not re.search(r"(?<!\\)\]\(", prose)  # no link made from data
    # the YAML header parses (with PyYAML and huggingface_hub) and keeps the values, on one line
    header = yaml.safe_load(text.split("---\n", 2)[1])
    shown = " ".join(title.replace("\u202e", "").replace("\x00", "").replace("\u200b", "").split())
    assert header["pretty_name"] == shown
    assert header["tags"][-4:] == ["<script>", "a: b", "- c", "#d"]
    assert DatasetCard(text).data.pretty_name == shown
    # nothing from data became a heading: the headings are the template's
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings[0].startswith("# Tiny") and "\\#1" in headings[0]
    assert not [h for h in headings[1:] if "heading" in h.lower() or "Not a" in h]
    # tables keep their column counts: no pipe or newline from data splits a cell
    for table in _tables(text):
        widths = {len(re.split(r"(?<!\\)\|", row)) for row in table}
        assert len(widths) == 1, table
    # the citation cannot close its fence: the fence is longer than any backtick run inside
    assert "````bibtex\n@misc{x,\n  title = {```}\n}\n````" in text
    # the recipe block's JSON still parses to the same values (<, >, & and ` as \\u escapes)
    block = text.split("```json\n", 1)[1].split("\n```", 1)[0]
    assert json.loads(block)["publish"]["description"] == HOSTILE + "\n```"


def test_the_licence_policy_is_claimed_only_when_the_recipe_ran_the_licence_step(
    layout: tuple[Path, dict[str, Any]],
) -> None:
    _, info = layout
    steps = [{"name": "decode"}, {"name": "license", "params": {}}]
    checked = render_card(dict(info["summary"], steps=steps))
    assert "only licences allowed by the\nfairsets licence policy" in checked
    unchecked = render_card(dict(info["summary"], steps=steps[:1]))
    assert "licence policy (CC0" not in unchecked
    assert "ran\nno `license` step: no licence was checked" in unchecked
