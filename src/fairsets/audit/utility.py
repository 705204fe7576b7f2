"""Utility check: does debiasing cost the model its ordinary abilities?

Zero-shot classification accuracy and text→image recall@k on a labelled image set the user
provides, with the original image embeddings and with a debias transform applied (the text side is
left as it is, as in the paper). Two layouts are read:

- a folder with one sub-folder per class (``DATA/<label>/<image>``), or
- a Parquet file with a label column and an image column holding encoded bytes, a
  ``{"bytes", "path"}`` struct (as Hugging Face ``datasets`` writes it) or a path relative to the
  file.

recall@k, for a class prompt: the share of the k images ranked most similar that belong to the
class, out of the most that could (``min(k, class size)``); averaged over classes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fairsets.audit.embeddings import decode_image
from fairsets.audit.metrics import cosine_similarity
from fairsets.core.progress import Progress

if TYPE_CHECKING:
    from fairsets.debias.transform import DebiasTransform
    from fairsets.models import VLM

__all__ = ["IMAGE_SUFFIXES", "evaluate_utility", "iter_labelled", "zero_shot_metrics"]

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff")


def zero_shot_metrics(
    images: np.ndarray, labels: Sequence[int], class_texts: np.ndarray, ks: Sequence[int] = (1, 5, 10)
) -> dict[str, Any]:
    """Accuracy (argmax over classes, ties to the lower class index) and recall@k (see module doc).

    Args:
        images: (n, d) image embeddings.
        labels: class index of each image (into ``class_texts``).
        class_texts: (c, d) one text embedding per class.
        ks: the k values of recall@k (each clamped to n).
    """
    labels = np.asarray(labels, dtype=np.int64)
    if images.ndim != 2 or class_texts.ndim != 2 or images.shape[1] != class_texts.shape[1]:
        raise ValueError(f"shapes do not match: images {images.shape}, class texts {class_texts.shape}")
    if len(labels) != len(images) or len(images) == 0:
        raise ValueError(f"{len(images)} images but {len(labels)} labels")
    sims = cosine_similarity(images, class_texts)  # (n, c)
    accuracy = float(np.mean(np.argmax(sims, axis=1) == labels))
    recall: dict[str, float] = {}
    present = [c for c in range(class_texts.shape[0]) if np.any(labels == c)]
    for k in ks:
        k_eff = min(int(k), len(images))
        scores = []
        for c in present:
            order = np.argsort(-sims[:, c], kind="stable")[:k_eff]
            relevant = int(np.sum(labels == c))
            scores.append(float(np.sum(labels[order] == c)) / min(k_eff, relevant))
        recall[f"recall@{k}"] = float(np.mean(scores))
    return {"accuracy": accuracy, **recall}


def _read_image_file(path: Path, name: str) -> tuple[bytes | None, str | None]:
    """The bytes of a regular image file (bounded: no FIFO, device or huge file), or why not."""
    from fairsets.fetch.localfile import LocalFileRefused, read_local_file

    try:
        return read_local_file(path), None
    except LocalFileRefused as e:
        return None, f"cannot read {name}: {e}"
    except OSError as e:
        return None, f"cannot read {name}: {e.strerror or e}"


def iter_labelled(
    path: str | os.PathLike[str], *, label_column: str = "label", image_column: str = "image"
) -> Iterator[tuple[str, str, bytes | None, str | None]]:
    """Yield ``(id, label, image bytes or None, error or None)`` for every item of a labelled set."""
    root = Path(path)
    if root.is_dir():
        classes = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
        if not classes:
            raise ValueError(f"{root}: expected one sub-folder per class")
        for cls in classes:
            for f in sorted(cls.rglob("*")):
                if f.suffix.lower() in IMAGE_SUFFIXES and not f.is_dir():
                    data, err = _read_image_file(f, str(f.relative_to(root)))
                    yield str(f.relative_to(root)), cls.name, data, err
        return
    if root.suffix != ".parquet" or not root.is_file():
        raise ValueError(f"{root}: expected a folder of class sub-folders or a .parquet file")
    import pyarrow.parquet as pq

    table = pq.read_table(root)
    for col in (label_column, image_column):
        if col not in table.column_names:
            raise ValueError(f"{root}: no column {col!r} (columns: {', '.join(table.column_names)})")
    for i, (label, cell) in enumerate(
        zip(table.column(label_column).to_pylist(), table.column(image_column).to_pylist(), strict=True)
    ):
        ident = f"row {i}"
        if label is None:
            yield ident, "", None, f"no {label_column!r}"
            continue
        data, err = None, None
        if isinstance(cell, dict):
            data = cell.get("bytes")
            cell = cell.get("path") if data is None else None
        if isinstance(cell, bytes):
            data = cell
        elif isinstance(cell, str):
            p = Path(cell) if Path(cell).is_absolute() else root.parent / cell
            data, err = _read_image_file(p, cell)
        if data is None and err is None:
            err = f"no image in column {image_column!r}"
        yield ident, str(label), data, err


def evaluate_utility(
    vlm: VLM,
    data: str | os.PathLike[str],
    *,
    transform: DebiasTransform | None = None,
    template: str = "a photo of a {}.",
    ks: Sequence[int] = (1, 5, 10),
    label_column: str = "label",
    image_column: str = "image",
    batch_size: int = 32,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Zero-shot accuracy and recall@k before and (with ``transform``) after debiasing.

    Items whose image cannot be read or decoded are skipped and listed with the reason.
    """
    from fairsets.vision.imageformat import decode_failure

    if "{}" not in template:
        raise ValueError("the template needs a {} where the class name goes, e.g. 'a photo of a {}.'")
    progress = progress or Progress()
    items = list(iter_labelled(data, label_column=label_column, image_column=image_column))
    skipped: list[dict[str, str]] = []
    images, names = [], []
    for ident, label, blob, err in items:
        if err is None:
            try:
                images.append(decode_image(blob))  # type: ignore[arg-type]
                names.append(label)
                continue
            except Exception as e:  # a damaged image is skipped with its reason
                err = f"image does not decode: {decode_failure(e)}"
        skipped.append({"id": ident, "reason": err})
    if not images:
        raise ValueError(f"{data}: no readable labelled image")
    classes = sorted(set(names))
    index = {c: i for i, c in enumerate(classes)}
    labels = [index[n] for n in names]
    vecs: list[np.ndarray] = []
    with progress.stage(f"embedding images ({vlm.model_id})", len(images)) as advance:
        for i in range(0, len(images), batch_size):
            batch = images[i : i + batch_size]
            vecs.append(np.asarray(vlm.embed_images(batch), dtype=np.float32))
            advance(len(batch))
    X = np.concatenate(vecs)
    T = np.asarray(vlm.embed_texts([template.format(c) for c in classes]), dtype=np.float32)
    result: dict[str, Any] = {
        "data": str(data),
        "model_id": vlm.model_id,
        "template": template,
        "n_images": len(labels),
        "classes": classes,
        "skipped": skipped,
        "original": zero_shot_metrics(X, labels, T, ks),
    }
    if transform is not None:
        if transform.dim != X.shape[1]:
            raise ValueError(
                f"the transform is for {transform.dim}-d embeddings, the model makes {X.shape[1]}-d"
            )
        after = zero_shot_metrics(transform.apply(X), labels, T, ks)
        result["debiased"] = after
        result["drop"] = {m: result["original"][m] - after[m] for m in after}
    return result
