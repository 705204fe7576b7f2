"""One state per person (:func:`assign_states`), by the rule in the package docstring."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from .rows import _row_order
from .terms import (
    ASSOCIATIONS,
    _qnum,
)


def _assignment(pairs: set[tuple[str, str]]) -> tuple[str, str]:
    """The (state, association) a person is assigned from all their (state, association) pairs."""
    prio = {a: i for i, a in enumerate(ASSOCIATIONS)}
    best = min(prio.get(a, len(prio)) for _, a in pairs)
    assoc = next(a for _, a in pairs if prio.get(a, len(prio)) == best)
    candidates = {s for s, a in pairs if a == assoc}
    n_assoc = defaultdict(int)
    for s, _ in pairs:
        n_assoc[s] += 1
    state = min(candidates, key=lambda s: (-n_assoc[s], _qnum(s), s))
    return state, assoc


def assign_states(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Assign each person exactly one state (rule in the module docstring).

    Args:
        rows: rows of :func:`fetch_people` (one per person, image, state, association).

    Returns:
        For each person, the rows of the assigned state and winning association (one per
        image), each with an extra ``associations`` column: every ``state:association`` found
        for that person, sorted and ``;``-joined. Sorted like :func:`fetch_people`.
    """
    by_person: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_person[r["person"]].append(r)
    out: list[dict[str, Any]] = []
    for person_rows in by_person.values():
        pairs = {(r["state"], r["association"]) for r in person_rows}
        state, assoc = _assignment(pairs)
        joined = ";".join(sorted(f"{s}:{a}" for s, a in pairs))
        seen: set[str] = set()
        for r in sorted(person_rows, key=_row_order):
            if r["state"] == state and r["association"] == assoc and r["image"] not in seen:
                seen.add(r["image"])
                out.append(dict(r, associations=joined))
    out.sort(key=_row_order)
    return out
