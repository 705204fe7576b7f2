"""Cohen's and Fleiss' κ against scikit-learn and worked examples, Krippendorff's α by hand, bootstrap CIs."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from sklearn.metrics import confusion_matrix as sk_confusion

from fairsets.annotate.agreement import (
    bootstrap_agreement,
    cohen_kappa,
    confusion_matrix,
    fleiss_kappa,
    fleiss_table,
    kappa_from_confusion,
    krippendorff_alpha,
    ratings_table,
)

# The worked example of Fleiss' κ (10 subjects, 14 raters, 5 categories), as in Fleiss (1971)'s
# formulas: P̄ = 0.378, P̄e = 0.213, κ = 0.210.
FLEISS_EXAMPLE = np.array(
    [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
)


@pytest.mark.parametrize("seed", range(6))
def test_cohen_kappa_equals_sklearn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    classes = ["female", "male", "mixed", "unclear"][: 2 + seed % 3]
    a = list(rng.choice(classes, size=200))
    # a second rater that agrees most of the time
    b = [x if rng.random() < 0.7 else rng.choice(classes) for x in a]
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    cm, labels = confusion_matrix(a, b)
    assert labels == sorted(set(a) | set(b))
    np.testing.assert_array_equal(cm, sk_confusion(a, b, labels=labels))


def test_cohen_kappa_small_worked_example() -> None:
    # 50 items: yes/yes 20, yes/no 5, no/yes 10, no/no 15 → po = 0.7, pe = 0.5·0.6 + 0.5·0.4 = 0.5, κ = 0.4
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4, abs=1e-12)


def test_kappa_undefined_and_perfect() -> None:
    assert math.isnan(cohen_kappa(["a"] * 5, ["a"] * 5))
    assert cohen_kappa(["a", "b", "a"], ["a", "b", "a"]) == 1.0
    assert math.isnan(kappa_from_confusion(np.zeros((2, 2))))


def test_labels_outside_the_given_order_are_an_error() -> None:
    with pytest.raises(ValueError, match="'woman'"):
        confusion_matrix(["female", "woman"], ["female", "male"], labels=["female", "male"])
    with pytest.raises(ValueError, match="different numbers"):
        confusion_matrix(["a"], ["a", "b"])


def test_kappa_of_a_stack_equals_each_matrix() -> None:
    rng = np.random.default_rng(1)
    stack = rng.integers(0, 20, size=(7, 3, 3))
    got = kappa_from_confusion(stack)
    for i in range(7):
        assert got[i] == pytest.approx(kappa_from_confusion(stack[i]), abs=1e-15)


def test_fleiss_kappa_worked_example() -> None:
    # the formulas in exact rational arithmetic
    t = [[Fraction(int(x)) for x in row] for row in FLEISS_EXAMPLE]
    n, raters = len(t), sum(t[0])
    p_j = [sum(row[j] for row in t) / (n * raters) for j in range(5)]
    p_i = [(sum(x * x for x in row) - raters) / (raters * (raters - 1)) for row in t]
    p_bar, p_e = sum(p_i) / n, sum(p * p for p in p_j)
    exact = (p_bar - p_e) / (1 - p_e)
    assert fleiss_kappa(FLEISS_EXAMPLE) == pytest.approx(float(exact), abs=1e-12)
    assert round(float(p_bar), 3) == 0.378 and round(float(p_e), 3) == 0.213
    assert round(fleiss_kappa(FLEISS_EXAMPLE), 3) == 0.210


def test_fleiss_kappa_of_two_raters_is_scotts_pi() -> None:
    rng = np.random.default_rng(3)
    a = list(rng.choice(["x", "y", "z"], size=300))
    b = [v if rng.random() < 0.6 else rng.choice(["x", "y", "z"]) for v in a]
    table = fleiss_table(list(zip(a, b, strict=True)), labels=["x", "y", "z"])
    assert table.sum(axis=1).tolist() == [2] * 300
    # Scott's π: chance agreement from the pooled label shares of both raters
    pooled = np.array([(a.count(c) + b.count(c)) / 600 for c in "xyz"])
    po = np.mean([x == y for x, y in zip(a, b, strict=True)])
    pe = float((pooled**2).sum())
    assert fleiss_kappa(table) == pytest.approx((po - pe) / (1 - pe), abs=1e-12)


def test_fleiss_kappa_rejects_ragged_tables() -> None:
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa(np.array([[2, 1], [1, 1]]))
    assert math.isnan(fleiss_kappa(np.array([[3, 0], [3, 0]])))


def test_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    rng = np.random.default_rng(7)
    a = list(rng.choice(["f", "m"], size=400))
    b = [v if rng.random() < 0.85 else ("m" if v == "f" else "f") for v in a]
    r1 = bootstrap_agreement(a, b, n_boot=500, seed=11)
    r2 = bootstrap_agreement(a, b, n_boot=500, seed=11)
    assert r1 == r2
    assert r1 != bootstrap_agreement(a, b, n_boot=500, seed=12)
    assert r1["n"] == 400
    assert r1["kappa"] == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    assert r1["accuracy"] == pytest.approx(np.mean([x == y for x, y in zip(a, b, strict=True)]))
    lo, hi = r1["kappa_ci"]
    assert lo < r1["kappa"] < hi and hi - lo < 0.2
    lo, hi = r1["accuracy_ci"]
    assert lo < r1["accuracy"] < hi
    # the interval is the percentile interval of κ over resamples drawn with that seed
    g = np.random.default_rng(11)
    idx = g.integers(0, 400, size=(500, 400))
    ks = [cohen_kappa_score(np.array(a)[i], np.array(b)[i]) for i in idx[:500]]
    assert r1["kappa_ci"] == pytest.approx(list(np.percentile(ks, [2.5, 97.5])), abs=1e-12)


def test_bootstrap_of_nothing() -> None:
    r = bootstrap_agreement([], [], labels=["f", "m"], n_boot=100)
    assert r == {"n": 0, "accuracy": None, "accuracy_ci": None, "kappa": None, "kappa_ci": None}


# --------------------------------------------------------------------------- Krippendorff's α


def hand_alpha(units: list[list[str | None]]) -> Fraction:
    """Nominal α from the coincidence matrix, in exact arithmetic (Krippendorff 2011, "Computing
    Krippendorff's Alpha-Reliability"): for each unit u with m_u >= 2 values, every ordered pair of
    values (c, k) from different raters adds 1 / (m_u - 1) to o[c][k]; n_c = sum_k o[c][k],
    n = sum_c n_c; alpha = 1 - (n - 1) * sum_{c != k} o[c][k] / sum_{c != k} n_c * n_k."""
    values = sorted({v for u in units for v in u if v is not None})
    o = {(c, k): Fraction(0) for c in values for k in values}
    for u in units:
        vs = [v for v in u if v is not None]
        m = len(vs)
        if m < 2:
            continue
        for i in range(m):
            for j in range(m):
                if i != j:
                    o[(vs[i], vs[j])] += Fraction(1, m - 1)
    n_c = {c: sum(o[(c, k)] for k in values) for c in values}
    n = sum(n_c.values())
    observed = sum(o[(c, k)] for c in values for k in values if c != k)
    expected = sum(n_c[c] * n_c[k] for c in values for k in values if c != k)
    return 1 - (n - 1) * observed / expected


# Krippendorff's own example (3 coders, 15 units, missing values; nominal α = 0.691), as units.
K_EXAMPLE = [
    [None, None, None, None, None, 3, 4, 1, 2, 1, 1, 3, 3, None, 3],
    [1, None, 2, 1, 3, 3, 4, 3, None, None, None, None, None, None, None],
    [None, None, 2, 1, 3, 4, 4, None, 2, 1, 1, 3, 3, None, 4],
]


def test_krippendorff_alpha_equals_the_coincidence_matrix_by_hand() -> None:
    units = [[None if r[u] is None else f"v{r[u]}" for r in K_EXAMPLE] for u in range(15)]
    exact = hand_alpha(units)
    assert round(float(exact), 3) == 0.691  # the published value of the example
    got = krippendorff_alpha(ratings_table(units, ["v1", "v2", "v3", "v4"]))
    assert got["alpha"] == pytest.approx(float(exact), abs=1e-12)
    # 12 units have two or more values (units 2 and 14 have none, unit 1 one), holding 26 values
    assert (got["items"], got["values"], got["items_total"]) == (12, 26, 15)
    # a planted vote: three annotators, labels, refusals as missing answers
    votes = [
        ["female", "female", "female"],
        ["male", "male", None],
        ["male", "female", "male"],
        [None, "mixed", "mixed"],
        ["unclear", None, None],
        ["female", "female", "male"],
        ["male", "male", "male"],
        ["mixed", "female", None],
    ]
    labels = ["female", "male", "mixed", "unclear"]
    got = krippendorff_alpha(ratings_table(votes, labels))
    assert got["alpha"] == pytest.approx(float(hand_alpha(votes)), abs=1e-12)
    assert (got["items"], got["values"]) == (7, 18)  # the item with one answer carries no pair


def test_krippendorff_alpha_undefined_and_bootstrap() -> None:
    labels = ["a", "b"]
    assert krippendorff_alpha(ratings_table([["a", "a"], ["a", None]], labels))["alpha"] is None
    assert krippendorff_alpha(ratings_table([["a", None], [None, "b"]], labels)) == {
        "alpha": None,
        "alpha_ci": None,
        "items": 0,
        "values": 0,
        "items_total": 2,
    }
    rng = np.random.default_rng(5)
    units = [
        [x, x if rng.random() < 0.8 else "b", None if rng.random() < 0.3 else x]
        for x in rng.choice(labels, 150)
    ]
    r1 = krippendorff_alpha(ratings_table(units, labels), n_boot=200, seed=3)
    assert r1 == krippendorff_alpha(ratings_table(units, labels), n_boot=200, seed=3)
    lo, hi = r1["alpha_ci"]
    assert lo < r1["alpha"] < hi
    assert r1["alpha"] == pytest.approx(float(hand_alpha(units)), abs=1e-12)
