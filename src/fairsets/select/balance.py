"""Balanced selection per group cell (IndicFairFace §3.3 and §4.3).

:func:`select` turns a pool of candidate images (metadata only) into a :class:`~.plan.Plan` with up
to three variants:

``imbalanced``
    every pool row of every cell, split identity-disjoint ~50/50 per cell.
``balanced``
    exactly ``quota`` (N) items per cell, split identity-disjoint 50/50 *within every cell*
    (``ceil(N/2)`` train, ``floor(N/2)`` test). A split with at least its target of real images gets
    a seeded choice of them; a split with fewer gets all of them plus "mild" augmentations of its own
    real images, round-robin in a seeded order, until the target is met — so the augmentations of a
    person never cross splits.
``augmented``
    2N per cell: the balanced items plus one "colour" copy of each, in the same split.

The assignment of a cell's identities to splits is shared by all variants (a person is in the same
split everywhere): a seeded largest-first greedy that balances real-image counts toward the split
fractions (see :mod:`.split`). When a cell has fewer identities than splits (typically one person),
identity-disjointness forces an uneven split: the whole quota goes to the split that has the
identity (train), and the plan reports it. A cell that is expected but has no real image gets no
item at all and is reported — nothing is ever faked.

Determinism: rows are sorted by key before any seeded choice; every seed is derived with SHA-256 from
``(seed, purpose, cell values, split, ...)``, so the same inputs give the same plan in any process,
and adding or removing a cell does not change the choices made in the other cells.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fairsets.core.data import validate_key

from .plan import CellReport, Plan, PlanItem, SplitCount, cell_label
from .split import (
    allocate,
    assign_groups,
    cross_cell_identities,
    derive_seed,
    identity_of,
    normalise_fractions,
)

__all__ = ["VARIANTS", "select"]

#: The variants :func:`select` can build.
VARIANTS: tuple[str, ...] = ("imbalanced", "balanced", "augmented")

Cell = tuple[str, ...]


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _as_rows(pool: Any) -> list[dict[str, Any]]:
    if hasattr(pool, "to_pylist"):  # pyarrow.Table / RecordBatch
        return list(pool.to_pylist())
    if isinstance(pool, Sequence) and not isinstance(pool, (str, bytes)):
        return [dict(r) for r in pool]
    raise TypeError(f"pool must be a list of dicts or a pyarrow.Table, got {type(pool).__name__}")


def _identities(n: int) -> str:
    return f"{n} identity" if n == 1 else f"{n} identities"


def _dist(counts: Mapping[str, SplitCount]) -> str:
    return "/".join(f"{s}={c.total}" for s, c in counts.items())


def select(
    pool: list[dict[str, Any]] | Any,
    groups: list[str],
    quota: int,
    variants: list[str],
    seed: int,
    cells: list[dict[str, Any]] | None = None,
    identity_column: str = "identity",
    fractions: Mapping[str, float] | None = None,
) -> Plan:
    """Plan a balanced, identity-disjoint selection per group cell.

    Args:
        pool: candidate images, a list of dicts or a ``pyarrow.Table``, with at least ``key``, the
            ``groups`` columns and ``identity_column``. A null identity makes the image its own
            identity. Rows with a null group value are left out (and reported in the warnings).
        groups: the attributes defining a cell, e.g. ``["state", "gender"]``.
        quota: N, the number of items per cell of the ``balanced`` variant (``augmented`` has 2N).
        variants: any of ``"imbalanced"``, ``"balanced"``, ``"augmented"``.
        seed: the build's seed.
        cells: the cells the recipe expects (dicts attribute -> value, e.g. every state × gender).
            An expected cell without real images is reported and gets no item; pool rows of cells
            that are not expected are left out and reported. ``None``: the cells found in the pool.
        identity_column: the column holding the person id.
        fractions: split name -> fraction, default ``{"train": 0.5, "test": 0.5}``.

    Returns:
        The :class:`~.plan.Plan`: items sorted by (variant, split, cell, key), one report per cell,
        and the warnings.

    Raises:
        ValueError: unknown variant, bad quota, missing column, illegal or duplicate key, a malformed
            expected cell, or an augmented key that collides with a pool key.
        TypeError: ``pool`` is neither a list of dicts nor a table.
    """
    variants = list(variants)
    if not variants:
        raise ValueError("variants must name at least one of " + ", ".join(VARIANTS))
    for v in variants:
        if v not in VARIANTS:
            raise ValueError(f"unknown variant {v!r}: use one of {', '.join(VARIANTS)}")
    if len(set(variants)) != len(variants):
        raise ValueError(f"duplicate variant in {variants}")
    groups = list(groups)
    if not groups or len(set(groups)) != len(groups) or not all(isinstance(g, str) and g for g in groups):
        raise ValueError(f"groups must be a non-empty list of distinct column names, got {groups!r}")
    needs_quota = any(v in variants for v in ("balanced", "augmented"))
    if isinstance(quota, bool) or not isinstance(quota, (int, np.integer)) or (needs_quota and quota < 1):
        raise ValueError(f"quota must be a positive integer, got {quota!r}")
    quota = int(quota)
    fr = normalise_fractions(fractions)
    warnings: list[str] = []

    # ---- read the pool ---------------------------------------------------------------------------
    rows = _as_rows(pool)
    by_cell: dict[Cell, list[tuple[str, str]]] = {}  # cell -> [(key, identity used for splitting)]
    seen: set[str] = set()
    null_groups: dict[str, int] = {}
    has_identity = False
    for i, row in enumerate(rows):
        if "key" not in row or _is_null(row["key"]):
            raise ValueError(f"pool row {i} has no 'key'")
        key = validate_key(str(row["key"]))
        if key in seen:
            raise ValueError(f"duplicate key {key!r} in the pool")
        seen.add(key)
        missing = [g for g in groups if g not in row]
        if missing:
            raise ValueError(f"pool row {key!r} lacks the group column(s) {missing}")
        nulls = [g for g in groups if _is_null(row[g])]
        if nulls:
            for g in nulls:
                null_groups[g] = null_groups.get(g, 0) + 1
            continue
        has_identity = has_identity or identity_column in row
        cell = tuple(str(row[g]) for g in groups)
        by_cell.setdefault(cell, []).append((key, identity_of(key, row.get(identity_column))))
    for g, n in null_groups.items():
        warnings.append(f"{n} pool row(s) with a null {g!r} were left out")
    if rows and not has_identity:
        warnings.append(
            f"no {identity_column!r} column in the pool: every image is treated as its own identity"
        )

    # ---- expected cells --------------------------------------------------------------------------
    if cells is None:
        expected = sorted(by_cell)
    else:
        expected = []
        for c in cells:
            if set(c) != set(groups):
                raise ValueError(f"expected cell {c!r} must have exactly the attributes {groups}")
            if any(_is_null(c[g]) for g in groups):
                raise ValueError(f"expected cell {c!r} has a null value")
            t = tuple(str(c[g]) for g in groups)
            if t in expected:
                raise ValueError(f"expected cell {c!r} is listed twice")
            expected.append(t)
        extra = sorted(set(by_cell) - set(expected))
        if extra:
            n = sum(len(by_cell[c]) for c in extra)
            shown = "; ".join(cell_label(dict(zip(groups, c, strict=True))) for c in extra[:5])
            more = f" and {len(extra) - 5} more" if len(extra) > 5 else ""
            warnings.append(
                f"{n} pool row(s) in {len(extra)} cell(s) not among the expected cells were left out: "
                f"{shown}{more}"
            )

    # ---- a person belongs to one cell, or the split cannot keep them on one side -----------------
    in_expected = [r for r in rows if tuple(str(r.get(g)) for g in groups) in set(expected)]
    crossing = cross_cell_identities(in_expected, groups, identity_column)
    if crossing:
        ident, (home, others) = next(iter(crossing.items()))
        label = "; ".join(cell_label(dict(zip(groups, c, strict=True))) for c in [home, *others])
        raise ValueError(
            f"{_identities(len(crossing))} in more than one cell, e.g. {ident!r} in {label}: "
            "splits are planned per cell, so such a person could be in train and test; keep each "
            "person's images in one cell (fairsets build rejects those outside the cell with most of them)"
        )

    # ---- per cell --------------------------------------------------------------------------------
    items: list[PlanItem] = []
    reports: list[CellReport] = []
    for cell in expected:
        report, cell_items, cell_warnings = _plan_cell(
            cell, groups, sorted(by_cell.get(cell, [])), quota, variants, seed, fr
        )
        reports.append(report)
        items.extend(cell_items)
        warnings.extend(cell_warnings)

    seen_keys: dict[str, set[str]] = {}
    for it in items:
        keys = seen_keys.setdefault(it.variant, set())
        if it.key in keys:
            raise ValueError(
                f"key {it.key!r} occurs twice in variant {it.variant!r} (an augmented key collides "
                "with a pool key); rename the pool key"
            )
        keys.add(it.key)
    items.sort(key=lambda it: (it.variant, it.split, it.cell, it.key))
    return Plan(items=items, cells=reports, warnings=warnings, groups=groups)


def _plan_cell(
    cell: Cell,
    groups: list[str],
    rows: list[tuple[str, str]],
    quota: int,
    variants: list[str],
    seed: int,
    fr: dict[str, float],
) -> tuple[CellReport, list[PlanItem], list[str]]:
    """Plan one cell; ``rows`` are its ``(key, identity)`` pairs sorted by key."""
    splits = list(fr)
    attrs = dict(zip(groups, cell, strict=True))
    label = cell_label(attrs)
    identities = sorted({ident for _, ident in rows})
    report = CellReport(
        cell=attrs,
        available=len(rows),
        identities=len(identities),
        counts={v: {s: SplitCount() for s in splits} for v in variants},
    )
    warnings: list[str] = []
    if not rows:
        report.notes.append("no real image")
        warnings.append(f"{label}: no real image, cell left empty (no sample is faked)")
        return report, [], warnings

    # identities -> splits, shared by all variants
    sizes: dict[str, int] = {}
    for _, ident in rows:
        sizes[ident] = sizes.get(ident, 0) + 1
    where = assign_groups(sizes, fr, derive_seed(seed, "identities", *cell))
    real: dict[str, list[str]] = {s: [] for s in splits}
    for key, ident in rows:  # sorted by key
        real[where[ident]].append(key)
    n_ident = {s: sum(1 for sp in where.values() if sp == s) for s in splits}
    starved = [s for s in splits if fr[s] > 0 and n_ident[s] == 0]
    ident_str = _identities(len(identities))

    items: list[PlanItem] = []
    if "imbalanced" in variants:
        for s in splits:
            for key in real[s]:
                items.append(PlanItem("imbalanced", s, key, key, cell, None))
            report.counts["imbalanced"][s].real = len(real[s])
        if starved:
            report.notes.append(
                f"imbalanced: {ident_str}, split forced to {_dist(report.counts['imbalanced'])}"
            )

    if "balanced" in variants or "augmented" in variants:
        balanced, notes = _balanced_cell(cell, real, n_ident, quota, seed, fr)
        bal_counts = {s: SplitCount() for s in splits}
        for it in balanced:
            c = bal_counts[it.split]
            if it.augmented:
                c.augmented += 1
            else:
                c.real += 1
        if starved:
            notes.insert(0, f"balanced: {ident_str}, split forced to {_dist(bal_counts)}")
            warnings.append(f"{label}: {ident_str}, split forced to {_dist(bal_counts)}")
        if "balanced" in variants:
            items.extend(balanced)
            report.counts["balanced"] = bal_counts
        if "augmented" in variants:
            aug = _colour_copies(balanced, seed)
            items.extend(aug)
            for it in aug:
                c = report.counts["augmented"][it.split]
                if it.augmented:
                    c.augmented += 1
                else:
                    c.real += 1
        report.notes.extend(notes)
    elif starved:
        warnings.append(f"{label}: {ident_str}, split forced to {_dist(report.counts['imbalanced'])}")
    return report, items, warnings


def _balanced_cell(
    cell: Cell,
    real: dict[str, list[str]],
    n_ident: dict[str, int],
    quota: int,
    seed: int,
    fr: dict[str, float],
) -> tuple[list[PlanItem], list[str]]:
    """Exactly ``quota`` items for one cell, given its identity-disjoint real images per split."""
    targets = allocate(quota, fr)
    # a split without any identity cannot hold real images nor their augmentations: move its target
    holders = [s for s in fr if n_ident[s] > 0]
    receiver = min(holders, key=lambda s: (-fr[s], list(fr).index(s)))
    for s in fr:
        if n_ident[s] == 0 and targets[s] > 0:
            targets[receiver] += targets[s]
            targets[s] = 0

    items: list[PlanItem] = []
    notes: list[str] = []
    for s, target in targets.items():
        keys = real[s]  # sorted by key
        if target == 0:
            continue
        if len(keys) >= target:
            rng = np.random.default_rng(derive_seed(seed, "balanced", *cell, s, "choose"))
            chosen = sorted(keys[i] for i in rng.choice(len(keys), size=target, replace=False))
            items.extend(PlanItem("balanced", s, k, k, cell, None) for k in chosen)
            continue
        items.extend(PlanItem("balanced", s, k, k, cell, None) for k in keys)
        need = target - len(keys)
        rng = np.random.default_rng(derive_seed(seed, "balanced", *cell, s, "augment"))
        order = [keys[i] for i in rng.permutation(len(keys))]
        for j in range(need):
            src, n = order[j % len(keys)], j // len(keys) + 1
            aug = {"kind": "mild", "seed": derive_seed(seed, "mild", src, n), "index": n}
            items.append(PlanItem("balanced", s, f"{src}-aug{n}", src, cell, aug))
        notes.append(
            f"balanced/{s}: {len(keys)} real + {need} mild augmentation(s) ({_identities(n_ident[s])})"
        )
    return items, notes


def _colour_copies(balanced: list[PlanItem], seed: int) -> list[PlanItem]:
    """The ``augmented`` variant of one cell: the balanced items plus one colour copy of each."""
    out = [PlanItem("augmented", it.split, it.key, it.source_key, it.cell, it.augment) for it in balanced]
    # number the copies per real source: the real image first, then its mild augmentations by index
    ordered = sorted(balanced, key=lambda it: (it.source_key, it.augment["index"] if it.augment else 0))
    counter: dict[str, int] = {}
    for it in ordered:
        n = counter[it.source_key] = counter.get(it.source_key, 0) + 1
        aug: dict[str, Any] = {"kind": "colour", "seed": derive_seed(seed, "colour", it.key), "index": n}
        if it.augment is not None:
            aug["base"] = dict(it.augment)
        out.append(PlanItem("augmented", it.split, f"{it.source_key}-col{n}", it.source_key, it.cell, aug))
    return out
