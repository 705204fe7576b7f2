"""``fairsets remove``: record a removal request against a built folder (see :mod:`.removals`).

:func:`record_removal` checks every selector against what the folder published (its metadata
tables and ``rejects.parquet``), so a typo is an error rather than a request that removes nothing;
then it appends the request — hashes, the reason, the cells it touches — to the deny list.
Nothing is rebuilt here: the next ``fairsets build`` applies the request.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any

from .removal_summary import default_variant, real_per_cell, row_cell
from .removals import KINDS, RemovalError, append_records, deny_path, read_deny_list, value_hash

__all__ = ["FROM_KINDS", "MAX_REASON_CHARS", "parse_selector_file", "record_removal"]

#: Longest reason, in characters (it is published in the card and CHANGELOG.md).
MAX_REASON_CHARS = 300
#: The kinds a ``--from`` file's lines may name (the command's option names).
FROM_KINDS = {"key": "key", "source-url": "source_url", "identity": "identity"}


def parse_selector_file(path: str | Path) -> list[tuple[str, str]]:
    """Selectors from a file: one ``KIND VALUE`` a line (``key``, ``source-url`` or ``identity``,
    whitespace, the value); blank lines and lines starting with ``#`` are skipped."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RemovalError(f"{path}: cannot be read ({exc}); give a UTF-8 text file") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        kind, _, value = line.partition(" ")
        if kind not in FROM_KINDS or not value.strip():
            raise RemovalError(
                f"{path}: line {n} is not 'KIND VALUE' (KIND: {', '.join(FROM_KINDS)}); fix that line"
            )
        out.append((FROM_KINDS[kind], value.strip()))
    return out


def _published_rows(out: Path, manifest: dict[str, Any], columns: set[str]) -> list[dict[str, Any]]:
    """The rows of every published metadata table and of ``rejects.parquet`` (the columns asked for)."""
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    names = [f for f in manifest.get("files", {}) if f.startswith("metadata/") and f.endswith(".parquet")]
    for name in [*sorted(names), "rejects.parquet"]:
        path = out / name
        if not path.is_file():
            continue
        table = pq.read_table(path)
        keep = [c for c in table.column_names if c in columns]
        for r in table.select(keep).to_pylist():
            rows.append({**r, "_rejected": name == "rejects.parquet"})
    return rows


def record_removal(
    out: str | Path, selectors: list[tuple[str, str]], reason: str, *, now: dt.datetime | None = None
) -> dict[str, Any]:
    """Append one removal request to ``OUT``'s deny list; return it with ``published``: per cell,
    how many real images of the default variant it takes out.

    Raises :class:`RemovalError` (not a build folder, an empty reason, nothing selected, a value
    the folder does not know) and ``LayoutBusy`` (a build is running there).
    """
    from fairsets.core.atomic import layout_lock

    out = Path(out)
    reason = " ".join(str(reason or "").split())
    if not reason:
        raise RemovalError("the reason is empty; say why, e.g. --reason 'consent withdrawn'")
    if len(reason) > MAX_REASON_CHARS:
        raise RemovalError(f"the reason is longer than {MAX_REASON_CHARS} characters; shorten it")
    if not selectors:
        raise RemovalError("nothing selected; give --key, --source-url, --identity or --from FILE")
    try:
        manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
        recipe = manifest["recipe"]
        groups, variants = list(recipe["groups"]), list(recipe["variants"])
    except (OSError, ValueError, KeyError, TypeError):
        raise RemovalError(
            f"{out}: not a built dataset (no readable manifest.json); give the --out folder of fairsets build"
        ) from None
    ident_col = recipe.get("identity_column") or "identity"
    variant = default_variant(variants)
    rows = _published_rows(
        out, manifest, {"key", "augmented_from", "variant", "source_url", "url", ident_col, *groups}
    )
    columns = {
        "key": ("key", "augmented_from"),
        "source_url": ("source_url", "url"),
        "identity": (ident_col,),
    }
    hashed: list[dict[str, str]] = []
    matched: dict[str, set[str]] = {}
    for kind, value in selectors:
        if kind not in KINDS:
            raise RemovalError(f"unknown selector kind {kind!r}; use one of {', '.join(KINDS)}")
        h = value_hash(value)
        hits = [r for r in rows if any(r.get(c) is not None and value_hash(r[c]) == h for c in columns[kind])]
        if not hits:
            shown = value if len(value) <= 80 else value[:77] + "..."
            raise RemovalError(
                f"unknown {kind.replace('_', ' ')} {shown!r}: no published sample or reject of {out} has it; "
                "check the value against the metadata tables"
            )
        if kind == "key":  # an augmented copy's key selects the real image it was made from
            h = value_hash(hits[0].get("augmented_from") or hits[0]["key"])
        hashed.append({"kind": kind, "sha256": h})
        for r in hits:
            if r["_rejected"] or r.get("variant") != variant:
                continue
            real = r.get("augmented_from") or r["key"]
            matched.setdefault(row_cell(r, groups), set()).add(value_hash(real))
    # the real images of the matched persons / URLs (all of an identity's images, not only the hit rows)
    selected = {(s["kind"], s["sha256"]) for s in hashed}
    for r in rows:
        if r["_rejected"] or r.get("variant") != variant or r.get("augmented_from"):
            continue
        mine = {("key", value_hash(r["key"]))}
        mine |= {("source_url", value_hash(r[c])) for c in ("source_url", "url") if r.get(c)}
        if r.get(ident_col) is not None:
            mine.add(("identity", value_hash(r[ident_col])))
        if mine & selected:
            matched.setdefault(row_cell(r, groups), set()).add(value_hash(r["key"]))
    hashed = sorted({(s["kind"], s["sha256"]) for s in hashed})
    with layout_lock(out):
        path = deny_path(out)
        _, revisions = read_deny_list(path)
        revision = int((manifest.get("removals") or {}).get("revision") or 1)
        records: list[dict[str, Any]] = []
        if revision not in revisions:
            cells = real_per_cell(manifest.get("cells") or [], variant)
            records.append({"type": "revision", "revision": revision, "cells": cells})
        when = (now or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc)
        request = {
            "type": "request",
            "time": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "reason": reason,
            "selectors": [{"kind": k, "sha256": h} for k, h in hashed],
            "against": revision,
            "matched": {c: sorted(v) for c, v in sorted(matched.items())},
        }
        digest = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()
        request["id"] = f"r-{digest[:12]}"
        records.append(request)
        append_records(path, records)
    return {**request, "published": {c: len(v) for c, v in request["matched"].items()}}
