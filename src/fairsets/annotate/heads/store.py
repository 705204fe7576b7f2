"""Perceived-attribute heads: a linear softmax classifier over an encoder's crop embeddings.

A head is what ``fairsets annotate train`` writes and ``fairsets annotate classify`` applies::

    p = softmax(coef · x + intercept)        x = the crop's embedding, L2-normalised if ``normalise``

``coef`` is ``(C, D)`` and ``intercept`` ``(C,)``, one row per class of ``classes`` (a binary
logistic regression is stored as two rows ``-w/2, +w/2`` so that the softmax equals its sigmoid; a
standardisation fitted in training is folded into them). The file is a checked ``.npz``
(:mod:`fairsets.core.checked_npz`: no pickle, sha256 of every array in the header, deterministic
bytes) whose JSON header holds:

* ``format`` (:data:`FORMAT`), ``attribute``, ``classes``, ``normalise``, ``dim``;
* ``encoder`` and ``pretrained``: what to pass to :func:`fairsets.models.load_vlm` to get the same
  embeddings, and ``encoder_provenance`` (model id, package version, weights, embed_dim). A
  fine-tuned encoder's weights file is saved beside the head and named relatively
  (``head.encoder.pt``); :func:`load_head` makes it absolute, so the two files move together;
* ``metrics``: test-part metrics (accuracy, per-class precision/recall/F1/support, confusion
  matrix, Cohen's kappa, the test keys with true and predicted labels);
* ``training``: the label set, split sizes, seed, chosen ``C`` and the validation scores, the
  fairsets version.

:attr:`Head.sha256` is the sha256 of the file's bytes: manifests record it so an annotation says
which head produced it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fairsets.core.checked_npz import array_sha256, read_checked_npz, write_checked_npz

from ..layout import check_attribute

__all__ = ["FORMAT", "Head", "evaluate", "load_head", "write_head"]

#: ``header["format"]`` of a head file.
FORMAT = "fairsets.annotate.head/1"
_ARRAYS = ("coef", "intercept")


def _json(value: Any, name: str) -> Any:
    try:
        return json.loads(json.dumps(value, allow_nan=False, sort_keys=True))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be JSON-serialisable (no NaN/inf): {e}") from e


def _check_classes(classes: Any) -> list[str]:
    if not isinstance(classes, list | tuple) or len(classes) < 2:
        raise ValueError(f"a head needs at least 2 classes, got {classes!r}")
    out = [str(c) for c in classes]
    if any(not c.strip() for c in out) or len(set(out)) != len(out):
        raise ValueError(f"classes must be distinct non-empty names, got {out}")
    return out


@dataclass(frozen=True, eq=False)
class Head:
    """A trained perceived-attribute head (see the module docstring).

    Attributes:
        attribute: What it predicts (``gender``; :func:`~fairsets.annotate.layout.check_attribute`).
        classes: The labels, in the order of ``coef``'s rows and of :meth:`predict_proba`'s columns.
        encoder: The model spec for :func:`fairsets.models.load_vlm` (``torchvision:mobilenet_v2``).
        pretrained: Its ``pretrained`` argument (a tag, a local file, ``"none"``), or None.
        coef: ``(C, D)`` float64.
        intercept: ``(C,)`` float64.
        normalise: Whether embeddings are L2-normalised before ``coef`` applies.
        metrics: The test-part metrics recorded at training.
        sha256: sha256 of the ``.npz`` file ("" for a head not read from a file).
        encoder_provenance: ``VLM.provenance()`` of the encoder it was trained with.
        training: The training record (split sizes, seed, C, label counts, …).
    """

    attribute: str
    classes: list[str]
    encoder: str
    pretrained: str | None
    coef: np.ndarray
    intercept: np.ndarray
    normalise: bool = True
    metrics: dict[str, Any] = field(default_factory=dict)
    sha256: str = ""
    encoder_provenance: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_attribute(self.attribute)
        classes = _check_classes(self.classes)
        coef = np.array(self.coef, dtype="<f8", order="C", copy=True)
        intercept = np.array(self.intercept, dtype="<f8", order="C", copy=True).reshape(-1)
        if coef.ndim != 2 or coef.shape[0] != len(classes) or coef.shape[1] == 0:
            raise ValueError(f"coef must be ({len(classes)}, D) for classes {classes}, not {coef.shape}")
        if intercept.shape != (len(classes),):
            raise ValueError(f"intercept must be ({len(classes)},), got shape {intercept.shape}")
        if not (np.isfinite(coef).all() and np.isfinite(intercept).all()):
            raise ValueError("coef and intercept must be finite")
        coef.setflags(write=False)
        intercept.setflags(write=False)
        if not isinstance(self.encoder, str) or not self.encoder.strip():
            raise ValueError(f"encoder must be a model spec, got {self.encoder!r}")
        object.__setattr__(self, "classes", classes)
        object.__setattr__(self, "coef", coef)
        object.__setattr__(self, "intercept", intercept)
        object.__setattr__(self, "normalise", bool(self.normalise))
        object.__setattr__(self, "pretrained", self.pretrained or None)
        for name in ("metrics", "encoder_provenance", "training"):
            object.__setattr__(self, name, _json(dict(getattr(self, name) or {}), name))

    @property
    def dim(self) -> int:
        """Embedding width ``D`` the head takes."""
        return int(self.coef.shape[1])

    def logits(self, embeddings: np.ndarray) -> np.ndarray:
        """``(n, C)`` scores before the softmax."""
        x = np.asarray(embeddings)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(
                f"the {self.attribute!r} head takes (n, {self.dim}) embeddings of {self.encoder}, "
                f"got shape {x.shape}"
            )
        if x.dtype.kind not in "fiu":
            raise ValueError(f"embeddings must hold real numbers, got dtype {x.dtype}")
        x = x.astype(np.float64)
        if self.normalise:
            norms = np.linalg.norm(x, axis=1, keepdims=True)
            x = x / np.where(norms > 0, norms, 1.0)
        return x @ self.coef.T + self.intercept

    def predict_proba(self, embeddings: np.ndarray) -> np.ndarray:
        """Class probabilities ``(n, C)`` (columns in :attr:`classes` order; rows sum to 1).

        Raises:
            ValueError: Embeddings of another width than the head's, or not numbers.
        """
        z = self.logits(embeddings)
        z = z - z.max(axis=1, keepdims=True) if len(z) else z
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, embeddings: np.ndarray) -> list[str]:
        """The most probable class of each row (ties go to the earlier class)."""
        return [self.classes[i] for i in np.argmax(self.logits(embeddings), axis=1)]

    def header(self) -> dict[str, Any]:
        """The JSON header of the head's file."""
        from fairsets.core.version import __version__

        return {
            "format": FORMAT,
            "attribute": self.attribute,
            "classes": self.classes,
            "encoder": self.encoder,
            "pretrained": self.pretrained,
            "encoder_provenance": self.encoder_provenance,
            "normalise": self.normalise,
            "dim": self.dim,
            "metrics": self.metrics,
            "training": {"fairsets_version": __version__, **self.training},
            "sha256": {"coef": array_sha256(self.coef), "intercept": array_sha256(self.intercept)},
        }

    def describe(self) -> dict[str, Any]:
        """What a manifest records about the head: encoder, classes, metrics and the file's sha256."""
        return {
            "encoder": self.encoder,
            "pretrained": self.pretrained,
            "classes": self.classes,
            "metrics": {k: v for k, v in self.metrics.items() if k != "test_items"},
            "sha256": self.sha256,
        }

    def __repr__(self) -> str:
        return f"Head({self.attribute!r}, classes={self.classes}, encoder={self.encoder!r}, dim={self.dim})"


def write_head(path: str | os.PathLike[str], head: Head) -> Head:
    """Write ``head`` to ``path`` (atomic, deterministic bytes); returns it as read back (with ``sha256``)."""
    write_checked_npz(path, head.header(), {"coef": head.coef, "intercept": head.intercept})
    return load_head(path)


def load_head(path: str | os.PathLike[str]) -> Head:
    """Read a head written by ``fairsets annotate train``, verifying format and checksums.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: Not a head file, or corrupt or modified (the message says which).
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"head not found: {p}; train one with fairsets annotate train")
    what = f"{p} is not a fairsets attribute head ({FORMAT} .npz from fairsets annotate train)"
    data = p.read_bytes()
    header, arrays = read_checked_npz(p, FORMAT, _ARRAYS, what)
    pretrained = header.get("pretrained")
    if isinstance(pretrained, str) and pretrained and not Path(pretrained).is_absolute():
        beside = p.parent / pretrained
        if beside.is_file():  # weights saved with the head (a fine-tuned encoder) travel with it
            pretrained = str(beside.resolve())
    try:
        head = Head(
            attribute=header["attribute"],
            classes=header["classes"],
            encoder=header["encoder"],
            pretrained=pretrained,
            coef=arrays["coef"],
            intercept=arrays["intercept"],
            normalise=header["normalise"],
            metrics=header.get("metrics") or {},
            sha256=hashlib.sha256(data).hexdigest(),
            encoder_provenance=header.get("encoder_provenance") or {},
            training=header.get("training") or {},
        )
        dim = int(header["dim"])
    except (KeyError, TypeError) as e:
        raise ValueError(f"{what}: incomplete header ({e})") from e
    except ValueError as e:
        raise ValueError(f"{p}: corrupt or modified: {e}") from e
    if head.dim != dim:
        raise ValueError(f"{p}: corrupt or modified: header says dim {dim}, the arrays have {head.dim}")
    if hashlib.sha256(p.read_bytes()).hexdigest() != head.sha256:
        raise ValueError(f"{p}: changed while it was read; read it again")
    return head


def evaluate(classes: Sequence[str], true: Sequence[str], predicted: Sequence[str]) -> dict[str, Any]:
    """Test metrics of predicted against true labels (κ and the matrix from :mod:`.agreement`).

    Returns:
        ``n``, ``accuracy``, ``kappa`` (Cohen's; None when undefined: one class everywhere),
        ``per_class`` (``{class: {precision, recall, f1, support}}``; a precision or recall whose
        denominator is 0 is 0, as scikit-learn's ``zero_division=0``), ``macro_f1`` and
        ``confusion`` (rows true, columns predicted, in ``classes`` order).
    """
    import math

    from ..agreement import confusion_matrix, kappa_from_confusion

    cm, _ = confusion_matrix(list(true), list(predicted), list(classes))
    n = int(cm.sum())
    per_class: dict[str, dict[str, float | int]] = {}
    for i, c in enumerate(classes):
        tp, col, row = int(cm[i, i]), int(cm[:, i].sum()), int(cm[i, :].sum())
        precision = tp / col if col else 0.0
        recall = tp / row if row else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_class[c] = {"precision": precision, "recall": recall, "f1": f1, "support": row}
    kappa = float(kappa_from_confusion(cm)) if n else math.nan
    return {
        "n": n,
        "accuracy": float(np.trace(cm)) / n if n else 0.0,
        "kappa": None if math.isnan(kappa) else kappa,
        "macro_f1": float(np.mean([m["f1"] for m in per_class.values()])) if classes else 0.0,
        "per_class": per_class,
        "confusion": cm.tolist(),
    }
