"""Driver-side duplicate detection over the hashes the ``decode`` step annotates.

Not a step: duplicates can only be found across samples, after the per-sample phase.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["find_duplicates", "popcount64"]

_LUT = np.array([bin(i).count("1") for i in range(256)], np.uint8)


def popcount64(x: np.ndarray) -> np.ndarray:
    """Number of set bits of each element of a ``uint64`` array (``np.bitwise_count`` if available)."""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(x)
    x = np.ascontiguousarray(x, np.uint64)
    return _LUT[x.view(np.uint8)].reshape(*x.shape, 8).sum(axis=-1, dtype=np.uint8)


def _sort_key(row: dict[str, Any]) -> tuple[bool, Any, str]:
    prio = row.get("priority")
    return (prio is None, prio if prio is not None else 0, str(row["key"]))


def find_duplicates(rows: Sequence[dict[str, Any]], hamming: int = 6) -> list[dict[str, Any]]:
    """Find exact and near duplicates among rows of image hashes.

    Rows are processed in ``(priority, key)`` order (rows without a priority last), so the result
    does not depend on the input order. A row is an *exact* duplicate if its ``pixel_sha256``
    equals that of an earlier kept row, else a *near* duplicate if its ``phash`` is within
    ``hamming`` bits of an earlier kept row's (the closest one, the earliest on ties). Otherwise
    it is kept. A row whose hash is missing (``None``) skips that test.

    Args:
        rows: dicts with ``key``, ``pixel_sha256`` (hex), ``phash`` (16 hex chars) and optionally
            ``priority`` (lower is kept first, e.g. a negative resolution or a source rank).
        hamming: largest Hamming distance (bits of 64) still counted as a near duplicate.

    Returns:
        One dict per rejected row, in processing order:
        ``{"key", "kept_key", "kind": "exact" | "near", "distance"}``.
    """
    order = sorted(rows, key=_sort_key)
    n = len(order)
    kept_hash = np.empty(n, np.uint64)
    kept_keys: list[Any] = []
    by_sha: dict[str, Any] = {}
    out: list[dict[str, Any]] = []
    for row in order:
        key, sha, ph = row["key"], row.get("pixel_sha256"), row.get("phash")
        if sha is not None and sha in by_sha:
            out.append({"key": key, "kept_key": by_sha[sha], "kind": "exact", "distance": 0})
            continue
        value = np.uint64(int(ph, 16)) if ph is not None else None
        m = len(kept_keys)
        if value is not None and m:
            dist = popcount64(np.bitwise_xor(kept_hash[:m], value))
            j = int(np.argmin(dist))
            if int(dist[j]) <= hamming:
                out.append({"key": key, "kept_key": kept_keys[j], "kind": "near", "distance": int(dist[j])})
                continue
        if sha is not None:
            by_sha[sha] = key
        if value is not None:
            kept_hash[m] = value
            kept_keys.append(key)
    return out
