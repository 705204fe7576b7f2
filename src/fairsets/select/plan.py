"""The selection plan: which image goes into which variant and split, and what had to be done.

A :class:`Plan` is pure metadata, computed before any pixel is touched: a list of
:class:`PlanItem` (one per published image, real or to be augmented) and a :class:`CellReport` per
group cell (e.g. state × gender) that says how many real images and identities were available and
how each variant/split was filled. Anything the plan could not do as asked (an empty cell, a cell
whose only identity forces an uneven split) is recorded in the cell's ``notes`` and in
``Plan.warnings``, never hidden or faked.

``augment`` of an item is ``None`` for a real image, else a dict:

* ``{"kind": "mild", "seed": int, "index": n}`` — the ``n``-th mild augmentation (flip, rotation,
  hue jitter, random crop) of the real image ``source_key``; key ``f"{source_key}-aug{n}"``.
* ``{"kind": "colour", "seed": int, "index": n}`` — the ``n``-th colour copy (hue and brightness)
  of ``source_key``; key ``f"{source_key}-col{n}"``. If the copied item is itself a mild
  augmentation, the dict has ``"base": {mild augment dict}``: apply the base first (from the real
  image), then the colour augmentation with ``seed``.

Pass ``kind`` and ``seed`` to :func:`fairsets.vision.augment.augment` to produce the pixels.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CellReport", "Plan", "PlanItem", "SplitCount", "cell_label"]


def cell_label(cell: dict[str, str]) -> str:
    """Human-readable cell name, e.g. ``"state=Kerala, gender=female"``."""
    return ", ".join(f"{k}={v}" for k, v in cell.items())


@dataclass(frozen=True)
class PlanItem:
    """One image of one variant.

    Attributes:
        variant: ``"imbalanced"``, ``"balanced"`` or ``"augmented"``.
        split: split name (``"train"``/``"test"``).
        key: dot-free key, unique within the variant (the real key, or ``-augN``/``-colN`` suffixed).
        source_key: key of the real pool image the pixels come from.
        cell: the group attribute values, in the order of the plan's ``groups``.
        augment: ``None`` for a real image, else the augmentation dict (see the module docstring).
    """

    variant: str
    split: str
    key: str
    source_key: str
    cell: tuple[str, ...]
    augment: dict[str, Any] | None = None

    @property
    def augmented(self) -> bool:
        """True if the item is produced by augmentation."""
        return self.augment is not None

    def to_row(self, groups: list[str] | None = None) -> dict[str, Any]:
        """A flat, Parquet/JSON-friendly row.

        Columns: ``variant, split, key, source_key``, one column per group attribute (if ``groups``
        is given), ``cell`` (list of values), ``augmented`` (bool), ``augment_kind`` (``None``,
        ``"mild"`` or ``"colour"``) and ``augment`` (the augment dict as a JSON string, or ``None``;
        a string keeps the Parquet schema fixed whatever the dict holds).
        """
        row: dict[str, Any] = {
            "variant": self.variant,
            "split": self.split,
            "key": self.key,
            "source_key": self.source_key,
        }
        if groups:
            row.update(zip(groups, self.cell, strict=True))
        row["cell"] = list(self.cell)
        row["augmented"] = self.augmented
        row["augment_kind"] = self.augment["kind"] if self.augment else None
        row["augment"] = json.dumps(self.augment, sort_keys=True) if self.augment else None
        return row


@dataclass
class SplitCount:
    """Number of real and augmented items of one cell in one variant/split."""

    real: int = 0
    augmented: int = 0

    @property
    def total(self) -> int:
        return self.real + self.augmented


@dataclass
class CellReport:
    """What was available for one cell and how each variant/split was filled.

    Attributes:
        cell: group attribute -> value.
        available: real images of the cell in the pool.
        identities: distinct identities among them (an image with a null identity counts as one).
        counts: variant -> split -> :class:`SplitCount` (zeros for an empty cell).
        notes: human-readable notes, e.g. ``"no real image"``, forced splits, augmentation used.
    """

    cell: dict[str, str]
    available: int = 0
    identities: int = 0
    counts: dict[str, dict[str, SplitCount]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return cell_label(self.cell)

    def to_rows(self) -> list[dict[str, Any]]:
        """One flat row per variant and split (attributes, availability, counts, notes)."""
        rows = []
        for variant, splits in self.counts.items():
            for split, c in splits.items():
                rows.append(
                    {
                        **self.cell,
                        "variant": variant,
                        "split": split,
                        "available": self.available,
                        "identities": self.identities,
                        "real": c.real,
                        "augmented": c.augmented,
                        "total": c.total,
                        "notes": list(self.notes),
                    }
                )
        return rows

    def to_dict(self) -> dict[str, Any]:
        """A nested JSON-friendly dict."""
        return {
            "cell": dict(self.cell),
            "available": self.available,
            "identities": self.identities,
            "counts": {
                v: {s: {"real": c.real, "augmented": c.augmented} for s, c in splits.items()}
                for v, splits in self.counts.items()
            },
            "notes": list(self.notes),
        }


@dataclass
class Plan:
    """The result of :func:`fairsets.select.balance.select`.

    Attributes:
        items: every item of every variant, sorted by (variant, split, cell, key).
        cells: one report per cell (expected cells first in the given order, or sorted pool cells).
        warnings: everything that deviates from the request (empty cells, forced splits, dropped rows).
        groups: the group attribute names, the order of :attr:`PlanItem.cell`.
    """

    items: list[PlanItem]
    cells: list[CellReport]
    warnings: list[str]
    groups: list[str] = field(default_factory=list)

    def variant(self, name: str) -> list[PlanItem]:
        """Items of one variant."""
        return [it for it in self.items if it.variant == name]

    def to_rows(self) -> list[dict[str, Any]]:
        """Items as flat rows (see :meth:`PlanItem.to_row`), e.g. for ``pyarrow.Table.from_pylist``."""
        return [it.to_row(self.groups) for it in self.items]

    def cell_rows(self) -> list[dict[str, Any]]:
        """Cell reports as flat rows, one per cell, variant and split (see :meth:`CellReport.to_rows`)."""
        return [row for c in self.cells for row in c.to_rows()]

    def to_dict(self) -> dict[str, Any]:
        """The whole plan as a JSON-friendly dict."""
        return {
            "groups": list(self.groups),
            "items": self.to_rows(),
            "cells": [c.to_dict() for c in self.cells],
            "warnings": list(self.warnings),
        }
