"""A vote recorded in ``ANN/manifest.json`` and published: the RAI properties and the card describe it.

Three scripted annotators on loopback (:mod:`annotator_script`) vote on the kept boxes of a
:func:`ann_data.make_ann` folder, behind a key. Then ``manifest["votes"]`` is checked against the
vote's own ``agreement.json`` and against a Fleiss' κ recomputed here from the answers table;
a re-run from the cache leaves the entry and the vote's files as they were, another VOTES file adds
an entry; ``fairsets publish ANN --dry-run`` prepares the folder, whose manifest, ``croissant.json``
and card name the voting models, the question, the rule and the agreement, and no file holds the
key, a host or a local path.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from ann_data import GENDER, make_ann
from annotator_script import Annotator, annotators_toml
from publish_ann import write_marker

from cli_helpers import run_cli
from fairsets.annotate import layout
from fairsets.annotate.publish.dataset import prepared_dir
from fairsets.annotate.vote.prompts import OPTIONS
from fairsets.annotate.vote.run import output_paths, vote_boxes
from secret_sweep import leaks

KEY_ENV = "FAIRSETS_TEST_VOTE_PUBLISH_KEY"
SECRET = "sk-vote-publish-5ecret-K3Y-4242"
REPO = "fairsets-test/person-annotations"
FAST = {"max_retries": 1, "backoff": 0.01}


def fleiss(rows: list[list[str]], labels: list[str]) -> float:
    """Fleiss' κ from its definition (Fleiss 1971)."""
    n = len(rows[0])
    counts = np.array([[row.count(lab) for lab in labels] for row in rows], dtype=float)
    p_j = counts.sum(axis=0) / (len(rows) * n)
    p_i = ((counts**2).sum(axis=1) - n) / (n * (n - 1))
    p_e = (p_j**2).sum()
    return float((p_i.mean() - p_e) / (1 - p_e))


def publishable(root: Path) -> None:
    """What ``annotate persons`` records besides the tables: each shard's counts and markers with digests."""
    manifest = layout.read_manifest(root)
    manifest["shards"] = {}
    for shard in sorted(p.stem for p in (root / "boxes").glob("*.parquet")):
        paths = {"boxes": layout.boxes_path(root, shard), "images": layout.images_path(root, shard)}
        write_marker(root, "persons", shard, paths)
        boxes = pq.read_table(paths["boxes"]).to_pylist()
        images = pq.read_table(paths["images"]).num_rows
        kept = sum(b["kept"] for b in boxes)
        manifest["shards"][shard] = {
            **{"images": images, "ok": images, "rejected": 0, "failed": 0},
            **{"boxes": len(boxes), "kept": kept, "problems": []},
        }
    manifest["detector"] = {"model_id": "ultralytics:yolo11n.pt", "weights_sha256": "b" * 64}
    manifest["params"] = {**manifest["params"], "conf": 0.25}
    layout.write_manifest(root, manifest)


def test_a_vote_is_recorded_and_published_in_the_rai_and_card(
    tmp_path: Path, shard_writer: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    ann = make_ann(tmp_path, shard_writer, shards=2, images_per_shard=6, boxes_per_image=2, seed=4)
    publishable(ann.path)
    out = tmp_path / "out" / "votes.parquet"
    annotators = [
        Annotator("ann_a"),
        Annotator("ann_b", bias={"mixed": "male"}),
        Annotator("ann_c", invalid=["female"]),
    ]
    for a in annotators:
        a.__enter__()
    try:
        toml = annotators_toml(tmp_path / "annotators.toml", annotators, api_key_env=KEY_ENV, timeout=2)
        first = vote_boxes(
            ann.path, attribute="gender", annotators=toml, sample=1000, out=out, seed=7, **FAST
        )
        hosts = {a.server.base_url.split("//")[-1].split("/")[0] for a in annotators}
    finally:
        for a in annotators:
            a.__exit__(None, None, None)
    assert first.kept > 0

    # The manifest's entry: the voters' models, the question, the rule, the counts, the agreement.
    entry = layout.read_manifest(ann.path)["votes"]["votes.parquet"]
    doc = json.loads(first.agreement.read_text())
    stats = doc["stats"]
    assert entry["attribute"] == "gender" and entry["view"] == "crop" and entry["seed"] == 7
    assert entry["annotators"] == [{"name": n, "model": f"{n}-vl"} for n in ("ann_a", "ann_b", "ann_c")]
    assert entry["answers_per_item"] == 3
    assert entry["question"]["text"] == OPTIONS["gender"][0]
    assert [o["label"] for o in entry["question"]["options"]] == list(GENDER)
    assert len(entry["question"]["prompt_sha256"]) == 64
    assert entry["consensus"]["relax"] == {"mixed": 2} == stats["relax"]
    assert entry["consensus"]["per_class_cap"] == stats["per_class_cap"]
    assert entry["counts"]["asked"] == len(ann.truth) == doc["run"]["sample"]["chosen"]
    assert entry["counts"]["answered"] == stats["items"]
    assert entry["counts"]["kept"] == stats["counts"]["kept"]
    assert sum(entry["counts"]["kept"].values()) == first.kept
    assert entry["files"]["votes"] == "votes.parquet"
    assert entry["files"]["agreement"] == "votes.agreement.json"
    # κ: as agreement.json says, and as recomputed here from the answers table.
    rows = pq.read_table(first.answers).to_pylist()
    by_item: dict[str, dict[str, Any]] = {}
    for r in rows:
        by_item.setdefault(r["item"], {})[r["annotator"]] = r
    complete = [
        [v[n]["label"] for n in ("ann_a", "ann_b", "ann_c")]
        for v in by_item.values()
        if all(v[n]["status"] == "ok" for n in ("ann_a", "ann_b", "ann_c"))
    ]
    kappa = fleiss(complete, list(GENDER))
    assert entry["agreement"]["fleiss_items"] == len(complete) == stats["fleiss_items"]
    assert entry["agreement"]["fleiss_kappa"] == pytest.approx(kappa, abs=1e-9)
    assert entry["agreement"]["fleiss_kappa"] == stats["fleiss_kappa"]
    assert entry["agreement"]["krippendorff_alpha"] == stats["krippendorff_alpha"]["alpha"]
    text = json.dumps(entry)
    assert not any(h in text for h in hosts) and "127.0.0.1" not in text
    assert str(tmp_path) not in text and "base_url" not in text

    # A re-run from the cache (every server stopped): the same entry, the same VOTES bytes.
    before = {k: p.read_bytes() for k, p in output_paths(out).items()}
    again = vote_boxes(ann.path, attribute="gender", annotators=toml, sample=1000, out=out, seed=7, **FAST)
    assert again.cache_hits == len(rows)
    assert out.read_bytes() == before["votes"]
    assert layout.read_manifest(ann.path)["votes"] == {"votes.parquet": entry}
    # Another VOTES file is another entry, with its own rule.
    strict = tmp_path / "out" / "strict.csv"
    vote_boxes(
        ann.path, attribute="gender", annotators=toml, sample=1000, out=strict, seed=7, relax={}, **FAST
    )
    votes = layout.read_manifest(ann.path)["votes"]
    assert sorted(votes) == ["strict.csv", "votes.parquet"] and votes["votes.parquet"] == entry
    assert votes["strict.csv"]["consensus"]["relax"] == {}

    # Published (dry run): the prepared manifest, croissant.json and the card describe the votes.
    code, _, err = run_cli(["publish", str(ann.path), "--repo-id", REPO, "--dry-run"], capsys)
    assert code == 0, err
    folder = prepared_dir(ann.path)
    released = json.loads((folder / "manifest.json").read_text())["votes"]
    assert sorted(released) == ["strict.csv", "votes.parquet"]
    assert released["votes.parquet"]["annotators"] == entry["annotators"]
    assert released["votes.parquet"]["agreement"] == entry["agreement"]
    croissant = json.loads((folder / "croissant.json").read_text())
    rai = {k[4:]: v for k, v in croissant.items() if k.startswith("rai:")}
    models = [f"{n}-vl" for n in ("ann_a", "ann_b", "ann_c")]
    protocol = rai["dataAnnotationProtocol"]
    assert all(m in protocol for m in models)
    assert OPTIONS["gender"][0] in protocol and entry["question"]["prompt_sha256"] in protocol
    assert "mixed when at least 2 of 3 give it" in protocol
    tools = rai["machineAnnotationTools"]
    for m in models:
        assert any(m in t and "gender vote (votes.parquet)" in t for t in tools)
    assert "3 chat-model answers per voted box" in rai["annotationsPerItem"]
    analysis = rai["dataAnnotationAnalysis"]
    assert f"Fleiss' kappa {kappa:.3g} over {len(complete)} boxes" in analysis
    assert "consensus rule: a label is kept when all 3 models give it" in analysis
    card = (folder / "README.md").read_text()
    assert all(m.replace("_", "\\_") in card for m in models)  # Markdown-escaped
    assert "Chat models voted on a sample of boxes" in card

    # No key anywhere (folder, prepared folder, outputs), no host, no local path in what is published.
    assert not leaks(SECRET, ann.path, out.parent)
    published = "".join(p.read_text() for p in (folder / "manifest.json", folder / "croissant.json"))
    assert not any(h in published for h in hosts) and str(tmp_path) not in published
    assert Counter(r["annotator"] for r in rows) == {n: len(ann.truth) for n in ("ann_a", "ann_b", "ann_c")}
