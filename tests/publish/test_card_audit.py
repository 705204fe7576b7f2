"""`fairsets card update --audit`: the audit block in the card, idempotent, manifest kept valid."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from fairsets.audit.card import card_audit_section, update_card
from fairsets.audit.prompts import default_prompts
from fairsets.audit.vlm import vlm_audit
from fairsets.publish.card import check_card
from fairsets.publish.manifest import verify_layout


def audit_for(
    out: Path,
    *,
    model: str = "ViT-B-32",
    pretrained: str = "none",
    debiased: bool = True,
    job: bool = True,
    seed: int = 0,
) -> dict[str, Any]:
    """An audit of the published layout's balanced train split, from random embeddings."""
    table = pq.read_table(out / "metadata" / "balanced" / "train.parquet")
    labels = [str(s) for s in table.column("state").to_pylist()]
    rng = np.random.default_rng(seed)
    d = 16
    original = rng.normal(size=(len(labels), d))
    embeddings = {"original": original}
    if debiased:
        embeddings["debiased"] = original - original.mean(axis=0)
    spec = default_prompts()
    texts = {p: rng.normal(size=d) for p in spec.all_prompts(include_job=True)}
    doc = vlm_audit(
        original,
        labels,
        texts,
        spec if job else dataclasses.replace(spec, job=None),
        k=4,
        debiased=embeddings.get("debiased"),
        header={
            "dataset": "example-faces",
            "dataset_path": str(out),
            "variant": "balanced",
            "splits": ["train"],
            "model": model,
            "model_id": f"open_clip:{model}:{pretrained}",
            "pretrained": pretrained,
            "attribute": "state",
        },
    )
    doc["debias"] = (
        {
            "transform": "/tmp/debias/inlp.npz",
            "method": "inlp",
            "alpha": 1.0,
            "beta": 0.01,
            "fit_splits": ["train"],
            "meta": {},
        }
        if debiased
        else None
    )
    doc.update(created="2026-11-21T12:00:00Z", fairsets_version="0.1.0")
    return doc


def write_audit(directory: Path, audit: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "audit.json").write_text(json.dumps(audit, indent=2), encoding="utf-8")
    return directory


def header(text: str) -> str:
    end = text.index("\n---\n", 3)
    return text[: end + 5]


@pytest.fixture
def dataset(example_out: Path, tmp_path: Path) -> Path:
    out = tmp_path / "dataset"
    shutil.copytree(example_out, out)
    assert verify_layout(out) == []
    return out


def test_update_card_inserts_the_audit_and_keeps_the_layout_valid(dataset: Path, tmp_path: Path) -> None:
    before = (dataset / "README.md").read_text(encoding="utf-8")
    problems_before = check_card(before, dataset)
    audit = audit_for(dataset)
    audit_dir = write_audit(tmp_path / "audit-b32", audit)

    readme = update_card(dataset, audit_dir)
    assert readme == dataset / "README.md"
    after = readme.read_text(encoding="utf-8")
    assert verify_layout(dataset) == []
    assert header(after) == header(before)
    assert check_card(after, dataset) == problems_before == []

    start = "<!-- fairsets:audit:open_clip:ViT-B-32:none start -->"
    end = "<!-- fairsets:audit:open_clip:ViT-B-32:none end -->"
    assert after.count(start) == 1 and after.count(end) == 1
    # Inside "Bias, risks and limitations", before its bullet list and before the next section.
    bias = after.index("## Bias, risks and limitations")
    assert bias < after.index(start) < after.index(end)
    assert after.index(end) < after.index("- The sources decide who is represented")
    assert after.index(end) < after.index("## Licences and attribution")
    assert after[bias:].startswith("## Bias, risks and limitations\n\n" + start + "\n")
    # Only the block was added.
    block = after[after.index(start) : after.index(end) + len(end)]
    assert after.replace(block + "\n\n", "", 1) == before

    assert "### Audit: ViT-B-32 (none), attribute state" in block
    assert "base 2" in block and "ddof=0" in block and "`train`" in block
    assert "2026-11-21" in block and "fairsets 0.1.0" in block
    for prompt in ("An Indian person", "An Indian male", "An Indian female"):
        assert f"Prompt “{prompt}” " in block
    person = next(
        r["metrics"]
        for r in audit["results"]
        if r["prompt"] == "An Indian person" and r["embeddings"] == "original"
    )
    person_deb = next(
        r["metrics"]
        for r in audit["results"]
        if r["prompt"] == "An Indian person" and r["embeddings"] == "debiased"
    )
    jsd_row = f"| JSD vs uniform | {person['jsd_uniform']:.4f} | {person_deb['jsd_uniform']:.4f} |"
    assert jsd_row in block
    assert f"| Std of group means | {person['mean_similarity_std']:.4f} |" in block
    assert "| Metric | Original | Debiased | Change |" in block
    for g in audit["groups"]:
        row = next(
            line for line in block.splitlines() if line.startswith(f"| {g} | {audit['group_sizes'][g]} |")
        )
        assert f" {person['topk'][g]} " in row
        assert any(
            line.startswith(f"| {g} | {audit['job']['original'][g]:.3f} |") for line in block.splitlines()
        )
    assert "Indian candidate" in block and "foreign candidate" in block

    manifest = json.loads((dataset / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["files"]["README.md"]["bytes"] == readme.stat().st_size


def test_update_card_is_idempotent_and_adds_other_models(dataset: Path, tmp_path: Path) -> None:
    b32 = write_audit(tmp_path / "b32", audit_for(dataset))
    update_card(dataset, b32)
    once = (dataset / "README.md").read_bytes()
    manifest_once = (dataset / "manifest.json").read_bytes()
    update_card(dataset, b32)
    assert (dataset / "README.md").read_bytes() == once
    assert (dataset / "manifest.json").read_bytes() == manifest_once

    b16 = write_audit(
        tmp_path / "b16", audit_for(dataset, model="ViT-B-16", debiased=False, job=False, seed=1)
    )
    update_card(dataset, b16)
    two = (dataset / "README.md").read_text(encoding="utf-8")
    assert verify_layout(dataset) == []
    i32 = two.index("<!-- fairsets:audit:open_clip:ViT-B-32:none start -->")
    i16 = two.index("<!-- fairsets:audit:open_clip:ViT-B-16:none start -->")
    assert i32 < i16 < two.index("- The sources decide who is represented")
    b16_block = two[i16 : two.index("<!-- fairsets:audit:open_clip:ViT-B-16:none end -->")]
    assert "| Metric | Original |\n" in b16_block and "Job-application" not in b16_block
    assert "Debiased" not in b16_block

    # Re-running either update changes nothing; a new B-32 audit replaces only its block.
    update_card(dataset, b32)
    update_card(dataset, b16)
    assert (dataset / "README.md").read_text(encoding="utf-8") == two
    new32 = write_audit(tmp_path / "b32-new", audit_for(dataset, seed=5))
    update_card(dataset, new32)
    three = (dataset / "README.md").read_text(encoding="utf-8")
    assert three.count("fairsets:audit:open_clip:ViT-B-32:none start") == 1
    assert three[three.index("<!-- fairsets:audit:open_clip:ViT-B-16") :] == two[i16:]
    assert header(three) == header(two)
    assert verify_layout(dataset) == []
    assert check_card(three, dataset) == []


def test_card_without_the_section_gets_one(dataset: Path, tmp_path: Path) -> None:
    from fairsets.publish.manifest import file_entries, write_manifest

    readme = dataset / "README.md"
    text = readme.read_text(encoding="utf-8")
    start = text.index("## Bias, risks and limitations")
    stop = text.index("## Licences and attribution")
    readme.write_text(text[:start] + text[stop:], encoding="utf-8")
    manifest = json.loads((dataset / "manifest.json").read_text(encoding="utf-8"))
    manifest["files"].update(file_entries(dataset, ["README.md"]))
    write_manifest(dataset / "manifest.json", manifest)

    audit_dir = write_audit(tmp_path / "a", audit_for(dataset))
    update_card(dataset, audit_dir)
    new = readme.read_text(encoding="utf-8")
    assert new.index("## Bias, risks and limitations\n\n<!-- fairsets:audit:") < new.index(
        "## Licences and attribution"
    )
    assert verify_layout(dataset) == []
    once = readme.read_bytes()
    update_card(dataset, audit_dir)
    assert readme.read_bytes() == once


def test_errors(dataset: Path, tmp_path: Path) -> None:
    readme_before = (dataset / "README.md").read_bytes()
    with pytest.raises(FileNotFoundError, match=r"audit\.json"):
        update_card(dataset, tmp_path / "nothing")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "audit.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        update_card(dataset, bad)
    wrong = write_audit(tmp_path / "wrong", dict(audit_for(dataset), schema="other/1"))
    with pytest.raises(ValueError, match="schema"):
        update_card(dataset, wrong)
    with pytest.raises(FileNotFoundError, match=r"README\.md"):
        update_card(tmp_path / "no-dataset", write_audit(tmp_path / "ok", audit_for(dataset)))
    assert (dataset / "README.md").read_bytes() == readme_before
    assert verify_layout(dataset) == []


def test_section_escapes_text(dataset: Path) -> None:
    audit = audit_for(dataset, job=True)
    old = audit["groups"][0]
    evil = "A|B <script>x</script> [y](javascript:alert(1)) *z*"
    audit["groups"][0] = evil
    audit["group_sizes"][evil] = audit["group_sizes"].pop(old)
    for r in audit["results"]:
        m = r["metrics"]
        for key in ("topk", "topk_share", "group_mean_similarity"):
            m[key] = {(evil if g == old else g): v for g, v in m[key].items()}
    audit["job"]["original"] = {(evil if g == old else g): v for g, v in audit["job"]["original"].items()}
    audit["model_id"] = "hf-hub:org/model--x <y>"
    text = card_audit_section(audit)
    assert "<script>" not in text and "A\\|B &lt;script&gt;x&lt;/script&gt;" in text
    assert "](javascript" not in text.replace("\\](", "")  # a group name never becomes a link
    assert "\\[y\\](javascript:alert(1)) \\*z\\*" in text
    audit["splits"] = ["te`st"]  # a name a code span cannot hold is shown as text
    assert "te\\`st" in card_audit_section(audit)
    first, last = text.splitlines()[0], text.splitlines()[-1]
    assert first.startswith("<!-- fairsets:audit:") and first.endswith(" start -->")
    assert "--x" not in first[4:-3] and "<y>" not in first
    assert last == first.replace(" start -->", " end -->")


def test_an_audit_that_is_not_an_audit_folder_says_what_audit_must_be(dataset: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from fairsets.cli import app

    toml = tmp_path / "some-file.toml"
    toml.write_text("x = 1\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    expected = "must be the folder written by `fairsets audit vlm --out`"
    for target, problem in (
        (toml, "is a file, not an audit folder"),
        (tmp_path / "missing", "no such folder"),
        (empty, "holds no audit.json"),
    ):
        with pytest.raises(FileNotFoundError) as info:
            update_card(dataset, target)
        assert problem in str(info.value) and expected in str(info.value)
        assert f"{target}/audit.json" not in str(info.value)
        res = CliRunner().invoke(app, ["card", "update", str(dataset), "--audit", str(target)])
        lines = [line for line in res.output.splitlines() if line.strip()]
        assert res.exit_code == 2 and len(lines) == 1, res.output
        assert problem in lines[0] and expected in lines[0], lines[0]
