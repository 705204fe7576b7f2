"""The card of published annotations: loud failures on missing values, escaping, its checks (the
template shipped in the wheel is checked by tests/test_packaging.py)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml
from publish_ann import make_ann

from fairsets.annotate.publish.card import check_annotation_card, render_card
from fairsets.annotate.publish.dataset import prepare, verify_prepared
from fairsets.publish.manifest import write_manifest


@pytest.fixture()
def prepared(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    folder = prepare(make_ann(tmp_path / "ANN") and tmp_path / "ANN", repo_id="org/cards").folder
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest.pop("files")
    return folder, manifest


def test_render_is_the_prepared_card(prepared: tuple[Path, dict[str, Any]]) -> None:
    folder, manifest = prepared
    assert render_card(manifest, out_dir=folder) == (folder / "README.md").read_text()


@pytest.mark.parametrize(
    ("path", "named"),
    [
        (("detector", "weights_sha256"), "detector.weights_sha256"),
        (("detector", "model_id"), "detector.model_id"),
        (("params", "min_side"), "params.min_side"),
        (("attributes", "gender", "head_sha256"), "head_sha256"),
        (("license",), "license"),
        (("repo_id",), "repo_id"),
    ],
)
def test_a_missing_required_value_fails_loudly(
    prepared: tuple[Path, dict[str, Any]], path: tuple[str, ...], named: str
) -> None:
    _, manifest = prepared
    for how in ("absent", "none"):
        broken = copy.deepcopy(manifest)
        parent = broken
        for key in path[:-1]:
            parent = parent[key]
        if how == "absent":
            del parent[path[-1]]
        else:
            parent[path[-1]] = None
        with pytest.raises(ValueError, match=named.replace(".", r"\.") + " is missing"):
            render_card(broken)


def test_a_template_showing_none_or_an_unknown_name_fails(prepared, tmp_path: Path) -> None:
    _, manifest = prepared
    manifest = copy.deepcopy(manifest)
    manifest["params"].pop("imgsz")
    tpl = tmp_path / "t.md.j2"
    tpl.write_text("---\n{{ header }}\n---\n\nsize {{ imgsz }}\n")
    with pytest.raises(ValueError, match=r"missing \(None\)"):
        render_card(manifest, tpl)
    tpl.write_text("---\n{{ header }}\n---\n\n{{ no_such_value }}\n")
    with pytest.raises(ValueError, match="no_such_value"):
        render_card(manifest, tpl)
    # the shipped template guards the optional value: no imgsz line, no "None"
    text = render_card(manifest)
    assert "Detector input size" not in text and "None" not in text.split("---", 2)[2].split()


def test_values_from_the_data_are_escaped(prepared: tuple[Path, dict[str, Any]]) -> None:
    folder, manifest = prepared
    hostile = copy.deepcopy(manifest)
    hostile["attributes"]["gender"]["head"]["encoder"] = "<script>alert(1)</script> | x"
    hostile["shards"]["00001"]["problems"] = ["# heading\n- item <img src=x onerror=alert(1)>"]
    hostile["detector"]["model_id"] = "[click](javascript:alert(1))"
    text = render_card(hostile, out_dir=folder)
    assert "<script" not in text and "<img" not in text and "[click](" not in text
    assert "\\[click\\](javascript" in text  # inert: the brackets are escaped
    assert "\n# heading" not in text and "\n- item" not in text
    assert check_annotation_card(text, folder) == []


def test_the_checks_catch_a_broken_card(prepared: tuple[Path, dict[str, Any]]) -> None:
    folder, _ = prepared
    text = (folder / "README.md").read_text()
    head, body = text.split("---", 2)[1:]
    header = yaml.safe_load(head)
    for key in ("extra_gated_prompt", "extra_gated_fields"):
        trimmed = {k: v for k, v in header.items() if k != key}
        problems = check_annotation_card(f"---\n{yaml.safe_dump(trimmed)}---{body}", folder)
        assert any(key in p for p in problems), problems
    no_boxes = {**header, "configs": [c for c in header["configs"] if c["config_name"] != "boxes"]}
    assert any("configs" in p for p in check_annotation_card(f"---\n{yaml.safe_dump(no_boxes)}---{body}"))
    assert any("None" in p for p in check_annotation_card(text + "\nlicence: None\n"))
    assert any("{{" in p for p in check_annotation_card(text + "\n{{ x }}\n"))
    assert any(
        "license" in p for p in check_annotation_card(text.replace("license: cc-by-4.0", "license: cc-by-9"))
    )
    assert check_annotation_card(text, folder / "data" / "images") != []  # globs checked against the folder


def test_an_image_listed_in_the_manifest_is_refused(prepared: tuple[Path, dict[str, Any]]) -> None:
    from fairsets.publish.manifest import file_entries

    folder, _ = prepared
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "data" / "face.jpg").write_bytes(b"\xff\xd8")
    manifest["files"].update(file_entries(folder, ["data/face.jpg"]))
    write_manifest(folder / "manifest.json", manifest)
    assert verify_prepared(folder) == ["data/face.jpg: images and shards are never published"]


def test_a_manifest_without_the_detector_hash_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    from cli_helpers import assert_one_line_error, run_cli
    from fairsets.annotate import layout

    root = tmp_path / "ANN"
    make_ann(root)
    manifest = layout.read_manifest(root)
    del manifest["detector"]["weights_sha256"]
    layout.write_manifest(root, manifest)
    code, _, err = run_cli(["publish", root, "--repo-id", "org/cards", "--dry-run"], capsys)
    assert_one_line_error(code, err, "detector.weights_sha256 is missing")


def test_a_folder_without_heads_says_so(tmp_path: Path) -> None:
    from fairsets.annotate import layout

    root = tmp_path / "ANN"
    make_ann(root)
    manifest = layout.read_manifest(root)
    del manifest["attributes"]
    layout.write_manifest(root, manifest)
    folder = prepare(root, repo_id="org/cards").folder
    text = (folder / "README.md").read_text()
    assert "No attribute head was applied" in text and "No comparison with human labels" in text
    assert pq.read_schema(folder / "data" / "boxes" / "00000.parquet") == layout.BOX_SCHEMA
    assert check_annotation_card(text, folder) == []


#: Class labels an attacker could train a head with: each tries to leave its code span, table cell or
#: line and make a rendered card run a tag or an attribute of its own.
HOSTILE_LABELS = [
    "x`<img src=x onerror=alert(1)>`",
    "``<script>alert(2)</script>``",
    "<b onmouseover=alert(3)>bold</b>",
    "[link](javascript:alert(4))",
    "a|b\n# heading <i>",
    '![i](x" onerror="alert(5))',
    "&lt;img src=x onerror=alert(6)&gt;",
    "\\`<iframe src=//x>",
    "<!-- c --><svg/onload=alert(7)>",
]
#: What the card's own Markdown renders to: these tags, and only these attributes.
CARD_TAGS = {"h1", "h2", "h3", "p", "ul", "ol", "li", "code", "pre", "strong", "em", "hr", "br"}
CARD_TAGS |= {"table", "thead", "tbody", "tr", "th", "td"}
CARD_ATTRS = {("th", "style"), ("td", "style"), ("code", "class")}


def _render_html(card: str) -> tuple[list[tuple[str, list[tuple[str, str | None]]]], str]:
    """The card's body rendered by a real CommonMark renderer with GFM tables and raw HTML let through
    (as a page that renders cards would, before any sanitiser): its tags with their attributes, and
    its visible text."""
    from html.parser import HTMLParser

    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(card.split("---", 2)[2])

    class Parser(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
            self.text: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.tags.append((tag, attrs))

        def handle_comment(self, data: str) -> None:
            self.tags.append(("<!--", []))

        def handle_data(self, data: str) -> None:
            self.text.append(data)

    parser = Parser()
    parser.feed(html)
    return parser.tags, " ".join("".join(parser.text).split())


def test_hostile_class_labels_stay_text_in_the_rendered_card(tmp_path: Path, monkeypatch) -> None:
    """Defect: ``p_{attr}_{label}`` was written inside a code span without escaping, so a label with
    backticks closed the span and the rendered card ran ``<img onerror>``. Every label (class list,
    columns, counts, per-class metrics, confusion matrix) reaches the rendered HTML as text only."""
    import publish_ann

    monkeypatch.setattr(publish_ann, "GENDER", HOSTILE_LABELS[:3])  # gender: classes, metrics, matrix
    monkeypatch.setattr(publish_ann, "RACE", HOSTILE_LABELS[3:6])
    make_ann(tmp_path / "ANN")
    folder = prepare(tmp_path / "ANN", repo_id="org/cards").folder
    text = (folder / "README.md").read_text()
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest.pop("files")
    manifest["attributes"]["race"]["head"]["classes"] = HOSTILE_LABELS[3:]  # every label, once more
    manifest["attributes"]["race"]["head"]["metrics"] = {
        "per_class": {c: {"precision": 0.5} for c in HOSTILE_LABELS},
        "confusion": [[1] * len(HOSTILE_LABELS[3:]) for _ in HOSTILE_LABELS[3:]],
    }
    manifest["counts"]["attributes"]["race"]["classes"] = dict.fromkeys(HOSTILE_LABELS, 1)
    for card, labels in ((text, HOSTILE_LABELS[:6]), (render_card(manifest, out_dir=folder), HOSTILE_LABELS)):
        tags, visible = _render_html(card)
        foreign = [
            (t, a) for t, a in tags if t not in CARD_TAGS or any((t, k) not in CARD_ATTRS for k, _ in a)
        ]
        assert foreign == [], foreign
        for label in labels:
            shown = " ".join(label.split())
            assert shown in visible, shown  # shown as written, not swallowed
            assert f"p_gender_{shown}" in visible or f"p_race_{shown}" in visible, shown
        assert check_annotation_card(card, folder) == []


@pytest.mark.parametrize(
    ("where", "value", "named"),
    [
        ("repo_id", "org/x`<img src=x onerror=alert(1)>`", "invalid repository id"),
        ("attribute", "gen`der", "attribute 'gen`der'"),
    ],
)
def test_names_written_in_code_spans_are_checked(
    prepared: tuple[Path, dict[str, Any]], where: str, value: str, named: str
) -> None:
    """The repository id and the attribute names go into code spans, URLs and column names, where no
    escape applies: a manifest holding another kind is refused, never rendered."""
    _, manifest = prepared
    broken = copy.deepcopy(manifest)
    if where == "repo_id":
        broken["repo_id"] = value
    else:
        broken["attributes"][value] = broken["attributes"].pop("gender")
        broken["counts"]["attributes"][value] = broken["counts"]["attributes"].pop("gender")
    with pytest.raises(ValueError, match=re.escape(named)):
        render_card(broken)
