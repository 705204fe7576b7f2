"""The Parquet output (:func:`fetch_to_parquet`) and ``fairsets fetch wikidata`` as a whole
(:func:`fetch_wikidata_cli`).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from ...fetch.retry import RetryPolicy
from .assign import assign_states
from .people import fetch_people
from .rows import _row_order
from .states import load_states, resolve_states
from .terms import (
    GENDERS,
    WIKIDATA_ENDPOINT,
)

#: Columns of the Parquet file written by :func:`fetch_to_parquet`, in order.
OUTPUT_SCHEMA = pa.schema(
    [
        pa.field("person", pa.string()),
        pa.field("label", pa.string()),
        pa.field("gender", pa.string()),
        pa.field("state", pa.string()),
        pa.field("state_name", pa.string()),
        pa.field("association", pa.string()),
        pa.field("primary", pa.bool_()),
        pa.field("image", pa.string()),
        pa.field("file", pa.string()),
        pa.field("associations", pa.string()),
    ]
)


def fetch_to_parquet(
    out: str | Path, rows: Sequence[dict[str, Any]], assigned: Sequence[dict[str, Any]]
) -> dict:
    """Write every association row with ``primary`` and ``associations`` columns, atomically.

    ``primary`` is true exactly on the rows :func:`assign_states` returned (the assigned state
    and winning association: one row per person and image), so ``WHERE primary`` gives the
    build's candidates and the other rows keep the full picture. Columns: :data:`OUTPUT_SCHEMA`.

    Returns:
        ``{"path", "sha256", "bytes", "rows"}`` (see :func:`fairsets.core.tables.write_table`).
    """
    from fairsets.core.tables import write_table

    chosen = {(r["person"], r["image"], r["state"], r["association"]) for r in assigned}
    pairs: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        pairs[r["person"]].add(f"{r['state']}:{r['association']}")
    table_rows = []
    for r in sorted(rows, key=_row_order):
        table_rows.append(
            {
                **{c: r.get(c) for c in OUTPUT_SCHEMA.names},
                "primary": (r["person"], r["image"], r["state"], r["association"]) in chosen,
                "associations": ";".join(sorted(pairs[r["person"]])),
            }
        )
    return write_table(out, table_rows, schema=OUTPUT_SCHEMA)


def fetch_wikidata_cli(
    out: str | Path,
    endpoint: str = WIKIDATA_ENDPOINT,
    states: Sequence[str] | None = None,
    genders: Sequence[str] | None = None,
    cache_dir: str | Path | None = None,
    states_file: str | Path | None = None,
    *,
    no_cache: bool = False,
    page_size: int = 5000,
    contact: str | None = None,
    policy: RetryPolicy | None = None,
    timeout: float = 65,
    progress: Callable[[int, int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """``fairsets fetch wikidata``: query, assign one state per person, write ``out`` (Parquet).

    Args:
        out: output Parquet path.
        endpoint: SPARQL endpoint.
        states: QIDs or names (see :func:`resolve_states`); default every unit of the table.
        genders: ``male``/``female``; default both.
        cache_dir: raw-response cache folder; default ``<out folder>/.wikidata-cache``.
        states_file: a CSV like ``builders/india_states.csv`` instead of the shipped one.
        no_cache: do not read or write any cache.
        page_size, contact, policy, timeout, progress, sleep: see :func:`fetch_people`.

    Returns:
        ``{"out", "sha256", "rows", "primary_rows", "people", "states", "genders", "pages",
        "requests", "cache_hits", "cache_dir", "per_state"}`` where ``per_state`` maps each
        queried QID to ``{"name", "people": {gender: n}}`` counted over the primary rows.
    """
    out = Path(out)
    table = load_states(states_file)
    chosen = resolve_states(states, table)
    genders = list(genders) if genders else list(GENDERS)
    if no_cache:
        cache: Path | None = None
    else:
        cache = Path(cache_dir) if cache_dir is not None else out.parent / ".wikidata-cache"
    stats: dict[str, int] = {}
    rows = fetch_people(
        chosen,
        genders,
        endpoint=endpoint,
        cache_dir=cache,
        page_size=page_size,
        policy=policy,
        contact=contact,
        timeout=timeout,
        progress=progress,
        sleep=sleep,
        stats=stats,
    )
    assigned = assign_states(rows)
    written = fetch_to_parquet(out, rows, assigned)
    per_state: dict[str, dict[str, Any]] = {st.qid: {"name": st.name, "people": {}} for st in chosen}
    seen: set[str] = set()
    for r in assigned:
        if r["person"] in seen:
            continue
        seen.add(r["person"])
        counter = per_state[r["state"]]["people"]
        counter[r["gender"]] = counter.get(r["gender"], 0) + 1
    return {
        "out": str(out),
        "sha256": written["sha256"],
        "rows": len(rows),
        "primary_rows": len(assigned),
        "people": len(seen),
        "states": [st.qid for st in chosen],
        "genders": genders,
        "cache_dir": str(cache) if cache is not None else None,
        **stats,
        "per_state": per_state,
    }
