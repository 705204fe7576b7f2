"""A disk cache of raw responses, so a re-run does not re-query a service.

Entries are files named by the SHA-256 of their key (any JSON-serialisable value: endpoint,
query, parameters), written atomically. Secrets must never be part of a key's *content*; pass
them in headers, not in the key.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from fairsets.core.atomic import atomic_write_bytes

__all__ = ["DiskCache"]


class DiskCache:
    """``get(key) -> bytes | None`` and ``put(key, data)``; ``None`` folder disables caching."""

    def __init__(self, folder: str | Path | None, namespace: str = "") -> None:
        self.folder: Path | None = None
        if folder is not None:
            self.folder = Path(folder) / namespace if namespace else Path(folder)
        self.hits = 0
        self.misses = 0

    @staticmethod
    def digest(key: Any) -> str:
        text = key if isinstance(key, str) else json.dumps(key, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def path(self, key: Any) -> Path | None:
        if self.folder is None:
            return None
        d = self.digest(key)
        return self.folder / d[:2] / f"{d}.bin"

    def get(self, key: Any) -> bytes | None:
        p = self.path(key)
        if p is None or not p.is_file():
            self.misses += 1
            return None
        self.hits += 1
        return p.read_bytes()

    def put(self, key: Any, data: bytes) -> None:
        p = self.path(key)
        if p is None:
            return
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(p, data)
