"""Composition shares corrected for the classifier's confusion: a planted truth is recovered."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fairsets.audit.persons.correction import CorrectionError, corrected_shares, load_confusion

LABELS = ["a", "b", "c"]
TRUE = np.array([0.5, 0.3, 0.2])
# P(classifier j | true i): the classifier pulls a lot of "a" into "b"
CONFUSION = np.array([[0.6, 0.3, 0.1], [0.1, 0.8, 0.1], [0.1, 0.3, 0.6]])


def noisy(
    rng: np.random.Generator, n: int, true: np.ndarray, confusion: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` boxes: true labels drawn from ``true``, the classifier's from the true label's row."""
    t = rng.choice(len(true), size=n, p=true)
    u = rng.random(n)
    pred = (u[:, None] > np.cumsum(confusion[t], axis=1)).sum(axis=1)
    return t, pred


def as_confusion(t: np.ndarray, pred: np.ndarray, labels: list[str]) -> dict[str, dict[str, int]]:
    return {
        labels[i]: {labels[j]: int(((t == i) & (pred == j)).sum()) for j in range(len(labels))}
        for i in range(len(labels))
    }


def test_corrected_shares_recover_a_planted_composition() -> None:
    rng = np.random.default_rng(2025)
    _, audited = noisy(rng, 50_000, TRUE, CONFUSION)  # the audit: classifier labels only
    counts = {lab: int((audited == j).sum()) for j, lab in enumerate(LABELS)}
    vt, vp = noisy(rng, 3_000, TRUE, CONFUSION)  # the verification sample: human (true) and classifier
    confusion = as_confusion(vt, vp, LABELS)
    res = corrected_shares(counts, confusion, n_boot=500, seed=7)
    assert res["labels"] == LABELS and res["warnings"] == [] and not res["clipped"]
    for j, lab in enumerate(LABELS):
        assert res["raw"][lab] == counts[lab] / 50_000
        lo, hi = res["ci95"][lab]
        assert lo < TRUE[j] < hi, (lab, TRUE[j], lo, hi)  # the truth is inside the interval
        assert abs(res["corrected"][lab] - TRUE[j]) < 0.03
    # the raw shares are not: "a" is 0.5 in truth, about 0.35 as the classifier counts it
    assert res["raw"]["a"] < 0.4 and not res["ci95"]["a"][0] < res["raw"]["a"] < res["ci95"]["a"][1]
    assert not res["ci95"]["b"][0] < res["raw"]["b"] < res["ci95"]["b"][1]
    # the point estimate, recomputed by inverting the estimated matrix (no clipping happened)
    m = np.array([[confusion[t][p] for p in LABELS] for t in LABELS], dtype=float)
    m /= m.sum(axis=1, keepdims=True)
    p_obs = np.array([counts[lab] for lab in LABELS]) / 50_000
    exact = np.linalg.solve(m.T, p_obs)
    assert [res["corrected"][lab] for lab in LABELS] == pytest.approx(list(exact / exact.sum()), abs=1e-12)
    assert res["condition_number"] == pytest.approx(np.linalg.cond(m), rel=1e-9)
    assert res["n"]["verification"] == 3000 and res["n"]["counts"] == 50_000
    assert {"raw", "corrected", "ci95"} <= set(res["definitions"]) and "Rogan" in res["method"]
    assert res == corrected_shares(counts, confusion, n_boot=500, seed=7)  # seeded
    assert res["ci95"] != corrected_shares(counts, confusion, n_boot=500, seed=8)["ci95"]


def test_a_classifier_label_no_human_gives_is_solved_by_least_squares() -> None:
    # humans say female or male; the classifier also says "unclear" for some of both
    labels = ["female", "male", "unclear"]
    true = np.array([0.4, 0.6, 0.0])
    conf = np.array([[0.75, 0.1, 0.15], [0.05, 0.85, 0.1], [0.0, 0.0, 1.0]])
    rng = np.random.default_rng(11)
    _, audited = noisy(rng, 40_000, true, conf)
    counts = {lab: int((audited == j).sum()) for j, lab in enumerate(labels)}
    vt, vp = noisy(rng, 2_000, true, conf)
    confusion = as_confusion(vt, vp, labels)
    assert sum(confusion["unclear"].values()) == 0
    res = corrected_shares(counts, confusion, n_boot=300, seed=1)
    assert res["corrected"]["unclear"] is None and res["ci95"]["unclear"] is None
    assert any("human label 'unclear'" in w for w in res["warnings"])
    for j, lab in enumerate(labels[:2]):
        lo, hi = res["ci95"][lab]
        assert lo < true[j] < hi
    assert res["corrected"]["female"] + res["corrected"]["male"] == pytest.approx(1.0)
    # least squares by the normal equations, independently of the module's solver
    m = np.array([[confusion[t][p] for p in labels] for t in labels[:2]], dtype=float)
    m /= m.sum(axis=1, keepdims=True)
    p = np.array([counts[lab] for lab in labels]) / 40_000
    t = np.linalg.inv(m @ m.T) @ m @ p
    assert [res["corrected"]["female"], res["corrected"]["male"]] == pytest.approx(
        list(t / t.sum()), abs=1e-12
    )


def test_warnings_and_errors() -> None:
    conf = {"a": {"a": 8, "b": 2}, "b": {"a": 8, "b": 2}}  # two identical rows: singular
    res = corrected_shares({"a": 50, "b": 40, "z": 10}, conf, n_boot=50)
    text = " | ".join(res["warnings"])
    assert "singular" in text and "'z'" in text and "small verification sample (20 boxes" in text
    assert res["raw"]["z"] == 0.1 and res["corrected"]["z"] is None and res["condition_number"] is None
    assert res["n"]["counts_corrected"] == 90
    # a label the classifier gave in the audit but never in the verification sample
    never = corrected_shares(
        {"a": 50, "b": 40, "c": 10}, {"a": {"a": 9, "b": 1, "c": 0}, "b": {"a": 1, "b": 9}}, n_boot=0
    )
    assert any("'c' by the classifier, a label it never gave" in w for w in never["warnings"])
    ill = {"a": {"a": 500, "b": 495}, "b": {"a": 495, "b": 500}}
    assert any("ill-conditioned" in w for w in corrected_shares({"a": 5, "b": 5}, ill, n_boot=0)["warnings"])
    off = {"a": {"a": 90, "b": 10}, "b": {"a": 10, "b": 90}}
    res = corrected_shares({"a": 5, "b": 95}, off, n_boot=0)  # observed share of "a" below what M allows
    assert res["clipped"] and res["corrected"] == {"a": 0.0, "b": 1.0}
    assert any("clipped" in w for w in res["warnings"])
    with pytest.raises(CorrectionError, match="empty"):
        corrected_shares({"a": 1}, {})
    with pytest.raises(CorrectionError, match="negative"):
        corrected_shares({"a": -1}, off)
    with pytest.raises(CorrectionError, match="all 0"):
        corrected_shares({"a": 0}, off)


def test_load_confusion_reads_verify_reports_new_and_old(tmp_path: Path) -> None:
    matrix = [[5, 1, 0], [2, 7, 1], [0, 0, 3]]
    classes = ["female", "male", "unclear"]
    new = {
        "attribute": "gender",
        "classes": classes,
        "human_vs_classifier": {"h1": {"confusion": {"matrix": [[0] * 3] * 3}}, "h2": {}},
        "confusion": {
            "labels": classes,
            "default_column": "h1",
            "by_human_column": {"h1": matrix, "h2": [[1] * 3] * 3},
        },
    }
    (tmp_path / "verify_gender.json").write_text(json.dumps(new))
    got = load_confusion(tmp_path, "gender")
    assert got == {
        "female": {"female": 5, "male": 1, "unclear": 0},
        "male": {"female": 2, "male": 7, "unclear": 1},
        "unclear": {"female": 0, "male": 0, "unclear": 3},
    }
    assert load_confusion(tmp_path, "gender", human_col="h2")["male"] == {
        "female": 1,
        "male": 1,
        "unclear": 1,
    }
    old = {
        "attribute": "race",
        "classes": ["x", "y"],
        "human_vs_classifier": {"r": {"confusion": {"matrix": [[4, 1], [0, 2]]}}},
    }
    (tmp_path / "verify_race.json").write_text(json.dumps(old))
    assert load_confusion(tmp_path / "verify_race.json", "race") == {
        "x": {"x": 4, "y": 1},
        "y": {"x": 0, "y": 2},
    }
    with pytest.raises(CorrectionError, match="verifies 'race', not 'gender'"):
        load_confusion(tmp_path / "verify_race.json", "gender")
    with pytest.raises(CorrectionError, match="no such file"):
        load_confusion(tmp_path / "nothing", "gender")
    with pytest.raises(CorrectionError, match="no human column 'h3'"):
        load_confusion(tmp_path, "gender", human_col="h3")
    (tmp_path / "junk.json").write_text("[1, 2]")
    with pytest.raises(CorrectionError, match="not an annotate verify report"):
        load_confusion(tmp_path / "junk.json", "gender")
