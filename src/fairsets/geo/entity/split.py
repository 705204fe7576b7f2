"""The train / in-distribution test / out-of-distribution (held-out countries) split."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from fairsets.geo.countries import normalize_country

log = logging.getLogger("fairsets.geo.entity")  # the package's name, as log lines always showed

#: The paper's OOD test countries (Appendix A.3.1): China, Chile, New Zealand, Philippines, Spain.
PAPER_OOD_COUNTRIES: tuple[str, ...] = ("CHN", "CHL", "NZL", "PHL", "ESP")
#: The paper's test-set size (§3.2: "100 form the test set").
PAPER_ID_TEST_SIZE = 100
#: The share of rows a seeded choice of held-out countries aims for.
OOD_FRACTION: tuple[float, float] = (0.15, 0.20)

_OOD_ATTEMPTS = 4096


@dataclass(frozen=True)
class Split:
    """Row indices of the three sets (sorted, disjoint, covering every row).

    Attributes:
        train: Training rows.
        id_test: In-distribution test rows (countries seen in training, or no country).
        ood_test: Rows of the held-out countries.
        ood_countries: The held-out countries (ISO3, sorted).
        ood_missing: Held-out countries that were named but have no rows.
        seed: The seed of the random choices.
    """

    train: np.ndarray
    id_test: np.ndarray
    ood_test: np.ndarray
    ood_countries: tuple[str, ...]
    ood_missing: tuple[str, ...] = ()
    seed: int = 0

    def sets(self) -> dict[str, np.ndarray]:
        """``{"train", "id", "ood"}`` → indices."""
        return {"train": self.train, "id": self.id_test, "ood": self.ood_test}


def _norm_countries(names: Iterable[str]) -> tuple[str, ...]:
    out = []
    for name in names:
        if not str(name).strip():
            continue
        iso3 = normalize_country(name)
        if iso3 is None:
            raise ValueError(f"unknown held-out country {name!r} (use an ISO code or a name)")
        out.append(iso3)
    return tuple(sorted(set(out)))


def _choose_ood(
    labels: np.ndarray,
    countries: Sequence[str | None],
    k: int | None,
    fraction: tuple[float, float],
    rng: np.random.Generator,
) -> tuple[str, ...]:
    """A seeded set of countries holding a ``fraction`` of the rows, with both labels inside and out."""
    names = sorted({c for c in countries if c is not None})
    if k is not None and not 1 <= k < len(names):
        raise ValueError(
            f"n_ood_countries must be between 1 and {len(names) - 1} (the data has {len(names)} countries)"
        )
    if len(names) < 2:
        return ()
    lo, hi = fraction
    n = len(labels)
    index = {c: i for i, c in enumerate(names)}
    codes = np.array([index[c] if c is not None else -1 for c in countries], dtype=np.int64)
    has = codes >= 0
    count = np.bincount(codes[has], minlength=len(names))
    weights = labels[has].astype(np.float64)
    pos = np.bincount(codes[has], weights=weights, minlength=len(names)).astype(np.int64)
    total_pos = int(labels.sum())
    total_neg = n - total_pos
    best: tuple[float, tuple[str, ...]] | None = None
    for _ in range(_OOD_ATTEMPTS):
        order = rng.permutation(len(names))
        # every prefix of this order (or the k-prefix), scored lexicographically: both labels left
        # for training (4), both labels held out (2), then the distance of the share to [lo, hi]
        rows = np.cumsum(count[order])[:-1]
        held_pos = np.cumsum(pos[order])[:-1]
        held_neg = rows - held_pos
        share = rows / n
        gap = np.maximum(np.maximum(lo - share, share - hi), 0.0)
        train_ok = (total_pos - held_pos >= 2) & (total_neg - held_neg >= 2)
        held_ok = (held_pos > 0) & (held_neg > 0)
        score = 4.0 * ~train_ok + 2.0 * ~held_ok + gap
        at = k - 1 if k is not None else int(np.argmin(score))  # argmin: the shortest best prefix
        if best is None or score[at] < best[0]:
            best = (float(score[at]), tuple(sorted(names[i] for i in order[: at + 1])))
            if best[0] == 0.0:
                break
    assert best is not None
    share = float(sum(count[index[c]] for c in best[1]) / n)
    if not lo <= share <= hi:
        log.warning(
            "the held-out countries (%s) hold %.1f%% of the rows; no choice of %s countries holds %g-%g%%",
            ", ".join(best[1]), 100 * share, k if k is not None else "whole", 100 * lo, 100 * hi,
        )  # fmt: skip
    return best[1]


def _stratified(labels: np.ndarray, pool: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    pos = pool[labels[pool]]
    neg = pool[~labels[pool]]
    n_pos = round(size * len(pos) / len(pool)) if len(pool) else 0
    n_pos = min(max(n_pos, 1 if size >= 2 and len(pos) >= 3 else 0), len(pos))
    n_neg = size - n_pos
    if n_neg > len(neg):
        n_neg, n_pos = len(neg), size - len(neg)
    picked = np.concatenate([rng.permutation(pos)[:n_pos], rng.permutation(neg)[:n_neg]])
    return np.sort(picked.astype(np.int64))


def split_annotations(
    labels: Sequence[bool] | np.ndarray,
    countries: Sequence[str | None] | None = None,
    *,
    ood_countries: Iterable[str] | None = None,
    n_ood_countries: int | None = None,
    id_test_size: int = PAPER_ID_TEST_SIZE,
    seed: int = 0,
    ood_fraction: tuple[float, float] = OOD_FRACTION,
) -> Split:
    """Split annotated rows into train, ID test and OOD test sets (deterministic given ``seed``).

    Held-out countries: ``ood_countries`` (codes or names; an empty list means no OOD test), else
    a seeded choice of ``n_ood_countries`` countries (or, when None, as many as it takes) whose
    rows make up ``ood_fraction`` of the data, preferring choices with both labels on each side.
    Without countries (``countries`` None or all None) there is no OOD test.

    Args:
        labels: ``present`` per row.
        countries: ISO3 per row (None for rows without a country), or None.
        ood_countries: Countries to hold out.
        n_ood_countries: How many countries to hold out when ``ood_countries`` is None.
        id_test_size: Rows in the ID test set, sampled from the non-OOD rows stratified by label.
        seed: Seed of the choice of countries and of the ID test sample.
        ood_fraction: The share of rows a seeded choice aims for, ``(low, high)``.

    Returns:
        The split.

    Raises:
        ValueError: Both ``ood_countries`` and ``n_ood_countries``, an unknown country, held-out
            countries with no rows, or too few rows of a label left for training (2 per label).
    """
    y = np.asarray(labels, dtype=bool).reshape(-1)
    n = len(y)
    if countries is not None and len(countries) != n:
        raise ValueError(f"{len(countries)} countries for {n} labels")
    if id_test_size < 0:
        raise ValueError(f"id_test_size must be >= 0, got {id_test_size}")
    if ood_countries is not None and n_ood_countries is not None:
        raise ValueError("give ood_countries or n_ood_countries, not both")
    lo, hi = ood_fraction
    if not 0.0 < lo <= hi < 1.0:
        raise ValueError(f"ood_fraction must satisfy 0 < low <= high < 1, got {ood_fraction}")
    rng = np.random.default_rng(seed)
    cs: list[str | None] = list(countries) if countries is not None else [None] * n
    have = {c for c in cs if c is not None}
    missing: tuple[str, ...] = ()
    if ood_countries is not None:
        held = _norm_countries(ood_countries)
        missing = tuple(c for c in held if c not in have)
        if held and len(missing) == len(held):
            raise ValueError(f"none of the held-out countries ({', '.join(held)}) occurs in the annotations")
        held = tuple(c for c in held if c in have)
    elif have:
        held = _choose_ood(y, cs, n_ood_countries, ood_fraction, rng)
    else:
        if n_ood_countries is not None:
            raise ValueError("n_ood_countries needs a country column")
        held = ()
    is_ood = np.array([c in held for c in cs], dtype=bool) if held else np.zeros(n, dtype=bool)
    ood = np.flatnonzero(is_ood)
    pool = np.flatnonzero(~is_ood)
    rest_pos, rest_neg = int(y[pool].sum()), int((~y[pool]).sum())
    if rest_pos < 2 or rest_neg < 2:
        raise ValueError(
            f"outside the held-out countries there are {rest_pos} present and {rest_neg} absent rows; "
            "training needs at least 2 of each"
        )
    if id_test_size > len(pool) - 4:
        raise ValueError(
            f"id_test_size {id_test_size} leaves too few rows for training ({len(pool)} rows outside the "
            "held-out countries)"
        )
    id_test = _stratified(y, pool, id_test_size, rng) if id_test_size else np.zeros(0, np.int64)
    train = np.setdiff1d(pool, id_test)
    tp, tn = int(y[train].sum()), int((~y[train]).sum())
    if tp < 2 or tn < 2:
        raise ValueError(
            f"the training split has {tp} present and {tn} absent rows (at least 2 of each needed); "
            "lower id_test_size"
        )
    return Split(
        train=train.astype(np.int64),
        id_test=id_test,
        ood_test=ood.astype(np.int64),
        ood_countries=held,
        ood_missing=missing,
        seed=seed,
    )
