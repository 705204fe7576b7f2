"""Embeddings of box crops, with any :mod:`fairsets.models` encoder.

:func:`embed_crops` turns RGB crops (from :func:`fairsets.annotate.images.crop`) into an
``(n, D)`` float32 array: each crop becomes a PIL image, the encoder's own ``preprocess`` resizes
and normalises it, and :meth:`~fairsets.models.VLM.embed_images` runs one forward pass per batch.
Embeddings are returned as the encoder gives them (not L2-normalised; a head normalises them
itself when it was trained that way).

:func:`embed_labelled` embeds the crops a LABELS file names (:mod:`fairsets.annotate.heads.labels`)
through a cache (:class:`fairsets.models.embedding_cache.EmbeddingCache`) keyed by the crop's id
``"{shard}/{key}/{box_id|image}"`` and the sha256 of its pixels. ``fairsets annotate train`` keeps
it in ``ANN/.fairsets/embeddings/{encoder slug}/`` (with ``--shards``: in
``{head folder}/.fairsets/embeddings/{encoder slug}/``, beside the head it writes), so a second
run, or a run with other split or classes, embeds nothing again.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fairsets.core.progress import Progress
from fairsets.models.embedding_cache import EmbeddingCache

from ..images import DEFAULT_MAX_BYTES, ImageRejected, crop, decode
from ..layout import AnnotationError, boxes_path
from ..shards import ShardRef, read_images
from .labels import LabelRow

if TYPE_CHECKING:
    from fairsets.models import VLM

__all__ = [
    "CropSource",
    "LabelledEmbeddings",
    "crop_cache",
    "crop_sha256",
    "embed_crops",
    "embed_labelled",
    "iter_crops",
]


def crop_sha256(crop: np.ndarray) -> str:
    """sha256 of a crop's pixels: its shape then its C-ordered uint8 bytes (the cache key's half)."""
    import hashlib

    arr = np.ascontiguousarray(crop, dtype=np.uint8)
    h = hashlib.sha256(("x".join(str(s) for s in arr.shape) + ";").encode("ascii"))
    h.update(arr.tobytes())
    return h.hexdigest()


def _pil(crop: np.ndarray) -> object:
    from PIL import Image

    arr = np.asarray(crop)
    if arr.dtype != np.uint8:
        raise ValueError(f"crops must be uint8 arrays, got {arr.dtype}")
    if arr.ndim == 2:
        arr = np.stack([arr] * 3, axis=-1)
    if arr.ndim != 3 or arr.shape[2] != 3 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"crops must be non-empty (H, W, 3) RGB arrays, got shape {arr.shape}")
    return Image.fromarray(np.ascontiguousarray(arr), mode="RGB")


def embed_crops(encoder: VLM, crops: Sequence[np.ndarray], *, batch_size: int = 32) -> np.ndarray:
    """Embed RGB crops with ``encoder``, ``batch_size`` crops per forward pass.

    Args:
        encoder: A loaded model (:func:`fairsets.models.load_vlm`).
        crops: ``(H, W, 3)`` uint8 RGB arrays (``(H, W)`` grey arrays are repeated to RGB).
        batch_size: Crops per forward pass (>= 1).

    Returns:
        ``(len(crops), encoder.embed_dim)`` float32, in the order given.

    Raises:
        ValueError: A crop that is not a non-empty uint8 image, or ``batch_size < 1``.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    images = [_pil(c) for c in crops]
    dim = int(encoder.embed_dim)
    if not images:
        return np.zeros((0, dim), np.float32)
    parts = [
        np.asarray(encoder.embed_images(images[i : i + batch_size]), dtype=np.float32)  # type: ignore[arg-type]
        for i in range(0, len(images), batch_size)
    ]
    out = np.concatenate(parts, axis=0)
    if out.shape != (len(images), dim):
        want = (len(images), dim)
        raise ValueError(f"{encoder!r} returned embeddings of shape {out.shape}, expected {want}")
    return out


@dataclass
class CropSource:
    """Where labelled crops come from: the shards by name and, with ``--ann``, the stored boxes.

    Attributes:
        shards: ``ShardRef`` by name (the manifest's ``inputs``, or :func:`resolve_shards`).
        ann: The annotation folder whose ``boxes/{shard}.parquet`` give ``box_id`` coordinates
            (None with ``--shards``: rows then need explicit ``x1, y1, x2, y2`` for boxes).
        max_bytes: Image byte cap (:data:`fairsets.annotate.images.DEFAULT_MAX_BYTES`).
    """

    shards: dict[str, ShardRef]
    ann: Path | None = None
    max_bytes: int = DEFAULT_MAX_BYTES

    def stored_boxes(self, shard: str) -> dict[tuple[str, int], tuple[float, float, float, float]] | None:
        """``{(key, box_id): box}`` of one shard's stored boxes; None when there are none to read."""
        if self.ann is None:
            return None
        import pyarrow.parquet as pq

        path = boxes_path(self.ann, shard)
        if not path.is_file():
            return None
        table = pq.read_table(path, columns=["key", "box_id", "x1", "y1", "x2", "y2"]).to_pydict()
        return {
            (k, int(b)): (float(x1), float(y1), float(x2), float(y2))
            for k, b, x1, y1, x2, y2 in zip(
                table["key"], table["box_id"], table["x1"], table["y1"], table["x2"], table["y2"], strict=True
            )
        }


def iter_crops(
    rows: Sequence[LabelRow], source: CropSource
) -> Iterator[tuple[LabelRow, np.ndarray | None, str]]:
    """The crop of every labelled row, shard by shard, or why there is none.

    The box of a row is its explicit ``x1..y2`` if it has them, else its stored box (``box_id``
    in ``ANN/boxes``), else the whole image (``box_id`` empty). Each shard is read once.

    Yields:
        ``(row, crop, "")`` for a usable row; ``(row, None, reason)`` otherwise (unknown shard, key
        or box, undecodable image, box outside the image).
    """
    by_shard: dict[str, list[LabelRow]] = {}
    for row in rows:
        by_shard.setdefault(row.shard, []).append(row)
    for shard in sorted(by_shard):
        todo = by_shard[shard]
        ref = source.shards.get(shard)
        if ref is None:
            known = ", ".join(sorted(source.shards)[:5]) + (", …" if len(source.shards) > 5 else "")
            for row in todo:
                yield row, None, f"unknown shard: {shard!r} is not an input (shards: {known})"
            continue
        stored = source.stored_boxes(shard)
        boxes: dict[str, tuple[float, float, float, float] | None] = {}
        pending: list[LabelRow] = []
        for row in todo:
            if row.box is not None or row.box_id is None:
                boxes[row.item] = row.box
            elif stored is None and source.ann is None:
                yield row, None, "unknown box: box_id without x1, y1, x2, y2 (no stored boxes with --shards)"
                continue
            elif stored is None:
                yield (
                    row,
                    None,
                    f"unknown box: no boxes/{shard}.parquet in {source.ann} (run annotate persons)",
                )
                continue
            elif (row.key, row.box_id) not in stored:
                yield (
                    row,
                    None,
                    f"unknown box: box {row.box_id} of {row.key!r} is not in boxes/{shard}.parquet",
                )
                continue
            else:
                boxes[row.item] = stored[(row.key, row.box_id)]
            pending.append(row)
        try:
            data = read_images(ref, {r.key for r in pending}, max_bytes=source.max_bytes)
        except (OSError, AnnotationError) as e:  # the shard went missing or unreadable since it was listed
            for row in pending:
                yield row, None, f"unreadable shard: {shard!r} ({e})"
            continue
        by_key: dict[str, list[LabelRow]] = {}
        for row in pending:
            by_key.setdefault(row.key, []).append(row)
        for key, key_rows in by_key.items():  # one decoded image in memory at a time
            if key not in data:
                for row in key_rows:
                    yield row, None, f"unknown key: {key!r} is not a readable image of shard {shard!r}"
                continue
            try:
                image = decode(data.pop(key), max_bytes=source.max_bytes)
            except ImageRejected as e:
                for row in key_rows:
                    yield row, None, f"undecodable image: {e}"
                continue
            for row in key_rows:
                box = boxes[row.item]
                try:
                    pixels = image if box is None else crop(image, box)
                except ValueError as e:
                    yield row, None, f"box outside image: {e}"
                    continue
                yield row, pixels, ""


@dataclass
class LabelledEmbeddings:
    """Embeddings of labelled crops, in the order of the rows given; unusable rows left out with a reason."""

    rows: list[LabelRow]
    vectors: np.ndarray  # (len(rows), D) float32
    rejected: list[dict[str, Any]] = field(default_factory=list)  # {"row", "item", "reason"}
    computed: int = 0  # crops embedded by this call (the others came from the cache)


def crop_cache(root: str | os.PathLike[str], encoder: VLM) -> EmbeddingCache:
    """The crop-embedding cache of ``encoder`` under ``root`` (``ANN/.fairsets/embeddings``)."""
    return EmbeddingCache.for_model(root, encoder)


def embed_labelled(
    encoder: VLM,
    rows: Sequence[LabelRow],
    source: CropSource,
    cache: EmbeddingCache,
    *,
    batch_size: int = 32,
    flush_every: int = 256,
    progress: Progress | None = None,
) -> LabelledEmbeddings:
    """Embed the crop of every labelled row, reusing and filling ``cache``.

    Cache rows are keyed by ``(item id, sha256 of the crop's pixels)`` (:func:`crop_sha256`), so a
    changed image or box is embedded again. New embeddings are flushed to the cache every
    ``flush_every`` crops, each part atomically: a killed run keeps what it finished.

    Returns:
        The usable rows with their embeddings, the rows left out with their reasons and how many
        crops were embedded in this call.
    """
    if flush_every < 1:
        raise ValueError(f"flush_every must be >= 1, got {flush_every}")
    progress = progress or Progress()
    cached = cache.load_images()
    vectors: dict[str, np.ndarray] = {}
    rejected: list[dict[str, Any]] = []
    batch: list[tuple[str, str, np.ndarray]] = []
    unsaved: list[tuple[str, str, np.ndarray]] = []
    computed = 0

    def run_batch() -> None:
        nonlocal computed
        if not batch:
            return
        embedded = embed_crops(encoder, [c for _, _, c in batch], batch_size=len(batch))
        for (item, sha, _), vec in zip(batch, embedded, strict=True):
            vectors[item] = vec
            unsaved.append((item, sha, vec))
        computed += len(batch)
        batch.clear()
        if len(unsaved) >= flush_every:
            cache.add_images(unsaved)
            unsaved.clear()

    with progress.stage(f"embedding labelled crops ({encoder.model_id})", len(rows)) as advance:
        for row, pixels, reason in iter_crops(rows, source):
            advance(1)
            if pixels is None:
                rejected.append({"row": row.row, "item": row.item, "reason": reason})
                continue
            sha = crop_sha256(pixels)
            hit = cached.get((row.item, sha))
            if hit is not None:
                vectors[row.item] = hit
                continue
            batch.append((row.item, sha, pixels))
            if len(batch) >= batch_size:
                run_batch()
        run_batch()
        cache.add_images(unsaved)
    kept = [r for r in rows if r.item in vectors]
    dim = int(encoder.embed_dim)
    matrix = (
        np.stack([vectors[r.item] for r in kept]).astype(np.float32)
        if kept
        else np.zeros((0, dim), np.float32)
    )
    rejected.sort(key=lambda r: r["row"])
    return LabelledEmbeddings(rows=kept, vectors=matrix, rejected=rejected, computed=computed)
