"""The states table: :class:`State`, reading ``builders/india_states.csv`` (:func:`load_states`)
and mapping user selectors onto it (:func:`resolve_states`).
"""

from __future__ import annotations

import csv
import io
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fairsets.core.textfile import read_text

from .terms import (
    QID_RE,
)

log = logging.getLogger(__package__)  # one logger for the whole source, as before the split


@dataclass(frozen=True)
class State:
    """A state or union territory: canonical QID, name, kind and alias QIDs."""

    qid: str
    name: str
    kind: str = "state"
    aliases: tuple[str, ...] = ()
    note: str = ""

    @property
    def area_qids(self) -> list[str]:
        """The canonical QID followed by its aliases (what ``build_query`` takes)."""
        return [self.qid, *self.aliases]


def load_states(path: str | Path | None = None) -> list[State]:
    """Read the states table (default: the shipped ``builders/india_states.csv``).

    A user CSV needs the columns ``qid`` and ``name``; ``kind`` (default ``"state"``),
    ``aliases`` (space-separated QIDs) and ``note`` are optional.

    Raises:
        ValueError: naming the file and row, for a missing column, a malformed QID, an empty
            name, or a QID/alias/name that occurs twice.
        FileNotFoundError: if the file does not exist.
    """
    if path is None:
        from fairsets.core.datafiles import find_data_file

        path = find_data_file("builders", "india_states.csv")
    path = Path(path)
    with io.StringIO(read_text(path), newline="") as f:  # TextFileError (a ValueError) names the file
        reader = csv.DictReader(f)
        fields = [h.strip() for h in (reader.fieldnames or [])]
        if twice := sorted({h for h in fields if fields.count(h) > 1}):
            raise ValueError(f"{path}: column(s) {', '.join(twice)} appear more than once in the header")
        missing = [c for c in ("qid", "name") if c not in fields]
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(missing)} (have: {', '.join(fields)})")
        states: list[State] = []
        owner: dict[str, str] = {}  # QID (canonical or alias) -> where it was first seen
        names: dict[str, int] = {}
        for raw in reader:
            line = reader.line_num  # the physical line (quoted values may span several)
            where = f"{path}, row {line}"
            if None in raw:  # csv.DictReader puts the fields beyond the header under None
                raise ValueError(
                    f"{where}: {len(fields) + len(raw[None])} fields where the header has {len(fields)}; "
                    "quote values that contain commas"
                )
            row = {(k or "").strip(): (v or "").strip() for k, v in raw.items()}
            if not any(row.values()):
                continue  # a line of empty fields
            qid, name = row.get("qid", ""), row.get("name", "")
            if not QID_RE.match(qid):
                raise ValueError(f"{where}: qid {qid!r} is not a Wikidata item id (Q followed by digits)")
            if not name:
                raise ValueError(f"{where}: empty name for {qid}")
            aliases = tuple(row.get("aliases", "").split())
            for a in aliases:
                if not QID_RE.match(a):
                    raise ValueError(f"{where}: alias {a!r} of {qid} is not a Wikidata item id")
            for q in (qid, *aliases):
                if q in owner:
                    raise ValueError(f"{where}: {q} already appears at {owner[q]}")
                owner[q] = f"row {line}"
            key = name.casefold()
            if key in names:
                raise ValueError(f"{where}: name {name!r} already used at row {names[key]}")
            names[key] = line
            states.append(State(qid, name, row.get("kind") or "state", aliases, row.get("note", "")))
    if not states:
        raise ValueError(f"{path}: no states")
    return states


def resolve_states(selectors: Iterable[str] | None, table: Sequence[State]) -> list[State]:
    """Map user selectors (QIDs or names, case-insensitive) to states of ``table``.

    ``None`` or empty selects the whole table. A QID that is an alias selects its canonical
    state. A well-formed QID that is not in the table is accepted as a unit of its own (name =
    QID, no aliases) with a warning, so any Wikidata item can be queried. Duplicates are dropped.

    Raises:
        ValueError: for a name not in the table.
    """
    selectors = [s.strip() for s in (selectors or []) if s and s.strip()]
    if not selectors:
        return list(table)
    by_qid = {s.qid: s for s in table}
    by_alias = {a: s for s in table for a in s.aliases}
    by_name = {s.name.casefold(): s for s in table}
    out: list[State] = []
    for sel in selectors:
        if QID_RE.match(sel):
            if sel in by_qid:
                st = by_qid[sel]
            elif sel in by_alias:
                st = by_alias[sel]
                log.info("%s is an alias of %s (%s); querying that", sel, st.qid, st.name)
            else:
                log.warning("%s is not in the states table; querying it without aliases", sel)
                st = State(sel, sel, kind="", aliases=())
        elif sel.casefold() in by_name:
            st = by_name[sel.casefold()]
        else:
            known = ", ".join(s.name for s in table)
            raise ValueError(f"unknown state {sel!r}: give a QID (Q…) or one of: {known}")
        if st not in out:
            out.append(st)
    return out
