"""``annotate vote`` with log-probabilities: the confidence of every answer, a consensus that asks
for a minimum confidence, and the calibration of confidence against agreement.

Three loopback annotators (:class:`Sure`) read a box's label back from its colour and answer one
plain letter; when the request asks for log-probabilities (``logprobs = true`` in the annotator's
table) they send them in the OpenAI format (``choices[0].logprobs.content[0].top_logprobs``). The
probability of the letter each gives follows :func:`behaviour`: every annotator is sure (0.86 and
up) of the *planted* boxes (painted in a colour of their own, ``male+``…), two of them are unsure
(0.37 at most) of the others, and the third is fairly sure (0.62–0.68) of the others and calls
their ``unclear`` boxes ``male``. So the kept set under ``--min-vote-confidence 0.5`` is exactly
the planted boxes, and every stored probability, drop count and calibration number is computed
here from that behaviour and from the answers table alone.

These runs read the probabilities through the chat client's own parsing of the server's
``logprobs`` (``ChatResult.option_probs``, issue 29's shaping); the chat client is not patched.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from ann_data import GENDER, label_of_jpeg, make_ann

from cli_helpers import assert_one_line_error, run_cli
from fairsets.annotate import layout
from fairsets.annotate.vote import ask
from fairsets.annotate.vote.calibration import calibration
from fairsets.annotate.vote.consensus import Ballot, consensus
from fairsets.annotate.vote.prompts import OPTIONS, build_question
from fairsets.annotate.vote.run import output_paths, vote_boxes
from openai_server import OpenAIServer, Step, last_user_text

#: The boxes' colours: a label, or a planted label (``male+``) every annotator is sure of.
PAINTED = (*GENDER, *(f"{lab}+" for lab in GENDER))
NAMES = ("ann_a", "ann_b", "ann_c")
SEED = 3
FAST = {"max_retries": 1, "backoff": 0.02}
_OPTION_LINE = re.compile(r"^([A-Z])\. (.+)$", re.M)
_TEXTS = dict(OPTIONS["gender"][1])


def behaviour(name: str, painted: str) -> tuple[str, float, float]:
    """What annotator ``name`` answers for a box painted ``painted``: the label, and the
    probability of its letter as ``base + step * position`` (the label's 0-based place among the
    options shown)."""
    label, planted = painted.removesuffix("+"), painted.endswith("+")
    if planted:
        return label, 0.86, 0.03
    if name == "ann_c":
        return ("male" if label == "unclear" else label), 0.62, 0.02
    return label, 0.22, 0.05


def expected_answer(name: str, item: str, painted: str) -> tuple[str, float, list[str]]:
    """The label, its probability and the labels in the order shown, for one answer row."""
    order = list(build_question("gender", item, SEED, annotator=name).options.values())
    label, base, step = behaviour(name, painted)
    return label, base + step * order.index(label), order


def _image(body: dict[str, Any]) -> bytes:
    for msg in body["messages"]:
        for part in msg["content"] if isinstance(msg["content"], list) else []:
            url = (part.get("image_url") or {}).get("url", "")
            if url.startswith("data:"):
                return base64.b64decode(url.partition(",")[2])
    raise AssertionError("a vote request without an image")


class Sure:
    """A loopback annotator answering one letter per :func:`behaviour`, with log-probabilities
    when the request asks for them (and ``send`` is on)."""

    def __init__(self, name: str, *, send: bool = True) -> None:
        self.name, self.send = name, send
        self.server = OpenAIServer()
        self.server.respond = self._respond
        self.asked_logprobs: list[bool] = []

    def _respond(self, body: dict[str, Any]) -> Step:
        options = dict(_OPTION_LINE.findall(last_user_text(body)))
        painted = label_of_jpeg(_image(body), PAINTED)
        label, base, step = behaviour(self.name, painted)
        letters = list(options)
        letter = next(L for L, text in options.items() if text == _TEXTS[label])
        p = base + step * letters.index(letter)
        probs = {x: p if x == letter else (1.0 - p) / (len(letters) - 1) for x in letters}
        asked = bool(body.get("logprobs"))
        self.asked_logprobs.append(asked)
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": letter},
            "finish_reason": "stop",
        }
        if asked and self.send:
            top = [
                {"token": L, "logprob": math.log(q), "bytes": list(L.encode())}
                for L, q in sorted(probs.items(), key=lambda kv: -kv[1])
            ]
            choice["logprobs"] = {
                "content": [
                    {
                        "token": letter,
                        "logprob": math.log(p),
                        "bytes": list(letter.encode()),
                        "top_logprobs": top,
                    }
                ]
            }
        out = {
            "id": "chatcmpl-sure",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [choice],
            "usage": {"prompt_tokens": 20, "completion_tokens": 1, "total_tokens": 21},
        }
        return Step(raw=json.dumps(out).encode())

    def __enter__(self) -> Sure:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


def write_toml(path: Path, annotators: list[Sure], logprobs: dict[str, bool]) -> Path:
    tables = []
    for a in annotators:
        lines = [f"[annotators.{a.name}]", f'base_url = "{a.server.base_url}"', f'model = "{a.name}-vl"']
        lines += ['api_key_env = ""', "timeout = 5"]
        if logprobs.get(a.name):
            lines.append("logprobs = true")
        tables.append("\n".join(lines) + "\n")
    path.write_text("\n".join(tables))
    return path


@pytest.fixture
def painted_ann(tmp_path: Path, shard_writer: Any) -> Any:
    ann = make_ann(
        tmp_path, shard_writer, shards=2, images_per_shard=8, boxes_per_image=2, labels=PAINTED, seed=11
    )
    planted = {it for it, p in ann.truth.items() if p.endswith("+")}
    assert planted and set(ann.truth) - planted, "the test needs planted and other boxes"
    assert "unclear" in ann.truth.values(), "the test needs unsure unclear boxes (ann_c calls them male)"
    return ann


def read_kept(path: Path) -> dict[str, dict[str, Any]]:
    rows = pq.read_table(path).to_pylist() if path.suffix == ".parquet" else None
    if rows is None:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {f"{r['shard']}/{r['key']}/{r['box_id']}": r for r in rows}


def independent_calibration(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Calibration from its definition, over the stored answers table (pure Python, floor bins)."""
    said: dict[str, dict[str, str | None]] = {}
    for r in rows:
        said.setdefault(r["item"], {})[r["annotator"]] = r["label"] if r["status"] == "ok" else None
    out = {}
    for name in NAMES:
        bins: dict[int, list[tuple[float, bool]]] = {}
        no_ref = without = 0
        for r in rows:
            if r["annotator"] != name or r["status"] != "ok":
                continue
            if r["confidence"] is None:
                without += 1
                continue
            others = {said[r["item"]][o] for o in NAMES if o != name}
            if None in others or len(others) != 1:
                no_ref += 1
                continue
            c = r["confidence"]
            bins.setdefault(min(9, math.floor(c * 10)), []).append((c, r["label"] == next(iter(others))))
        total = sum(len(v) for v in bins.values())
        ece = sum(
            len(v) / total * abs(sum(a for _, a in v) / len(v) - sum(c for c, _ in v) / len(v))
            for v in bins.values()
        )
        out[name] = {
            "answers": total,
            "no_reference": no_ref,
            "without_confidence": without,
            "ece": ece,
            "bins": {
                k: (len(v), sum(c for c, _ in v) / len(v), sum(a for _, a in v) / len(v))
                for k, v in bins.items()
            },
        }
    return out


def test_min_vote_confidence_keeps_the_planted_boxes_and_calibration_is_reported(
    tmp_path: Path, painted_ann: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ann = painted_ann
    n = len(ann.truth)
    planted = {it for it, p in ann.truth.items() if p.endswith("+")}
    annotators = [Sure(name) for name in NAMES]
    out = tmp_path / "out" / "votes.parquet"
    for a in annotators:
        a.__enter__()
    try:
        toml = write_toml(tmp_path / "annotators.toml", annotators, dict.fromkeys(NAMES, True))
        first = vote_boxes(
            ann.path, attribute="gender", annotators=toml, sample=1000, out=out, seed=SEED, **FAST
        )
        assert all(a.asked_logprobs == [True] * n for a in annotators)
        hits = [a.server.hits for a in annotators]

        # the same answers, from the cache, under a minimum confidence of 0.5 (on the command line)
        strict = tmp_path / "out" / "strict.jsonl"
        code, _, stderr = run_cli(
            ["annotate", "vote", ann.path, "--attribute", "gender", "--annotators", toml, "--sample", 1000,
             "--seed", SEED, "--min-vote-confidence", 0.5, "--max-retries", 1, "--out", strict],
            capsys,
        )  # fmt: skip
        assert code == 0, stderr
        assert [a.server.hits for a in annotators] == hits, "every answer (and its probabilities) is cached"
    finally:
        for a in annotators:
            a.__exit__(None, None, None)

    # 1. every answer's confidence and per-option probabilities, as the server gave them
    rows = pq.read_table(first.answers).to_pylist()
    assert len(rows) == 3 * n
    for r in rows:
        label, p, order = expected_answer(r["annotator"], r["item"], ann.truth[r["item"]])
        assert (r["status"], r["label"]) == ("ok", label), r
        assert r["confidence"] == pytest.approx(p, abs=1e-9)
        probs = json.loads(r["option_probs"])
        assert list(probs) == order  # labels in the order shown
        for lab, q in probs.items():
            assert q == pytest.approx(p if lab == label else (1 - p) / 3, abs=1e-9)

    # 2. without a minimum, every box whose three answers agree is kept (the planted ones and more)
    unanimous = {
        it for it in ann.truth if len({expected_answer(nm, it, ann.truth[it])[0] for nm in NAMES}) == 1
    }
    assert planted < unanimous
    assert set(read_kept(first.votes)) == unanimous

    # 3. with --min-vote-confidence 0.5, exactly the planted boxes
    kept = read_kept(strict)
    assert set(kept) == planted
    for it, row in kept.items():
        assert row["label"] == ann.truth[it].removesuffix("+") and row["rule"] == "all"
    doc = json.loads(strict.with_name("strict.agreement.json").read_text())
    floor = doc["stats"]["min_confidence"]
    assert floor["threshold"] == 0.5 and "abstention" in floor["rule"]
    low = Counter(r["annotator"] for r in rows if r["confidence"] < 0.5)
    assert floor["low_confidence"] == {nm: low.get(nm, 0) for nm in NAMES}
    assert floor["no_confidence"] == dict.fromkeys(NAMES, 0)
    assert low["ann_a"] == low["ann_b"] == n - len(planted) and low.get("ann_c", 0) == 0
    # a dropped answer is missing for κ, like an invalid one: Fleiss' κ is over the planted boxes only
    assert doc["stats"]["fleiss_items"] == len(planted)
    line = " ".join(stderr.split())
    assert f"{2 * (n - len(planted))} under it and 0 without a confidence did not count" in line
    report = strict.with_name("strict.report.html").read_text()
    assert "minimum confidence" in report and "low_confidence" in report
    strict_rows = pq.read_table(strict.with_name("strict.answers.parquet")).to_pylist()
    same = ("item", "annotator", "label", "confidence", "option_probs")
    assert [{k: r[k] for k in same} for r in strict_rows] == [{k: r[k] for k in same} for r in rows]

    # 4. a higher minimum, 0.9: a planted box is kept when each of its three answers had its label
    #    third or fourth among the options (0.92 or 0.95, not 0.86 or 0.89), or two of them for
    #    mixed (the default relaxed rule), from the behaviour alone
    top = vote_boxes(
        ann.path, attribute="gender", annotators=toml, sample=1000, out=tmp_path / "top.csv", seed=SEED,
        min_vote_confidence=0.9, **FAST,
    )  # fmt: skip
    counted = {it: sum(expected_answer(nm, it, ann.truth[it])[1] > 0.9 for nm in NAMES) for it in planted}
    sure = {it for it, k in counted.items() if k == 3 or (k == 2 and ann.truth[it] == "mixed+")}  # mixed=2
    assert sure and sure < planted
    assert _csv_items(top.votes) == sure

    # 5. calibration: recomputed here from the stored answers table
    got = json.loads(first.agreement.read_text())["calibration"]
    assert got["bins"] == 10 and "leave-one-out" in got["rule"]
    want = independent_calibration(rows)
    for name in NAMES:
        g, w = got["annotators"][name], want[name]
        assert (g["answers"], g["no_reference"], g["without_confidence"]) == (
            w["answers"], w["no_reference"], w["without_confidence"],
        )  # fmt: skip
        assert g["ece"] == pytest.approx(w["ece"], abs=1e-12)
        assert len(g["bins"]) == 10 and sum(b["count"] for b in g["bins"]) == w["answers"]
        for k, b in enumerate(g["bins"]):
            assert (b["low"], b["high"]) == pytest.approx((k / 10, (k + 1) / 10))
            if k not in w["bins"]:
                assert (b["count"], b["mean_confidence"], b["agreement"]) == (0, None, None)
                continue
            count, mean, share = w["bins"][k]
            assert b["count"] == count
            assert b["mean_confidence"] == pytest.approx(mean, abs=1e-12)
            assert b["agreement"] == pytest.approx(share, abs=1e-12)
    # ann_c disagrees with the two others on the unsure unclear boxes, at 0.62–0.68
    unsure_unclear = sum(1 for p in ann.truth.values() if p == "unclear")
    assert want["ann_c"]["bins"][6][2] < 1.0 and want["ann_c"]["ece"] > 0
    assert want["ann_a"]["no_reference"] == unsure_unclear  # the others (ann_b, ann_c) disagree there
    assert "Confidence calibration" in first.report.read_text()
    manifest = layout.read_manifest(ann.path)
    entry = manifest["votes"]["votes.parquet"]
    assert entry["agreement"]["calibration"]["annotators"]["ann_c"]["ece"] == pytest.approx(
        want["ann_c"]["ece"]
    )
    strict_entry = manifest["votes"]["strict.jsonl"]["consensus"]["min_vote_confidence"]
    assert strict_entry["threshold"] == 0.5 and strict_entry["low_confidence"] == floor["low_confidence"]
    assert "min_vote_confidence" not in entry["consensus"]
    # what publishing says of them
    from fairsets.annotate.publish.votes import release_votes, vote_analysis

    said = dict(
        zip(sorted(manifest["votes"]), vote_analysis({"votes": release_votes(manifest)}), strict=True)
    )
    assert "expected calibration error" in said["votes.parquet"]
    assert "probability of the chosen option is at least 0.5" in said["strict.jsonl"]
    assert "at least 0.5" not in said["votes.parquet"]


def _csv_items(path: Path) -> set[str]:
    import csv

    with open(path, newline="", encoding="utf-8") as fh:
        return {f"{r['shard']}/{r['key']}/{r['box_id']}" for r in csv.DictReader(fh)}


def test_no_log_probabilities_leave_the_confidence_null(
    tmp_path: Path, painted_ann: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Endpoints at their defaults: requests that name their choices find the answers cached before
    they did, and every confidence is null. Then ann_a asks but its server sends none, the others do
    not ask: null too, and a minimum confidence keeps nothing (an answer without a probability does
    not count)."""
    ann = painted_ann
    n = len(ann.truth)
    annotators = [Sure("ann_a", send=False), Sure("ann_b"), Sure("ann_c")]
    out = tmp_path / "votes.parquet"
    real = ask.vote_request

    def before_choices(question: Any, jpeg: Any, **kw: Any) -> Any:  # a request as sent before choices
        return dataclasses.replace(real(question, jpeg, **kw), choices=None)

    for a in annotators:
        a.__enter__()
    try:
        toml = write_toml(tmp_path / "annotators.toml", annotators, {})
        with monkeypatch.context() as m:
            m.setattr(ask, "vote_request", before_choices)
            old = vote_boxes(
                ann.path, attribute="gender", annotators=toml, sample=1000, out=out, seed=SEED, **FAST
            )
        assert old.requests_sent == 3 * n
    finally:
        for a in annotators:
            a.__exit__(None, None, None)
    old_votes = out.read_bytes()
    old_stats = json.loads(output_paths(out)["agreement"].read_text())["stats"]

    # servers gone: the requests that now name their choices find the answers cached without them
    again = vote_boxes(ann.path, attribute="gender", annotators=toml, sample=1000, out=out, seed=SEED, **FAST)
    assert (again.requests_sent, again.cache_hits) == (0, 3 * n)
    rows = pq.read_table(again.answers).to_pylist()
    assert len(rows) == 3 * n and all(r["status"] == "ok" for r in rows)
    assert all(r["confidence"] is None and r["option_probs"] is None for r in rows)
    doc = json.loads(again.agreement.read_text())
    assert "calibration" not in doc and "min_confidence" not in doc["stats"]
    # without probabilities, the consensus and its statistics are what they were
    assert out.read_bytes() == old_votes and doc["stats"] == old_stats

    # ann_a's endpoint asks, its server sends none: null too, never 1.0
    with Sure("ann_a", send=False) as a, Sure("ann_b") as b, Sure("ann_c") as c:
        toml2 = write_toml(tmp_path / "fresh.toml", [a, b, c], {"ann_a": True})
        fresh = vote_boxes(
            ann.path, attribute="gender", annotators=toml2, sample=1000, out=tmp_path / "fresh.parquet",
            seed=SEED + 1, min_vote_confidence=0.5, **FAST,
        )  # fmt: skip
        assert a.asked_logprobs == [True] * n and b.asked_logprobs == [False] * n
    rows = pq.read_table(fresh.answers).to_pylist()
    assert all(r["confidence"] is None and r["option_probs"] is None for r in rows)
    assert fresh.kept == 0
    floor = fresh.stats["min_confidence"]
    assert floor["no_confidence"] == dict.fromkeys(NAMES, n) and floor["low_confidence"] == dict.fromkeys(
        NAMES, 0
    )


def test_vote_requests_name_their_letters_outside_the_cache_key(tmp_path: Path) -> None:
    from fairsets.fetch.chat import ChatClient, ChatEndpoint

    q = build_question("gender", "00000/k/0", 1, annotator="a")
    request = ask.vote_request(q, b"\xff\xd8jpeg")
    assert request.choices == tuple(q.options) == q.letters
    client = ChatClient(ChatEndpoint(base_url="http://127.0.0.1:9/v1", model="m"), cache_dir=tmp_path)
    assert client.cache_key(request) == client.cache_key(dataclasses.replace(request, choices=None))


def test_consensus_minimum_confidence_is_at_least_and_unknown_does_not_count() -> None:
    names = ["a", "b", "c"]
    ballots = [
        Ballot("s", "k1", 0, ("male",) * 3, ("ok",) * 3, (0.5, 0.9, 0.7)),  # 0.5 at 0.5: counts
        Ballot("s", "k2", 0, ("male",) * 3, ("ok",) * 3, (0.49, 0.9, 0.7)),  # under: blocks "all"
        Ballot("s", "k3", 0, ("male",) * 3, ("ok",) * 3, (None, 0.9, 0.7)),  # unknown: blocks
        Ballot("s", "k4", 0, ("mixed", "mixed", "male"), ("ok",) * 3, (0.9, 0.8, 0.1)),  # relaxed 2 of 3
        Ballot("s", "k5", 0, ("mixed", None, "mixed"), ("ok", "invalid", "ok"), (0.9, None, 0.2)),
    ]
    got = consensus(ballots, names, labels=list(GENDER), relax={"mixed": 2}, min_confidence=0.5)
    assert [(r["key"], r["label"], r["rule"]) for r in got.rows] == [
        ("k1", "male", "all"),
        ("k4", "mixed", "relaxed"),
    ]
    assert got.rows[1]["agreement"] == pytest.approx(2 / 3)  # over every annotator of the vote
    assert json.loads(got.rows[1]["votes"]) == {"a": "mixed", "b": "mixed", "c": "low_confidence"}
    floor = got.stats["min_confidence"]
    assert floor["low_confidence"] == {"a": 1, "b": 0, "c": 2} and floor["no_confidence"] == {
        "a": 1,
        "b": 0,
        "c": 0,
    }
    assert got.stats["invalid"] == {"a": 0, "b": 1, "c": 0}
    plain = consensus(ballots, names, labels=list(GENDER), relax={"mixed": 2})
    assert "min_confidence" not in plain.stats and len(plain.rows) == 5  # k5: 2 mixed, relaxed
    for bad in (-0.1, 1.5, float("nan"), True):
        with pytest.raises(ValueError, match="min_confidence"):
            consensus(ballots, names, min_confidence=bad)


def test_calibration_bins_edges_and_ece_by_hand() -> None:
    def row(item: str, who: str, label: str, c: float | None) -> dict[str, Any]:
        return {"item": item, "annotator": who, "status": "ok", "label": label, "confidence": c}

    rows = [
        row("i1", "a", "x", 0.3), row("i1", "b", "x", None),  # 0.3 is bin 3 ([0.3, 0.4))
        row("i2", "a", "y", 1.0), row("i2", "b", "x", 0.0),  # 1.0 is in the last bin, 0.0 in the first
        row("i3", "a", "x", 0.35), row("i3", "b", "x", 0.95),
        {"item": "i4", "annotator": "a", "status": "ok", "label": "x", "confidence": 0.9},
        {"item": "i4", "annotator": "b", "status": "refused", "label": None, "confidence": None},
    ]  # fmt: skip
    got = calibration(rows, ["a", "b"])
    a, b = got["annotators"]["a"], got["annotators"]["b"]
    assert (a["answers"], a["no_reference"], a["without_confidence"]) == (3, 1, 0)
    assert [x["count"] for x in a["bins"]] == [0, 0, 0, 2, 0, 0, 0, 0, 0, 1]
    assert a["bins"][3]["mean_confidence"] == pytest.approx(0.325) and a["bins"][3]["agreement"] == 1.0
    assert a["bins"][9]["agreement"] == 0.0
    assert a["ece"] == pytest.approx(2 / 3 * (1 - 0.325) + 1 / 3 * 1.0)
    assert (b["answers"], b["without_confidence"]) == (2, 1)
    assert b["bins"][0]["count"] == 1 and b["bins"][9]["count"] == 1
    assert b["ece"] == pytest.approx(0.5 * 0.0 + 0.5 * 0.05)
    assert calibration([row("i1", "a", "x", None), row("i1", "b", "x", None)], ["a", "b"]) is None


@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan"])
def test_min_vote_confidence_outside_0_1_is_one_line(
    tmp_path: Path, painted_ann: Any, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    toml = tmp_path / "annotators.toml"
    toml.write_text(
        '[annotators.a]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
        '[annotators.b]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "n"\n'
    )
    code, _, err = run_cli(
        ["annotate", "vote", painted_ann.path, "--attribute", "gender", "--annotators", toml, "--sample", 5,
         "--out", tmp_path / "v.csv", "--min-vote-confidence", value],
        capsys,
    )  # fmt: skip
    assert_one_line_error(code, err, "--min-vote-confidence", "from 0 to 1")
