"""Bias metrics of a text-to-image retrieval audit (IndicFairFace §4.5 and appendix §11).

For a text prompt ``t`` the images of a dataset are ranked by cosine similarity to ``t`` (eq. 14).
Given one group label per image (for example its Indian state), the audit reports:

* the distribution of groups among the top-``k`` images (:func:`topk_distribution`) and its
  Jensen–Shannon *divergence* from the uniform distribution over every group
  (:func:`jsd_uniform`; eq. 16, logarithms base 2, so the value lies in ``[0, 1]``);
* the mean similarity of each group's images to ``t`` (:func:`group_mean_similarity`, eq. 15) and
  the population standard deviation (``ddof=0``) of those means across groups
  (:func:`std_of_means`);
* prompt robustness: the pairwise JSD between the top-``k`` distributions of synonymous prompts
  (:func:`pairwise_jsd`);
* the job-application simulation of §5.4 (:func:`job_simulation`): per group, the share of images
  closer to the positive prompt ("Indian candidate") than to the negative one ("foreign
  candidate").

:func:`prompt_metrics` bundles the per-prompt numbers into one JSON-serialisable dict.

Everything here is plain NumPy, deterministic (ties in the ranking go to the lower image index) and
returns plain Python ``float``/``int`` values, in the order of the ``group_names`` argument.
``group_names`` is the reference set (the declared groups, see :mod:`fairsets.audit.reference`):
a group with no image is counted with zero retrievals, never dropped. Inputs are validated: shape
mismatches, ``k < 1``, empty inputs, non-finite values, zero vectors and unknown groups raise
:class:`ValueError` with a message saying what is wrong.

API:
    * ``cosine_similarity(a, b) -> ndarray`` — ``(n, d), (m, d) -> (n, m)``; ``(n, d), (d,) -> (n,)``
    * ``topk_indices(sims, k) -> ndarray`` — the ``min(k, n)`` best indices, best first
    * ``topk_distribution(sims, groups, k, group_names) -> dict[str, int]``
    * ``jsd(p, q, base=2) -> float`` and ``jsd_uniform(counts) -> float``
    * ``group_mean_similarity(sims, groups, group_names, allow_empty=False) -> dict[str, float | None]``
    * ``group_similarity_summary(sims, groups, group_names) -> dict`` — per group n, min, quartiles,
      max, mean (the report's box plots)
    * ``std_of_means(means) -> float``
    * ``pairwise_jsd(distributions) -> dict`` — ``{"pairs", "mean", "max", "n_prompts"}``
    * ``job_simulation(img, groups, positive, negative, group_names, allow_empty=False) -> dict``
    * ``prompt_metrics(img, groups, text, k, group_names) -> dict``
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "cosine_similarity",
    "group_mean_similarity",
    "group_similarity_summary",
    "job_simulation",
    "jsd",
    "jsd_uniform",
    "pairwise_jsd",
    "prompt_metrics",
    "std_of_means",
    "topk_distribution",
    "topk_indices",
]


# --------------------------------------------------------------------------- validation helpers


def _as_matrix(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (n, d), got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape})")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values (NaN or inf)")
    return arr


def _as_vector(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 2 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values (NaN or inf)")
    return arr


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"k must be an integer, got {k!r}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return int(k)


def _check_group_names(group_names: Sequence[str]) -> list[str]:
    names = [str(g) for g in group_names]
    if not names:
        raise ValueError("group_names is empty")
    if len(set(names)) != len(names):
        dup = sorted({g for g in names if names.count(g) > 1})
        raise ValueError(f"group_names has duplicates: {dup}")
    return names


def _group_index(groups: Sequence[str], group_names: Sequence[str], n: int) -> tuple[list[str], np.ndarray]:
    """Validate ``groups`` against ``group_names`` and return (names, index of each image's group)."""
    names = _check_group_names(group_names)
    labels = [str(g) for g in groups]
    if len(labels) != n:
        raise ValueError(f"groups has {len(labels)} labels for {n} images")
    pos = {g: i for i, g in enumerate(names)}
    unknown = sorted({g for g in labels if g not in pos})
    if unknown:
        raise ValueError(f"groups contains labels not in group_names: {unknown[:10]}")
    return names, np.fromiter((pos[g] for g in labels), dtype=np.int64, count=n)


# --------------------------------------------------------------------------- similarity and ranking


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity (eq. 14) between the rows of ``a`` and the rows of ``b``.

    Args:
        a: ``(n, d)`` array (e.g. image embeddings).
        b: ``(m, d)`` array, or one ``(d,)`` vector (e.g. a text embedding).

    Returns:
        ``(n, m)`` float64 array, or ``(n,)`` when ``b`` is 1-D.

    Raises:
        ValueError: on empty or non-finite input, mismatched dimensions, or a zero-norm vector.
    """
    A = _as_matrix(a, "a")
    b_arr = np.asarray(b, dtype=np.float64)
    one = b_arr.ndim == 1
    B = _as_matrix(b_arr[None, :] if one else b_arr, "b")
    if A.shape[1] != B.shape[1]:
        raise ValueError(f"dimension mismatch: a has d={A.shape[1]}, b has d={B.shape[1]}")
    na = np.linalg.norm(A, axis=1)
    nb = np.linalg.norm(B, axis=1)
    if np.any(na == 0):
        raise ValueError(f"a has {int(np.sum(na == 0))} zero vector(s); cosine similarity is undefined")
    if np.any(nb == 0):
        raise ValueError(f"b has {int(np.sum(nb == 0))} zero vector(s); cosine similarity is undefined")
    sims = (A / na[:, None]) @ (B / nb[:, None]).T
    np.clip(sims, -1.0, 1.0, out=sims)
    return sims[:, 0] if one else sims


def topk_indices(sims: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest similarities, best first.

    Ties are broken by the lower index (a stable sort), so the result is deterministic. A ``k``
    larger than the number of images is clamped to it; callers record ``len(result)`` as the
    effective ``k``.

    Args:
        sims: ``(n,)`` similarities.
        k: number of images to keep (``>= 1``).

    Returns:
        int64 array of ``min(k, n)`` indices.
    """
    s = _as_vector(sims, "sims")
    k = _check_k(k)
    return np.argsort(-s, kind="stable")[: min(k, s.size)].astype(np.int64)


def topk_distribution(
    sims: np.ndarray, groups: Sequence[str], k: int, group_names: Sequence[str]
) -> dict[str, int]:
    """Count the groups of the top-``k`` images.

    Args:
        sims: ``(n,)`` similarities of the images to one prompt.
        groups: the group label of each image (``n`` labels, each in ``group_names``).
        k: top-``k`` (clamped to ``n``).
        group_names: every group, in report order.

    Returns:
        ``{group: count}`` for every name in ``group_names`` (zeros included), in that order.
    """
    s = _as_vector(sims, "sims")
    names, idx = _group_index(groups, group_names, s.size)
    top = topk_indices(s, k)
    counts = np.bincount(idx[top], minlength=len(names))
    return {g: int(c) for g, c in zip(names, counts, strict=True)}


# --------------------------------------------------------------------------- divergences


def _distribution(x: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    arr = _as_vector(x, name)
    if np.any(arr < 0):
        raise ValueError(f"{name} has negative entries")
    total = float(arr.sum())
    if total <= 0:
        raise ValueError(f"{name} sums to zero; it is not a distribution")
    return arr / total


def _kl_to(p: np.ndarray, m: np.ndarray) -> float:
    mask = p > 0
    return float(np.sum(p[mask] * np.log(p[mask] / m[mask])))


def jsd(p: Sequence[float], q: Sequence[float], base: float = 2) -> float:
    """Jensen–Shannon divergence (eq. 16) between ``p`` and ``q`` after normalising each to sum 1.

    ``JSD(P‖Q) = H((P+Q)/2) − (H(P) + H(Q))/2``, computed as the mean Kullback–Leibler divergence
    to the midpoint. This is the divergence, not its square root (the Jensen–Shannon *distance*
    that :func:`scipy.spatial.distance.jensenshannon` returns). With ``base=2`` it lies in
    ``[0, 1]``.

    Args:
        p: non-negative weights (counts or probabilities), not all zero.
        q: same length as ``p``.
        base: logarithm base (> 0, != 1).

    Returns:
        The divergence as a float.
    """
    if not (base > 0 and base != 1 and math.isfinite(base)):
        raise ValueError(f"base must be a positive number other than 1, got {base}")
    P = _distribution(p, "p")
    Q = _distribution(q, "q")
    if P.shape != Q.shape:
        raise ValueError(f"p and q differ in length: {P.size} != {Q.size}")
    M = 0.5 * (P + Q)
    value = 0.5 * (_kl_to(P, M) + _kl_to(Q, M)) / math.log(base)
    upper = math.log(2) / math.log(base)
    return float(min(max(value, 0.0), upper))


def jsd_uniform(counts: Mapping[str, int] | Sequence[float]) -> float:
    """JSD (base 2) between the normalised ``counts`` and the uniform distribution over all of them.

    Every listed group counts, including groups with a zero count, so "all top-``k`` images in one
    of ``N`` groups" and "all in one of 2 groups" give different values. The result is in ``[0, 1]``.

    Args:
        counts: ``{group: count}`` (e.g. from :func:`topk_distribution`) or a sequence of weights.
    """
    values = list(counts.values()) if isinstance(counts, Mapping) else list(counts)
    if not values:
        raise ValueError("counts is empty")
    return jsd(values, np.ones(len(values)), base=2)


# --------------------------------------------------------------------------- group similarity


def group_mean_similarity(
    sims: np.ndarray, groups: Sequence[str], group_names: Sequence[str], *, allow_empty: bool = False
) -> dict[str, float | None]:
    """Mean similarity of each group's images to the prompt (eq. 15).

    Args:
        sims: ``(n,)`` similarities.
        groups: the group label of each image.
        group_names: every group, in report order.
        allow_empty: a group with no image gets ``None`` (it has no mean) instead of an error.

    Returns:
        ``{group: mean}`` in ``group_names`` order.

    Raises:
        ValueError: if a group in ``group_names`` has no image (unless ``allow_empty``).
    """
    s = _as_vector(sims, "sims")
    names, idx = _group_index(groups, group_names, s.size)
    sizes = np.bincount(idx, minlength=len(names))
    empty = [g for g, c in zip(names, sizes, strict=True) if c == 0]
    if empty and not allow_empty:
        raise ValueError(f"group(s) with no image, so no mean similarity: {empty[:10]}")
    return {g: float(np.mean(s[idx == i])) if sizes[i] else None for i, g in enumerate(names)}


def group_similarity_summary(
    sims: np.ndarray, groups: Sequence[str], group_names: Sequence[str]
) -> dict[str, dict[str, float | int] | None]:
    """Per group, the distribution of its images' similarities: what a box plot draws.

    Quartiles and median by :func:`numpy.quantile` (linear interpolation between order statistics,
    Hyndman–Fan type 7); ``None`` for a group with no image.

    Returns:
        ``{group: {"n", "min", "q1", "median", "q3", "max", "mean"}}`` in ``group_names`` order.
    """
    s = _as_vector(sims, "sims")
    names, idx = _group_index(groups, group_names, s.size)
    out: dict[str, dict[str, float | int] | None] = {}
    for i, g in enumerate(names):
        out[g] = box_stats(s[idx == i])
    return out


def box_stats(values: Sequence[float] | np.ndarray) -> dict[str, float | int] | None:
    """``{"n", "min", "q1", "median", "q3", "max", "mean"}`` of the finite ``values`` (quartiles by
    :func:`numpy.quantile`, linear interpolation; None and non-finite values left out); ``None``
    when no value is left."""
    v = np.asarray([float(x) for x in values if x is not None and math.isfinite(float(x))], dtype=float)
    if v.size == 0:
        return None
    q1, med, q3 = (float(x) for x in np.quantile(v, [0.25, 0.5, 0.75]))
    return {
        "n": int(v.size),
        "min": float(v.min()),
        "q1": q1,
        "median": med,
        "q3": q3,
        "max": float(v.max()),
        "mean": float(v.mean()),
    }


def std_of_means(means: Mapping[str, float]) -> float:
    """Population standard deviation (``ddof=0``) of the per-group means across groups."""
    values = np.asarray(list(means.values()), dtype=np.float64)
    if values.size == 0:
        raise ValueError("means is empty")
    if not np.all(np.isfinite(values)):
        raise ValueError("means contains non-finite values")
    return float(np.std(values, ddof=0))


# --------------------------------------------------------------------------- prompt robustness


def pairwise_jsd(distributions: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """Prompt robustness: the JSD (base 2) between the top-``k`` distributions of every prompt pair.

    Args:
        distributions: ``{prompt: {group: count}}``; every prompt must list the same groups.

    Returns:
        ``{"pairs": [{"a": prompt, "b": prompt, "jsd": float}, ...], "mean": float, "max": float,
        "n_prompts": int}``; pairs in the order of ``itertools.combinations`` over the prompts; mean and
        max are 0.0 when there are fewer than two prompts.
    """
    prompts = list(distributions)
    keys: list[str] = []
    if prompts:
        keys = list(distributions[prompts[0]])
        for p in prompts[1:]:
            if set(distributions[p]) != set(keys):
                raise ValueError(f"prompt {p!r} lists different groups than prompt {prompts[0]!r}")
    pairs = []
    for a, b in itertools.combinations(prompts, 2):
        pa = [distributions[a][g] for g in keys]
        pb = [distributions[b][g] for g in keys]
        pairs.append({"a": a, "b": b, "jsd": jsd(pa, pb)})
    values = [p["jsd"] for p in pairs]
    return {
        "pairs": pairs,
        "mean": float(np.mean(values)) if values else 0.0,
        "max": float(max(values)) if values else 0.0,
        "n_prompts": len(prompts),
    }


# --------------------------------------------------------------------------- job simulation


def job_simulation(
    img: np.ndarray,
    groups: Sequence[str],
    positive: np.ndarray,
    negative: np.ndarray,
    group_names: Sequence[str],
    *,
    allow_empty: bool = False,
) -> dict[str, float | None]:
    """Job-application simulation (§5.4): per group, the share of images judged "Indian".

    An image counts when ``cos(img, positive) > cos(img, negative)`` (strictly; a tie counts as
    not "Indian").

    Args:
        img: ``(n, d)`` image embeddings.
        groups: the group label of each image.
        positive: ``(d,)`` embedding of the positive prompt ("Indian candidate").
        negative: ``(d,)`` embedding of the negative prompt ("foreign candidate").
        group_names: every group, in report order; each must have at least one image unless
            ``allow_empty`` (then an empty group's share is ``None``: it has no denominator).

    Returns:
        ``{group: share in [0, 1]}`` in ``group_names`` order.
    """
    pos = cosine_similarity(img, _as_vector(positive, "positive"))
    neg = cosine_similarity(img, _as_vector(negative, "negative"))
    names, idx = _group_index(groups, group_names, pos.size)
    hits = (pos > neg).astype(np.int64)
    sizes = np.bincount(idx, minlength=len(names))
    empty = [g for g, c in zip(names, sizes, strict=True) if c == 0]
    if empty and not allow_empty:
        raise ValueError(f"group(s) with no image: {empty[:10]}")
    wins = np.bincount(idx, weights=hits, minlength=len(names))
    return {g: float(wins[i] / sizes[i]) if sizes[i] else None for i, g in enumerate(names)}


# --------------------------------------------------------------------------- per-prompt bundle


def prompt_metrics(
    img: np.ndarray, groups: Sequence[str], text: np.ndarray, k: int, group_names: Sequence[str]
) -> dict[str, Any]:
    """All per-prompt metrics of the audit for one text embedding.

    ``group_names`` is the reference set: every declared group, including groups with no image. An
    empty group counts as zero retrievals in ``topk`` and in the JSD against the uniform
    distribution over all of ``group_names``; it has no mean similarity (``None``), so
    ``mean_similarity_std`` (the paper's σ across all N groups) is ``None`` too, and
    ``mean_similarity_std_present`` gives the σ over the groups with images.

    Args:
        img: ``(n, d)`` image embeddings.
        groups: the group label of each image (each in ``group_names``).
        text: ``(d,)`` text embedding of the prompt.
        k: top-``k`` (clamped to ``n``; the returned ``"k"`` is the effective value).
        group_names: every group, in report order.

    Returns:
        ``{"k": int, "topk": {g: int}, "topk_share": {g: float}, "jsd_uniform": float,
        "group_mean_similarity": {g: float | None}, "mean_similarity_std": float | None,
        "mean_similarity": float, "mean_similarity_std_present": float,
        "group_similarity_summary": {g: {...} | None}}`` — groups in ``group_names`` order,
        plain Python numbers.
    """
    k = _check_k(k)
    sims = cosine_similarity(img, _as_vector(text, "text"))
    topk = topk_distribution(sims, groups, k, group_names)
    k_eff = min(k, sims.size)
    means = group_mean_similarity(sims, groups, group_names, allow_empty=True)
    present = {g: m for g, m in means.items() if m is not None}
    return {
        "k": k_eff,
        "topk": topk,
        "topk_share": {g: c / k_eff for g, c in topk.items()},
        "jsd_uniform": jsd_uniform(topk),
        "group_mean_similarity": means,
        "mean_similarity_std": std_of_means(means) if len(present) == len(means) else None,
        "mean_similarity": float(np.mean(sims)),
        "mean_similarity_std_present": std_of_means(present),
        "group_similarity_summary": group_similarity_summary(sims, groups, group_names),
    }
