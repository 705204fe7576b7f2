"""Consensus of a vote: which items keep a label, the per-class cap, the LABELS output, agreement."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from fairsets.annotate.heads.labels import read_labels
from fairsets.annotate.vote.consensus import Ballot, consensus, write_labels
from fairsets.annotate.vote.prompts import build_question, parse_answer

NAMES = ("intern", "phi", "llava")
GENDER = ["female", "male", "mixed", "unclear"]


def ballot(i: int, *labels, statuses=()) -> Ballot:
    return Ballot("00000", f"k{i:04d}", 0, tuple(labels), tuple(statuses))


def test_only_full_agreement_is_kept_and_an_invalid_reply_blocks_it():
    out = consensus(
        [
            ballot(1, "male", "male", "male"),
            ballot(2, "male", "male", "female"),
            ballot(3, "female", "female", None),
            ballot(4, "unclear", "unclear", "unclear"),
        ],
        NAMES,
        labels=GENDER,
    )
    assert [(r["key"], r["label"], r["rule"], r["agreement"]) for r in out.rows] == [
        ("k0001", "male", "all", 1.0),
        ("k0004", "unclear", "all", 1.0),
    ]
    assert out.stats["no_consensus"] == 2
    assert out.stats["counts"]["consensus"] == {"female": 0, "male": 1, "mixed": 0, "unclear": 1}


def test_mixed_relaxed_to_two_of_three():
    ballots = [
        ballot(1, "mixed", "mixed", "male"),  # 2 of 3, the third saw one person: kept
        ballot(2, "mixed", None, "mixed", statuses=("ok", "refused", "ok")),  # kept
        ballot(3, "mixed", "male", None),  # one vote: not kept
        ballot(4, "male", "male", "female"),  # no relaxation for male
    ]
    out = consensus(ballots, NAMES, labels=GENDER, relax={"mixed": 2})
    assert [(r["key"], r["label"], r["rule"]) for r in out.rows] == [
        ("k0001", "mixed", "relaxed"),
        ("k0002", "mixed", "relaxed"),
    ]
    assert out.rows[0]["agreement"] == pytest.approx(2 / 3, abs=1e-6)
    assert json.loads(out.rows[1]["votes"]) == {"intern": "mixed", "phi": "refused", "llava": "mixed"}
    assert out.stats["relaxed"] == 2
    assert consensus(ballots, NAMES, labels=GENDER).rows == []


def test_a_relaxed_label_must_lead_the_votes():
    four = ("a", "b", "c", "d")
    tie = Ballot("s", "k", 0, ("mixed", "mixed", "male", "male"))
    lead = Ballot("s", "k2", 0, ("mixed", "mixed", "male", None))
    out = consensus([tie, lead], four, relax={"mixed": 2})
    assert [r["key"] for r in out.rows] == ["k2"]


def test_per_class_cap_is_seeded_order_free_and_counted():
    ballots = [ballot(i, "male", "male", "male") for i in range(50)]
    ballots += [ballot(100 + i, "female", "female", "female") for i in range(8)]
    a = consensus(ballots, NAMES, per_class_cap=10, seed=1)
    shuffled = ballots[:]
    random.Random(5).shuffle(shuffled)
    assert consensus(shuffled, NAMES, per_class_cap=10, seed=1).rows == a.rows
    assert consensus(ballots, NAMES, per_class_cap=10, seed=2).rows != a.rows
    assert a.stats["counts"]["consensus"] == {"female": 8, "male": 50}
    assert a.stats["counts"]["kept"] == {"female": 8, "male": 10}
    # More candidates never bring back an item the smaller vote left out.
    extra = [ballot(500 + i, "male", "male", "male") for i in range(50)]
    more = consensus(ballots + extra, NAMES, per_class_cap=10, seed=1)
    first = {b.key for b in ballots}
    before = {r["key"] for r in a.rows if r["label"] == "male"}
    assert {r["key"] for r in more.rows if r["key"] in first and r["label"] == "male"} <= before
    assert len(consensus(ballots, NAMES, per_class_cap=None).rows) == 58


def test_rows_are_a_labels_table_that_read_labels_reads(tmp_path: Path):
    ballots = [
        Ballot("00001", "a", 0, ("male", "male", "male")),
        Ballot("00001", "a", 1, ("female", "female", "female")),
        Ballot("00000", "z", None, ("unclear", "unclear", "unclear")),
        Ballot("00002", "b", 3, ("mixed", "mixed", "female")),
        Ballot("00002", "c", 0, ("male", "female", "male")),
    ]
    out = consensus(ballots, NAMES, labels=GENDER, relax={"mixed": 2})
    expected = [(r["shard"], r["key"], r["box_id"], r["label"]) for r in out.rows]
    assert expected == [
        ("00000", "z", None, "unclear"),
        ("00001", "a", 0, "male"),
        ("00001", "a", 1, "female"),
        ("00002", "b", 3, "mixed"),
    ]
    for name in ("votes.csv", "votes.parquet", "votes.jsonl"):
        path = write_labels(tmp_path / name, out.rows)
        labels = read_labels(path, classes=GENDER, drop=("unclear",))
        assert [(r.shard, r.key, r.box_id, r.label) for r in labels.rows] == expected[1:], name
        assert labels.dropped == {"unclear": 1} and labels.rejected == []
    with pytest.raises(ValueError, match="unknown LABELS format"):
        write_labels(tmp_path / "votes.xlsx", out.rows)


def test_invalid_and_refused_are_counted_per_annotator_and_stats_are_json():
    ballots = [
        ballot(1, None, "male", "male", statuses=("refused", "ok", "ok")),
        ballot(2, None, None, "male", statuses=("invalid", "refused", "ok")),
        ballot(3, None, "female", "female"),
        ballot(4, "female", "female", "female"),
    ]
    stats = consensus(ballots, NAMES, labels=GENDER).stats
    assert stats["invalid"] == {"intern": 2, "phi": 0, "llava": 0}
    assert stats["refused"] == {"intern": 1, "phi": 1, "llava": 0}
    assert stats["counts"]["votes"]["llava"] == {"female": 2, "male": 2, "mixed": 0, "unclear": 0}
    assert stats["fleiss_items"] == 1
    assert stats["fleiss_kappa"] is None  # one item, one label: κ undefined
    json.dumps(stats, allow_nan=False)


def test_cohen_kappa_and_confusion_match_scikit_learn():
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = random.Random(0)
    truth = [rng.choice(GENDER) for _ in range(300)]

    def noisy(p: float) -> list[str | None]:
        return [t if rng.random() < p else rng.choice([*GENDER, None]) for t in truth]

    votes = [noisy(0.9), noisy(0.7), noisy(0.6)]
    ballots = [ballot(i, *(v[i] for v in votes)) for i in range(len(truth))]
    stats = consensus(ballots, NAMES, labels=GENDER).stats
    assert len(stats["pairs"]) == 3
    for pair in stats["pairs"]:
        i, j = NAMES.index(pair["a"]), NAMES.index(pair["b"])
        both = [(a, b) for a, b in zip(votes[i], votes[j], strict=True) if a is not None and b is not None]
        a, b = [x for x, _ in both], [y for _, y in both]
        assert pair["items"] == len(both)
        assert pair["cohen_kappa"] == pytest.approx(sklearn_metrics.cohen_kappa_score(a, b), abs=1e-6)
        assert pair["confusion"] == sklearn_metrics.confusion_matrix(a, b, labels=GENDER).tolist()
    assert 0.2 < stats["fleiss_kappa"] < 0.9


def _fleiss_reference(table: np.ndarray) -> float:
    try:
        from statsmodels.stats.inter_rater import fleiss_kappa
    except ImportError:
        return float("nan")
    return float(fleiss_kappa(table, method="fleiss"))


def test_fleiss_kappa_worked_example():
    # Four items, three annotators: counts (a, b) = (3,0), (2,1), (0,3), (1,2).
    # P_i = 1, 1/3, 1, 1/3 → P̄ = 2/3; p_a = p_b = 1/2 → P_e = 1/2; κ = (2/3 - 1/2) / (1/2) = 1/3.
    ballots = [
        ballot(1, "a", "a", "a"),
        ballot(2, "a", "b", "a"),
        ballot(3, "b", "b", "b"),
        ballot(4, "b", "a", "b"),
        ballot(5, "a", None, "a"),  # not answered by all: left out of Fleiss' κ
    ]
    stats = consensus(ballots, NAMES).stats
    assert stats["fleiss_items"] == 4
    assert stats["fleiss_kappa"] == pytest.approx(1 / 3, abs=1e-6)
    reference = _fleiss_reference(np.array([[3, 0], [2, 1], [0, 3], [1, 2]]))
    if not np.isnan(reference):
        assert stats["fleiss_kappa"] == pytest.approx(reference, abs=1e-6)


def test_from_replies_to_consensus_through_each_annotators_own_shuffle():
    rng = random.Random(3)
    truth = {f"00000/k{i}/0": rng.choice(GENDER) for i in range(60)}
    ballots = []
    for item, label in truth.items():
        labels, statuses = [], []
        for name in NAMES:
            q = build_question("gender", item, 11, annotator=name)
            letter = next(x for x, lab in q.options.items() if lab == label)
            raw = f"**{letter}**" if name == "phi" else f"Answer: {letter.lower()}"
            if item.endswith("k7/0") and name == "llava":
                raw = "I'm sorry, I can't help with that."
            got, status = parse_answer(raw, q)
            labels.append(got)
            statuses.append(status)
        shard, key, box = item.split("/")
        ballots.append(Ballot(shard, key, int(box), tuple(labels), tuple(statuses)))
    out = consensus(ballots, NAMES, labels=GENDER, relax={"mixed": 2})
    kept = {f"{r['shard']}/{r['key']}/{r['box_id']}": r["label"] for r in out.rows}
    assert out.stats["refused"]["llava"] == 1
    expected = {item: label for item, label in truth.items() if item != "00000/k7/0"}
    if truth["00000/k7/0"] == "mixed":  # two of three, relaxed
        expected["00000/k7/0"] = "mixed"
    assert kept == expected
    assert out.stats["fleiss_kappa"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("kwargs", "ballots", "match"),
    [
        ({"annotators": ["one"]}, [], "at least two annotators"),
        ({"annotators": ["a", "a"]}, [], "distinct names"),
        ({}, [ballot(1, "male", "male")], "2 labels for 3 annotators"),
        ({}, [ballot(1, "male", "male", "male"), ballot(1, "male", "male", "male")], "two ballots"),
        ({"labels": GENDER}, [ballot(1, "man", "male", "male")], "not among"),
        ({"relax": {"mixed": 4}}, [], "from 1 to 3"),
        ({"relax": {"mixed": True}}, [], "from 1 to 3"),
        ({"per_class_cap": 0}, [], "positive number"),
        ({}, [ballot(1, "male", None, "male", statuses=("ok", "ok", "ok"))], "only 'ok' has a label"),
        ({}, [ballot(1, "male", None, "male", statuses=("ok", "lost", "ok"))], "unknown status"),
        ({}, [ballot(1, "male", None, "male", statuses=("ok",))], "1 statuses"),
    ],
)
def test_bad_input_is_a_clear_error(kwargs, ballots, match):
    kwargs = {"annotators": NAMES, **kwargs}
    with pytest.raises(ValueError, match=match):
        consensus(ballots, **kwargs)


def test_an_empty_vote_has_no_rows_and_no_kappa():
    out = consensus([], NAMES, labels=GENDER)
    assert out.rows == []
    assert out.stats["fleiss_kappa"] is None and out.stats["items"] == 0
    assert all(p["cohen_kappa"] is None for p in out.stats["pairs"])
