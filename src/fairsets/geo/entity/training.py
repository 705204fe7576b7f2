"""Training: fit the SVM with cross-validated ``C`` (:func:`fit_classifier`), and the whole run from
annotations to a classifier with ID/OOD metrics and a report (:func:`fit_entity_classifier`).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fairsets.core.progress import Progress
from fairsets.geo.countries import country as country_info

from .annotations import load_annotations
from .classifier import EntityPresenceClassifier, _json, _unit_rows, _version
from .embedding import AnnotatedEmbeddings, _shown, embed_annotations
from .metrics import binary_metrics
from .split import PAPER_ID_TEST_SIZE, Split, split_annotations

if TYPE_CHECKING:
    from fairsets.audit.embeddings import EmbeddingCache
    from fairsets.models import VLM

#: ``schema`` of the training report (:attr:`TrainResult.report`).
REPORT_SCHEMA = "fairsets.geo.entity-train/1"
#: The SVM's C values tried by cross-validation.
DEFAULT_C_GRID: tuple[float, ...] = (0.001, 0.01, 0.1, 1.0, 10.0)


def _standardiser(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    return mean, np.where(scale > 1e-12, scale, 1.0)


def _svm(z: np.ndarray, y: np.ndarray, C: float) -> tuple[np.ndarray, float]:
    from sklearn.svm import SVC

    model = SVC(kernel="linear", C=C, class_weight="balanced")
    model.fit(z, y.astype(np.int64))
    return np.asarray(model.coef_, dtype=np.float64).reshape(-1), float(model.intercept_[0])


def fit_classifier(
    X: np.ndarray,
    y: Sequence[bool] | np.ndarray,
    *,
    entity: str,
    encoder: dict[str, Any] | None = None,
    C_grid: Sequence[float] = DEFAULT_C_GRID,
    cv_folds: int = 5,
    seed: int = 0,
    l2_normalize: bool = True,
    threshold: float = 0.0,
    meta: dict[str, Any] | None = None,
) -> EntityPresenceClassifier:
    """Fit the standardise + linear SVM classifier, choosing ``C`` by seeded cross-validation.

    Each ``C`` of ``C_grid`` is scored by the mean F1 of positives over stratified k-fold splits of
    ``X`` (``k = min(cv_folds, smallest class count)``, shuffled with ``seed``; standardisation is
    fitted inside each fold); the best wins, ties going to the smaller ``C``. The final model is fit
    on all of ``X``. The result is deterministic given the inputs and ``seed``.

    Args:
        X: ``(n, d)`` training embeddings.
        y: ``present`` per row (both labels needed, at least 2 of each).
        entity: The entity's name.
        encoder: Provenance of the embeddings (see :func:`encoder_info`).
        C_grid: Candidate values of ``C`` (one value: no cross-validation).
        cv_folds: Folds of the cross-validation.
        seed: Seed of the fold assignment.
        l2_normalize: L2-normalise embeddings before standardising.
        threshold: Decision threshold stored with the model.
        meta: Extra JSON-serialisable record; ``cv`` (the per-``C`` scores) is added.

    Returns:
        The fitted classifier.

    Raises:
        ValueError: Bad shapes, non-finite values, too few rows of a label, a bad grid.
        fairsets.core.step.MissingDependency: scikit-learn is not installed.
    """
    from fairsets.core.step import check_requires

    check_requires("the entity-presence classifier", (("sklearn", "vlm"),))
    from sklearn.model_selection import StratifiedKFold

    x = np.asarray(X)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"X must be a non-empty (n, d) array, got shape {x.shape}")
    if x.dtype.kind not in "fiu":
        raise ValueError(f"X must hold real numbers, got dtype {x.dtype}")
    x = x.astype(np.float64)
    if not np.isfinite(x).all():
        raise ValueError("X holds non-finite values (NaN or inf)")
    labels = np.asarray(y, dtype=bool).reshape(-1)
    if labels.shape[0] != x.shape[0]:
        raise ValueError(f"{x.shape[0]} embeddings but {labels.shape[0]} labels")
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if min(n_pos, n_neg) < 2:
        raise ValueError(f"training needs at least 2 present and 2 absent rows, got {n_pos} and {n_neg}")
    grid = sorted({float(c) for c in C_grid})
    if not grid or any(not math.isfinite(c) or c <= 0 for c in grid):
        raise ValueError(f"C_grid must hold positive numbers, got {list(C_grid)}")
    if cv_folds < 2:
        raise ValueError(f"cv_folds must be >= 2, got {cv_folds}")
    if l2_normalize:
        x = _unit_rows(x)

    cv: list[dict[str, Any]] = []
    best_c = grid[0]
    if len(grid) > 1:
        k = min(cv_folds, n_pos, n_neg)
        folds = list(StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(x, labels))
        best = -1.0
        for c in grid:
            scores = []
            for tr, va in folds:
                mean, scale = _standardiser(x[tr])
                w, b = _svm((x[tr] - mean) / scale, labels[tr], c)
                pred = ((x[va] - mean) / scale) @ w + b >= 0.0
                scores.append(binary_metrics(labels[va], pred)["f1"])
            score = float(np.mean(scores))
            cv.append({"C": c, "f1_mean": score, "f1_folds": [float(s) for s in scores]})
            if score > best + 1e-12:
                best, best_c = score, c
    mean, scale = _standardiser(x)
    w, b = _svm((x - mean) / scale, labels, best_c)
    record = dict(meta or {})
    record["cv"] = {
        "folds": min(cv_folds, n_pos, n_neg) if len(grid) > 1 else 0,
        "seed": seed,
        "grid": grid,
        "scores": cv,
    }
    record.setdefault("fairsets_version", _version())
    return EntityPresenceClassifier(
        entity=entity,
        mean=mean,
        scale=scale,
        coef=w,
        intercept=b,
        threshold=threshold,
        C=best_c,
        l2_normalize=l2_normalize,
        encoder=encoder or {},
        meta=record,
    )


@dataclass
class TrainResult:
    """What :func:`fit_entity_classifier` returns.

    Attributes:
        classifier: The fitted classifier (its ``meta`` holds the split, counts and metrics).
        split: The split (indices into ``data.rows``).
        report: JSON-serialisable training report (schema :data:`REPORT_SCHEMA`): counts, split,
            cross-validation, ID/OOD metrics, per-test-row predictions and rejected rows.
    """

    classifier: EntityPresenceClassifier
    split: Split
    report: dict[str, Any]

    @property
    def metrics(self) -> dict[str, dict[str, Any] | None]:
        """``{"id": ..., "ood": ...}`` metrics (None for an empty set)."""
        return self.report["metrics"]


def _counts(y: np.ndarray) -> dict[str, int]:
    return {"n": int(y.size), "present": int(y.sum()), "absent": int((~y).sum())}


def _country_row(iso3: str) -> dict[str, str]:
    try:
        c = country_info(iso3)
    except KeyError:
        return {"iso3": iso3, "name": "", "subregion": "", "income": ""}
    return {"iso3": iso3, "name": c.name, "subregion": c.subregion, "income": c.income}


def fit_entity_classifier(
    data: AnnotatedEmbeddings,
    *,
    entity: str | None = None,
    ood_countries: Iterable[str] | None = None,
    n_ood_countries: int | None = None,
    id_test_size: int = PAPER_ID_TEST_SIZE,
    seed: int = 0,
    C_grid: Sequence[float] = DEFAULT_C_GRID,
    cv_folds: int = 5,
    threshold: float = 0.0,
) -> TrainResult:
    """Split, fit on the training split and report F1 on the ID and OOD test sets (Table 7).

    Args:
        data: From :func:`embed_annotations`.
        entity: The entity's name (default: ``data.entity``).
        ood_countries, n_ood_countries, id_test_size, seed: See :func:`split_annotations`.
        C_grid, cv_folds: See :func:`fit_classifier`.
        threshold: Decision threshold stored with the model.

    Returns:
        The classifier, the split and the report.

    Raises:
        ValueError: No entity name, or a split or fit that is not possible (see the callees).
    """
    name = (entity or data.entity or "").strip()
    if not name:
        raise ValueError("name the entity (the annotation CSV has no entity column)")
    y = data.labels
    split = split_annotations(
        y,
        data.countries if data.has_country else None,
        ood_countries=ood_countries,
        n_ood_countries=n_ood_countries,
        id_test_size=id_test_size,
        seed=seed,
    )
    split_info = {
        "seed": seed,
        "id_test_size": id_test_size,
        "ood_countries": [_country_row(c) for c in split.ood_countries],
        "ood_missing": list(split.ood_missing),
        "train": _counts(y[split.train]),
        "id_test": _counts(y[split.id_test]),
        "ood_test": _counts(y[split.ood_test]),
    }
    counts = {
        **_counts(y),
        "rejected": len(data.rejected),
        "other_entity": data.other_entity,
    }
    draft = fit_classifier(
        data.X[split.train], y[split.train], entity=name, encoder=data.encoder, C_grid=C_grid,
        cv_folds=cv_folds, seed=seed, threshold=threshold,
    )  # fmt: skip
    scores = draft.decision_function(data.X)
    pred = scores >= draft.threshold
    metrics = {
        key: (binary_metrics(y[idx], pred[idx]) if idx.size else None)
        for key, idx in (("id", split.id_test), ("ood", split.ood_test))
    }
    meta = {
        **draft.meta,
        "annotations": data.source.name,
        "counts": counts,
        "split": split_info,
        "metrics": metrics,
    }
    clf = dataclasses.replace(draft, meta=meta)
    predictions = []
    for key, idx in (("id", split.id_test), ("ood", split.ood_test)):
        for i in idx.tolist():
            row = data.rows[i]
            predictions.append(
                {
                    "set": key,
                    "line": row.line,
                    "image": _shown(row.image, data.source),
                    "country": row.country,
                    "present": row.present,
                    "predicted": bool(pred[i]),
                    "score": float(scores[i]),
                }
            )
    report = {
        "schema": REPORT_SCHEMA,
        "entity": name,
        "annotations": str(data.source),
        "encoder": data.encoder,
        "counts": counts,
        "split": split_info,
        "model": {"C": clf.C, "threshold": clf.threshold, "l2_normalize": clf.l2_normalize, "cv": meta["cv"]},
        "metrics": metrics,
        "predictions": predictions,
        "rejected": data.rejected,
        "fairsets_version": _version(),
    }
    return TrainResult(classifier=clf, split=split, report=_json(report, "report"))


def train_entity_classifier(
    csv_path: str | os.PathLike[str],
    vlm: VLM,
    *,
    entity: str | None = None,
    ood_countries: Iterable[str] | None = None,
    n_ood_countries: int | None = None,
    id_test_size: int = PAPER_ID_TEST_SIZE,
    seed: int = 0,
    C_grid: Sequence[float] = DEFAULT_C_GRID,
    batch_size: int = 32,
    cache: EmbeddingCache | None = None,
    progress: Progress | None = None,
) -> TrainResult:
    """Load an annotation CSV, embed its images and fit (:func:`fit_entity_classifier`).

    Args:
        csv_path: The annotation CSV (:func:`load_annotations`).
        vlm: The encoder.
        entity: The entity (default: the CSV's ``entity`` value).
        ood_countries, n_ood_countries, id_test_size, seed: See :func:`split_annotations`.
        C_grid: See :func:`fit_classifier`.
        batch_size: Images per forward pass.
        cache: An embedding cache (:func:`embedding_cache`).
        progress: Progress bars.

    Returns:
        The classifier, the split and the report.
    """
    annotations = load_annotations(csv_path, entity=entity)
    data = embed_annotations(annotations, vlm, batch_size=batch_size, cache=cache, progress=progress)
    return fit_entity_classifier(
        data, entity=entity, ood_countries=ood_countries, n_ood_countries=n_ood_countries,
        id_test_size=id_test_size, seed=seed, C_grid=C_grid,
    )  # fmt: skip
