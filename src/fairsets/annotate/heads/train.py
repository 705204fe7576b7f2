"""Training a perceived-attribute head from labelled crops (``fairsets annotate train``).

The method of the LAION person-annotation paper ("Key Designs" 2): embed the labelled box crops
with an image encoder (SigLIP there; any :mod:`fairsets.models` encoder here) and train a
classifier on the consensus labels.

1. **Split** (:func:`~fairsets.annotate.heads.train_split.split_parts`): by image — all boxes of one
   image go to the same part, so no person seen in training is tested on; identical images (same
   sha256 of their stored bytes) as one — and stratified by each image's majority label, seeded:
   within each label, the images are shuffled with ``seed`` and cut at the fractions
   (``0.7, 0.15, 0.15`` by default; train, validation, test).
2. **Head** (:func:`fit_logistic`): embeddings are L2-normalised and standardised (mean and scale of
   the training part), then scikit-learn's multinomial ``LogisticRegression`` (lbfgs) is fitted for
   each ``C`` of :data:`C_GRID`; the ``C`` with the best validation macro-F1 wins (ties: the
   better validation accuracy, then the smaller ``C``), and the final head is refitted on
   train + validation with it. The standardisation is folded into ``coef``/``intercept``, so the
   saved :class:`~fairsets.annotate.heads.Head` applies to raw embeddings. Without a validation
   part, ``C = 1``.
3. **Fine-tuning** (``--finetune``, :mod:`fairsets.annotate.heads.finetune`): the encoder itself is
   trained end to end, starting from the logistic head; see there.
4. **Metrics** (:func:`fairsets.annotate.heads.evaluate`): the saved head is applied to the test
   part's embeddings: accuracy, per-class precision / recall / F1 / support, the confusion matrix
   (rows true, columns predicted), Cohen's kappa and every test item with its true and predicted
   label, so anyone can recompute them.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fairsets.core.progress import Progress

from ..layout import WORKDIR, AnnotationError, check_attribute, read_manifest
from ..shards import ShardRef, resolve_shards
from .embed import CropSource, LabelledEmbeddings, crop_cache, embed_labelled
from .labels import Labels, read_labels
from .store import Head, evaluate, write_head
from .train_split import DEFAULT_SPLIT, PARTS, image_digests, parse_split, split_parts

if TYPE_CHECKING:
    from fairsets.models import VLM

    from .finetune import FinetuneParams

__all__ = [
    "C_GRID",
    "DEFAULT_SPLIT",
    "TrainResult",
    "crop_source",
    "fit_logistic",
    "parse_split",
    "plot_confusion",
    "split_parts",
    "train_head",
]

#: ``C`` values tried on the validation part.
C_GRID: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0, 100.0)


def _fit(x: np.ndarray, y: np.ndarray, n_classes: int, C: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Standardise + logistic regression on unit rows; returns (coef (C, D), intercept (C,)) on unit rows."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(x)
    mean, scale = scaler.mean_, scaler.scale_  # a constant column has scale 1
    model = LogisticRegression(C=C, max_iter=5000, random_state=seed)
    model.fit((x - mean) / scale, y)
    w = np.asarray(model.coef_, dtype=np.float64)
    b = np.asarray(model.intercept_, dtype=np.float64)
    if w.shape[0] == 1:  # binary: softmax of (-z/2, z/2) is the sigmoid of z
        w, b = np.vstack([-w / 2, w / 2]), np.array([-b[0] / 2, b[0] / 2])
    coef = np.zeros((n_classes, x.shape[1]))
    intercept = np.zeros(n_classes)
    for i, cls in enumerate(model.classes_):
        coef[int(cls)] = w[i] / scale
        intercept[int(cls)] = b[i] - float(np.dot(w[i], mean / scale))
    missing = sorted(set(range(n_classes)) - {int(c) for c in model.classes_})
    for i in missing:  # a class absent from training can never win
        intercept[i] = -1e6
    return coef, intercept


def _scores(
    coef: np.ndarray, intercept: np.ndarray, x: np.ndarray, y: np.ndarray, n: int
) -> tuple[float, float]:
    pred = np.argmax(x @ coef.T + intercept, axis=1)
    f1s = []
    for c in range(n):
        tp = int(np.sum((pred == c) & (y == c)))
        fp, fn = int(np.sum((pred == c) & (y != c))), int(np.sum((pred != c) & (y == c)))
        if tp + fp + fn:
            f1s.append(2 * tp / (2 * tp + fp + fn))
    return (float(np.mean(f1s)) if f1s else 0.0), float(np.mean(pred == y))


def fit_logistic(
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_val: np.ndarray,
    y_val: np.ndarray,
    n_classes: int,
    *,
    C_grid: Sequence[float] = C_GRID,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """The logistic head on raw embeddings, ``C`` chosen on the validation part (module docstring).

    Args:
        x_train, y_train: Training embeddings ``(n, D)`` and class indices ``(n,)``.
        x_val, y_val: Validation embeddings and class indices (may be empty: then ``C = 1``).
        n_classes: Number of classes (indices ``0 .. n_classes - 1``).
        C_grid: ``C`` values to try.
        seed: ``random_state`` of the solver.

    Returns:
        ``coef (n_classes, D)`` and ``intercept (n_classes,)`` to apply to L2-normalised
        embeddings, and the record ``{"C", "grid": [{"C", "val_macro_f1", "val_accuracy"}]}``.

    Raises:
        ValueError: Fewer than two classes in the training part.
    """
    from fairsets.core.step import check_requires

    check_requires("training an attribute head", (("sklearn", "vlm"),))
    from sklearn.preprocessing import normalize

    xt = normalize(np.asarray(x_train, np.float64))
    xv = np.asarray(x_val, np.float64).reshape(-1, xt.shape[1])
    xv = normalize(xv) if len(xv) else xv
    yt, yv = np.asarray(y_train, np.int64), np.asarray(y_val, np.int64)
    if len(set(yt.tolist())) < 2:
        raise ValueError("the training part holds fewer than two classes; label more crops of each class")
    grid: list[dict[str, float]] = []
    best_c = 1.0
    if len(yv):
        best: tuple[float, float, float] | None = None
        for C in sorted({float(c) for c in C_grid}):
            coef, intercept = _fit(xt, yt, n_classes, C, seed)
            f1, acc = _scores(coef, intercept, xv, yv, n_classes)
            grid.append({"C": C, "val_macro_f1": round(f1, 6), "val_accuracy": round(acc, 6)})
            key = (round(f1, 9), round(acc, 9), -C)
            if best is None or key > best:
                best, best_c = key, C
        xt, yt = np.vstack([xt, xv]), np.concatenate([yt, yv])
    coef, intercept = _fit(xt, yt, n_classes, best_c, seed)
    return coef, intercept, {"C": best_c, "grid": grid, "refit_on": "train+val" if len(yv) else "train"}


@dataclass
class TrainResult:
    """What :func:`train_head` did: the head written, the labels read, the crops embedded."""

    head: Head
    path: Path
    labels: Labels
    embedded: LabelledEmbeddings
    parts: dict[str, int]  # crops per part
    plot: Path | None = None


def crop_source(
    ann: str | os.PathLike[str] | None, shards: Sequence[str] | None, out: Path
) -> tuple[CropSource, Path]:
    """The crops' source and the embedding cache root, from ``--ann`` or ``--shards``.

    Raises:
        AnnotationError: Neither or both given, or an unusable annotation folder or shard list.
    """
    if (ann is None) == (not shards):
        raise AnnotationError(
            "give either --ann ANN (boxes from annotate persons) or --shards SHARDS, not both"
        )
    if ann is not None:
        manifest = read_manifest(ann)
        inputs = manifest.get("inputs")
        if not isinstance(inputs, list) or not inputs:
            raise AnnotationError(
                f"{ann}: the manifest lists no input shards; run fairsets annotate persons again"
            )
        refs = [ShardRef.from_json(d) for d in inputs]
        return CropSource({r.name: r for r in refs}, ann=Path(ann)), Path(ann) / WORKDIR / "embeddings"
    refs = resolve_shards(list(shards or ()))
    return CropSource({r.name: r for r in refs}), out.parent / WORKDIR / "embeddings"


def _spec(vlm: VLM) -> str:
    return f"{vlm.family}:{vlm.name}"


def train_head(
    labels_path: str | os.PathLike[str],
    *,
    encoder: str,
    out: str | os.PathLike[str],
    pretrained: str | None = None,
    ann: str | os.PathLike[str] | None = None,
    shards: Sequence[str] | None = None,
    attribute: str = "gender",
    classes: Sequence[str] | None = None,
    drop_labels: Sequence[str] = (),
    split: Sequence[float] = DEFAULT_SPLIT,
    seed: int = 0,
    batch_size: int = 32,
    device: str = "cpu",
    finetune: FinetuneParams | None = None,
    vlm: VLM | None = None,
    plot: bool = True,
    progress: Progress | None = None,
) -> TrainResult:
    """Train a head on the crops LABELS names and write it to ``out`` (see the module docstring).

    Args:
        labels_path: The LABELS file (:mod:`fairsets.annotate.heads.labels`).
        encoder, pretrained, device: The encoder (:func:`fairsets.models.load_vlm`).
        out: The head file to write (``head.npz``); the confusion plot goes beside it
            (``head.confusion.png``).
        ann: An annotation folder (boxes by ``box_id``), or
        shards: shard paths / globs / folders (boxes only as explicit ``x1..y2`` columns).
        attribute: What the head predicts (``gender``).
        classes: The label set and its order (default: the labels found, sorted).
        drop_labels: Labels to leave out (``unclear``, ``invalid``).
        split: Train, validation and test fractions.
        seed: Seed of the split and the solver.
        batch_size: Crops per forward pass.
        finetune: Fine-tune the encoder (:mod:`fairsets.annotate.heads.finetune`) instead of a linear head.
        vlm: An already loaded encoder (then ``encoder``/``pretrained``/``device`` are not used).
        plot: Write the confusion-matrix plot.
        progress: Progress bars.

    Raises:
        AnnotationError: Bad arguments, LABELS, annotation folder or shards (one-line message).
        ValueError: Too few usable crops or classes to train and test.
        fairsets.models.ModelUnavailable: The encoder cannot be loaded here.
    """
    check_attribute(attribute)
    fractions = parse_split(split)
    target = Path(out)
    if target.suffix != ".npz":
        raise AnnotationError(
            f"--out {target}: a head is an .npz file, e.g. --out {target.with_suffix('.npz')}"
        )
    if classes is not None and (len(set(classes)) != len(classes) or len(classes) < 2):
        raise AnnotationError(f"--classes {','.join(classes)}: name at least two distinct labels")
    if finetune is not None and vlm is None:
        from fairsets.models import parse_model_spec

        from .finetune import FINETUNE_FAMILIES

        family = parse_model_spec(encoder)[0]
        if family not in FINETUNE_FAMILIES:  # said before the model loads (offline: before it fails)
            raise AnnotationError(
                f"--finetune supports {' and '.join(FINETUNE_FAMILIES)} encoders, not {family}:; "
                "train the linear head without --finetune"
            )
    labels = read_labels(labels_path, classes=classes, drop=drop_labels)
    source, cache_root = crop_source(ann, shards, target)
    if vlm is None:
        from fairsets.models import load_vlm

        vlm = load_vlm(encoder, pretrained, device=device)
    progress = progress or Progress()
    embedded = embed_labelled(
        vlm, labels.rows, source, crop_cache(cache_root, vlm), batch_size=batch_size, progress=progress
    )
    names = list(classes) if classes else sorted({r.label for r in embedded.rows})
    if len(names) < 2:
        raise ValueError(
            f"a head needs at least two classes with usable crops, got {names}"
            + _why_unusable(embedded.rejected)
        )
    index = {c: i for i, c in enumerate(names)}
    rows = embedded.rows
    digests = image_digests(rows, source)  # identical images: one unit of the split
    parts = split_parts(rows, fractions, seed, digests)
    mask = {p: np.array([q == p for q in parts], dtype=bool) for p in PARTS}
    y = np.array([index[r.label] for r in rows], dtype=np.int64)
    if not mask["test"].any():
        raise ValueError(f"no crop falls in the test part ({len(rows)} usable crops); label more crops")
    x = embedded.vectors
    test_rows = [r for r, p in zip(rows, parts, strict=True) if p == "test"]
    coef, intercept, fit = fit_logistic(
        x[mask["train"]], y[mask["train"]], x[mask["val"]], y[mask["val"]], len(names), seed=seed
    )
    head_encoder, x_test = vlm, x[mask["test"]]
    pretrained_name = vlm.pretrained or None
    if finetune is not None:
        from .finetune import finetune_encoder

        tuned = finetune_encoder(vlm, rows, parts, y, (coef, intercept), source, target, finetune, seed=seed)
        coef, intercept, head_encoder = tuned.coef, tuned.intercept, tuned.encoder
        fit = {**tuned.record, "start": fit}
        pretrained_name = tuned.weights.name  # beside the head; load_head makes it absolute
        # The test part is embedded again by the saved, reloaded encoder: the metrics are those of the files.
        x_test = embed_labelled(
            head_encoder, test_rows, source, crop_cache(cache_root, head_encoder), batch_size=batch_size
        ).vectors
    counts = {p: int(m.sum()) for p, m in mask.items()}
    head = Head(
        attribute=attribute,
        classes=names,
        encoder=_spec(head_encoder),
        pretrained=pretrained_name,
        coef=coef,
        intercept=intercept,
        normalise=True,
        encoder_provenance=head_encoder.provenance(),
        training={
            "labels": str(Path(labels_path).resolve()),
            "label_counts": labels.counts,
            "rejected": len(labels.rejected) + len(embedded.rejected),
            "rejected_reasons": dict(
                Counter(
                    r["reason"].split(":")[0] for r in [*labels.rejected, *embedded.rejected]
                ).most_common()
            ),
            "dropped": labels.dropped,
            "split": list(fractions),
            "parts": counts,
            "images": {
                p: len({(r.shard, r.key) for r, q in zip(rows, parts, strict=True) if q == p}) for p in PARTS
            },
            # images whose bytes another labelled image also has (kept in one part with it)
            "duplicate_images": _duplicates(digests),
            "seed": seed,
            "method": "logistic" if finetune is None else "finetune",
            "fit": fit,
        },
    )
    predicted = head.predict(x_test)
    metrics = evaluate(names, [r.label for r in test_rows], predicted)
    metrics["test_items"] = [
        {"item": r.item, "shard": r.shard, "key": r.key, "box_id": r.box_id, "label": r.label, "predicted": p}
        for r, p in zip(test_rows, predicted, strict=True)
    ]
    head = write_head(target, dataclasses.replace(head, metrics=metrics))
    png = plot_confusion(head, target.with_suffix(".confusion.png")) if plot else None
    return TrainResult(head=head, path=target, labels=labels, embedded=embedded, parts=counts, plot=png)


def _duplicates(digests: dict[tuple[str, str], str]) -> int:
    counts = Counter(digests.values())
    return sum(n for n in counts.values() if n > 1)


def plot_confusion(head: Head, path: str | os.PathLike[str]) -> Path:
    """Draw the head's test confusion matrix (counts, rows true) to a PNG, atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fairsets.core.atomic import atomic_path

    cm = np.asarray(head.metrics["confusion"], dtype=np.int64)
    k = len(head.classes)
    fig, ax = plt.subplots(figsize=(1.2 * k + 2.5, 1.1 * k + 2))
    ax.imshow(cm, cmap="Blues")
    ax.set_xticks(range(k), head.classes, rotation=45, ha="right")
    ax.set_yticks(range(k), head.classes)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    top = cm.max() if cm.size else 0
    for i in range(k):
        for j in range(k):
            ax.text(
                j,
                i,
                str(cm[i, j]),
                ha="center",
                va="center",
                color="white" if cm[i, j] > top / 2 else "black",
            )
    m = head.metrics
    kappa = "undefined" if m["kappa"] is None else f"{m['kappa']:.3f}"
    ax.set_title(f"{head.attribute}: accuracy {m['accuracy']:.3f}, κ {kappa} (n={m['n']})")
    fig.tight_layout()
    target = Path(path)
    with atomic_path(target) as tmp:
        fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return target


def _why_unusable(rejected: list[dict[str, Any]]) -> str:
    """`` (N rows left out, most often: REASON)`` for an error that no class has usable crops."""
    if not rejected:
        return ""
    from collections import Counter

    reason, n = Counter(r["reason"] for r in rejected).most_common(1)[0]
    return f" ({len(rejected)} labelled rows left out, most often ({n}): {reason})"
