"""Sweeping everything a command wrote or printed for a secret: the whole key or any piece of it.

A piece is any run of :data:`PIECE` characters or more of the key (a clip can leave the start of a
key behind; a server can quote part of it). Files are read as bytes (UTF-8, also JSON-escaped),
and Parquet files also as the values of their columns, since a column's pages may be compressed::

    assert not leaks(SECRET, out_dir, cache_dir, text=captured.out + captured.err)
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["PIECE", "leaks"]

PIECE = 8


def _pieces(secret: str) -> set[str]:
    return {secret[i : i + PIECE] for i in range(len(secret) - PIECE + 1)}


def _texts(path: Path) -> list[str]:
    data = path.read_bytes()
    texts = [data.decode("utf-8", "replace")]
    if path.suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        texts.append(json.dumps(pq.read_table(path).to_pylist(), default=str, ensure_ascii=False))
    return texts


def leaks(secret: str, *folders: Path, text: str = "") -> list[str]:
    """Where a piece of ``secret`` shows: ``"path: piece"`` per file (and ``"text: piece"`` for
    ``text``), empty when none. Every file under each folder is read."""
    assert len(secret) >= 2 * PIECE, "use a key long enough for its pieces to mean something"
    pieces = _pieces(secret)
    escaped = {json.dumps(p)[1:-1] for p in pieces}
    found: list[str] = []
    sources: list[tuple[str, str]] = [("text", text)]
    for folder in folders:
        for path in sorted(Path(folder).rglob("*")):
            if path.is_file():
                sources += [(str(path), t) for t in _texts(path)]
    for name, body in sources:
        hit = next((p for p in pieces | escaped if p in body), None)
        if hit is not None:
            found.append(f"{name}: {hit}")
    return found
