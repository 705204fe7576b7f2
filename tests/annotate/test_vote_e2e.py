"""``annotate vote`` end to end: three scripted annotators on loopback vote on the kept boxes.

Each annotator (:mod:`annotator_script`) reads a box's label back from the colour of the crop it
is sent, finds that label's letter among the options shuffled in the prompt, and answers in one of
several formats; its ``bias`` changes some labels, ``invalid`` / ``refuse`` / ``refuse_field``
make it chatter or decline, and ``script`` puts 429s, 500s and timeouts first. So the consensus
the vote writes can be computed here independently, from the truth :func:`ann_data.make_ann` wrote
and each annotator's behaviour, and compared row by row; the κ it reports are checked against
scikit-learn and an independent Fleiss' κ. Then: a cached re-run with every server stopped sends
nothing and writes the same files, a failed request leaves its box pending until a re-run asks
only it again, a missing image is a recorded rejection, the key never lands in a file or a log,
and race candidates come from alt-text keywords.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from ann_data import GENDER, RACE, make_ann
from annotator_script import Annotator, annotators_toml

from fairsets.annotate.heads.labels import item_id
from fairsets.annotate.vote.prompts import build_question
from fairsets.annotate.vote.run import output_paths, vote_boxes
from openai_server import Step

KEY_ENV = "FAIRSETS_TEST_VOTE_KEY"
SECRET = "sk-vote-test-5ecret-Q7W9-0815"
FAST = {"max_retries": 3, "backoff": 0.02}

# What each annotator says for a box of each true label: a label, or "invalid" / "refused".
SAYS: dict[str, dict[str, str]] = {
    "ann_a": {lab: lab for lab in GENDER},
    "ann_b": {"male": "male", "female": "female", "mixed": "male", "unclear": "refused"},
    "ann_c": {"male": "male", "female": "invalid", "mixed": "mixed", "unclear": "refused"},
}


def make_annotators(image_dir: Path | None = None) -> list[Annotator]:
    a = Annotator(
        "ann_a",
        script=[Step(status=429, retry_after="1"), Step(status=500), Step(status=503), Step(delay=2.5)],
    )
    b = Annotator("ann_b", bias={"mixed": "male"}, refuse=["unclear"])
    c = Annotator("ann_c", invalid=["female"], refuse_field=["unclear"])
    return [a, b, c]


def expected_consensus(truth: dict[str, str], relax: dict[str, int]) -> dict[str, tuple[str, str]]:
    """item → (label, rule), computed from the truth and SAYS alone."""
    out = {}
    for item, true in truth.items():
        said = [SAYS[n][true] for n in SAYS]
        labels = [s for s in said if s not in ("invalid", "refused")]
        if len(labels) == len(said) and len(set(labels)) == 1:
            out[item] = (labels[0], "all")
            continue
        tally = Counter(labels).most_common()
        if tally:
            top, votes = tally[0]
            second = tally[1][1] if len(tally) > 1 else 0
            if top in relax and votes >= relax[top] and votes > second:
                out[item] = (top, "relaxed")
    return out


def read_votes(path: Path) -> dict[str, tuple[str, str]]:
    t = pq.read_table(path).to_pylist() if path.suffix == ".parquet" else None
    if t is None:
        import csv

        with open(path, newline="", encoding="utf-8") as fh:
            t = list(csv.DictReader(fh))
    return {item_id(r["shard"], r["key"], int(r["box_id"])): (r["label"], r["rule"]) for r in t}


def fleiss_independent(rows: list[list[str]], labels: list[str]) -> float:
    """Fleiss' κ from its definition (Fleiss 1971), written here without the library's helpers."""
    n_raters = len(rows[0])
    counts = np.array([[row.count(lab) for lab in labels] for row in rows], dtype=float)
    p_j = counts.sum(axis=0) / (len(rows) * n_raters)
    p_i = ((counts**2).sum(axis=1) - n_raters) / (n_raters * (n_raters - 1))
    p_bar, p_e = p_i.mean(), (p_j**2).sum()
    return float((p_bar - p_e) / (1 - p_e))


@pytest.fixture
def gender_ann(tmp_path: Path, shard_writer: Any) -> Any:
    ann = make_ann(tmp_path, shard_writer, shards=2, images_per_shard=6, boxes_per_image=2, seed=4)
    assert set(ann.truth.values()) == set(GENDER), "the test needs every label among the boxes"
    return ann


def test_vote_consensus_kappa_cache_and_key(
    tmp_path: Path, gender_ann: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="fairsets")
    monkeypatch.setenv(KEY_ENV, SECRET)
    ann = gender_ann
    out = tmp_path / "out" / "votes.parquet"
    annotators = make_annotators()
    for a in annotators:
        a.__enter__()
    try:
        toml = annotators_toml(tmp_path / "annotators.toml", annotators, api_key_env=KEY_ENV, timeout=1)
        first = vote_boxes(
            ann.path, attribute="gender", annotators=toml, sample=1000, out=out, seed=7, **FAST
        )
        hits = [a.server.hits for a in annotators]
        headers = [h for a in annotators for h in a.server.headers]
    finally:
        for a in annotators:
            a.__exit__(None, None, None)

    # Every kept box asked once per annotator (dropped boxes never); the scripted failures retried.
    n = len(ann.truth)
    assert hits == [n + 4, n, n]
    assert first.requests_sent == 3 * n + 4 and first.retries == 4 and first.cache_hits == 0
    assert not first.pending and not first.rejected
    for h in headers:
        assert {k.lower(): v for k, v in h.items()}["authorization"] == f"Bearer {SECRET}"

    # The consensus equals the one computed from the truth and the annotators' behaviour.
    expected = expected_consensus(ann.truth, {"mixed": 2})
    assert read_votes(out) == expected
    assert {lab for lab, _ in expected.values()} == {"male", "mixed"}
    assert any(rule == "relaxed" for _, rule in expected.values())

    # The answers table: one row per box and annotator, raw text kept, options as shown.
    rows = pq.read_table(first.answers).to_pylist()
    assert len(rows) == 3 * n and {r["item"] for r in rows} == set(ann.truth)
    assert not set(ann.dropped) & {r["item"] for r in rows}
    for r in rows:
        true, said = ann.truth[r["item"]], SAYS[r["annotator"]][ann.truth[r["item"]]]
        q = build_question("gender", r["item"], 7, annotator=r["annotator"])
        assert r["options"] == ",".join(f"{k}={v}" for k, v in q.options.items())
        assert r["model"] == f"{r['annotator']}-vl" and r["cached"] is False
        if said == "invalid":
            assert (r["status"], r["label"]) == ("invalid", None)
            assert r["answer"] == "The person seems to be standing near a wall."
        elif said == "refused":
            assert (r["status"], r["label"]) == ("refused", None)
            text = (
                "I'm sorry, I can't help with that."
                if r["annotator"] == "ann_b"
                else "I cannot identify people."
            )
            assert r["answer"] == text
        else:
            assert (r["status"], r["label"], r["error"]) == ("ok", said, None), (r, true)
            assert r["answer"] and r["answer"] != said  # the raw letter answer, not the label

    # κ: Fleiss over the boxes every annotator answered, Cohen per pair over those both answered.
    doc = json.loads(first.agreement.read_text())
    stats = doc["stats"]
    names = list(SAYS)
    said = {it: [SAYS[nm][t] for nm in names] for it, t in ann.truth.items()}
    complete = [v for v in said.values() if all(s not in ("invalid", "refused") for s in v)]
    assert stats["fleiss_items"] == len(complete)
    assert stats["fleiss_kappa"] == pytest.approx(fleiss_independent(complete, list(GENDER)), abs=1e-9)
    from sklearn.metrics import cohen_kappa_score

    pairs = {(p["a"], p["b"]): p for p in stats["pairs"]}
    for i, j in combinations(range(3), 2):
        both = [(v[i], v[j]) for v in said.values() if {v[i], v[j]}.isdisjoint({"invalid", "refused"})]
        p = pairs[(names[i], names[j])]
        assert p["items"] == len(both)
        want = cohen_kappa_score([x for x, _ in both], [y for _, y in both], labels=list(GENDER))
        assert p["cohen_kappa"] == pytest.approx(want, abs=1e-9)
    assert stats["refused"] == {
        nm: sum(v[k] == "refused" for v in said.values()) for k, nm in enumerate(names)
    }
    assert stats["invalid"] == {
        nm: sum(v[k] == "invalid" for v in said.values()) for k, nm in enumerate(names)
    }
    run = doc["run"]
    assert [a["name"] for a in run["annotators"]] == names
    assert all(a["host"].startswith("127.0.0.1:") for a in run["annotators"])
    assert run["requests_sent"] == 3 * n + 4 and run["retries"] == 4
    assert run["prompt_tokens"] == 11 * 3 * n and run["completion_tokens"] == 3 * 3 * n
    assert first.report.read_text().startswith("<!DOCTYPE html>")

    # Every server stopped: a re-run answers everything from the cache and writes the same files. An
    # invalid answer is not final: it is asked again, and kept since no server answers.
    invalid = sum(SAYS[nm][t] == "invalid" for t in ann.truth.values() for nm in SAYS)
    before = {k: p.read_bytes() for k, p in output_paths(out).items()}
    second = vote_boxes(ann.path, attribute="gender", annotators=toml, sample=1000, out=out, seed=7, **FAST)
    assert invalid and second.requests_sent == invalid and second.cache_hits == 3 * n
    again = {k: p.read_bytes() for k, p in output_paths(out).items()}
    assert again["votes"] == before["votes"]
    rows2 = pq.read_table(second.answers).to_pylist()
    assert all(r["cached"] for r in rows2)
    # Same statuses and labels; the raw text too, but for boxes whose request is the very same
    # (the same crop and option order): those share one cached answer, the last one received.
    assert [{**r, "cached": None, "answer": None} for r in rows2] == [
        {**r, "cached": None, "answer": None} for r in rows
    ]
    doc2 = json.loads(second.agreement.read_text())
    assert doc2["stats"] == doc["stats"] and doc2["pending"] == doc["pending"] == []
    third = vote_boxes(ann.path, attribute="gender", annotators=toml, sample=1000, out=out, seed=7, **FAST)
    assert third.requests_sent == invalid
    assert {k: p.read_bytes() for k, p in output_paths(out).items()} == again

    # --relax none: the mixed boxes kept by 2 of 3 are dropped (from the cache, no server needed).
    strict = tmp_path / "strict.csv"
    res = vote_boxes(
        ann.path, attribute="gender", annotators=toml, sample=1000, out=strict, seed=7, relax={}, **FAST
    )
    assert res.requests_sent == invalid
    assert read_votes(strict) == expected_consensus(ann.truth, {})
    assert "mixed" not in {lab for lab, _ in read_votes(strict).values()}

    # The per-class cap keeps at most that many boxes of each label, all of them consensus boxes.
    capped = tmp_path / "capped.jsonl"
    res = vote_boxes(
        ann.path,
        attribute="gender",
        annotators=toml,
        sample=1000,
        out=capped,
        seed=7,
        per_class_cap=1,
        **FAST,
    )
    kept = [json.loads(line) for line in capped.read_text().splitlines()]
    assert Counter(r["label"] for r in kept) == {"male": 1, "mixed": 1}
    assert all(expected[item_id(r["shard"], r["key"], r["box_id"])][0] == r["label"] for r in kept)

    # The key: sent as Bearer, never written to any file nor logged.
    secret = SECRET.encode()
    for p in tmp_path.rglob("*"):
        if p.is_file():
            assert secret not in p.read_bytes(), p
    assert SECRET not in caplog.text
    assert (ann.path / ".fairsets" / "chat-cache").is_dir()


def test_failed_requests_stay_pending_until_a_rerun_and_missing_images_are_rejected(
    tmp_path: Path, gender_ann: Any, shard_writer: Any
) -> None:
    ann = gender_ann
    # One image removed from its shard: its boxes are recorded rejections, not a crash.
    import tarfile

    tar = ann.shards_dir / "00001.tar"
    gone_key = "00100003"
    with tarfile.open(tar) as tf:
        members = [(m.name, tf.extractfile(m).read()) for m in tf.getmembers()]  # type: ignore[union-attr]
    samples: dict[str, dict[str, bytes]] = {}
    for name, data in members:
        key, _, ext = name.partition(".")
        if key != gone_key:
            samples.setdefault(key, {})[ext] = data
    shard_writer(tar, list(samples.items()))
    gone = {it for it in ann.truth if it.startswith(f"00001/{gone_key}/")}
    assert len(gone) == 2

    out = tmp_path / "votes.csv"
    annotators = [Annotator("ann_a"), Annotator("ann_b"), Annotator("ann_c", script=[Step(status=500)] * 2)]
    for a in annotators:
        a.__enter__()
    try:
        toml = annotators_toml(tmp_path / "annotators.toml", annotators, max_concurrency=1, timeout=1)
        first = vote_boxes(
            ann.path, attribute="gender", annotators=toml, sample=100, out=out, max_retries=1, backoff=0.01
        )
        rows = pq.read_table(first.answers).to_pylist()
        failed = [r for r in rows if r["status"] == "failed" and r["item"] not in gone]
        assert len(failed) == 1 and failed[0]["annotator"] == "ann_c"
        assert failed[0]["error"] == "http 500 after 1 retries"
        assert first.pending == [failed[0]["item"]]
        assert set(first.rejected) == gone
        assert all("image not found" in reason for reason in first.rejected.values())
        assert {r["status"] for r in rows if r["item"] in gone} == {"failed"}
        votes = read_votes(out)
        assert failed[0]["item"] not in votes and not gone & set(votes)
        assert votes == {
            it: (lab, "all") for it, lab in ann.truth.items() if it not in gone | set(first.pending)
        }
        doc = json.loads(first.agreement.read_text())
        assert doc["pending"] == first.pending
        assert [r["item"] for r in doc["rejected"]] == sorted(gone)
        assert doc["stats"]["items"] == len(ann.truth) - 3
        # A re-run asks only the failed request again (the missing image is looked for again too).
        hits = [a.server.hits for a in annotators]
        second = vote_boxes(
            ann.path, attribute="gender", annotators=toml, sample=100, out=out, max_retries=1, backoff=0.01
        )
        assert [a.server.hits - h for a, h in zip(annotators, hits, strict=True)] == [0, 0, 1]
        assert second.requests_sent == 1 and not second.pending and set(second.rejected) == gone
        assert read_votes(out) == {it: (lab, "all") for it, lab in ann.truth.items() if it not in gone}
    finally:
        for a in annotators:
            a.__exit__(None, None, None)


def test_sample_is_seeded_and_nested(tmp_path: Path, gender_ann: Any) -> None:
    ann = gender_ann
    annotators = [Annotator("ann_a"), Annotator("ann_b")]
    for a in annotators:
        a.__enter__()
    try:
        toml = annotators_toml(tmp_path / "annotators.toml", annotators, timeout=2)

        def asked(n: int, seed: int) -> list[str]:
            res = vote_boxes(
                ann.path, attribute="gender", annotators=toml, sample=n, out=tmp_path / "v.csv", seed=seed
            )
            items = [r["item"] for r in pq.read_table(res.answers).to_pylist() if r["annotator"] == "ann_a"]
            assert res.run["sample"] == {"asked": n, "kept_boxes": len(ann.truth), "chosen": len(items)}
            return items

        five, eight = asked(5, 1), asked(8, 1)
        assert len(five) == 5 and len(eight) == 8 and set(five) < set(eight) <= set(ann.truth)
        assert asked(5, 1) == five and asked(5, 2) != five
    finally:
        for a in annotators:
            a.__exit__(None, None, None)


RACE_WORDS = '[black]\nkeywords = ["African American"]\n\n[east_asian]\nkeywords = ["Japanese"]\n'


def test_race_candidates_come_from_alt_text_keywords(tmp_path: Path, shard_writer: Any) -> None:
    def caption(key: str, labels: list[str]) -> str:
        words = []
        if "black" in labels:
            words.append("Portrait of an African-American woman")
        if "east_asian" in labels:
            words.append("two Japanese friends")
        return ", ".join(words or ["a photo"]) + f" {key}"

    ann = make_ann(
        tmp_path,
        shard_writer,
        shards=2,
        images_per_shard=10,
        boxes_per_image=2,
        labels=RACE,
        seed=3,
        caption=caption,
    )
    keywords = tmp_path / "words.toml"
    keywords.write_text(RACE_WORDS)
    pools: dict[str, set[str]] = {"black": set(), "east_asian": set()}
    for item in ann.truth:
        shard, key, _ = item.split("/")
        text = ann.captions[(shard, key)]
        if "African-American" in text:
            pools["black"].add(item)
        if "Japanese" in text:
            pools["east_asian"].add(item)
    assert len(pools["black"]) >= 4 and len(pools["east_asian"]) >= 4

    annotators = [Annotator(n, "race") for n in ("r1", "r2", "r3")]
    for a in annotators:
        a.__enter__()
    try:
        toml = annotators_toml(tmp_path / "annotators.toml", annotators, timeout=2)
        res = vote_boxes(
            ann.path,
            attribute="race",
            annotators=toml,
            sample=6,
            out=tmp_path / "race.csv",
            keywords=keywords,
        )
    finally:
        for a in annotators:
            a.__exit__(None, None, None)
    rows = pq.read_table(res.answers).to_pylist()
    asked = {r["item"] for r in rows}
    assert len(asked) == 6 and asked <= pools["black"] | pools["east_asian"]
    assert len(asked & pools["black"]) >= 3 and len(asked & pools["east_asian"]) >= 3  # equal turns
    assert all(r["status"] == "ok" and r["label"] == ann.truth[r["item"]] for r in rows)
    assert read_votes(tmp_path / "race.csv") == {it: (ann.truth[it], "all") for it in asked}
    recall = json.loads(res.agreement.read_text())["run"]["recall"]
    assert recall == {
        "black": {"candidates": len(pools["black"]), "chosen": 3},
        "east_asian": {"candidates": len(pools["east_asian"]), "chosen": 3},
    }
    assert res.stats["relax"] == {}  # no relaxed rule for race by default


def test_views_and_annotators_asked_at_the_same_time(tmp_path: Path, gender_ann: Any) -> None:
    from PIL import Image

    ann = gender_ann
    a = Annotator("slow_a", delay=0.8, image_dir=tmp_path / "seen_a")
    b = Annotator("slow_b", delay=0.8, image_dir=tmp_path / "seen_b")
    with a, b:
        toml = annotators_toml(tmp_path / "annotators.toml", [a, b], timeout=2)
        res = vote_boxes(ann.path, attribute="gender", annotators=toml, sample=3, out=tmp_path / "c.csv")
        # Both annotators were asked at once: b's first request did not wait for a's answers.
        assert abs(min(a.server.times) - min(b.server.times)) < 0.6  # one after the other: >= 0.8 s
        asked = [r["item"] for r in pq.read_table(res.answers).to_pylist() if r["annotator"] == "slow_a"]
        crops = sorted(Image.open(p).size for p in a.server.images)
        boxes = sorted(
            (int(ann.boxes[i][2] - ann.boxes[i][0]), int(ann.boxes[i][3] - ann.boxes[i][1])) for i in asked
        )
        assert crops == boxes  # the crop view: each box's own pixels
        vote_boxes(
            ann.path, attribute="gender", annotators=toml, sample=3, out=tmp_path / "r.csv", view="redbox"
        )
        framed = [Image.open(p).convert("RGB") for p in a.server.images[3:]]
    assert len(framed) == 3 and all(im.size == (200, 150) for im in framed)  # the whole image
    for im in framed:
        px = np.asarray(im).astype(int)
        assert ((px[..., 0] > 190) & (px[..., 1] < 70) & (px[..., 2] < 70)).sum() > 100  # a red frame


def test_race_without_any_recalled_candidate_is_an_error(tmp_path: Path, shard_writer: Any) -> None:
    from fairsets.annotate.layout import AnnotationError

    ann = make_ann(tmp_path, shard_writer, shards=1, images_per_shard=2, labels=RACE)
    keywords = tmp_path / "words.toml"
    keywords.write_text(RACE_WORDS)
    toml = tmp_path / "annotators.toml"
    toml.write_text(
        "".join(f'[annotators.{n}]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n' for n in ("x", "y"))
    )
    with pytest.raises(AnnotationError, match="no kept box's alt-text matches a keyword"):
        vote_boxes(
            ann.path, attribute="race", annotators=toml, sample=5, out=tmp_path / "v.csv", keywords=keywords
        )
    assert not (tmp_path / "v.csv").exists()


def test_killed_vote_resumes_from_the_cache(tmp_path: Path, gender_ann: Any) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    ann = gender_ann
    n = len(ann.truth)
    out = tmp_path / "votes.csv"
    annotators = [Annotator(name, delay=0.1) for name in ("k1", "k2", "k3")]
    with annotators[0], annotators[1], annotators[2]:
        toml = annotators_toml(tmp_path / "annotators.toml", annotators, max_concurrency=1, timeout=2)
        cmd = [sys.executable, "-m", "fairsets", "annotate", "vote", str(ann.path), "--attribute", "gender",
               "--annotators", str(toml), "--sample", "100", "--out", str(out), "-q"]  # fmt: skip
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, start_new_session=True)
        deadline = time.monotonic() + 60
        while (
            min(a.server.hits for a in annotators) < 6 and proc.poll() is None and time.monotonic() < deadline
        ):
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stderr.close()  # type: ignore[union-attr]
        asked = sum(a.server.hits for a in annotators)
        assert 18 <= asked < 3 * n and not out.exists()
        # The re-run sends only what had not been answered (at most one request per annotator was
        # in flight when it was killed).
        res = vote_boxes(ann.path, attribute="gender", annotators=toml, sample=100, out=out)
    assert res.cache_hits + res.requests_sent == 3 * n
    assert asked - 3 <= res.cache_hits <= asked
    assert read_votes(out) == {it: (lab, "all") for it, lab in ann.truth.items()}


def _store_real_sha256(ann: Any) -> dict[tuple[str, str], bytes]:
    """Write each image's SHA-256 into images/{shard}.parquet as ``annotate persons`` does (make_ann
    writes a placeholder); return every image's bytes by (shard, key)."""
    import hashlib
    import tarfile

    import pyarrow as pa

    from fairsets.annotate import layout

    stored: dict[tuple[str, str], bytes] = {}
    for tar in sorted(ann.shards_dir.glob("*.tar")):
        with tarfile.open(tar) as tf:
            for m in tf.getmembers():
                if m.name.endswith(".png"):
                    stored[(tar.stem, m.name[:-4])] = tf.extractfile(m).read()  # type: ignore[union-attr]
        path = layout.images_path(ann.path, tar.stem)
        table = pq.read_table(path)
        digests = [hashlib.sha256(stored[(tar.stem, k)]).hexdigest() for k in table["key"].to_pylist()]
        table = table.set_column(table.schema.get_field_index("sha256"), "sha256", pa.array(digests))
        pq.write_table(table, path)
    return stored


def test_a_cached_rerun_renders_nothing_and_a_changed_image_is_asked_again(
    tmp_path: Path, gender_ann: Any, shard_writer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import tarfile

    from PIL import Image

    import fairsets.annotate.chat.views as views_mod
    import fairsets.annotate.vote.examples as vote_examples

    ann, n = gender_ann, len(gender_ann.truth)
    images = _store_real_sha256(ann)
    real_render = views_mod.render
    renders: list[tuple[float, ...]] = []

    def counting_render(image: Any, box: Any, **kw: Any) -> bytes:
        renders.append(tuple(box))
        return real_render(image, box, **kw)

    monkeypatch.setattr(views_mod, "render", counting_render)
    monkeypatch.setattr(vote_examples, "EXAMPLES", 0)  # the report's thumbnails aside: what asking renders
    out = tmp_path / "votes.parquet"
    annotators = [Annotator(name) for name in ("v1", "v2", "v3")]
    with annotators[0], annotators[1], annotators[2]:
        toml = annotators_toml(tmp_path / "annotators.toml", annotators, timeout=2)

        def vote() -> Any:
            return vote_boxes(ann.path, attribute="gender", annotators=toml, sample=100, out=out, seed=3)

        first = vote()
        assert len(renders) == n and first.requests_sent == 3 * n and first.cache_hits == 0
        assert read_votes(out) == {it: (lab, "all") for it, lab in ann.truth.items()}
        live = {k: p.read_bytes() for k, p in output_paths(out).items()}

        # Every answer cached: nothing rendered, nothing sent, the same VOTES; twice: the same files.
        renders.clear()
        second = vote()
        assert renders == [] and second.requests_sent == 0 and second.cache_hits == 3 * n
        cached = {k: p.read_bytes() for k, p in output_paths(out).items()}
        assert cached["votes"] == live["votes"]
        third = vote()
        assert renders == [] and third.requests_sent == 0
        assert {k: p.read_bytes() for k, p in output_paths(out).items()} == cached
        assert [a.server.hits for a in annotators] == [n] * 3

        # One image changes (a few pixels inside its first box; its sha256 with it): both its boxes
        # are rendered again, the box whose view changed is asked again, the other one is a cache hit.
        shard, key = "00000", "00000000"
        px = np.asarray(Image.open(io.BytesIO(images[(shard, key)])).convert("RGB")).copy()
        x1, y1, _, _ = (int(v) for v in ann.boxes[item_id(shard, key, 0)])
        px[y1 + 2 : y1 + 5, x1 + 2 : x1 + 5] = np.clip(
            px[y1 + 2 : y1 + 5, x1 + 2 : x1 + 5].astype(int) - 4, 0, 255
        )
        buf = io.BytesIO()
        Image.fromarray(px).save(buf, format="PNG")
        tar_path = ann.shards_dir / f"{shard}.tar"
        with tarfile.open(tar_path) as tf:
            members = {m.name: tf.extractfile(m).read() for m in tf.getmembers()}  # type: ignore[union-attr]
        members[f"{key}.png"] = buf.getvalue()
        samples: dict[str, dict[str, bytes]] = {}
        for name, data in members.items():
            stem, ext = name.rsplit(".", 1)
            samples.setdefault(stem, {})[ext] = data
        shard_writer(tar_path, list(samples.items()))
        _store_real_sha256(ann)
        renders.clear()
        fourth = vote()
        assert sorted(renders) == sorted(ann.boxes[item_id(shard, key, b)] for b in (0, 1))
        assert fourth.requests_sent == 3 and fourth.cache_hits == 3 * n - 3
        assert [a.server.hits for a in annotators] == [n + 1] * 3
        rows = pq.read_table(fourth.answers).to_pylist()
        assert {r["item"] for r in rows if not r["cached"]} == {item_id(shard, key, 0)}
        assert read_votes(out) == {it: (lab, "all") for it, lab in ann.truth.items()}

        # The report's examples: rendered by the first run that shows them, kept for the next ones.
        monkeypatch.setattr(vote_examples, "EXAMPLES", 3)
        renders.clear()
        shown = vote()
        assert len(renders) == 3 and shown.requests_sent == 0  # every box agreed: three examples
        report = shown.report.read_bytes()
        assert report.count(b"data:image/jpeg;base64,") == 3
        renders.clear()
        again = vote()
        assert renders == [] and again.report.read_bytes() == report
