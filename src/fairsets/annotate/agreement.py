"""Agreement between raters: confusion matrices, Cohen's κ, Fleiss' κ, Krippendorff's α, bootstrap CIs.

Every κ and α in fairsets is computed here. Cohen's κ compares two raters over the same items (a human
and the classifier, or two humans); Fleiss' κ compares any fixed number of raters per item (the
votes of several annotators). Both are ``1 - observed disagreement / chance disagreement``, the
form :func:`sklearn.metrics.cohen_kappa_score` uses, so the numbers match scikit-learn's.
κ is undefined (``nan``) when chance disagreement is zero, e.g. when both raters use a single
label throughout.

Krippendorff's α (nominal) is the agreement measure for ratings with missing answers (an annotator
that refused, a human who left a cell blank): every item with at least two answers counts, each
with the answers it has. It is computed by the ``krippendorff`` package (a well-kept
implementation; no hand formula here), from a per-item count table as :func:`fleiss_table` builds.

Only NumPy is needed for κ; labels may be any hashable values (strings usually).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "bootstrap_agreement",
    "cohen_kappa",
    "confusion_matrix",
    "fleiss_kappa",
    "fleiss_table",
    "kappa_from_confusion",
    "krippendorff_alpha",
    "ratings_table",
]


def _labels(a: Sequence[Hashable], b: Sequence[Hashable], labels: Sequence[Hashable] | None) -> list[Any]:
    if labels is not None:
        return list(labels)
    return sorted(set(a) | set(b), key=str)


def _codes(values: Sequence[Hashable], labels: Sequence[Hashable], who: str) -> np.ndarray:
    index = {lab: i for i, lab in enumerate(labels)}
    try:
        return np.fromiter((index[v] for v in values), dtype=np.int64, count=len(values))
    except KeyError as exc:
        raise ValueError(f"{who} has the label {exc.args[0]!r}, which is not among {list(labels)}") from None


def confusion_matrix(
    a: Sequence[Hashable], b: Sequence[Hashable], labels: Sequence[Hashable] | None = None
) -> tuple[np.ndarray, list[Any]]:
    """Counts of ``(a[i], b[i])`` pairs: rows are ``a``'s labels, columns ``b``'s.

    Args:
        a: the first rater's labels, one per item.
        b: the second rater's labels for the same items.
        labels: the label order (default: every label seen, sorted); a label outside it is an error.

    Returns:
        ``(matrix, labels)``: an ``(L, L)`` int64 matrix and the label order used.
    """
    if len(a) != len(b):
        raise ValueError(f"the raters labelled different numbers of items ({len(a)} and {len(b)})")
    order = _labels(a, b, labels)
    k = len(order)
    pairs = _codes(a, order, "the first rater") * k + _codes(b, order, "the second rater")
    return np.bincount(pairs, minlength=k * k).reshape(k, k), order


def kappa_from_confusion(cm: np.ndarray) -> np.ndarray | float:
    """Cohen's κ of one ``(L, L)`` confusion matrix, or of a stack ``(..., L, L)`` of them.

    ``κ = 1 - Σ off-diagonal observed / Σ off-diagonal expected``, the expected counts being the
    outer product of the margins over the total; ``nan`` where that denominator is zero.
    """
    cm = np.asarray(cm, dtype=np.float64)
    total = cm.sum(axis=(-2, -1))
    rows = cm.sum(axis=-1)
    cols = cm.sum(axis=-2)
    off = 1.0 - np.eye(cm.shape[-1])
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = rows[..., :, None] * cols[..., None, :] / total[..., None, None]
        kappa = 1.0 - (off * cm).sum(axis=(-2, -1)) / (off * expected).sum(axis=(-2, -1))
    kappa = np.where((off * np.nan_to_num(expected)).sum(axis=(-2, -1)) > 0, kappa, np.nan)
    return float(kappa) if kappa.ndim == 0 else kappa


def cohen_kappa(
    a: Sequence[Hashable], b: Sequence[Hashable], labels: Sequence[Hashable] | None = None
) -> float:
    """Cohen's κ between two raters' labels of the same items (``nan`` when undefined)."""
    cm, _ = confusion_matrix(a, b, labels)
    return float(kappa_from_confusion(cm))


def fleiss_table(
    ratings: Sequence[Sequence[Hashable]], labels: Sequence[Hashable] | None = None
) -> np.ndarray:
    """The ``(items, L)`` count table of ``ratings`` (one sequence of raters' labels per item)."""
    order = list(labels) if labels is not None else sorted({r for item in ratings for r in item}, key=str)
    table = np.zeros((len(ratings), len(order)), dtype=np.int64)
    for i, item in enumerate(ratings):
        codes = _codes(list(item), order, f"item {i}")
        table[i] = np.bincount(codes, minlength=len(order))
    return table


def fleiss_kappa(table: np.ndarray) -> float:
    """Fleiss' κ (1971) of an ``(items, categories)`` table of how many raters chose each category.

    Every item must have the same number of raters (at least two). ``nan`` when chance agreement
    is 1 (every rating in one category).
    """
    t = np.asarray(table, dtype=np.float64)
    if t.ndim != 2 or t.shape[0] == 0:
        raise ValueError("Fleiss' κ needs a non-empty (items, categories) table")
    if (t < 0).any():
        raise ValueError("Fleiss' κ: counts must not be negative")
    n = t.sum(axis=1)
    if not np.all(n == n[0]) or n[0] < 2:
        raise ValueError(
            "Fleiss' κ needs the same number (≥ 2) of ratings for every item; "
            f"the items have {int(n.min())} to {int(n.max())}"
        )
    raters = n[0]
    p_j = t.sum(axis=0) / t.sum()
    p_i = ((t * t).sum(axis=1) - raters) / (raters * (raters - 1))
    p_bar, p_e = p_i.mean(), float((p_j * p_j).sum())
    if p_e >= 1.0:
        return float("nan")
    return float((p_bar - p_e) / (1.0 - p_e))


def bootstrap_agreement(
    a: Sequence[Hashable],
    b: Sequence[Hashable],
    labels: Sequence[Hashable] | None = None,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """Accuracy (share of items with equal labels) and Cohen's κ, with percentile bootstrap CIs.

    Items are resampled with replacement ``n_boot`` times from a generator seeded with ``seed``,
    so the intervals are reproducible. Resamples where κ is undefined are left out of κ's interval.

    Returns:
        ``{"n", "accuracy", "accuracy_ci", "kappa", "kappa_ci"}``; a CI is ``[low, high]`` or
        ``None`` when there are no items (or no defined κ among the resamples); κ is ``None``
        when undefined.
    """
    cm, order = confusion_matrix(a, b, labels)
    n = int(cm.sum())
    k = len(order)
    kappa = kappa_from_confusion(cm)
    out: dict[str, Any] = {
        "n": n,
        "accuracy": float(np.trace(cm) / n) if n else None,
        "accuracy_ci": None,
        "kappa": None if np.isnan(kappa) else float(kappa),
        "kappa_ci": None,
    }
    if n == 0 or n_boot <= 0:
        return out
    pairs = _codes(a, order, "the first rater") * k + _codes(b, order, "the second rater")
    rng = np.random.default_rng(seed)
    accs, kappas = [], []
    chunk = max(1, min(n_boot, 4_000_000 // max(n, 1)))
    for start in range(0, n_boot, chunk):
        m = min(chunk, n_boot - start)
        sample = pairs[rng.integers(0, n, size=(m, n))]
        flat = (sample + (np.arange(m) * k * k)[:, None]).ravel()
        cms = np.bincount(flat, minlength=m * k * k).reshape(m, k, k)
        accs.append(np.trace(cms, axis1=1, axis2=2) / n)
        kappas.append(np.atleast_1d(kappa_from_confusion(cms)))
    tail = (1.0 - level) / 2 * 100
    acc_all = np.concatenate(accs)
    out["accuracy_ci"] = [float(x) for x in np.percentile(acc_all, [tail, 100 - tail])]
    kap_all = np.concatenate(kappas)
    kap_all = kap_all[~np.isnan(kap_all)]
    if kap_all.size:
        out["kappa_ci"] = [float(x) for x in np.percentile(kap_all, [tail, 100 - tail])]
    return out


def ratings_table(
    ratings: Sequence[Sequence[Hashable | None]], labels: Sequence[Hashable] | None = None
) -> np.ndarray:
    """The ``(items, L)`` count table of ratings with missing answers (``None`` is left out).

    Unlike :func:`fleiss_table`, items may have different numbers of answers (none at all too).
    """
    order = (
        list(labels)
        if labels is not None
        else sorted({r for item in ratings for r in item if r is not None}, key=str)
    )
    return fleiss_table([[r for r in item if r is not None] for item in ratings], order)


def _alpha(table: np.ndarray) -> float:
    import krippendorff

    t = table[table.sum(axis=1) >= 2]
    if t.shape[0] == 0 or t.shape[1] < 2 or np.count_nonzero(t.sum(axis=0)) < 2:
        return float("nan")  # no pairable item, or every answer is one label: α is undefined
    return float(krippendorff.alpha(value_counts=t, level_of_measurement="nominal"))


def krippendorff_alpha(
    table: np.ndarray, *, n_boot: int = 0, seed: int = 0, level: float = 0.95
) -> dict[str, Any]:
    """Krippendorff's α (nominal level) of an ``(items, L)`` table of answer counts per label.

    Items with fewer than two answers carry no pairable value and are left out (they are counted
    in ``items_total`` but not in ``items``). With ``n_boot > 0`` a percentile interval from
    resampling the items with replacement (seeded); resamples where α is undefined are left out.

    Returns:
        ``{"alpha", "alpha_ci", "items", "values", "items_total"}``: ``alpha`` is ``None`` when
        undefined (no item with two answers, or a single label used throughout); ``items`` are
        the items with at least two answers and ``values`` the answers they hold.
    """
    t = np.asarray(table, dtype=np.int64)
    if t.ndim != 2:
        raise ValueError("Krippendorff's α needs an (items, labels) count table")
    if (t < 0).any():
        raise ValueError("Krippendorff's α: counts must not be negative")
    pairable = t[t.sum(axis=1) >= 2]
    alpha = _alpha(pairable)
    out: dict[str, Any] = {
        "alpha": None if np.isnan(alpha) else alpha,
        "alpha_ci": None,
        "items": int(pairable.shape[0]),
        "values": int(pairable.sum()),
        "items_total": int(t.shape[0]),
    }
    if out["alpha"] is None or n_boot <= 0:
        return out
    rng = np.random.default_rng(seed)
    n = pairable.shape[0]
    boots = np.array([_alpha(pairable[rng.integers(0, n, size=n)]) for _ in range(n_boot)])
    boots = boots[~np.isnan(boots)]
    if boots.size:
        tail = (1.0 - level) / 2 * 100
        out["alpha_ci"] = [float(x) for x in np.percentile(boots, [tail, 100 - tail])]
    return out
