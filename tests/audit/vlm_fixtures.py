"""Shared helpers for the audit tests: a random-weight CLIP (built once) and dataset surgery."""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fairsets.audit.dataset import sha256_bytes


class CountingVLM:
    """Delegates to a real model and counts the images it embeds (to observe the cache)."""

    def __init__(self, vlm, fail_after: int | None = None) -> None:
        self._vlm = vlm
        self.images_embedded = 0
        self.fail_after = fail_after

    def __getattr__(self, name):
        return getattr(self._vlm, name)

    def embed_images(self, images):
        if self.fail_after is not None and self.images_embedded >= self.fail_after:
            raise KeyboardInterrupt("interrupted on purpose")
        self.images_embedded += len(images)
        return self._vlm.embed_images(images)


def copy_dataset(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".fairsets"))
    return dst


def damage_image(dataset: Path, variant: str, split: str, key: str) -> None:
    """Truncate one image inside its shard and record the new bytes' sha256 in the metadata."""
    rewrite_image(dataset, variant, split, key, lambda data: data[: len(data) // 3])


def flip_image(dataset: Path, variant: str, split: str, key: str) -> None:
    """Replace one image by its mirror image (a valid, different JPEG) and update the metadata."""
    from PIL import Image, ImageOps

    def flip(data: bytes) -> bytes:
        out = io.BytesIO()
        ImageOps.mirror(Image.open(io.BytesIO(data)).convert("RGB")).save(out, "JPEG", quality=90)
        return out.getvalue()

    rewrite_image(dataset, variant, split, key, flip)


def rewrite_image(dataset: Path, variant: str, split: str, key: str, change) -> None:
    """Replace one image's bytes by ``change(bytes)`` in its shard and its sha256 in the metadata."""
    shard = sorted((dataset / "shards" / variant).glob(f"{split}-*.tar"))[0]
    members = []
    with tarfile.open(shard) as tar:
        for m in tar.getmembers():
            members.append((m, tar.extractfile(m).read()))
    bad = b""
    with tarfile.open(shard, "w") as tar:
        for m, data in members:
            if m.name == f"{key}.jpg":
                data = bad = change(data)
                m.size = len(data)
            tar.addfile(m, io.BytesIO(data))
    table_path = dataset / "metadata" / variant / f"{split}.parquet"
    rows = pq.read_table(table_path).to_pylist()
    for r in rows:
        if r["key"] == key:
            r["sha256"] = sha256_bytes(bad)
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(table_path)), table_path)


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)
