"""Where a shard's images came from, as recorded: the resize that made them and the original's facts.

:func:`shard_origin` reads the record a ``fairsets download`` leaves beside its shards
(``.fairsets/listing.json``: ``resize_mode``, ``image_size``, ``original_hash``); the annotation
manifest keeps it per shard (``originals``) and every image row its resize mode and size
(:data:`fairsets.annotate.layout.IMAGE_SCHEMA`). :func:`original_facts` reads one sample's
``original_width``, ``original_height`` and, where the record says img2dataset hashed the served
bytes, ``original_sha256`` from its json sidecar. Nothing here is guessed: a tar without the
record has ``resize_mode`` null (unknown), a listing of local files is its own original
(``resize_mode`` ``no``). How boxes map back: :mod:`fairsets.annotate.publish.originals`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .records import ShardRef

__all__ = ["RECORDED_MODES", "original_facts", "shard_origin"]

#: The resize modes of ``fairsets download`` (``fairsets.fetch.download.RESIZE_MODES``; not imported:
#: that package loads img2dataset).
RECORDED_MODES = ("no", "keep_ratio", "center_crop")
#: The download record beside the shards (``fairsets.fetch.shards``' ``.fairsets/listing.json``).
_RECORD = Path(".fairsets") / "listing.json"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_MAX_RECORD_BYTES = 1_000_000


def _unknown(recorded_by: str | None) -> dict[str, Any]:
    return {"resize_mode": None, "image_size": None, "original_hash": None, "recorded_by": recorded_by}


def shard_origin(ref: ShardRef) -> dict[str, Any]:
    """``{"resize_mode", "image_size", "original_hash", "recorded_by"}`` of one shard.

    * a tar in a ``fairsets download`` folder: the record's mode and size (``image_size`` null for
      ``no``), ``original_hash`` ``sha256`` when the download hashed the served bytes (earlier
      downloads did not: null), ``recorded_by`` ``fairsets download``;
    * a listing of local image files: ``no``, ``recorded_by`` ``local files`` (the files are the
      originals);
    * anything else (a tar from elsewhere, a published dataset, an unreadable record): every field
      null; the card says the boxes cannot be mapped to an original.
    """
    if ref.kind == "listing":
        return {"resize_mode": "no", "image_size": None, "original_hash": None, "recorded_by": "local files"}
    path = Path(ref.path).parent / _RECORD
    try:
        if not path.is_file() or path.stat().st_size > _MAX_RECORD_BYTES:
            return _unknown(None)
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return _unknown(None)
    if not isinstance(record, dict):
        return _unknown(None)
    mode, size = record.get("resize_mode"), record.get("image_size")
    if mode not in RECORDED_MODES or (
        mode != "no" and (not isinstance(size, int) or isinstance(size, bool) or size < 1)
    ):
        return _unknown(None)
    hashed = record.get("original_hash")
    return {
        "resize_mode": mode,
        "image_size": size if mode != "no" else None,
        "original_hash": hashed if hashed == "sha256" else None,
        "recorded_by": "fairsets download",
    }


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    n = int(value)
    return n if 0 < n < 2**31 else None


def original_facts(meta: dict[str, Any], origin: dict[str, Any]) -> dict[str, Any]:
    """``original_width``, ``original_height`` and ``original_sha256`` of one sample (null where
    not recorded): img2dataset's sidecar values (the original as OpenCV decoded it, before any EXIF
    orientation), the hash only where ``origin`` says the download wrote it."""
    sha = meta.get("sha256") if origin.get("original_hash") == "sha256" else None
    return {
        "original_width": _positive_int(meta.get("original_width")),
        "original_height": _positive_int(meta.get("original_height")),
        "original_sha256": sha if isinstance(sha, str) and _HEX64.match(sha) else None,
    }
