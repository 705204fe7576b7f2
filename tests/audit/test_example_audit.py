"""The audit example (``builders/example-audit.toml``, issue 25 item 13): built offline from photos
that ship inside packages, it has three states with images in both splits, so the documented
`fairsets audit vlm` and `fairsets debias fit` show something on a first run.

The face detector is the recipe's (the paper's res10); the model is the random-weight ViT-B-32 of
``clip_vlm`` (the CLI's loader is pointed at it). Numbers are recomputed from the cached
embeddings with scipy, not with fairsets' metrics.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy.spatial.distance import jensenshannon
from typer.testing import CliRunner
from vlm_fixtures import unit

from fairsets.audit.dataset import open_dataset
from fairsets.audit.embeddings import EmbeddingCache, embed_dataset
from fairsets.audit.prompts import PRIMARY
from fairsets.cli import app
from fairsets.debias.transform import DebiasTransform

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "builders" / "example-audit.toml"
runner = CliRunner()
MODEL = ["--model", "ViT-B-32", "--pretrained", "none"]
STATES = ["Assam", "Goa", "Kerala"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def audit_example(tmp_path_factory) -> Path:
    if importlib.util.find_spec("ultralytics") is None:
        pytest.skip(
            "the audit example reads the sample photos of the ultralytics wheel "
            "(pip install 'fairsets[persons]')"
        )
    out = tmp_path_factory.mktemp("example-audit") / "out"
    res = runner.invoke(app, ["build", str(RECIPE), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


def test_the_audit_example_has_three_states_with_images_in_each_split(audit_example):
    manifest = json.loads((audit_example / "manifest.json").read_text())
    assert {c["cell"]["state"]: (c["available"], c["identities"]) for c in manifest["cells"]} == {
        s: (2, 2) for s in STATES
    }
    for split in ("train", "test"):
        rows = pq.read_table(audit_example / "metadata" / "balanced" / f"{split}.parquet").to_pylist()
        per_state = {s: sum(1 for r in rows if r["state"] == s) for s in STATES}
        assert per_state == {s: 4 for s in STATES}, (split, per_state)
        people = {s: {r["identity"] for r in rows if r["state"] == s} for s in STATES}
        assert all(len(p) == 1 for p in people.values())  # one person per state and split
    train = pq.read_table(audit_example / "metadata" / "balanced" / "train.parquet").column("identity")
    test = pq.read_table(audit_example / "metadata" / "balanced" / "test.parquet").column("identity")
    assert not set(train.to_pylist()) & set(test.to_pylist())  # identity-disjoint


def test_audit_and_debias_on_the_audit_example(audit_example, tmp_path, monkeypatch, clip_vlm):
    import fairsets.models

    monkeypatch.setattr(fairsets.models, "load_vlm", lambda *a, **k: clip_vlm)
    out = tmp_path / "audit"
    res = runner.invoke(app, ["audit", "vlm", str(audit_example), *MODEL, "--k", "3", "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "audit.json").read_text())
    assert doc["groups"] == STATES and doc["group_sizes"] == {s: 4 for s in STATES}
    assert doc["empty_groups"] == [] and doc["warnings"] == []  # k = 3 < 4 per state < n = 12
    assert doc["splits"] == ["test"] and doc["k"] == 3

    ds = open_dataset(audit_example)
    emb = embed_dataset(ds, clip_vlm, "balanced", ["test"])
    assert emb.computed == 0
    labels = [r["state"] for r in emb.rows]
    text = EmbeddingCache.for_dataset(ds, clip_vlm).load_texts()[PRIMARY["neutral"]].astype(np.float64)
    sims = [float(unit(v.astype(np.float64)) @ unit(text)) for v in emb.vectors]
    top = sorted(range(len(sims)), key=lambda i: (-sims[i], i))[:3]
    counts = [sum(1 for i in top if labels[i] == s) for s in STATES]
    m = next(r for r in doc["results"] if r["prompt"] == PRIMARY["neutral"])["metrics"]
    assert list(m["topk"].values()) == counts
    assert m["jsd_uniform"] == pytest.approx(float(jensenshannon(counts, [1, 1, 1], base=2) ** 2), abs=1e-12)
    means = [np.mean([s for s, lab in zip(sims, labels, strict=True) if lab == g]) for g in STATES]
    assert m["mean_similarity_std"] == pytest.approx(float(np.std(means)), abs=1e-6)
    assert m["mean_similarity_std"] > 0

    transform = tmp_path / "state.npz"
    res = runner.invoke(
        app, ["debias", "fit", str(audit_example), *MODEL, "--attribute", "state", "--out", str(transform)]
    )
    assert res.exit_code == 0, res.output
    tr = DebiasTransform.load(transform)
    assert tr.meta["groups"] == STATES and tr.meta["splits"] == ["train"] and tr.meta["n"] == 12

    res = runner.invoke(
        app,
        [
            "audit",
            "vlm",
            str(audit_example),
            *MODEL,
            "--k",
            "3",
            "--debias",
            str(transform),
            "--out",
            str(tmp_path / "d"),
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "d" / "audit.json").read_text())
    debiased = tr.apply(emb.vectors.astype(np.float32))
    sims_d = [float(unit(v.astype(np.float64)) @ unit(text)) for v in debiased]
    top_d = sorted(range(len(sims_d)), key=lambda i: (-sims_d[i], i))[:3]
    rec = next(
        r for r in doc["results"] if r["prompt"] == PRIMARY["neutral"] and r["embeddings"] == "debiased"
    )
    assert list(rec["metrics"]["topk"].values()) == [sum(1 for i in top_d if labels[i] == s) for s in STATES]
