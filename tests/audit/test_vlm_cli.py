"""`fairsets audit vlm` / `debias fit|apply` / `card update` end to end on the offline example's
photos with one person per state (the `two_state_out` fixture: two groups in `train`).

Random weights (``--pretrained none``): nothing is downloaded. The numbers say nothing about a
real model; what is checked is that the audit measures what it says it measures on the
embeddings it computed, writes its files, and that a fitted transform travels.
"""

from __future__ import annotations

import base64
import io
import json
from html.parser import HTMLParser

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner
from vlm_fixtures import copy_dataset, unit

from fairsets.audit.dataset import open_dataset
from fairsets.audit.embeddings import EmbeddingCache, embed_dataset
from fairsets.audit.prompts import PRIMARY, PROMPT_SETS
from fairsets.cli import app
from fairsets.debias.transform import DebiasTransform
from fairsets.publish.manifest import verify_layout

runner = CliRunner()


@pytest.fixture(scope="module")
def audited(two_state_out, tmp_path_factory, clip_vlm):
    """The issue's command, run once: the dataset copy and the audit folder."""
    base = tmp_path_factory.mktemp("audit")
    dataset = copy_dataset(two_state_out, base / "ds")
    out = base / "audit"
    args = ["audit", "vlm", str(dataset), "--model", "ViT-B-32", "--pretrained", "none"]
    result = runner.invoke(app, [*args, "--attribute", "state", "--k", "4", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return dataset, out


class _Images(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.srcs: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.srcs.append(a.get("src", ""))
        for name in ("href", "src"):
            if a.get(name):
                self.links.append(a[name])


def test_audit_writes_json_records_and_a_self_contained_report(audited):
    _, out = audited
    doc = json.loads((out / "audit.json").read_text())
    assert doc["schema"] == "fairsets.audit.vlm/1"
    assert doc["model"] == "ViT-B-32" and doc["pretrained"] == "none" and doc["attribute"] == "state"
    assert doc["k"] == 4 and doc["jsd_log_base"] == 2
    assert doc["groups"] == ["Assam", "Kerala"] and doc["empty_groups"] == []
    assert doc["reference"] == {
        "source": "the recipe's cells in manifest.json",
        "declared": True,
        "groups": ["Assam", "Kerala"],
    }
    assert {"reference_set", "jsd_uniform", "mean_similarity_std", "topk_share", "job"} <= set(
        doc["definitions"]
    )
    # 4 images per state in train and k = 4: each state can be retrieved whole, and the audit says so
    assert [w for w in doc["warnings"] if w.startswith("k = 4 >= the size of 2 state group(s)")]
    n_prompts = sum(len(v) for v in PROMPT_SETS.values())
    assert len(doc["results"]) == n_prompts  # no transform: one record per prompt
    for rec in doc["results"]:
        assert {"dataset", "model", "pretrained", "prompt", "attribute", "metrics"} <= set(rec)
        m = rec["metrics"]
        assert sum(m["topk"].values()) == 4
        assert 0.0 <= m["jsd_uniform"] <= 1.0
    primaries = {r["prompt"] for r in doc["results"] if r["primary"]}
    assert primaries == set(PRIMARY.values())
    assert set(doc["robustness"]) == set(PROMPT_SETS)
    assert set(doc["job"]["original"]) == {"Assam", "Kerala"}

    parser = _Images()
    parser.feed((out / "report.html").read_text())
    assert parser.srcs, "the report has plots"
    for src in parser.srcs:
        assert src.startswith("data:image/png;base64,")
        Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))).verify()
    assert not [x for x in parser.links if x.startswith(("http://", "https://", "//"))]


def test_audit_numbers_agree_with_the_cached_embeddings(audited, clip_vlm):
    """Recompute the primary prompt's top-4 and group means from the cache, independently."""
    dataset, out = audited
    doc = json.loads((out / "audit.json").read_text())
    ds = open_dataset(dataset)
    emb = embed_dataset(ds, clip_vlm, "balanced", ["train"])  # all cached now
    assert emb.computed == 0
    texts = EmbeddingCache.for_dataset(ds, clip_vlm).load_texts()
    prompt = PRIMARY["neutral"]
    sims = [float(unit(v.astype(np.float64)) @ unit(texts[prompt].astype(np.float64))) for v in emb.vectors]
    labels = [r["state"] for r in emb.rows]
    top = sorted(range(len(sims)), key=lambda i: (-sims[i], i))[:4]
    want = {g: sum(1 for i in top if labels[i] == g) for g in ("Assam", "Kerala")}
    rec = next(r for r in doc["results"] if r["prompt"] == prompt)
    assert rec["metrics"]["topk"] == want
    for g in ("Assam", "Kerala"):
        mean = np.mean([s for s, lab in zip(sims, labels, strict=True) if lab == g])
        assert rec["metrics"]["group_mean_similarity"][g] == pytest.approx(mean, abs=1e-6)


def test_debias_fit_apply_audit_and_card(audited, tmp_path, clip_vlm):
    dataset, _ = audited
    transform_file = tmp_path / "state.npz"
    common = ["--model", "ViT-B-32", "--pretrained", "none"]
    res = runner.invoke(
        app, ["debias", "fit", str(dataset), *common, "--attribute", "state", "--out", str(transform_file)]
    )
    assert res.exit_code == 0, res.output
    tr = DebiasTransform.load(transform_file)
    assert tr.meta["model_id"] == clip_vlm.model_id and tr.meta["attribute"] == "state"
    assert tr.meta["groups"] == ["Assam", "Kerala"] and tr.meta["splits"] == ["train"]

    # apply: the CLI writes exactly what the transform computes
    ds = open_dataset(dataset)
    vectors = embed_dataset(ds, clip_vlm, "balanced", ["train"]).vectors
    np.save(tmp_path / "emb.npy", vectors)
    res = runner.invoke(
        app,
        ["debias", "apply", str(transform_file), str(tmp_path / "emb.npy"), "-o", str(tmp_path / "d.npy")],
    )
    assert res.exit_code == 0, res.output
    # the float32 row path (fairsets.debias.rows32), within its stated tolerance of the float64
    # reference: every row within 1e-5 |x| of DebiasTransform.apply
    got, ref = np.load(tmp_path / "d.npy"), tr.apply(vectors)
    assert got.shape == ref.shape and got.dtype == np.float32
    err = np.linalg.norm(got.astype(np.float64) - ref, axis=1)
    assert np.all(err <= 1e-5 * np.linalg.norm(vectors.astype(np.float64), axis=1))

    # audit with the transform: debiased records for every prompt and the job simulation
    out = tmp_path / "audit"
    res = runner.invoke(
        app,
        [
            "audit",
            "vlm",
            str(dataset),
            *common,
            "--k",
            "4",
            "--debias",
            str(transform_file),
            "--out",
            str(out),
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "audit.json").read_text())
    views = {r["embeddings"] for r in doc["results"]}
    assert views == {"original", "debiased"}
    assert "debiased" in doc["job"] and doc["debias"]["method"] == "inlp"

    # card update: the tables land in the bias section; the layout still verifies
    res = runner.invoke(app, ["card", "update", str(dataset), "--audit", str(out)])
    assert res.exit_code == 0, res.output
    card = (dataset / "README.md").read_text()
    bias = card.split("## Bias, risks and limitations", 1)[1].split("\n## ", 1)[0]
    assert "ViT-B-32" in bias and PRIMARY["neutral"] in bias
    assert verify_layout(dataset) == []


def test_a_transform_for_another_model_is_refused(audited, tmp_path):
    dataset, _ = audited
    bad = DebiasTransform(
        method="inlp", A=np.eye(8), b=np.zeros(8), alpha=1.0, target=None, beta=0.0, meta={}
    )
    bad.save(tmp_path / "bad.npz")
    res = runner.invoke(
        app,
        [
            "audit",
            "vlm",
            str(dataset),
            "--model",
            "ViT-B-32",
            "--pretrained",
            "none",
            "--k",
            "4",
            "--debias",
            str(tmp_path / "bad.npz"),
            "--out",
            str(tmp_path / "a"),
        ],
    )
    assert res.exit_code == 2
    assert "8-d" in res.output


def test_job_prompts_are_configurable(audited, tmp_path, clip_vlm):
    dataset, _ = audited
    out = tmp_path / "a"
    cmd = ["audit", "vlm", str(dataset), "--model", "ViT-B-32", "--pretrained", "none", "--k", "4"]
    res = runner.invoke(
        app, [*cmd, "--job-prompts", "local applicant", "foreign applicant", "--out", str(out), "-q"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "audit.json").read_text())
    assert (doc["job"]["positive"], doc["job"]["negative"]) == ("local applicant", "foreign applicant")
    # the share is what the embeddings say: recompute it from the caches
    ds = open_dataset(dataset)
    emb = embed_dataset(ds, clip_vlm, "balanced", ["train"])
    texts = EmbeddingCache.for_dataset(ds, clip_vlm).load_texts()
    pos, neg = unit(texts["local applicant"].astype(float)), unit(texts["foreign applicant"].astype(float))
    for g in doc["groups"]:
        rows = [unit(v.astype(float)) for v, r in zip(emb.vectors, emb.rows, strict=True) if r["state"] == g]
        want = sum(1 for v in rows if v @ pos > v @ neg) / len(rows)
        assert doc["job"]["original"][g] == pytest.approx(want)


def test_clear_errors(audited, tmp_path):
    dataset, _ = audited
    base = [
        "audit",
        "vlm",
        str(dataset),
        "--model",
        "ViT-B-32",
        "--pretrained",
        "none",
        "--out",
        str(tmp_path),
    ]
    res = runner.invoke(app, [*base, "--attribute", "caste"])
    assert res.exit_code == 2 and "no column 'caste'" in res.output
    res = runner.invoke(app, [*base, "--split", "test"])
    assert res.exit_code == 2 and "no split 'test'" in res.output
    res = runner.invoke(
        app,
        [
            "audit",
            "vlm",
            str(tmp_path),
            "--model",
            "ViT-B-32",
            "--pretrained",
            "none",
            "--out",
            str(tmp_path / "x"),
        ],
    )
    assert res.exit_code == 2 and "not a published fairsets dataset" in res.output
    res = runner.invoke(
        app,
        ["audit", "vlm", str(dataset), "--model", "ViT-B-99", "--pretrained", "none", "--out", str(tmp_path)],
    )
    assert res.exit_code == 2


@pytest.mark.slow
def test_report_renders_in_headless_chromium(audited, tmp_path):
    """Where a Chromium is installed, the report's plots render (a screenshot with colour in it)."""
    import shutil
    import subprocess

    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no headless Chromium on this machine (the report is checked by parsing above)")
    _, out = audited
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={shot}",
            "--window-size=1200,2400",
            (out / "report.html").as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    img = np.asarray(Image.open(shot).convert("RGB"))
    colours = {tuple(c) for c in img.reshape(-1, 3)[::97]}
    # Text alone is black, white and greys; rendered bar charts add the plot colours.
    assert any(max(c) - min(c) > 80 for c in colours), "no coloured plot pixels in the screenshot"


def test_missing_pytorch_names_the_extra(audited, tmp_path, monkeypatch):
    """Without PyTorch the command says which extra to install (and rich does not eat '[vlm]')."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    dataset, _ = audited
    res = runner.invoke(
        app,
        ["audit", "vlm", str(dataset), "--model", "ViT-B-32", "--pretrained", "none", "--out", str(tmp_path)],
    )
    assert res.exit_code == 2
    assert "needs the Python module 'torch'" in res.output and "pip install 'fairsets[vlm]'" in res.output
