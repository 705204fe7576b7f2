"""Identity-disjoint splitting (IndicFairFace §4.3: "two equal, non-overlapping subsets").

A person must not appear in more than one split, otherwise a model is evaluated on faces it was
trained on. The helpers here assign whole *groups* (identities) to splits with a seeded,
deterministic greedy that balances the number of images per split toward the requested fractions:

1. identities are sorted by id, shuffled with a seeded generator (ties are broken by the seed, not by
   the input order), then stably sorted by image count, largest first;
2. each identity goes to the split whose fill ratio ``images / weight`` is lowest (ties: the split
   with the larger weight, then the earlier split in ``fractions`` order).

This is the classic "largest first" heuristic for balanced partitioning; with at least as many
identities as splits every split with a positive weight gets at least one identity.

Nothing here uses Python's ``hash()`` or the global random state, so results are identical across
processes and runs.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from typing import TypeVar

import numpy as np

from fairsets.core.data import derive_seed

__all__ = [
    "DEFAULT_FRACTIONS",
    "allocate",
    "assign_groups",
    "cross_cell_identities",
    "derive_seed",
    "identity_disjoint_split",
    "identity_of",
    "normalise_fractions",
]

K = TypeVar("K", bound=Hashable)

#: The paper's split: two equal halves.
DEFAULT_FRACTIONS: dict[str, float] = {"train": 0.5, "test": 0.5}

_NO_IDENTITY = "\x00key:"  # prefix of the synthetic identity of an image whose identity is unknown


def identity_of(key: str, identity: object) -> str:
    """The identity used for splitting: ``identity`` as a string, or the image's own key if null.

    An image without a known identity is treated as its own person (it can only leak into another
    split through a near-duplicate, which deduplication handles upstream).
    """
    if identity is None or (isinstance(identity, float) and math.isnan(identity)) or identity == "":
        return f"{_NO_IDENTITY}{key}"
    return str(identity)


def normalise_fractions(fractions: Mapping[str, float] | None = None) -> dict[str, float]:
    """Validate split fractions and scale them to sum to 1 (order preserved).

    Args:
        fractions: split name -> non-negative weight; ``None`` gives :data:`DEFAULT_FRACTIONS`.

    Raises:
        ValueError: no splits, a negative or non-finite weight, or all weights zero.
    """
    fractions = dict(DEFAULT_FRACTIONS if fractions is None else fractions)
    if not fractions:
        raise ValueError("fractions must name at least one split")
    for name, value in fractions.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"split names must be non-empty strings, got {name!r}")
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"split fraction for {name!r} must be a finite number >= 0, got {value!r}")
    total = sum(fractions.values())
    if total <= 0:
        raise ValueError(f"split fractions must not all be zero: {fractions}")
    return {name: value / total for name, value in fractions.items()}


def allocate(total: int, fractions: Mapping[str, float] | None = None) -> dict[str, int]:
    """Split an integer ``total`` into per-split integer targets (largest remainder method).

    Leftover units go to the splits with the largest fractional remainder, ties to the earlier split,
    so 50/50 of an odd ``N`` gives ``train = ceil(N/2)``, ``test = floor(N/2)``.

    >>> allocate(7)
    {'train': 4, 'test': 3}
    """
    if total < 0:
        raise ValueError(f"total must be >= 0, got {total}")
    fr = normalise_fractions(fractions)
    exact = {name: total * f for name, f in fr.items()}
    out = {name: math.floor(v) for name, v in exact.items()}
    left = total - sum(out.values())
    names = list(fr)
    order = sorted(range(len(names)), key=lambda i: (-(exact[names[i]] - out[names[i]]), i))
    for i in order[:left]:
        out[names[i]] += 1
    return out


def assign_groups(sizes: Mapping[K, int], weights: Mapping[str, float], seed: int) -> dict[K, str]:
    """Assign whole groups (e.g. identities) to splits, balancing their sizes toward ``weights``.

    Args:
        sizes: group id -> number of images. Group ids must be sortable (strings, typically).
        weights: split name -> weight (fractions or integer targets; only the ratios matter). Splits
            with weight 0 get no group.
        seed: seed for the tie-breaking shuffle.

    Returns:
        group id -> split name, for every group in ``sizes``.
    """
    names = [n for n, w in weights.items() if w > 0]
    if not names:
        raise ValueError(f"at least one split needs a positive weight: {dict(weights)}")
    groups = sorted(sizes)
    rng = np.random.default_rng(seed)
    order = [groups[i] for i in rng.permutation(len(groups))]
    order.sort(key=lambda g: -int(sizes[g]))  # stable: the shuffle breaks ties
    filled = dict.fromkeys(names, 0)
    out: dict[K, str] = {}
    for g in order:
        best = min(
            range(len(names)),
            key=lambda i: (filled[names[i]] / weights[names[i]], -weights[names[i]], i),
        )
        out[g] = names[best]
        filled[names[best]] += int(sizes[g])
    return out


def identity_disjoint_split(
    items: Iterable[tuple[str, object]],
    seed: int,
    fractions: Mapping[str, float] | None = None,
) -> dict[str, str]:
    """Split images so that no identity appears in two splits.

    Args:
        items: ``(key, identity)`` pairs; a null identity makes the image its own identity.
        seed: seed of the split (derive one per cell/purpose with ``derive_seed``).
        fractions: split name -> fraction of images, default ``{"train": 0.5, "test": 0.5}``.

    Returns:
        key -> split name.

    Raises:
        ValueError: duplicate keys or invalid fractions.
    """
    fr = normalise_fractions(fractions)
    ident: dict[str, str] = {}
    for key, identity in items:
        if key in ident:
            raise ValueError(f"duplicate key {key!r}")
        ident[key] = identity_of(key, identity)
    sizes: dict[str, int] = {}
    for i in ident.values():
        sizes[i] = sizes.get(i, 0) + 1
    if not sizes:
        return {}
    where = assign_groups(sizes, fr, derive_seed(seed, "identity_disjoint_split"))
    return {key: where[i] for key, i in ident.items()}


def cross_cell_identities(
    rows: Iterable[Mapping[str, object]], groups: list[str], identity_column: str = "identity"
) -> dict[str, tuple[tuple[str, ...], list[tuple[str, ...]]]]:
    """Identities found in more than one cell: ``{identity: (home cell, [other cells])}``.

    Splits are planned per cell, so a person whose images sit in two cells could land in train in
    one and in test in the other. A person belongs to one cell: the home cell is the one holding
    most of their images (ties: the first cell in sorted order). Rows without an identity are
    their own person and never cross; rows with a null group value are ignored.
    """
    per: dict[str, dict[tuple[str, ...], int]] = {}
    for row in rows:
        ident = row.get(identity_column)
        if identity_of("", ident).startswith(_NO_IDENTITY):
            continue
        values = [row.get(g) for g in groups]
        if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in values):
            continue
        cell = tuple(str(v) for v in values)
        counts = per.setdefault(str(ident), {})
        counts[cell] = counts.get(cell, 0) + 1
    out = {}
    for ident, counts in sorted(per.items()):
        if len(counts) > 1:
            home = min(counts, key=lambda c: (-counts[c], c))
            out[ident] = (home, sorted(c for c in counts if c != home))
    return out
