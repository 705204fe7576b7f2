"""`fairsets audit vlm` measures against the declared groups (issue 25, finding 1).

The offline example promises two states (``[cells] state = ["Kerala", "Assam"]``) and Assam gets
no real face, so its card reports that cell as empty. An audit that took its groups from the
labels present saw one state and called the retrieval perfectly uniform (JSD 0.0, std 0.0). Here
every number is recomputed from the cached embeddings with scipy or by hand, never with fairsets'
metrics.

The model is the random-weight ViT-B-32 of ``clip_vlm`` (built once per session; the CLI's loader
is pointed at it so each command does not build it again).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon
from typer.testing import CliRunner
from vlm_fixtures import copy_dataset, unit

from fairsets.audit.dataset import open_dataset
from fairsets.audit.embeddings import EmbeddingCache, embed_dataset
from fairsets.audit.prompts import PRIMARY
from fairsets.cli import app

runner = CliRunner()
MODEL = ["--model", "ViT-B-32", "--pretrained", "none"]


@pytest.fixture
def same_model(monkeypatch, clip_vlm):
    """`load_vlm` returns the session's model (the loading itself is tested in tests/models)."""
    import fairsets.models

    monkeypatch.setattr(fairsets.models, "load_vlm", lambda *a, **k: clip_vlm)
    return clip_vlm


def sims_and_labels(dataset, vlm, variant, splits, prompt, attribute="state"):
    ds = open_dataset(dataset)
    emb = embed_dataset(ds, vlm, variant, splits)
    assert emb.computed == 0  # the audit cached them
    text = EmbeddingCache.for_dataset(ds, vlm).load_texts()[prompt].astype(np.float64)
    sims = [float(unit(v.astype(np.float64)) @ unit(text)) for v in emb.vectors]
    return sims, [str(r[attribute]) for r in emb.rows]


def top_counts(sims, labels, k, groups):
    top = sorted(range(len(sims)), key=lambda i: (-sims[i], i))[:k]
    return [sum(1 for i in top if labels[i] == g) for g in groups]


def jsd_base2(p, q):
    """The divergence: scipy returns the Jensen–Shannon *distance*, its square root."""
    return float(jensenshannon(p, q, base=2) ** 2)


def test_a_promised_state_with_no_image_is_counted_and_named(example_out, tmp_path, same_model):
    dataset = copy_dataset(example_out, tmp_path / "ds")
    manifest = json.loads((dataset / "manifest.json").read_text())
    assert {c["cell"]["state"]: c["available"] for c in manifest["cells"]} == {"Kerala": 2, "Assam": 0}
    out = tmp_path / "audit"
    res = runner.invoke(app, ["audit", "vlm", str(dataset), *MODEL, "--k", "1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "audit.json").read_text())

    assert doc["groups"] == ["Assam", "Kerala"]
    assert doc["group_sizes"] == {"Assam": 0, "Kerala": 2}
    assert doc["empty_groups"] == ["Assam"]
    assert doc["reference"]["declared"] and "manifest.json" in doc["reference"]["source"]
    assert any("Assam" in w and "no image" in w for w in doc["warnings"])
    assert "Assam" in res.output and "no image" in res.output

    sims, labels = sims_and_labels(dataset, same_model, "balanced", ["test"], PRIMARY["neutral"])
    assert set(labels) == {"Kerala"}  # nothing of Assam was published
    rec = next(r for r in doc["results"] if r["prompt"] == PRIMARY["neutral"])
    m = rec["metrics"]
    assert m["topk"] == {"Assam": 0, "Kerala": 1}
    # (0, 1) against (1/2, 1/2), by hand: M = (1/4, 3/4); JSD = (log2(4/3) + 1/2 log2 2 + 1/2 log2(2/3)) / 2
    by_hand = 0.5 * (np.log2(4 / 3) + 0.5 * np.log2(2) + 0.5 * np.log2(2 / 3))
    assert m["jsd_uniform"] == pytest.approx(by_hand, abs=1e-12)
    assert m["jsd_uniform"] == pytest.approx(jsd_base2([0, 1], [1, 1]), abs=1e-12)
    assert m["jsd_uniform"] > 0.3  # not the "perfectly uniform" 0.0 of the labels present
    assert m["group_mean_similarity"]["Assam"] is None
    assert m["group_mean_similarity"]["Kerala"] == pytest.approx(np.mean(sims), abs=1e-6)
    assert m["mean_similarity_std"] is None  # the σ over both states does not exist
    assert m["mean_similarity_std_present"] == 0.0
    assert doc["job"]["original"]["Assam"] is None
    for name in ("reference_set", "jsd_uniform", "mean_similarity_std", "top_k", "job"):
        assert name in doc["definitions"]
    assert "2 declared groups" in doc["definitions"]["reference_set"]

    html = (out / "report.html").read_text()
    assert "Assam" in html.split('id="warnings"', 1)[1].split("</div>", 1)[0]
    res = runner.invoke(app, ["card", "update", str(dataset), "--audit", str(out)])
    assert res.exit_code == 0, res.output
    bias = (dataset / "README.md").read_text().split("## Bias, risks and limitations", 1)[1]
    assert "1 with no image, counted as zero retrievals: Assam" in bias
    assert "Definitions:" in bias and "| Std of group means | undefined |" in bias


def test_groups_option_declares_the_reference_and_k_warnings(two_state_out, tmp_path, same_model):
    """--groups overrides the manifest: Goa has no image and counts; k >= a group, and k >= n,
    are warnings in audit.json (the JSD is not quietly 0)."""
    dataset = copy_dataset(two_state_out, tmp_path / "ds")
    out = tmp_path / "groups"
    args = ["audit", "vlm", str(dataset), *MODEL, "--groups", "Kerala, Goa,Assam", "--k", "3"]
    res = runner.invoke(app, [*args, "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "audit.json").read_text())
    assert doc["groups"] == ["Assam", "Goa", "Kerala"] and doc["empty_groups"] == ["Goa"]
    assert doc["reference"]["source"] == "--groups"
    sims, labels = sims_and_labels(dataset, same_model, "balanced", ["train"], PRIMARY["female"])
    n = len(labels)
    sizes = {g: labels.count(g) for g in ("Assam", "Kerala")}
    assert sizes == {"Assam": 4, "Kerala": 4} and doc["group_sizes"] == {**sizes, "Goa": 0}
    rec = next(r for r in doc["results"] if r["prompt"] == PRIMARY["female"])
    counts = top_counts(sims, labels, 3, ["Assam", "Goa", "Kerala"])
    assert list(rec["metrics"]["topk"].values()) == counts
    assert rec["metrics"]["jsd_uniform"] == pytest.approx(jsd_base2(counts, [1, 1, 1]), abs=1e-12)
    assert not any("k = 3" in w for w in doc["warnings"])  # 3 < every group of 4

    # k = 4 holds a whole group: a warning naming the groups it can exhaust
    res = runner.invoke(app, [*args[:-2], "--k", "4", "--out", str(tmp_path / "k4"), "-q"])
    assert res.exit_code == 0, res.output
    warnings = json.loads((tmp_path / "k4" / "audit.json").read_text())["warnings"]
    assert any("k = 4 >= the size of 2 state group(s): Assam (4), Kerala (4)" in w for w in warnings)

    # k >= n: the top-k is the whole dataset; the JSD measures its composition, and says so
    res = runner.invoke(
        app, ["audit", "vlm", str(dataset), *MODEL, "--k", "50", "--out", str(tmp_path / "kn")]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "kn" / "audit.json").read_text())
    assert doc["k"] == n and doc["k_requested"] == 50
    rec = next(r for r in doc["results"] if r["prompt"] == PRIMARY["neutral"])
    assert rec["metrics"]["jsd_uniform"] == 0.0  # 4 and 4 of 2 declared states: the composition
    assert any(f"k = 50 >= n = {n} images" in w for w in doc["warnings"])
    assert f"k = 50 >= n = {n} images" in res.output
    html = (tmp_path / "kn" / "report.html").read_text()
    assert "k = 50 &gt;= n" in html.split('id="warnings"', 1)[1]


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ("Kerala", "'Assam' that are not among the 1 groups declared by --groups"),
        (" , ", "--groups is empty"),
        ("Kerala,,Assam", "has an empty name"),
        ("Kerala,Assam,Kerala", "names Kerala twice"),
    ],
)
def test_groups_errors_are_one_line_before_any_model_loads(
    two_state_out, tmp_path, monkeypatch, groups, message
):
    import fairsets.models

    def no_model(*a, **k):
        raise AssertionError("the model was loaded before the check")

    monkeypatch.setattr(fairsets.models, "load_vlm", no_model)
    res = runner.invoke(
        app, ["audit", "vlm", str(two_state_out), *MODEL, "--groups", groups, "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1
