"""Croissant RAI metadata and complete cards: the example build and a published annotation folder.

The expected property lists and the card's template headings are written out here, from the RAI
vocabulary (mlcommons/croissant docs/croissant_rai.ttl) and huggingface_hub's
datasetcard_template.md, not taken from fairsets' own constants.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cli_helpers import assert_one_line_error, run_cli
from fairsets.publish.rai import check_rai, missing_rai, rai_properties

ROOT = Path(__file__).resolve().parents[2]
VOCABULARY = {  # the 20 properties of croissant_rai.ttl, with schema:rangeIncludes
    **dict.fromkeys(
        [
            "dataCollection",
            "dataCollectionType",
            "dataCollectionMissingData",
            "dataCollectionRawData",
            "dataPreprocessingProtocol",
            "dataImputationProtocol",
            "dataManipulationProtocol",
            "dataReleaseMaintenancePlan",
            "personalSensitiveInformation",
            "dataAnnotationProtocol",
            "dataAnnotationPlatform",
            "dataAnnotationAnalysis",
            "annotationsPerItem",
            "annotatorDemographics",
            "machineAnnotationTools",
            "dataSocialImpact",
            "dataBiases",
            "dataLimitations",
            "dataUseCases",
        ],
        "Text",
    ),
    "dataCollectionTimeframe": "DateTime",
}
RAI_IRI = "http://mlcommons.org/croissant/RAI/1.0"
#: Sections of huggingface_hub's datasetcard_template.md a card about people is read for.
TEMPLATE_HEADINGS = [
    "uses",
    "direct use",
    "out-of-scope use",
    "source data",
    "data collection and processing",
    "who are the source data producers?",
    "annotations",
    "annotation process",
    "who are the annotators?",
    "personal and sensitive information",
    "bias, risks and limitations",
    "recommendations",
    "maintenance and versioning",
    "dataset card contact",
]


def _rai(doc: dict) -> dict:
    return {k[4:]: v for k, v in doc.items() if k.startswith("rai:")}


def _headings(card: str) -> set[str]:
    body, fenced, heads = card.split("\n---\n", 1)[1], False, set()
    for line in body.splitlines():
        fenced ^= line.startswith("```")
        if not fenced and (m := re.match(r"^#{1,6} (.+)$", line)):
            heads.add(m.group(1).strip().lower())
    return heads


def _strings(value: object) -> bool:
    items = value if isinstance(value, list) else [value]
    return bool(items) and all(isinstance(x, str) and x.strip() for x in items)


def test_shipped_vocabulary_is_the_rai_1_0_term_list() -> None:
    props = rai_properties()
    assert {k: v["range"] for k, v in props.items()} == VOCABULARY
    assert all(v["meaning"].strip() for v in props.values())
    text = (ROOT / "cards" / "croissant_rai.toml").read_text(encoding="utf-8")
    assert "docs/croissant_rai.ttl" in text and re.search(r"commit\s+[0-9a-f]{40}", text)


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        ("rai:dataCollectionTimeFrame", "2020/2022", "spells it dataCollectionTimeframe"),  # mlcroissant's
        ("rai:dataDataManipulationProtocol", "x", "not a property"),  # mlcroissant's spelling
        ("rai:dataUseCase", "x", "not a property"),
        ("rai:dataBiases", 3, "int"),
        ("rai:dataBiases", [], "empty list"),
        ("rai:dataCollectionTimeframe", "last spring", "ISO 8601"),
    ],
)
def test_check_rai_fails_on_unknown_keys_and_wrong_types(key: str, value: object, needle: str) -> None:
    doc = {
        "@context": {"rai": "http://mlcommons.org/croissant/RAI/"},
        "conformsTo": ["http://mlcommons.org/croissant/1.0", RAI_IRI],
        "rai:dataCollection": "fine",
        key: value,
    }
    problems = check_rai(doc)
    assert len(problems) == 1 and problems[0].startswith(key) and needle in problems[0], problems
    ok = {**doc, "rai:dataCollectionTimeframe": "2024-01-01/2024-03-31"}
    del ok[key]
    assert check_rai(ok) == []
    assert any(
        "conformsTo" in p for p in check_rai({**ok, "conformsTo": "http://mlcommons.org/croissant/1.0"})
    )


def test_example_croissant_has_every_rai_property_fairsets_knows(example_out: Path) -> None:
    from fairsets.pipeline.config import tomllib

    doc = json.loads((example_out / "croissant.json").read_text(encoding="utf-8"))
    assert check_rai(doc) == [] and missing_rai(doc) == []
    rai = _rai(doc)
    assert set(rai) <= set(VOCABULARY)
    for name, value in rai.items():
        assert _strings(value), name
    assert RAI_IRI in doc["conformsTo"]
    # what the build knows, and what the recipe's [publish.rai] says
    assert set(rai) == set(VOCABULARY) - {
        "dataCollectionTimeframe",  # the example's recipe gives none
        "dataAnnotationPlatform",
        "dataAnnotationAnalysis",
        "machineAnnotationTools",
    }
    person = tomllib.loads((ROOT / "builders" / "example.toml").read_text())["publish"]["rai"]
    for field, prop in [
        ("data_use_cases", "dataUseCases"),
        ("data_social_impact", "dataSocialImpact"),
        ("data_release_maintenance_plan", "dataReleaseMaintenancePlan"),
        ("annotator_demographics", "annotatorDemographics"),
    ]:
        assert rai[prop] == " ".join(person[field].split())
    manifest = json.loads((example_out / "manifest.json").read_text())
    for step in manifest["steps"]:  # every step, its parameters' rule and its own count
        assert f"{step['name']} with parameters" in rai["dataPreprocessingProtocol"]
        assert re.search(
            rf"{re.escape(step['name'])} with parameters .*?: "
            rf"{step['rejected']} rejected, {step['failed']} failed",
            rai["dataPreprocessingProtocol"],
        ), step["name"]
    augmented = sum(
        1
        for p in (example_out / "metadata" / "balanced").glob("*.parquet")
        for r in pq.read_table(p).to_pylist()
        if r["augmented_from"]
    )
    assert f"balanced: {augmented}" in rai["dataManipulationProtocol"]
    assert "state, gender" in rai["personalSensitiveInformation"]
    card = (example_out / "README.md").read_text(encoding="utf-8")
    bullets = [rai[k] if isinstance(rai[k], list) else [rai[k]] for k in ("dataBiases", "dataLimitations")]
    for bullet in bullets[0] + bullets[1]:  # the card says the same
        assert " ".join(bullet.split())[:60] in " ".join(card.split()).replace("\\", "")


def test_mlcroissant_loads_the_example_with_its_rai(example_out: Path) -> None:
    import mlcroissant as mlc

    doc = json.loads((example_out / "croissant.json").read_text(encoding="utf-8"))
    files = {
        f["@id"]: str(example_out / f["@id"]) for f in doc["distribution"] if f["@type"] == "cr:FileObject"
    }
    ds = mlc.Dataset(jsonld=str(example_out / "croissant.json"), mapping=files)
    assert ds.metadata.data_use_cases == [doc["rai:dataUseCases"]]
    rs = doc["recordSet"][0]["@id"]
    assert (
        len(list(ds.records(rs)))
        == pq.read_metadata(files[doc["recordSet"][0]["field"][0]["source"]["fileObject"]["@id"]]).num_rows
    )


def test_example_card_renders_every_template_section_and_lints_clean(
    example_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    card = (example_out / "README.md").read_text(encoding="utf-8")
    assert set(TEMPLATE_HEADINGS) <= _headings(card)
    assert "[More Information Needed]" not in card
    header = card.split("---")[1]
    for key in (
        "source_datasets:",
        "annotations_creators:",
        "language_creators:",
        "size_categories:",
        "task_categories:",
    ):
        assert key in header
    code, out, err = run_cli(["card", "lint", example_out, "--strict"], capsys)
    assert code == 0 and "lack nothing" in out, out + err


@pytest.fixture(scope="module")
def bare_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example built without its [publish.rai] section."""
    from fairsets.pipeline.build import build
    from fairsets.pipeline.config import load_recipe

    recipe = load_recipe(ROOT / "builders" / "example.toml")
    recipe = recipe.model_copy(update={"publish": recipe.publish.model_copy(update={"rai": None})})
    out = tmp_path_factory.mktemp("bare") / "out"
    build(recipe, out)
    return out


def test_card_lint_names_what_is_missing(bare_out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    card = (bare_out / "README.md").read_text(encoding="utf-8")
    assert set(TEMPLATE_HEADINGS) <= _headings(card)  # the sections are there, with placeholders
    code, out, _ = run_cli(["card", "lint", bare_out], capsys)
    assert code == 0
    lines = out.strip().splitlines()
    for field in ("data_use_cases", "data_social_impact", "data_release_maintenance_plan", "contact"):
        assert any("placeholder" in ln and field in ln for ln in lines), field
    for prop in ("dataUseCases", "dataSocialImpact", "dataReleaseMaintenancePlan", "annotatorDemographics"):
        assert any(f"rai:{prop} is missing" in ln for ln in lines), prop
    assert not any(c in out for c in ("\\[", "**", "<")), out  # plain text, no markup
    code, _, _ = run_cli(["card", "lint", bare_out, "--strict"], capsys)
    assert code == 1


def test_publish_refuses_placeholders_unless_told(
    bare_out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from fairsets.publish import hub
    from publish.test_hub import RecordingApi

    api = RecordingApi()
    monkeypatch.setattr(hub, "_make_api", lambda token: api)
    monkeypatch.setenv("HF_TOKEN", "hf_test_token_rai")
    out = tmp_path / "out"
    shutil.copytree(bare_out, out)
    code, _, err = run_cli(["publish", out, "--repo-id", "org/example"], capsys)
    assert_one_line_error(code, err, "incomplete", "--allow-placeholders", "[publish.rai]")
    assert api.names == []  # nothing was sent
    code, _, err = run_cli(["publish", out, "--repo-id", "org/example", "--rai", tmp_path / "x.toml"], capsys)
    assert_one_line_error(code, err, "--rai is for annotation folders")
    code, _, err = run_cli(["publish", out, "--repo-id", "org/example", "--allow-placeholders"], capsys)
    assert code == 0, err
    assert "upload_large_folder" in api.names
