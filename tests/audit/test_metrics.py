"""Audit metrics against independent references (explicit loops, scipy, statistics)."""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from fairsets.audit.metrics import (
    cosine_similarity,
    group_mean_similarity,
    job_simulation,
    jsd,
    jsd_uniform,
    pairwise_jsd,
    prompt_metrics,
    std_of_means,
    topk_distribution,
    topk_indices,
)

# --------------------------------------------------------------------------- independent references


def ref_cosine(a: list[list[float]], b: list[float]) -> list[float]:
    out = []
    for row in a:
        dot = sum(x * y for x, y in zip(row, b, strict=True))
        na = math.sqrt(sum(x * x for x in row))
        nb = math.sqrt(sum(y * y for y in b))
        out.append(dot / (na * nb))
    return out


def ref_topk(s: list[float], k: int) -> list[int]:
    return sorted(range(len(s)), key=lambda i: (-s[i], i))[:k]


def ref_jsd(p: list[float], q: list[float]) -> float:
    return float(jensenshannon(p, q, base=2) ** 2)


def ref_group_means(s: list[float], groups: list[str], names: list[str]) -> dict[str, float]:
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for value, g in zip(s, groups, strict=True):
        sums[g] = sums.get(g, 0.0) + value
        counts[g] = counts.get(g, 0) + 1
    return {g: sums[g] / counts[g] for g in names}


def ref_counts(top: list[int], groups: list[str], names: list[str]) -> dict[str, int]:
    counts = dict.fromkeys(names, 0)
    for i in top:
        counts[groups[i]] += 1
    return counts


# --------------------------------------------------------------------------- cosine similarity


def test_cosine_similarity_hand_written() -> None:
    a = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0], [-1.0, 0.0]])
    t = np.array([2.0, 0.0])
    got = cosine_similarity(a, t)
    assert got.shape == (4,) and got.dtype == np.float64
    np.testing.assert_allclose(got, [1.0, 0.0, 1 / math.sqrt(2), -1.0], atol=1e-15)


def test_cosine_similarity_matrix_matches_loops() -> None:
    rng = np.random.default_rng(7)
    a = rng.normal(size=(9, 5)).astype(np.float32)
    b = rng.normal(size=(4, 5))
    got = cosine_similarity(a, b)
    assert got.shape == (9, 4) and got.dtype == np.float64
    for j in range(4):
        ref = ref_cosine(a.astype(np.float64).tolist(), b[j].tolist())
        np.testing.assert_allclose(got[:, j], ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cosine_similarity(a, b[1]), got[:, 1], rtol=1e-12)


@pytest.mark.parametrize(
    ("a", "b", "match"),
    [
        (np.ones((3, 4)), np.ones(5), "dimension mismatch"),
        (np.ones((3, 4)), np.ones((2, 5)), "dimension mismatch"),
        (np.ones(4), np.ones(4), "2-D"),
        (np.zeros((0, 4)), np.ones(4), "empty"),
        (np.array([[1.0, np.nan]]), np.ones(2), "non-finite"),
        (np.ones((2, 2)), np.array([np.inf, 1.0]), "non-finite"),
        (np.array([[0.0, 0.0], [1.0, 0.0]]), np.ones(2), "zero vector"),
        (np.ones((2, 2)), np.zeros(2), "zero vector"),
    ],
)
def test_cosine_similarity_rejects_bad_input(a: np.ndarray, b: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cosine_similarity(a, b)


# --------------------------------------------------------------------------- top-k


def test_topk_ties_go_to_the_lower_index() -> None:
    s = [0.5, 0.9, 0.5, 0.9, 0.1, 0.5]
    for k in range(1, 7):
        assert topk_indices(np.array(s), k).tolist() == ref_topk(s, k)
    assert topk_indices(np.array(s), 3).tolist() == [1, 3, 0]


def test_topk_k_larger_than_n_is_clamped() -> None:
    s = np.array([0.1, 0.3, 0.2])
    assert topk_indices(s, 10).tolist() == [1, 2, 0]


def test_topk_seeded_random_matches_reference() -> None:
    rng = np.random.default_rng(3)
    s = np.round(rng.normal(size=300), 2)  # rounding makes ties
    for k in (1, 7, 50, 299, 300, 1000):
        assert topk_indices(s, k).tolist() == ref_topk(s.tolist(), k)


@pytest.mark.parametrize("k", [0, -3])
def test_topk_rejects_k_below_one(k: int) -> None:
    with pytest.raises(ValueError, match="k must be >= 1"):
        topk_indices(np.ones(3), k)


def test_topk_rejects_empty_and_nan() -> None:
    with pytest.raises(ValueError, match="empty"):
        topk_indices(np.array([]), 1)
    with pytest.raises(ValueError, match="non-finite"):
        topk_indices(np.array([0.1, np.nan]), 1)


def test_topk_distribution_lists_every_group_in_order() -> None:
    s = np.array([0.9, 0.8, 0.7, 0.1])
    groups = ["Kerala", "Kerala", "Goa", "Assam"]
    got = topk_distribution(s, groups, 2, ["Assam", "Goa", "Kerala", "Ladakh"])
    assert list(got) == ["Assam", "Goa", "Kerala", "Ladakh"]
    assert got == {"Assam": 0, "Goa": 0, "Kerala": 2, "Ladakh": 0}
    assert all(type(v) is int for v in got.values())


def test_topk_distribution_validates_groups() -> None:
    s = np.array([0.9, 0.8])
    with pytest.raises(ValueError, match="not in group_names"):
        topk_distribution(s, ["A", "X"], 1, ["A", "B"])
    with pytest.raises(ValueError, match="2 images"):
        topk_distribution(s, ["A"], 1, ["A", "B"])
    with pytest.raises(ValueError, match="duplicates"):
        topk_distribution(s, ["A", "B"], 1, ["A", "B", "A"])


# --------------------------------------------------------------------------- JSD


@pytest.mark.parametrize(
    ("p", "q"),
    [
        ([1, 0], [0.5, 0.5]),
        ([3, 1, 0, 0], [1, 1, 1, 1]),
        ([0.2, 0.3, 0.5], [0.5, 0.3, 0.2]),
        ([1, 0, 0], [0, 0, 1]),
        ([5, 5], [2, 2]),
        ([10, 0, 3, 7, 1], [2, 2, 2, 2, 2]),
    ],
)
def test_jsd_matches_scipy_squared_distance(p: list[float], q: list[float]) -> None:
    assert jsd(p, q) == pytest.approx(ref_jsd(p, q), abs=1e-12)
    assert jsd(q, p) == pytest.approx(jsd(p, q), abs=1e-15)
    assert 0.0 <= jsd(p, q) <= 1.0


def test_jsd_known_values_and_base() -> None:
    # P = (1, 0), Q = (1/2, 1/2): H(M) - (H(P) + H(Q))/2 with M = (3/4, 1/4).
    h_m = -(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25))
    assert jsd([1, 0], [0.5, 0.5]) == pytest.approx(h_m - 0.5, abs=1e-15)
    assert jsd([1, 0, 0], [0, 0, 1]) == pytest.approx(1.0, abs=1e-15)  # disjoint supports: the maximum
    assert jsd([1, 2, 3], [2, 4, 6]) == 0.0
    assert jsd([1, 0], [0.5, 0.5], base=math.e) == pytest.approx((h_m - 0.5) * math.log(2), abs=1e-15)


def test_jsd_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        jsd([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="negative"):
        jsd([1, -1], [1, 1])
    with pytest.raises(ValueError, match="sums to zero"):
        jsd([0, 0], [1, 1])
    with pytest.raises(ValueError, match="base"):
        jsd([1, 1], [1, 1], base=1)


@pytest.mark.parametrize("n_groups", [2, 3, 11, 36])
def test_jsd_uniform_all_in_one_group(n_groups: int) -> None:
    counts = [0] * n_groups
    counts[n_groups // 2] = 500
    expected = ref_jsd(counts, [1 / n_groups] * n_groups)
    assert jsd_uniform(counts) == pytest.approx(expected, abs=1e-12)
    assert 0.0 < expected < 1.0


def test_jsd_uniform_zero_for_uniform_and_mapping_counts_zeros() -> None:
    assert jsd_uniform({"A": 5, "B": 5, "C": 5}) == 0.0
    assert jsd_uniform([7] * 36) == 0.0
    # Zero-count groups count: the same non-zero counts over more groups are less uniform.
    assert jsd_uniform({"A": 5, "B": 5, "C": 0}) == pytest.approx(ref_jsd([5, 5, 0], [1, 1, 1]), abs=1e-12)
    assert jsd_uniform({"A": 5, "B": 5, "C": 0}) > jsd_uniform({"A": 5, "B": 5})
    with pytest.raises(ValueError, match="empty"):
        jsd_uniform({})


# --------------------------------------------------------------------------- group means and std


def test_group_mean_similarity_and_std_hand_written() -> None:
    s = np.array([0.1, 0.3, 0.5, 0.2, 0.4])
    groups = ["B", "A", "B", "A", "C"]
    means = group_mean_similarity(s, groups, ["A", "B", "C"])
    assert list(means) == ["A", "B", "C"]
    assert means == pytest.approx({"A": 0.25, "B": 0.3, "C": 0.4})
    assert std_of_means(means) == pytest.approx(statistics.pstdev([0.25, 0.3, 0.4]), abs=1e-15)
    assert all(type(v) is float for v in means.values())


def test_group_mean_similarity_requires_every_group() -> None:
    with pytest.raises(ValueError, match="no image"):
        group_mean_similarity(np.array([0.1, 0.2]), ["A", "A"], ["A", "B"])


def test_std_of_means_edge_cases() -> None:
    assert std_of_means({"A": 0.3}) == 0.0
    assert std_of_means({"A": 0.2, "B": 0.4}) == pytest.approx(0.1)  # ddof=0, not 0.1414
    with pytest.raises(ValueError, match="empty"):
        std_of_means({})


# --------------------------------------------------------------------------- prompt robustness


def test_pairwise_jsd() -> None:
    dists = {
        "p1": {"A": 3, "B": 1, "C": 0},
        "p2": {"A": 1, "B": 1, "C": 2},
        "p3": {"C": 0, "B": 1, "A": 3},  # same as p1, other key order
    }
    got = pairwise_jsd(dists)
    assert got["n_prompts"] == 3
    assert [(p["a"], p["b"]) for p in got["pairs"]] == [("p1", "p2"), ("p1", "p3"), ("p2", "p3")]
    expected = [ref_jsd([3, 1, 0], [1, 1, 2]), 0.0, ref_jsd([1, 1, 2], [3, 1, 0])]
    assert [p["jsd"] for p in got["pairs"]] == pytest.approx(expected, abs=1e-12)
    assert got["mean"] == pytest.approx(sum(expected) / 3, abs=1e-12)
    assert got["max"] == pytest.approx(max(expected), abs=1e-12)
    json.dumps(got)


def test_pairwise_jsd_fewer_than_two_prompts() -> None:
    assert pairwise_jsd({"only": {"A": 1, "B": 0}}) == {"pairs": [], "mean": 0.0, "max": 0.0, "n_prompts": 1}
    assert pairwise_jsd({}) == {"pairs": [], "mean": 0.0, "max": 0.0, "n_prompts": 0}
    with pytest.raises(ValueError, match="different groups"):
        pairwise_jsd({"a": {"A": 1}, "b": {"B": 1}})


# --------------------------------------------------------------------------- job simulation


def test_job_simulation_hand_written_and_ties() -> None:
    img = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.1]])
    groups = ["A", "A", "B", "B"]
    pos, neg = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    got = job_simulation(img, groups, pos, neg, ["B", "A"])
    # image 2 is exactly between the prompts: a tie counts as not "Indian".
    assert got == {"B": 0.5, "A": 0.5}
    assert list(got) == ["B", "A"]
    assert job_simulation(img, groups, pos, pos, ["A", "B"]) == {"A": 0.0, "B": 0.0}


def test_job_simulation_seeded_matches_loops() -> None:
    rng = np.random.default_rng(11)
    img = rng.normal(size=(60, 8))
    groups = [f"g{i % 4}" for i in range(60)]
    pos, neg = rng.normal(size=8), rng.normal(size=8)
    sp = ref_cosine(img.tolist(), pos.tolist())
    sn = ref_cosine(img.tolist(), neg.tolist())
    expected = {}
    for g in ["g0", "g1", "g2", "g3"]:
        idx = [i for i in range(60) if groups[i] == g]
        expected[g] = sum(1 for i in idx if sp[i] > sn[i]) / len(idx)
    assert job_simulation(img, groups, pos, neg, ["g0", "g1", "g2", "g3"]) == pytest.approx(expected)
    with pytest.raises(ValueError, match="no image"):
        job_simulation(img, groups, pos, neg, ["g0", "g1", "g2", "g3", "g4"])


# --------------------------------------------------------------------------- prompt_metrics


def test_prompt_metrics_seeded_random_against_reference() -> None:
    rng = np.random.default_rng(2026)
    names = ["Assam", "Goa", "Kerala", "Ladakh", "Sikkim"]
    n, d, k = 200, 16, 23
    img = rng.normal(size=(n, d))
    groups = [names[i] for i in rng.integers(0, len(names), size=n)]
    text = rng.normal(size=d)
    got = prompt_metrics(img, groups, text, k, names)

    assert list(got) == [
        "k",
        "topk",
        "topk_share",
        "jsd_uniform",
        "group_mean_similarity",
        "mean_similarity_std",
        "mean_similarity",
        "mean_similarity_std_present",
        "group_similarity_summary",
    ]
    s = ref_cosine(img.tolist(), text.tolist())
    counts = ref_counts(ref_topk(s, k), groups, names)
    means = ref_group_means(s, groups, names)
    assert got["k"] == k
    assert got["topk"] == counts and list(got["topk"]) == names
    assert got["topk_share"] == pytest.approx({g: c / k for g, c in counts.items()})
    assert got["jsd_uniform"] == pytest.approx(ref_jsd(list(counts.values()), [1] * len(names)), abs=1e-12)
    assert got["group_mean_similarity"] == pytest.approx(means, abs=1e-12)
    assert list(got["group_mean_similarity"]) == names
    assert got["mean_similarity_std"] == pytest.approx(float(np.std(list(means.values()), ddof=0)), abs=1e-12)
    assert got["mean_similarity"] == pytest.approx(sum(s) / n, abs=1e-12)
    assert got["mean_similarity_std_present"] == got["mean_similarity_std"]  # no empty group
    for g in names:  # the box-plot statistics, against the standard library
        mine = sorted(v for v, lab in zip(s, groups, strict=True) if lab == g)
        q1, med, q3 = statistics.quantiles(mine, n=4, method="inclusive")
        box = got["group_similarity_summary"][g]
        assert (
            box["n"] == len(mine)
            and box["min"] == pytest.approx(mine[0])
            and box["max"] == pytest.approx(mine[-1])
        )
        assert (box["q1"], box["median"], box["q3"]) == pytest.approx((q1, med, q3), abs=1e-12)
        assert box["mean"] == pytest.approx(means[g], abs=1e-12)
    # Plain Python numbers, JSON-serialisable, deterministic.
    assert type(got["k"]) is int and type(got["jsd_uniform"]) is float
    assert all(type(v) is int for v in got["topk"].values())
    assert all(type(v) is float for v in got["topk_share"].values())
    assert json.loads(json.dumps(got)) == got
    assert prompt_metrics(img, groups, text, k, names) == got


def test_prompt_metrics_k_larger_than_n_and_zero_hit_group() -> None:
    img = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    groups = ["A", "A", "B"]
    got = prompt_metrics(img, groups, np.array([1.0, 0.0]), 100, ["A", "B"])
    assert got["k"] == 3
    assert got["topk"] == {"A": 2, "B": 1}
    one = prompt_metrics(img, groups, np.array([1.0, 0.0]), 1, ["A", "B"])
    assert one["topk"] == {"A": 1, "B": 0}
    assert one["topk_share"] == {"A": 1.0, "B": 0.0}
    assert one["jsd_uniform"] == pytest.approx(ref_jsd([1, 0], [1, 1]), abs=1e-12)


def test_prompt_metrics_validates() -> None:
    img = np.ones((3, 2))
    with pytest.raises(ValueError, match="k must be >= 1"):
        prompt_metrics(img, ["A", "A", "B"], np.ones(2), 0, ["A", "B"])
    with pytest.raises(ValueError, match="dimension mismatch"):
        prompt_metrics(img, ["A", "A", "B"], np.ones(3), 1, ["A", "B"])
    with pytest.raises(ValueError, match="3 images"):
        prompt_metrics(img, ["A", "B"], np.ones(2), 1, ["A", "B"])


def test_prompt_metrics_counts_a_declared_group_with_no_image() -> None:
    """Finding 1 of issue 25: a declared group with no image is zero retrievals in the JSD against
    the uniform over every declared group (not dropped), has no mean (None), and the std over all
    declared groups is undefined; the std over the groups present is reported apart."""
    img = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [0.6, 0.8]])
    labels = ["A", "A", "B", "B"]
    got = prompt_metrics(img, labels, np.array([1.0, 0.0]), 2, ["A", "B", "C"])
    assert got["topk"] == {"A": 2, "B": 0, "C": 0}
    # by hand: P = (1, 0, 0), Q = (1/3, 1/3, 1/3), M = (P + Q) / 2 = (2/3, 1/6, 1/6);
    # KL(P||M) = log2(3/2); KL(Q||M) = 1/3 log2(1/2) + 2/3 log2(2) = 1/3; JSD = their mean
    assert got["jsd_uniform"] == pytest.approx(0.5 * math.log2(1.5) + 0.5 / 3, abs=1e-12)
    assert got["jsd_uniform"] == pytest.approx(ref_jsd([2, 0, 0], [1, 1, 1]), abs=1e-12)
    assert got["group_mean_similarity"]["C"] is None
    assert got["group_mean_similarity"]["A"] == pytest.approx((1.0 + 0.8) / 2)
    assert got["mean_similarity_std"] is None
    assert got["mean_similarity_std_present"] == pytest.approx(statistics.pstdev([0.9, 0.3]), abs=1e-12)
    assert got["group_similarity_summary"]["C"] is None
    assert json.loads(json.dumps(got)) == got
    # Both groups present and balanced: the same images over the present groups only read 0.0,
    # the flattering number the old reference set produced for a dataset that lacks C.
    both = prompt_metrics(img, labels, np.array([1.0, 1.0]), 4, ["A", "B"])
    assert both["jsd_uniform"] == 0.0
    assert prompt_metrics(img, labels, np.array([1.0, 1.0]), 4, ["A", "B", "C"])["jsd_uniform"] == (
        pytest.approx(ref_jsd([2, 2, 0], [1, 1, 1]), abs=1e-12)
    )


def test_empty_groups_are_none_on_request() -> None:
    s = np.array([0.1, 0.2])
    assert group_mean_similarity(s, ["A", "A"], ["A", "B"], allow_empty=True) == {
        "A": pytest.approx(0.15),
        "B": None,
    }
    img = np.array([[1.0, 0.0], [0.0, 1.0]])
    pos, neg = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    assert job_simulation(img, ["A", "A"], pos, neg, ["A", "B"], allow_empty=True) == {"A": 0.5, "B": None}
    with pytest.raises(ValueError, match="no image"):
        job_simulation(img, ["A", "A"], pos, neg, ["A", "B"])
