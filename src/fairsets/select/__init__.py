"""Selection: balanced, identity-disjoint plans of which images go into which variant and split.

>>> from fairsets.select import select
>>> plan = select(pool, groups=["state", "gender"], quota=100,
...               variants=["imbalanced", "balanced", "augmented"], seed=0)  # doctest: +SKIP

The plan is metadata only; produce augmented pixels with :func:`fairsets.vision.augment.augment`
from each item's ``augment`` dict. Importing this package needs neither OpenCV nor albumentations.
"""

from __future__ import annotations

from .balance import VARIANTS, select
from .plan import CellReport, Plan, PlanItem, SplitCount, cell_label
from .split import (
    DEFAULT_FRACTIONS,
    allocate,
    assign_groups,
    derive_seed,
    identity_disjoint_split,
    identity_of,
    normalise_fractions,
)

__all__ = [
    "DEFAULT_FRACTIONS",
    "VARIANTS",
    "CellReport",
    "Plan",
    "PlanItem",
    "SplitCount",
    "allocate",
    "assign_groups",
    "cell_label",
    "derive_seed",
    "identity_disjoint_split",
    "identity_of",
    "normalise_fractions",
    "select",
]
