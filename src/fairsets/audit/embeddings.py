"""Embedding cache: embed a dataset's images (and prompts) once per model, reuse them in every audit.

Layout, beside the dataset in its hidden working folder (never published)::

    DATASET/.fairsets/embeddings/{model slug}/
        model.json                 the model's provenance (model_id, package, weights, dim)
        images/part-NNNNN.parquet  rows: key, sha256 (of the image bytes), embedding (float32 list)
        texts.parquet              rows: text, embedding

Image rows are keyed by (sample key, image sha256), so a variant or split that shares images with
another reuses their embeddings, and a changed image is embedded again. Embeddings are stored as
the model returns them (not normalised). Work is flushed to a new part file every
``flush_every`` images, each written atomically, so an interrupted run keeps what it finished and
the next run embeds only the rest.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fairsets.audit.dataset import PublishedDataset, sha256_bytes
from fairsets.core.atomic import atomic_path, atomic_write_text
from fairsets.core.progress import Progress

if TYPE_CHECKING:
    from fairsets.models import VLM

__all__ = ["EmbeddingCache", "ImageEmbeddings", "decode_image", "embed_dataset", "embed_texts"]

log = logging.getLogger(__name__)


@dataclass
class ImageEmbeddings:
    """Embeddings of a dataset's rows, in row order; rows whose image could not be read are skipped."""

    rows: list[dict[str, Any]]
    vectors: np.ndarray  # (len(rows), dim) float32
    skipped: list[dict[str, str]] = field(default_factory=list)  # {"key", "reason"}
    computed: int = 0  # how many images were embedded in this call (the rest came from the cache)


class EmbeddingCache:
    """The cache folder of one model for one dataset (see the module docstring)."""

    def __init__(self, root: str | os.PathLike[str], model_id: str, provenance: dict[str, Any] | None = None):
        self.root = Path(root)
        self.model_id = model_id
        self.provenance = dict(provenance or {"model_id": model_id})
        self._check_model()

    @classmethod
    def for_dataset(
        cls, dataset: PublishedDataset, vlm: VLM, cache_dir: str | os.PathLike[str] | None = None
    ) -> EmbeddingCache:
        base = Path(cache_dir) if cache_dir is not None else dataset.workdir / "embeddings"
        return cls(base / vlm.slug, vlm.model_id, vlm.provenance())

    def _check_model(self) -> None:
        info = self.root / "model.json"
        if info.is_file():
            try:
                have = json.loads(info.read_text(encoding="utf-8")).get("model_id")
            except (OSError, ValueError):
                have = None
            if have != self.model_id:
                raise ValueError(
                    f"{self.root}: embedding cache belongs to model {have!r}, not {self.model_id!r}; "
                    "remove the folder or use another --cache-dir"
                )

    def _write_model(self) -> None:
        info = self.root / "model.json"
        if not info.is_file():
            atomic_write_text(info, json.dumps(self.provenance, sort_keys=True, indent=2, default=str) + "\n")

    # images -----------------------------------------------------------------------------------
    def _parts(self) -> list[Path]:
        return sorted((self.root / "images").glob("part-*.parquet"))

    def load_images(self) -> dict[tuple[str, str], np.ndarray]:
        """Every cached image embedding, ``{(key, sha256): vector}``."""
        import pyarrow.parquet as pq

        out: dict[tuple[str, str], np.ndarray] = {}
        for part in self._parts():
            table = pq.read_table(part)
            keys = table.column("key").to_pylist()
            shas = table.column("sha256").to_pylist()
            vecs = _vectors(table.column("embedding"))
            for key, sha, vec in zip(keys, shas, vecs, strict=True):
                out[(key, sha)] = vec
        return out

    def add_images(self, items: Sequence[tuple[str, str, np.ndarray]]) -> Path | None:
        """Append ``(key, sha256, vector)`` rows as a new part file (atomically)."""
        if not items:
            return None
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._write_model()
        vecs = np.stack([np.asarray(v, dtype=np.float32) for _, _, v in items])
        table = pa.table(
            {
                "key": pa.array([k for k, _, _ in items], pa.string()),
                "sha256": pa.array([s for _, s, _ in items], pa.string()),
                "embedding": pa.FixedSizeListArray.from_arrays(
                    pa.array(vecs.reshape(-1), pa.float32()), vecs.shape[1]
                ),
            }
        )
        images = self.root / "images"
        images.mkdir(parents=True, exist_ok=True)
        tmp = images / f".part.parquet.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            pq.write_table(table, tmp)
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            # Claim the next free part number with a hard link, which never replaces a file: an audit
            # adding parts to this cache at the same time keeps its own (os.replace would drop one).
            while True:
                parts = self._parts()
                path = images / f"part-{int(parts[-1].stem.split('-')[1]) + 1 if parts else 0:05d}.parquet"
                try:
                    os.link(tmp, path)
                    break
                except FileExistsError:
                    continue
                except OSError:  # a file system without hard links: a rename (the race stays there)
                    os.replace(tmp, path)
                    break
        finally:
            tmp.unlink(missing_ok=True)
        return path

    # texts ------------------------------------------------------------------------------------
    def load_texts(self) -> dict[str, np.ndarray]:
        import pyarrow.parquet as pq

        path = self.root / "texts.parquet"
        if not path.is_file():
            return {}
        table = pq.read_table(path)
        return dict(zip(table.column("text").to_pylist(), _vectors(table.column("embedding")), strict=True))

    def save_texts(self, texts: dict[str, np.ndarray]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._write_model()
        names = sorted(texts)
        vecs = np.stack([np.asarray(texts[t], dtype=np.float32) for t in names])
        table = pa.table(
            {
                "text": pa.array(names, pa.string()),
                "embedding": pa.FixedSizeListArray.from_arrays(
                    pa.array(vecs.reshape(-1), pa.float32()), vecs.shape[1]
                ),
            }
        )
        with atomic_path(self.root / "texts.parquet") as tmp:
            pq.write_table(table, tmp)


def _vectors(column: Any) -> np.ndarray:
    """A (fixed-size) list column of floats as a (n, dim) float32 array."""
    import pyarrow as pa

    arr = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    if len(arr) == 0:
        return np.zeros((0, 0), np.float32)
    if pa.types.is_fixed_size_list(arr.type):
        return arr.flatten().to_numpy(zero_copy_only=False).astype(np.float32).reshape(len(arr), -1)
    return np.asarray(arr.to_pylist(), dtype=np.float32)


def decode_image(data: bytes) -> Any:
    """Decode image bytes to an RGB PIL image.

    Only the allowed formats are opened (:mod:`fairsets.vision.imageformat`: no EPS, no
    external programs); raises :class:`~fairsets.vision.imageformat.ImageDecodeError` (its
    message is the reason) on refused or damaged data.
    """
    from ..vision.imageformat import decode_rgb_image

    return decode_rgb_image(data)


def embed_dataset(
    dataset: PublishedDataset,
    vlm: VLM,
    variant: str,
    splits: Sequence[str],
    *,
    rows: list[dict[str, Any]] | None = None,
    batch_size: int = 32,
    flush_every: int = 512,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
) -> ImageEmbeddings:
    """Embeddings of the images of ``variant``/``splits`` (cached per model; see the module docstring).

    Args:
        dataset: the published dataset.
        vlm: the model (``fairsets.models.load_vlm``).
        variant, splits: what to embed.
        rows: the metadata rows to embed (default: all rows of ``splits``); their order is kept.
        batch_size: images per forward pass.
        flush_every: images per cache part file (the unit of resumption).
        cache_dir: cache folder instead of ``DATASET/.fairsets/embeddings``.
        progress: progress bars (default: on when stderr is a terminal).

    Returns:
        The rows with their embeddings; images that fail to decode are skipped with a reason.
    """
    from ..vision.imageformat import decode_failure

    if batch_size < 1 or flush_every < 1:
        raise ValueError("batch_size and flush_every must be >= 1")
    progress = progress or Progress()
    rows = list(rows) if rows is not None else dataset.rows(variant, splits)
    cache = EmbeddingCache.for_dataset(dataset, vlm, cache_dir)
    cached = cache.load_images()

    wanted = {r["key"]: r.get("sha256") for r in rows}
    missing = {k for k, sha in wanted.items() if not sha or (k, sha) not in cached}
    skipped: dict[str, str] = {}
    computed = 0
    if missing:
        pending: list[tuple[str, str, np.ndarray]] = []
        batch: list[tuple[str, str, Any]] = []

        def run_batch() -> None:
            if batch:
                vecs = np.asarray(vlm.embed_images([im for _, _, im in batch]), dtype=np.float32)
                for (key, sha, _), vec in zip(batch, vecs, strict=True):
                    cached[(key, sha)] = vec
                    pending.append((key, sha, vec))
                batch.clear()

        with progress.stage(f"embedding images ({vlm.model_id})", len(missing)) as advance:
            for key, data in dataset.images(variant, splits, keys=missing):
                sha = sha256_bytes(data)
                if wanted[key] and wanted[key] != sha:
                    skipped[key] = f"image sha256 {sha[:12]}… differs from the metadata's {wanted[key][:12]}…"
                    advance(1)
                    continue
                wanted[key] = sha
                try:
                    image = decode_image(data)
                except Exception as e:  # a damaged image is a per-sample rejection, not a failed audit
                    skipped[key] = f"image does not decode: {decode_failure(e)}"
                    advance(1)
                    continue
                batch.append((key, sha, image))
                if len(batch) >= batch_size:
                    n = len(batch)
                    run_batch()
                    computed += n
                    advance(n)
                if len(pending) >= flush_every:
                    cache.add_images(pending)
                    pending.clear()
            n = len(batch)
            run_batch()
            computed += n
            advance(n)
            cache.add_images(pending)
    if skipped:
        log.warning("%d image(s) skipped (first: %s)", len(skipped), next(iter(skipped.items())))

    kept, vectors = [], []
    for r in rows:
        key = r["key"]
        if key in skipped:
            continue
        kept.append(r)
        vectors.append(cached[(key, wanted[key])])
    dim = int(getattr(vlm, "embed_dim", 0) or (vectors[0].shape[0] if vectors else 0))
    matrix = np.stack(vectors).astype(np.float32) if vectors else np.zeros((0, dim), np.float32)
    return ImageEmbeddings(
        rows=kept,
        vectors=matrix,
        skipped=[{"key": k, "reason": v} for k, v in sorted(skipped.items())],
        computed=computed,
    )


def embed_texts(
    vlm: VLM,
    texts: Iterable[str],
    *,
    cache: EmbeddingCache | None = None,
    batch_size: int = 64,
) -> np.ndarray:
    """Text embeddings in the order given (deduplicated work; cached when ``cache`` is given)."""
    texts = list(texts)
    known = cache.load_texts() if cache is not None else {}
    todo = [t for t in dict.fromkeys(texts) if t not in known]
    for i in range(0, len(todo), batch_size):
        chunk = todo[i : i + batch_size]
        for t, vec in zip(chunk, np.asarray(vlm.embed_texts(chunk), dtype=np.float32), strict=True):
            known[t] = vec
    if todo and cache is not None:
        cache.save_texts(known)
    if not texts:
        return np.zeros((0, int(getattr(vlm, "embed_dim", 0))), np.float32)
    return np.stack([known[t] for t in texts]).astype(np.float32)
