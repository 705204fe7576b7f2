"""A disk cache of raw responses, so a re-run does not re-query a service.

Entries are files named by the SHA-256 of their key (any JSON-serialisable value: endpoint,
query, parameters), written atomically: fsynced by default; with ``synced=False`` only renamed
into place (a killed process leaves no partial entry, a power loss may leave an empty one, which a
reader must take as a miss: the chat client's answers, written hundreds per second). Secrets must
never be part of a key's *content*; pass them in headers, not in the key.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from fairsets.core.atomic import atomic_write_bytes, replace_unsynced

__all__ = ["DiskCache"]


class DiskCache:
    """``get(key) -> bytes | None`` and ``put(key, data)``; ``None`` folder disables caching."""

    def __init__(self, folder: str | Path | None, namespace: str = "", *, synced: bool = True) -> None:
        self.folder: Path | None = None
        self.synced = synced
        self._made: set[Path] = set()
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
        try:
            if p is None:
                raise FileNotFoundError
            data = p.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            self.misses += 1
            return None
        self.hits += 1
        return data

    def put(self, key: Any, data: bytes) -> None:
        p = self.path(key)
        if p is None:
            return
        if p.parent not in self._made:
            p.parent.mkdir(parents=True, exist_ok=True)
            self._made.add(p.parent)
        if self.synced:
            atomic_write_bytes(p, data)
        else:
            replace_unsynced(p, data)
