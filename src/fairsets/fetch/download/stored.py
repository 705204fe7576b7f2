"""Reading stored images back: the tar index of a shard and :func:`read_image`."""

from __future__ import annotations

import functools
import os
import tarfile
from pathlib import Path
from typing import Any


@functools.lru_cache(maxsize=64)
def _tar_index_cached(path: str, _mtime_ns: int, _size: int) -> dict[str, tuple[int, int]]:
    with tarfile.open(path, "r:") as tf:
        return {m.name: (m.offset_data, m.size) for m in tf if m.isfile()}


def _tar_index(path: Path) -> dict[str, tuple[int, int]]:
    """``{member name: (data offset, size)}`` of a tar, cached per process by (path, mtime, size)."""
    st = path.stat()
    return _tar_index_cached(str(path), st.st_mtime_ns, st.st_size)


def _read_member(path: Path, offset: int, size: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(size)
    if len(data) != size:
        raise OSError(f"{path}: truncated member at offset {offset}")
    return data


def read_image(out_dir: str | os.PathLike[str], status_row: dict[str, Any]) -> bytes:
    """Return the stored image bytes of one ``ok`` status row.

    Args:
        out_dir: the ``out_dir`` given to :func:`download_urls`.
        status_row: a row returned by :func:`download_urls` (or read from ``status.parquet``).

    Returns:
        The image bytes.

    Raises:
        ValueError: if the row is not ``ok`` or its shard path leaves ``out_dir``.
        KeyError: if the member is not in the shard.
    """
    if status_row.get("status") != "ok" or not status_row.get("shard") or not status_row.get("member"):
        raise ValueError(
            f"sample {status_row.get('key')!r} has no stored image (status {status_row.get('status')})"
        )
    root = Path(out_dir).resolve()
    tar_path = (root / status_row["shard"]).resolve()
    if root not in tar_path.parents:
        raise ValueError(f"shard {status_row['shard']!r} is outside {root}")
    index = _tar_index(tar_path)
    member = status_row["member"]
    if member not in index:
        raise KeyError(f"{member} not in {status_row['shard']}")
    return _read_member(tar_path, *index[member])
