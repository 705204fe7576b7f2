"""What removals changed between revisions: ``summary["removals"]`` of a build.

Computed from the deny list (:mod:`.removals`) and this build's selection only — never from the
files an earlier build left in the folder — so the same recipe and deny list give the same bytes.

Definitions (also published in the summary's ``definitions`` block):

* a *revision* is a published state of the folder: the first build is revision 1; a build whose
  deny list holds requests made against revision r is revision r + 1 (the highest such r);
* ``removed_by_cell``: candidates this build left out because of the revision's requests, per cell
  of the candidate's group values (a candidate selected by requests of several revisions counts for
  the earliest);
* ``refilled_by_cell``: of the real images the requests took out of the default variant of the
  previous revision, how many were replaced by another real image of the same cell:
  ``matched - shrunk``;
* ``shrunk_cells``: how many real images of the default variant the cell lost,
  ``min(matched, real_before - real_after)`` (not below 0); the balanced variants then fill the
  quota with augmentations of the cell's remaining real images, or leave the cell empty when none
  is left (``real_after`` says which);
* ``reasons``: requests per reason, as the curator wrote them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..select.plan import cell_label

__all__ = ["DEFINITIONS", "Removals", "default_variant", "row_cell"]

NO_CELL = "(no cell)"

DEFINITIONS = {
    "revision": "the first build is revision 1; a build with requests made against revision r is r + 1",
    "removed_by_cell": "candidates left out by the revision's requests, per cell of their group values",
    "refilled_by_cell": "real images of the default variant taken out and replaced by another real "
    "image of the same cell (matched - shrunk)",
    "shrunk_cells": "real images of the default variant the cell lost: min(matched, real_before - "
    "real_after), not below 0; the quota is filled with augmentations of the remaining real images, "
    "or the cell is empty when none is left",
    "reasons": "requests per reason, as written by the curator (never who asked)",
}


def default_variant(variants: list[str]) -> str:
    """The variant whose real images are counted: ``balanced`` when built, else the first."""
    return "balanced" if "balanced" in variants else variants[0]


def row_cell(row: dict[str, Any], groups: list[str]) -> str:
    """A candidate's cell label from its group values; ``(no cell)`` when one is missing."""
    vals = {g: row.get(g) for g in groups}
    if any(v is None or str(v) == "" for v in vals.values()):
        return NO_CELL
    return cell_label({g: str(v) for g, v in vals.items()})


def real_per_cell(cells: list[dict[str, Any]], variant: str) -> dict[str, int]:
    """Cell label -> real images of ``variant``, from a build's cell summaries (``manifest["cells"]``)."""
    out = {}
    for c in cells:
        v = (c.get("variants") or {}).get(variant)
        out[cell_label(c["cell"])] = int(v["real"]) if v else int(c.get("available") or 0)
    return out


class Removals:
    """A build's removal state: the deny list's requests and snapshots, and what this build left out."""

    def __init__(
        self,
        requests: list[dict[str, Any]],
        revisions: dict[int, dict[str, int]],
        removed: list[tuple[dict[str, Any], dict[str, Any]]],
        groups: list[str],
    ) -> None:
        self.requests = requests
        self.revisions = revisions
        self.removed_cells = [(row_cell(row, groups), int(req["against"])) for row, req in removed]

    @property
    def revision(self) -> int:
        return 1 + max((int(r["against"]) for r in self.requests), default=0)

    def summary(self, cells: list[dict[str, Any]], variant: str) -> dict[str, Any] | None:
        """``summary["removals"]``: the latest change's numbers, the history, the definitions;
        None when the deny list is empty."""
        if not self.requests:
            return None
        current = real_per_cell(cells, variant)
        history = [self._change(a, current) for a in sorted({int(r["against"]) for r in self.requests})]
        latest = history[-1]
        return {
            "revision": self.revision,
            "requests": latest["requests"],
            "removed_by_cell": latest["removed_by_cell"],
            "refilled_by_cell": latest["refilled_by_cell"],
            "shrunk_cells": latest["shrunk_cells"],
            "reasons": latest["reasons"],
            "variant": variant,
            "total_requests": len(self.requests),
            "history": history,
            "definitions": DEFINITIONS,
        }

    def _change(self, against: int, current: dict[str, int]) -> dict[str, Any]:
        """The change from revision ``against`` to ``against + 1`` made by the requests against it."""
        batch = [r for r in self.requests if int(r["against"]) == against]
        before = self.revisions.get(against, {})
        after = current if against + 1 == self.revision else self.revisions.get(against + 1)
        removed = Counter(cell for cell, a in self.removed_cells if a == against)
        matched: dict[str, set[str]] = {}
        for r in batch:
            for cell, keys in (r.get("matched") or {}).items():
                matched.setdefault(cell, set()).update(keys)
        refilled, shrunk, real_after = {}, {}, {}
        for cell in sorted(set(removed) | set(matched)):
            n = len(matched.get(cell, ()))
            if after is None or cell not in before:  # no snapshot: the change is not known
                continue
            lost = min(n, max(0, before[cell] - after.get(cell, 0)))
            if lost:
                shrunk[cell] = lost
            if n - lost:
                refilled[cell] = n - lost
            real_after[cell] = after.get(cell, 0)
        times = sorted(str(r.get("time") or "") for r in batch)
        return {
            "revision": against + 1,
            "against": against,
            "requests": len(batch),
            "dates": sorted({t[:10] for t in times if t}),
            "removed_by_cell": dict(sorted(removed.items())),
            "refilled_by_cell": refilled,
            "shrunk_cells": shrunk,
            "real_after": real_after,
            "reasons": dict(sorted(Counter(str(r["reason"]) for r in batch).items())),
        }
