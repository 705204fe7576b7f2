"""Croissant RAI, the complete card and the placeholder refusal of a published annotation folder
(the fixture folder of tests/annotate/publish_ann.py: a gender head verified against one human
coder, a race head without verification)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_rai import RAI_IRI, TEMPLATE_HEADINGS, VOCABULARY, _headings, _rai, _strings

from annotate.publish_ann import make_ann
from cli_helpers import assert_one_line_error, run_cli
from fairsets.annotate.publish.dataset import prepare, prepared_dir, verify_prepared
from fairsets.publish.rai import check_rai, missing_rai
from fairsets.publish.rai_text import RaiText

REPO = "fairsets-test/person-annotations"
PERSON = {
    "data_use_cases": "Aggregate audits of who appears in the annotated shards.",
    "data_social_impact": "Makes the composition of a web dataset measurable; labels can be misused.",
    "data_release_maintenance_plan": "Rebuilt when the heads change; old revisions stay tagged.",
    "annotator_demographics": "One coder, h1, an adult member of the project.",
    "contact": "The maintainers, through the repository's discussions.",
}


@pytest.fixture()
def ann(tmp_path: Path) -> Path:
    root = tmp_path / "ANN"
    make_ann(root)
    return root


def test_annotation_croissant_rai_keys_types_and_facts(ann: Path) -> None:
    prepared = prepare(ann, repo_id=REPO, rai=RaiText(**PERSON))
    assert verify_prepared(prepared.folder) == []
    doc = json.loads((prepared.folder / "croissant.json").read_text(encoding="utf-8"))
    assert "croissant.json" in prepared.manifest["files"]
    assert check_rai(doc) == [] and missing_rai(doc) == [] and RAI_IRI in doc["conformsTo"]
    rai = _rai(doc)
    assert set(rai) == set(VOCABULARY) - {"dataCollectionTimeframe"}
    assert all(_strings(v) for v in rai.values())
    source = json.loads((ann / "manifest.json").read_text())
    tools = " ".join(rai["machineAnnotationTools"])
    assert source["detector"]["model_id"] in tools
    for attr, entry in source["attributes"].items():
        assert entry["head_sha256"] in tools, attr
    kappa = source["attributes"]["gender"]["verification"]["human_vs_classifier"]["h1"]
    assert f"over {kappa['n']} boxes" in rai["dataAnnotationAnalysis"]
    assert (
        f"Cohen's kappa {kappa['kappa']} [{kappa['kappa_ci'][0]}, {kappa['kappa_ci'][1]}]"
        in (rai["dataAnnotationAnalysis"])
    )
    assert "1000 resamples" in rai["dataAnnotationAnalysis"]
    assert "h1" in rai["annotationsPerItem"] and "dataAnnotationPlatform" in rai
    assert rai["annotatorDemographics"] == PERSON["annotator_demographics"]
    boxes = pq.read_table(prepared.folder / "data/boxes").num_rows  # counts recomputed from the tables
    assert f"Boxes: {boxes} detected" in rai["dataPreprocessingProtocol"]


def test_mlcroissant_loads_the_annotation_croissant(ann: Path) -> None:
    import mlcroissant as mlc

    folder = prepare(ann, repo_id=REPO).folder
    ds = mlc.Dataset(jsonld=str(folder / "croissant.json"))
    for name in ("boxes", "images"):
        rows = sum(pq.read_metadata(p).num_rows for p in sorted((folder / "data" / name).glob("*.parquet")))
        assert len(list(ds.records(name))) == rows, name


def test_annotation_card_sections_and_lint(
    ann: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = prepare(ann, repo_id=REPO).folder
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert set(TEMPLATE_HEADINGS) <= _headings(card)
    header = card.split("---")[1]
    assert re.search(r"annotations_creators:\n- machine-generated", header)
    assert "source_datasets:" in header and "language_creators:" in header
    code, out, _ = run_cli(["card", "lint", ann, "--strict"], capsys)
    assert code == 1
    for field in ("data_use_cases", "data_social_impact", "annotator_demographics", "contact"):
        assert any("placeholder" in ln and field in ln for ln in out.splitlines()), field
    assert any("rai:annotatorDemographics is missing" in ln for ln in out.splitlines())

    rai_file = tmp_path / "rai.toml"
    rai_file.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in PERSON.items()), encoding="utf-8")
    code, _, err = run_cli(["publish", ann, "--repo-id", REPO, "--rai", rai_file, "--dry-run"], capsys)
    assert code == 0 and "note:" not in err, err
    code, out, _ = run_cli(["card", "lint", ann, "--strict"], capsys)
    assert code == 0, out
    assert "One coder, h1" in (prepared_dir(ann) / "README.md").read_text(encoding="utf-8")


def test_annotation_publish_refuses_placeholders_and_bad_rai(
    ann: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from fairsets.publish import hub
    from publish.test_hub import RecordingApi

    api = RecordingApi()
    monkeypatch.setattr(hub, "_make_api", lambda token: api)
    monkeypatch.setenv("HF_TOKEN", "hf_test_token_rai_ann")
    code, _, err = run_cli(["publish", ann, "--repo-id", REPO], capsys)
    assert_one_line_error(code, err, "incomplete", "--rai", "--allow-placeholders")
    assert api.names == []
    bad = tmp_path / "bad.toml"
    bad.write_text('data_use_case = "typo"\n', encoding="utf-8")
    code, _, err = run_cli(["publish", ann, "--repo-id", REPO, "--rai", bad], capsys)
    assert_one_line_error(code, err, "data_use_case")
    code, _, err = run_cli(["publish", ann, "--repo-id", REPO, "--allow-placeholders"], capsys)
    assert code == 0, err
    assert "upload_large_folder" in api.names
