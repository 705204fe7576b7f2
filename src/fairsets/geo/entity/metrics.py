"""Binary metrics of the positive class (F1, precision, recall) used for model selection and reports."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def binary_metrics(
    y_true: Sequence[bool] | np.ndarray, y_pred: Sequence[bool] | np.ndarray
) -> dict[str, Any]:
    """F1, precision and recall of the positive class, accuracy, balanced accuracy and the confusion counts.

    Precision (recall) is 0.0 when nothing is predicted (is) positive, as is F1 then; balanced
    accuracy averages the recalls of the classes that occur.

    Returns:
        ``{"n", "positives", "tp", "fp", "fn", "tn", "precision", "recall", "f1", "accuracy",
        "balanced_accuracy"}``.
    """
    t = np.asarray(y_true, dtype=bool).reshape(-1)
    p = np.asarray(y_pred, dtype=bool).reshape(-1)
    if t.shape != p.shape:
        raise ValueError(f"{t.size} labels but {p.size} predictions")
    tp = int(np.sum(t & p))
    fp = int(np.sum(~t & p))
    fn = int(np.sum(t & ~p))
    tn = int(np.sum(~t & ~p))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    recalls = [r for r, has in ((recall, tp + fn), (tn / (tn + fp) if tn + fp else 0.0, tn + fp)) if has]
    return {
        "n": int(t.size),
        "positives": tp + fn,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "accuracy": (tp + tn) / t.size if t.size else 0.0,
        "balanced_accuracy": float(np.mean(recalls)) if recalls else 0.0,
    }
