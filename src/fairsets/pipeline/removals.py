"""Removal requests of a built dataset: the deny list, and the candidates it takes out of a build.

``fairsets remove OUT`` appends one *request* per call to ``OUT/.fairsets/removals.jsonl`` (the
work state, never published; it stays with the folder across rebuilds). A request holds:

* ``selectors``: what to remove, each a kind (``key``, ``source_url``, ``identity``) and the
  sha256 of the UTF-8 value — never the value itself, so the deny list holds no name, URL or key
  of the person removed;
* ``reason`` (free text written by the curator: why, never who), ``id`` and ``time`` (UTC);
* ``against``: the revision of the published folder the request was made against, and
  ``matched``: per cell, the sha256 of the keys of the real images of the default variant
  (``balanced`` when built) that the request took out of that revision.

Once per revision the file also holds a ``revision`` record: per cell, the number of real images
in the default variant of that revision (from its ``manifest.json``). With those two, what changed
between revisions is computed from the deny list alone (:mod:`.removal_summary`), so a rebuild is
byte-identical however often it runs.

The next ``fairsets build OUT`` leaves out every candidate a request selects *before* it is
downloaded or read (:func:`split_removed`): a removed candidate is in no shard, metadata table,
``rejects.parquet`` (which would name it) or attribution line; only counts per cell are published.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "DENY_FILE",
    "KINDS",
    "RemovalError",
    "append_records",
    "candidate_hashes",
    "read_deny_list",
    "split_removed",
    "value_hash",
]

#: The deny list, under the build folder's work state.
DENY_FILE = "removals.jsonl"
#: Selector kinds, and the row columns each is matched against (``identity``: the recipe's column).
KINDS = ("key", "source_url", "identity")
#: Columns a ``source_url`` selector is compared with (a source's own URL, or a listing's ``url``).
URL_COLUMNS = ("source_url", "url")


class RemovalError(ValueError):
    """A deny list or a request that cannot be used; the message says what to fix."""


def value_hash(value: Any) -> str:
    """sha256 (hex) of a value's text, UTF-8: what a selector stores instead of the value."""
    return hashlib.sha256(str(value).encode("utf-8")).hexdigest()


def deny_path(out: str | Path) -> Path:
    from .layout import WORKDIR

    return Path(out) / WORKDIR / DENY_FILE


def read_deny_list(path: str | Path) -> tuple[list[dict[str, Any]], dict[int, dict[str, int]]]:
    """The requests (in file order) and the revision snapshots (revision -> cell label -> real images).

    A missing file is an empty deny list. Raises :class:`RemovalError` naming the line of a record
    that is not one fairsets wrote.
    """
    path = Path(path)
    if not path.is_file():
        return [], {}
    requests: list[dict[str, Any]] = []
    revisions: dict[int, dict[str, int]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            kind = rec["type"]
            if kind == "revision":
                revisions[int(rec["revision"])] = {str(k): int(v) for k, v in rec["cells"].items()}
                continue
            if kind != "request":
                raise ValueError(kind)
            for s in rec["selectors"]:
                if s["kind"] not in KINDS or len(s["sha256"]) != 64:
                    raise ValueError(s)
            int(rec["against"])
            str(rec["reason"])
            dict(rec.get("matched") or {})
        except (ValueError, KeyError, TypeError, AttributeError):
            raise RemovalError(
                f"{path}: line {n} is not a removal record fairsets wrote; restore the file from a "
                "backup (it is the folder's deny list), or remove that line"
            ) from None
        requests.append(rec)
    return requests, revisions


def append_records(path: str | Path, records: Iterable[dict[str, Any]]) -> None:
    """Append records to the deny list, atomically (the old file and the new lines, or the old file)."""
    from fairsets.core.atomic import atomic_write_text

    path = Path(path)
    old = path.read_text(encoding="utf-8") if path.is_file() else ""
    if old and not old.endswith("\n"):
        old += "\n"
    new = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in records)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, old + new)


def candidate_hashes(row: dict[str, Any], identity_column: str) -> set[tuple[str, str]]:
    """The (kind, sha256) pairs a row can be selected by: its key, its URL (as listed and as
    published, without credentials), its identity."""
    from ..publish.attribution import redact_url

    out: set[tuple[str, str]] = set()
    if row.get("key") not in (None, ""):
        out.add(("key", value_hash(row["key"])))
    for col in URL_COLUMNS:
        url = row.get(col)
        if isinstance(url, str) and url:
            out.add(("source_url", value_hash(url)))
            out.add(("source_url", value_hash(redact_url(url))))
    ident = row.get(identity_column)
    if ident is not None and str(ident) != "" and not (isinstance(ident, float) and ident != ident):
        out.add(("identity", value_hash(ident)))
    return out


def split_removed(
    rows: list[dict[str, Any]], requests: list[dict[str, Any]], identity_column: str
) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], dict[str, Any]]]]:
    """Rows the deny list keeps, and the removed ones with the request that removed each.

    A row selected by several requests is counted once, for the earliest (lowest ``against``
    revision, then file order).
    """
    if not requests:
        return rows, []
    order = sorted(range(len(requests)), key=lambda i: (int(requests[i]["against"]), i))
    index: dict[tuple[str, str], int] = {}
    for rank, i in enumerate(order):
        for s in requests[i]["selectors"]:
            index.setdefault((s["kind"], s["sha256"]), rank)
    kept, removed = [], []
    for row in rows:
        ranks = [index[h] for h in candidate_hashes(row, identity_column) if h in index]
        if ranks:
            removed.append((row, requests[order[min(ranks)]]))
        else:
            kept.append(row)
    return kept, removed
