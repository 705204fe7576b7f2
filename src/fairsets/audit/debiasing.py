"""Fit a debias transform on a published dataset's embeddings, and apply one to embedding files."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fairsets.core.atomic import atomic_path

if TYPE_CHECKING:
    from fairsets.core.progress import Progress
    from fairsets.debias.transform import DebiasTransform
    from fairsets.models import VLM

__all__ = ["apply_to_file", "fit_on_dataset", "read_embeddings", "write_embeddings"]


def fit_on_dataset(
    dataset: str | os.PathLike[str],
    model: str | VLM,
    *,
    pretrained: str | None = None,
    attribute: str = "state",
    method: str = "inlp",
    alpha: float = 1.0,
    target: str | None = "An Indian person",
    compensate: bool = True,
    variant: str | None = None,
    splits: Sequence[str] | None = None,
    out: str | os.PathLike[str] | None = None,
    device: str = "cpu",
    batch_size: int = 32,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    **fit_kwargs: Any,
) -> DebiasTransform:
    """Fit ``method`` to remove ``attribute`` from ``model``'s image embeddings of a dataset.

    Fits on the ``train`` split by default (evaluate the result on ``test`` with
    ``fairsets audit vlm --debias``). ``target`` is the prompt whose similarity the compensation
    restores (``None``: no compensation). The transform is saved to ``out`` when given.
    """
    from fairsets.audit.dataset import open_dataset
    from fairsets.audit.embeddings import EmbeddingCache, embed_dataset, embed_texts
    from fairsets.audit.vlm import group_labels
    from fairsets.core.step import check_requires
    from fairsets.debias.transform import fit_transform
    from fairsets.models import load_vlm

    needs = {"inlp": (("sklearn", "vlm"),), "leace": (("concept_erasure", "vlm"), ("torch", "vlm"))}
    check_requires(f"debias method {method!r}", needs.get(method, ()))
    ds = open_dataset(dataset)
    variant = variant or ds.default_variant()
    splits = list(splits) if splits else ds.default_splits(variant, prefer="train")
    vlm = model if not isinstance(model, str) else load_vlm(model, pretrained, device=device)
    emb = embed_dataset(
        ds, vlm, variant, splits, batch_size=batch_size, cache_dir=cache_dir, progress=progress
    )
    emb, labels = group_labels(emb, attribute)
    if len(set(labels)) < 2:
        raise ValueError(
            f"{attribute!r} has {len(set(labels))} group(s) in {variant}/{splits}; need at least 2"
        )
    t = None
    if target is not None:
        t = embed_texts(vlm, [target], cache=EmbeddingCache.for_dataset(ds, vlm, cache_dir))[0]
    meta = {
        "model_id": vlm.model_id,
        "model": vlm.provenance(),
        "dataset": ds.name,
        "variant": variant,
        "splits": splits,
        "attribute": attribute,
        "groups": sorted(set(labels)),
        "n": len(labels),
        "target_prompt": target,
    }
    transform = fit_transform(
        emb.vectors,
        labels,
        method=method,
        alpha=alpha,
        target=t,
        compensate=compensate and t is not None,
        meta=meta,
        **fit_kwargs,
    )
    if out is not None:
        transform.save(out)
    return transform


def read_embeddings(path: str | os.PathLike[str]) -> tuple[np.ndarray, Any]:
    """Read ``.npy`` (n, d) or a Parquet file with an ``embedding`` list column.

    Returns the (n, d) array and, for Parquet, the table (so the other columns can be written back).
    """
    p = Path(path)
    if p.suffix == ".npy":
        arr = np.load(p, allow_pickle=False)
        if arr.ndim != 2:
            raise ValueError(f"{p}: expected a 2-D array of embeddings, got shape {arr.shape}")
        return arr, None
    if p.suffix == ".parquet":
        import pyarrow.parquet as pq

        from fairsets.audit.embeddings import _vectors

        table = pq.read_table(p)
        if "embedding" not in table.column_names:
            raise ValueError(f"{p}: no 'embedding' column (columns: {', '.join(table.column_names)})")
        return _vectors(table.column("embedding")), table
    raise ValueError(f"{p}: embeddings must be .npy or .parquet")


def write_embeddings(path: str | os.PathLike[str], vectors: np.ndarray, table: Any = None) -> Path:
    """Write embeddings like :func:`read_embeddings` reads them (atomically)."""
    p = Path(path)
    vectors = np.asarray(vectors, dtype=np.float32)
    with atomic_path(p) as tmp:
        if p.suffix == ".npy":
            with open(tmp, "wb") as f:
                np.save(f, vectors, allow_pickle=False)
        elif p.suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            col = pa.FixedSizeListArray.from_arrays(
                pa.array(vectors.reshape(-1), pa.float32()), vectors.shape[1]
            )
            if table is None:
                table = pa.table({"embedding": col})
            else:
                table = table.set_column(table.column_names.index("embedding"), "embedding", col)
            pq.write_table(table, tmp)
        else:
            raise ValueError(f"{p}: embeddings must be .npy or .parquet")
    return p


def apply_to_file(
    transform: DebiasTransform | str | os.PathLike[str],
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    block_rows: int | None = None,
) -> Path:
    """Apply a saved transform to an embedding file (``.npy`` or Parquet) and write the result.

    Streams in row blocks with bounded memory, in float32 (:mod:`fairsets.audit.debias_stream`:
    within ``1e-5 * |x|`` per row of :meth:`DebiasTransform.apply`; the bytes do not depend on
    ``block_rows``, default :data:`~fairsets.audit.debias_stream.BLOCK_ROWS`). A Parquet output of a
    Parquet input keeps the other columns.
    """
    from fairsets.audit.debias_stream import BLOCK_ROWS, apply_in_blocks
    from fairsets.debias.transform import DebiasTransform

    if not hasattr(transform, "apply"):
        transform = DebiasTransform.load(transform)
    return apply_in_blocks(transform, Path(src), Path(dst), block_rows or BLOCK_ROWS)
