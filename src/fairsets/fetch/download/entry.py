"""The public entry point: :func:`download_urls` (validate the rows, resume the rounds, start a new one)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fairsets.core.keys import unsafe_key_chars
from fairsets.core.tables import write_table

from ..guard import FetchPolicy
from ..guard.hosts import HostTotals, write_host_totals
from .layout import STATUS_SCHEMA, _list_rounds, _round_name, _write_input
from .rounds import _load_round, unblocked

log = logging.getLogger("fairsets.fetch.download")  # one logger for the whole package

#: The requests of the last call per host (``write_host_totals``), beside ``status.parquet``.
HOSTS_FILE = "hosts.json"


def _validate(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    seen: dict[str, int] = {}
    dups: list[int] = []
    out = []
    for i, r in enumerate(rows):
        key, url = r.get("key"), r.get("url")
        if not isinstance(key, str) or not key or "." in key:
            raise ValueError(f"row {i}: key must be a non-empty string without dots")
        unsafe = unsafe_key_chars(key)
        if unsafe is not None:
            raise ValueError(f"row {i}: the key holds {unsafe}; give keys of visible characters")
        if not isinstance(url, str):
            raise ValueError(f"row {i}: url must be a string")
        if key in seen:
            dups.append(i)
        seen.setdefault(key, i)
        out.append({"key": key, "url": url})
    if dups:
        raise ValueError(f"{len(dups)} duplicate keys in the input (first at rows {dups[:5]})")
    return out


def download_urls(
    rows: list[dict[str, Any]],
    out_dir: str | os.PathLike[str],
    policy: FetchPolicy,
    *,
    processes: int = 1,
    threads: int = 16,
    shard_size: int = 1000,
    retry_failed: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Download ``rows`` into WebDataset shards under ``out_dir``, resumably, behind the guard.

    Args:
        rows: dicts with ``key`` (unique, dot-free) and ``url``; other fields are ignored.
        out_dir: output folder (``round-NNN/`` folders and ``status.parquet``).
        policy: the fetch policy (addresses, byte cap, timeout, deadline and minimum rate per
            download, redirects, opt-out directives).
        processes: worker processes (spawned); 0 runs the shards in this process, one by one.
        threads: download threads per shard.
        shard_size: samples per shard of a *new* round (a resumed round keeps its own).
        retry_failed: download again, in a new round, the keys whose latest status is ``failed``.
            Keys refused for an address that ``policy`` allows (the refusal names the flag) are
            downloaded again in any case.
        progress: ``progress(done, total)`` with sample counts of the round, when its download
            starts (the samples of shards done before) and after each shard.

    Returns:
        One row per input key, in input order: ``key, url, status, error, round, shard, member,
        bytes, sha256`` (latest round wins); also written to ``out_dir/status.parquet``. The
        requests of this call per host are written to ``out_dir/hosts.json``.

    Raises:
        ValueError: on duplicate or malformed keys, non-string URLs, or bad arguments.
    """
    if processes < 0 or threads < 1 or shard_size < 1:
        raise ValueError("processes must be >= 0, threads and shard_size >= 1")
    todo_rows = _validate(rows)
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    hosts: dict[str, HostTotals] = {}
    run_args: dict[str, Any] = {
        "processes": processes,
        "threads": threads,
        "progress": progress,
        "hosts": hosts,
    }

    latest: dict[str, dict[str, Any]] = {}
    rounds = _list_rounds(root)
    for idx, round_dir in rounds:
        for r in _load_round(root, idx, round_dir, policy, **run_args):
            latest[r["key"]] = r

    todo = []
    for r in todo_rows:
        prev = latest.get(r["key"])
        if (
            prev is None
            or prev["url"] != r["url"]
            or (retry_failed and prev["status"] == "failed")
            or unblocked(prev, policy)  # refused by an earlier policy, allowed by this one
        ):
            todo.append(r)
    if todo:
        idx = rounds[-1][0] + 1 if rounds else 0
        round_dir = root / _round_name(idx)
        round_dir.mkdir(exist_ok=True)
        _write_input(round_dir, todo, shard_size)
        log.info("%s: %d samples to download", round_dir.name, len(todo))
        for r in _load_round(root, idx, round_dir, policy, **run_args):
            latest[r["key"]] = r

    result = [latest[r["key"]] for r in todo_rows]
    write_table(root / "status.parquet", result, schema=STATUS_SCHEMA)
    write_host_totals(root / HOSTS_FILE, policy, hosts)
    return result
