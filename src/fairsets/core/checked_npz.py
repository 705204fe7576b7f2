"""Deterministic, pickle-free ``.npz`` files with a JSON header and per-array sha256.

Fitted artefacts (debias transforms, entity-presence classifiers) are float64 arrays plus a
JSON header. :func:`write_checked_npz` writes them atomically with fixed zip timestamps, so the
same content gives the same bytes; :func:`read_checked_npz` checks the format tag, that every
member is there and readable, the dtype of every array and its sha256 against the header.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["array_sha256", "read_checked_npz", "write_checked_npz"]

_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def array_sha256(arr: np.ndarray) -> str:
    """sha256 of an array's little-endian float64 bytes."""
    return hashlib.sha256(np.ascontiguousarray(arr, dtype="<f8").tobytes()).hexdigest()


def write_checked_npz(
    path: str | os.PathLike[str], header: Mapping[str, Any], arrays: Mapping[str, Any]
) -> Path:
    """Write ``header`` (as a JSON string member) and ``arrays`` to ``path``; returns the path."""
    from fairsets.core.atomic import atomic_path

    text = json.dumps(dict(header), sort_keys=True, allow_nan=False)
    members = {"header": np.array(text), **arrays}
    target = Path(path)
    with atomic_path(target) as tmp, open(tmp, "wb") as f, zipfile.ZipFile(f, "w") as zf:
        for name, arr in members.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_DATE)
            with zf.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(arr), allow_pickle=False)
    return target


def read_checked_npz(
    path: Path, fmt: str, names: Sequence[str], what: str
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read and verify a file written by :func:`write_checked_npz`.

    Args:
        path: The file (its existence is the caller's check).
        fmt: The ``format`` the header must carry.
        names: The float64 arrays the file must hold.
        what: The start of error messages about a file that is not of this kind.

    Returns:
        The header and the arrays.

    Raises:
        ValueError: Not such a file (``what: …``), or corrupt or modified (``path: corrupt or modified: …``).
    """
    try:
        npz = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        if "pickled" in str(e):  # numpy's hint to load it unsafely is not one to give
            raise ValueError(f"{what}: not an .npz archive (pickled objects are never loaded)") from e
        raise ValueError(f"{what}: {e}") from e
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise ValueError(f"{what}: it holds a single array, not an archive")
    with npz:
        missing = [n for n in ("header", *names) if n not in npz.files]
        if missing:
            raise ValueError(f"{what}: missing member(s) {missing}")
        try:
            raw = npz["header"]
            arrays = {name: npz[name] for name in names}
        except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError) as e:
            raise ValueError(f"{what}: unreadable member ({e})") from e
    if raw.shape != () or raw.dtype.kind != "U":
        raise ValueError(f"{what}: 'header' is not a JSON string")
    try:
        header = json.loads(str(raw[()]))
    except json.JSONDecodeError as e:
        raise ValueError(f"{what}: header is not valid JSON ({e})") from e
    if not isinstance(header, dict) or header.get("format") != fmt:
        got = header.get("format") if isinstance(header, dict) else None
        raise ValueError(f"{what}: header format is {got!r}")
    sums = header.get("sha256")
    if not isinstance(sums, dict):
        raise ValueError(f"{what}: header has no sha256 table")
    for name, arr in arrays.items():
        if arr.dtype != np.dtype("<f8"):
            raise ValueError(f"{path}: corrupt or modified: array {name!r} is {arr.dtype}, not float64")
        if array_sha256(arr) != sums.get(name):
            raise ValueError(
                f"{path}: corrupt or modified: sha256 of array {name!r} does not match the header"
            )
    return header, arrays
