"""The entity-presence classifier: a linear SVM over embeddings, applied with numpy and saved as ``.npz``.

The saved file's format is described in the package docstring (:mod:`fairsets.geo.entity`).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fairsets.core.checked_npz import array_sha256, read_checked_npz, write_checked_npz

#: Value of ``header["format"]`` in a saved classifier.
FORMAT = "fairsets.geo.entity/1"

_ARRAYS = ("mean", "scale", "coef", "intercept")


def _f64(a: Any, name: str) -> np.ndarray:
    arr = np.array(a, dtype="<f8", order="C", copy=True)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} holds non-finite values")
    arr.setflags(write=False)
    return arr


def _json(value: Any, name: str) -> Any:
    try:
        return json.loads(json.dumps(value, allow_nan=False, sort_keys=True))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be JSON-serialisable (no NaN/inf): {e}") from e


def _version() -> str:
    from fairsets.core.version import __version__

    return __version__


def _unit_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


@dataclass(frozen=True, eq=False)
class EntityPresenceClassifier:
    """A linear SVM over standardised embeddings: ``score = ((x - mean) / scale) · coef + intercept``.

    ``x`` is L2-normalised first when ``l2_normalize``; the entity is predicted present when
    ``score >= threshold``. See the module docstring for the saved file.

    Attributes:
        entity: What the classifier detects ("house").
        mean: ``(d,)`` float64 mean of the training embeddings.
        scale: ``(d,)`` float64 standard deviation (1 where it is 0).
        coef: ``(d,)`` float64 SVM weights.
        intercept: SVM bias.
        threshold: Decision threshold on the score.
        C: The SVM's regularisation constant.
        l2_normalize: Whether embeddings are L2-normalised before standardising.
        encoder: Provenance of the embeddings it was trained on (``model_id``, ``spec``,
            ``pretrained``, ``embed_dim``, ...).
        meta: JSON-serialisable training record (split, counts, cross-validation, metrics).
    """

    entity: str
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    threshold: float = 0.0
    C: float = 1.0
    l2_normalize: bool = True
    encoder: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.entity, str) or not self.entity.strip():
            raise ValueError(f"entity must be a non-empty string, got {self.entity!r}")
        mean, scale, coef = _f64(self.mean, "mean"), _f64(self.scale, "scale"), _f64(self.coef, "coef")
        if coef.ndim != 1 or coef.size == 0:
            raise ValueError(f"coef must be a (d,) vector, got shape {coef.shape}")
        for name, arr in (("mean", mean), ("scale", scale)):
            if arr.shape != coef.shape:
                raise ValueError(f"{name} must have shape {coef.shape}, got {arr.shape}")
        if not (scale > 0).all():
            raise ValueError("scale must be positive")
        for name in ("intercept", "threshold", "C"):
            value = float(getattr(self, name))
            if not math.isfinite(value):
                raise ValueError(f"{name} must be finite, got {value!r}")
            object.__setattr__(self, name, value)
        if self.C <= 0:
            raise ValueError(f"C must be positive, got {self.C}")
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "scale", scale)
        object.__setattr__(self, "coef", coef)
        object.__setattr__(self, "l2_normalize", bool(self.l2_normalize))
        object.__setattr__(self, "encoder", _json(dict(self.encoder or {}), "encoder"))
        object.__setattr__(self, "meta", _json(dict(self.meta or {}), "meta"))
        dim = self.encoder.get("embed_dim")
        if dim is not None and int(dim) != coef.size:
            raise ValueError(f"encoder embed_dim {dim} does not match the classifier's dimension {coef.size}")

    @property
    def dim(self) -> int:
        """Embedding dimension ``d``."""
        return int(self.coef.size)

    @property
    def model_id(self) -> str:
        """The encoder's ``model_id`` ("" when unknown)."""
        return str(self.encoder.get("model_id", ""))

    def check_encoder(self, model_id: str | None, dim: int, *, allow_other: bool = False) -> None:
        """Refuse embeddings of another dimension, or (unless ``allow_other``) of another encoder.

        Raises:
            ValueError: Saying which encoder the classifier needs.
        """
        if int(dim) != self.dim:
            raise ValueError(
                f"the {self.entity!r} classifier takes {self.dim}-dim embeddings "
                f"(from {self.model_id or 'an unknown encoder'}), got {dim}-dim embeddings"
                + (f" from {model_id}" if model_id else "")
            )
        if model_id and self.model_id and model_id != self.model_id and not allow_other:
            raise ValueError(
                f"the {self.entity!r} classifier was trained on embeddings of {self.model_id}, "
                f"not {model_id}; embed with the same model "
                "(allow_other_encoder / --allow-other-encoder overrides this)"
            )

    def decision_function(self, embeddings: np.ndarray, *, model_id: str | None = None) -> np.ndarray:
        """SVM scores (``>= threshold`` means present).

        Args:
            embeddings: ``(n, d)`` or ``(d,)`` embeddings, as the encoder returns them.
            model_id: The encoder that produced them; refused when it is not the classifier's.

        Returns:
            ``(n,)`` float64 scores (a scalar array of shape ``()`` for a ``(d,)`` input).

        Raises:
            ValueError: Another dimension or encoder, non-finite values, a non-numeric array.
        """
        x = np.asarray(embeddings)
        if x.ndim not in (1, 2):
            raise ValueError(f"embeddings must be (n, d) or (d,), got shape {x.shape}")
        if x.dtype.kind not in "fiu":
            raise ValueError(f"embeddings must hold real numbers, got dtype {x.dtype}")
        self.check_encoder(model_id, x.shape[-1])
        one = x.ndim == 1
        x64 = np.array(x, dtype=np.float64, order="C", copy=True).reshape(-1, self.dim)
        if not np.isfinite(x64).all():
            raise ValueError("embeddings hold non-finite values (NaN or inf)")
        if self.l2_normalize:
            x64 = _unit_rows(x64)
        scores = ((x64 - self.mean) / self.scale) @ self.coef + self.intercept
        return scores.reshape(()) if one else scores

    def predict(
        self, embeddings: np.ndarray, *, threshold: float | None = None, model_id: str | None = None
    ) -> np.ndarray:
        """Whether the entity is present: ``decision_function(embeddings) >= threshold``.

        Args:
            embeddings: ``(n, d)`` or ``(d,)`` embeddings.
            threshold: Override of :attr:`threshold`.
            model_id: The encoder that produced them (checked).

        Returns:
            Boolean array.
        """
        t = self.threshold if threshold is None else float(threshold)
        return np.asarray(self.decision_function(embeddings, model_id=model_id) >= t)

    def _arrays(self) -> dict[str, np.ndarray]:
        return {
            "mean": self.mean,
            "scale": self.scale,
            "coef": self.coef,
            "intercept": np.array([self.intercept], dtype="<f8"),
        }

    def header(self) -> dict[str, Any]:
        """The JSON header :meth:`save` writes."""
        return {
            "format": FORMAT,
            "entity": self.entity,
            "dim": self.dim,
            "l2_normalize": self.l2_normalize,
            "threshold": self.threshold,
            "C": self.C,
            "encoder": self.encoder,
            "meta": self.meta,
            "fairsets_version": self.meta.get("fairsets_version", _version()),
            "sha256": {name: array_sha256(arr) for name, arr in self._arrays().items()},
        }

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the classifier to ``path`` (``.npz``, atomically, no pickle, deterministic bytes).

        Returns:
            The path written.
        """
        return write_checked_npz(path, self.header(), self._arrays())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> EntityPresenceClassifier:
        """Read a classifier written by :meth:`save`, verifying its format and checksums.

        Raises:
            FileNotFoundError: ``path`` does not exist.
            ValueError: Not an entity classifier, or corrupt or modified.
        """
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"classifier not found: {p}")
        what = f"{p} is not a fairsets entity classifier ({FORMAT} .npz)"
        header, arrays = read_checked_npz(p, FORMAT, _ARRAYS, what)
        if arrays["intercept"].shape != (1,):
            raise ValueError(f"{p}: corrupt or modified: intercept has shape {arrays['intercept'].shape}")
        try:
            out = cls(
                entity=header["entity"],
                mean=arrays["mean"],
                scale=arrays["scale"],
                coef=arrays["coef"],
                intercept=float(arrays["intercept"][0]),
                threshold=header["threshold"],
                C=header["C"],
                l2_normalize=header["l2_normalize"],
                encoder=header.get("encoder") or {},
                meta=header.get("meta") or {},
            )
            dim = int(header["dim"])
        except (KeyError, TypeError) as e:
            raise ValueError(f"{what}: incomplete header ({e})") from e
        if out.dim != dim:
            raise ValueError(f"{p}: corrupt or modified: header says dim {dim}, the arrays have {out.dim}")
        return out

    def __repr__(self) -> str:
        return (
            f"EntityPresenceClassifier(entity={self.entity!r}, dim={self.dim}, C={self.C:g}, "
            f"threshold={self.threshold:g}, encoder={self.model_id!r})"
        )
