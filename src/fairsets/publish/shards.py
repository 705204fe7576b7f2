"""WebDataset shards: deterministic tar files written with :class:`webdataset.TarWriter`.

A shard holds, per sample, ``{key}.jpg`` (the published JPEG bytes, unchanged) and ``{key}.json``
(its metadata, ``json.dumps(sort_keys=True, ensure_ascii=False, separators=(",", ":"))``, UTF-8).
Samples appear in the order given; within a sample TarWriter writes members in sorted extension
order (``jpg`` before ``json``).

Type-stable JSON: ``datasets.load_dataset("webdataset", ...)`` (and the Hub viewer) infers one
schema for ``json`` from the first 5 samples of one shard and then fails on any later sample
whose field types differ: a field that is ``null`` in those 5 samples cannot later hold a string
("Couldn't cast array of type string to null", datasets 5.2.0), and a nested dict whose keys vary
(``augmentation``) cannot be cast either. So, by default (:func:`shard_json`), top-level ``None``
values are written as ``""`` and top-level dict values as JSON strings (sorted keys) — the same
encoding the metadata Parquet uses for dicts. Numeric fields must therefore never be null.
The Parquet tables keep real nulls; pass ``null=None`` to keep nulls in the JSON too.

Determinism: TarWriter is given a fixed ``mtime`` (:data:`SHARD_MTIME`), fixed ``uname``/``gname``
(``fairsets``), fixed mode ``0o644``; uid/gid stay 0 (tarfile's default) and the format is USTAR,
so identical records give byte-identical shards. A shard is written to a temporary file and
renamed into place (:func:`fairsets.core.atomic.atomic_path`).

API:
    * ``shard_name(variant, split, index) -> str`` — ``"shards/{variant}/{split}-{index:05d}.tar"``
    * ``shard_json(meta, null="") -> dict`` — the type-stable form written to ``{key}.json``.
    * ``write_shard(path, records, *, mtime=SHARD_MTIME, null="") -> dict`` with
      ``{"path": str, "sha256": str, "bytes": int, "count": int}``; ``records`` yields
      ``(key, jpeg_bytes, metadata_dict)``.
    * ``write_shards(out_dir, variant, split, records, *, max_count=10000, max_bytes=1e9,
      null="") -> list[dict]`` — splits ``records`` over consecutive shards ``shard_name(...)`` under
      ``out_dir``; each result's ``"path"`` is relative to ``out_dir`` (POSIX separators).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from fairsets.core import light_import
from fairsets.core.atomic import atomic_path, sha256_file
from fairsets.core.data import validate_key

__all__ = ["SHARD_MTIME", "encode_json", "shard_json", "shard_name", "write_shard", "write_shards"]

#: Fixed member mtime: 2000-01-01T00:00:00Z (0 would make GNU tar warn "implausibly old time stamp").
SHARD_MTIME = 946_684_800
_OWNER = "fairsets"
_MODE = 0o644
_SPLIT_RE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")

Record = tuple[str, bytes, dict[str, Any]]


def _check_part(kind: str, value: str) -> str:
    if not value or not set(value) <= _SPLIT_RE_CHARS:
        raise ValueError(f"illegal {kind} name {value!r}: use lowercase letters, digits and '_'")
    return value


def shard_name(variant: str, split: str, index: int) -> str:
    """Return the relative path of shard ``index`` of ``variant``/``split``.

    >>> shard_name("balanced", "train", 3)
    'shards/balanced/train-00003.tar'
    """
    if index < 0 or index > 99_999:
        raise ValueError(f"shard index {index} out of range 0..99999")
    return f"shards/{_check_part('variant', variant)}/{_check_part('split', split)}-{index:05d}.tar"


def shard_json(meta: dict[str, Any], null: str | None = "") -> dict[str, Any]:
    """Return the type-stable form of ``meta`` for ``{key}.json`` (see module docstring).

    Top-level ``None`` values are replaced by the ``null`` argument (default ``""``; pass None to
    keep them) and top-level dicts become compact JSON strings with sorted keys; everything else
    is unchanged.
    """
    out: dict[str, Any] = {}
    for k, v in meta.items():
        if v is None:
            out[k] = null
        elif isinstance(v, dict):
            out[k] = json.dumps(v, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        else:
            out[k] = v
    return out


def encode_json(meta: dict[str, Any]) -> bytes:
    """Encode per-sample metadata deterministically (sorted keys, compact, UTF-8)."""
    return json.dumps(
        meta, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    ).encode()


def _tar_writer() -> type:
    """:class:`webdataset.writer.TarWriter`, loaded without webdataset's package ``__init__``.

    ``import webdataset`` (and so ``import webdataset.writer``) runs the package ``__init__``, which
    imports every submodule and with them PyTorch: 1-2 s of CPU and ~300 MB in every process that
    writes a shard, though writing a tar file needs none of it. :mod:`fairsets.core.light_import`
    loads ``webdataset.writer`` alone (the same code); where it cannot, or webdataset was already
    imported, it is imported as usual.
    """
    light_import.light_packages("webdataset")
    return light_import.light_module("webdataset.writer").TarWriter


def write_shard(
    path: str | os.PathLike[str],
    records: Iterable[Record],
    *,
    mtime: int = SHARD_MTIME,
    null: str | None = "",
) -> dict[str, Any]:
    """Write one WebDataset shard atomically with :class:`webdataset.TarWriter`.

    Args:
        path: destination ``.tar`` path (parents are created).
        records: ``(key, jpeg_bytes, metadata)`` triples; keys must pass
            :func:`fairsets.core.data.validate_key` and be unique within the shard.
        mtime: member modification time (keep the default for reproducible shards).
        null: what top-level ``None`` values become in the JSON (None keeps JSON nulls); see
            :func:`shard_json`.

    Returns:
        ``{"path": str(path), "sha256": hex digest, "bytes": file size, "count": samples}``.

    Raises:
        ValueError: on an illegal or duplicate key, non-bytes image data, or metadata that is not
            JSON-serialisable. Nothing is left at ``path`` (nor a temporary file) on error.
    """
    TarWriter = _tar_writer()

    target = Path(path)
    seen: set[str] = set()
    count = 0
    with atomic_path(target) as tmp:
        with open(tmp, "wb") as f:
            writer = TarWriter(f, user=_OWNER, group=_OWNER, mode=_MODE, mtime=mtime, encoder=False)
            try:
                for key, jpeg, meta in records:
                    validate_key(key)
                    if key in seen:
                        raise ValueError(f"duplicate sample key {key!r} in shard {target}")
                    seen.add(key)
                    if not isinstance(jpeg, (bytes, bytearray, memoryview)):
                        raise ValueError(
                            f"sample {key!r}: image must be encoded bytes, got {type(jpeg).__name__}"
                        )
                    if not isinstance(meta, dict):
                        raise ValueError(
                            f"sample {key!r}: metadata must be a dict, got {type(meta).__name__}"
                        )
                    try:
                        meta_bytes = encode_json(shard_json(meta, null))
                    except (TypeError, ValueError) as e:
                        raise ValueError(f"sample {key!r}: metadata is not JSON-serialisable: {e}") from e
                    writer.write({"__key__": key, "jpg": bytes(jpeg), "json": meta_bytes})
                    count += 1
            finally:
                writer.close()
        digest = sha256_file(tmp)
        size = tmp.stat().st_size
    return {"path": str(target), "sha256": digest, "bytes": size, "count": count}


def _chunks(records: Iterable[Record], max_count: int, max_bytes: float) -> Iterator[list[Record]]:
    chunk: list[Record] = []
    size = 0
    for rec in records:
        rec_size = len(rec[1]) + 1024  # image + json/header overhead estimate
        if chunk and (len(chunk) >= max_count or size + rec_size > max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(rec)
        size += rec_size
    if chunk:
        yield chunk


def write_shards(
    out_dir: str | os.PathLike[str],
    variant: str,
    split: str,
    records: Iterable[Record],
    *,
    max_count: int = 10_000,
    max_bytes: float = 1e9,
    mtime: int = SHARD_MTIME,
    null: str | None = "",
) -> list[dict[str, Any]]:
    """Write ``records`` as consecutive shards ``shards/{variant}/{split}-NNNNN.tar`` under ``out_dir``.

    A shard is closed when it holds ``max_count`` samples or adding the next sample would exceed
    about ``max_bytes``. Keys must be unique across the split (checked). An empty ``records``
    writes no shard and returns ``[]``.

    Returns:
        One :func:`write_shard` result per shard, with ``"path"`` relative to ``out_dir``.
    """
    if max_count < 1:
        raise ValueError("max_count must be >= 1")
    root = Path(out_dir)
    seen: set[str] = set()

    def unique(chunk: list[Record]) -> Iterator[Record]:
        for rec in chunk:
            if rec[0] in seen:
                raise ValueError(f"duplicate sample key {rec[0]!r} in {variant}/{split}")
            seen.add(rec[0])
            yield rec

    results = []
    for index, chunk in enumerate(_chunks(records, max_count, max_bytes)):
        rel = shard_name(variant, split, index)
        info = write_shard(root / rel, unique(chunk), mtime=mtime, null=null)
        info["path"] = rel
        results.append(info)
    return results
