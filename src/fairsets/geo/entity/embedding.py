"""Image embedding for the classifier: paths, bytes or structs in, one vector (or a reason) per image out."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fairsets.core.progress import Progress

from .annotations import Annotation, Annotations, _first

if TYPE_CHECKING:
    from fairsets.audit.embeddings import EmbeddingCache
    from fairsets.models import VLM

log = logging.getLogger("fairsets.geo.entity")  # the package's name, as log lines always showed


@dataclass
class ImageEmbeddings:
    """Embeddings of a list of images, aligned with the input (:func:`embed_images`).

    Attributes:
        vectors: ``(n, dim)`` float32 as the model returns them; NaN rows where ``errors`` has an entry.
        errors: Input index → why that image could not be embedded.
        sha256: Input index → SHA-256 of the image bytes (None where they could not be read).
        computed: How many images the model embedded (the rest came from the cache or repeats).
    """

    vectors: np.ndarray
    errors: dict[int, str]
    sha256: list[str | None]
    computed: int = 0

    @property
    def ok(self) -> np.ndarray:
        """Boolean mask of the inputs that have an embedding."""
        mask = np.ones(len(self.sha256), dtype=bool)
        mask[list(self.errors)] = False
        return mask


def embedding_cache(cache_dir: str | os.PathLike[str], vlm: VLM) -> EmbeddingCache:
    """The embedding cache of ``vlm`` under ``cache_dir`` (``cache_dir/{vlm.slug}``), keyed by image SHA-256.

    The layout is :class:`fairsets.audit.embeddings.EmbeddingCache`'s; a cache folder of another
    model is refused.
    """
    from fairsets.audit.embeddings import EmbeddingCache

    return EmbeddingCache(Path(cache_dir) / vlm.slug, vlm.model_id, vlm.provenance())


def _read_item(item: Any, base_dir: Path | None) -> tuple[bytes | None, str | None]:
    """The bytes of one image (bytes, a path, or an ``{"bytes", "path"}`` struct), or why not."""
    if isinstance(item, dict):
        data = item.get("bytes")
        item = data if data is not None else item.get("path")
    if item is None:
        return None, "no image"
    if isinstance(item, bytes | bytearray | memoryview):
        data = bytes(item)
        return (data, None) if data else (None, "empty image bytes")
    if isinstance(item, str | os.PathLike):
        text = os.fspath(item)
        if not str(text).strip():
            return None, "no image path"
        p = Path(text).expanduser()
        if not p.is_absolute() and base_dir is not None:
            p = base_dir / p
        from fairsets.fetch.localfile import LocalFileRefused, read_local_file

        try:  # regular files only, bounded: a FIFO or /dev/zero in a table must not hang the run
            data = read_local_file(p)
        except FileNotFoundError:
            return None, f"image not found: {p}"
        except LocalFileRefused as e:
            return None, f"cannot read {p}: {e}"
        except OSError as e:
            return None, f"cannot read {p}: {e.strerror or e}"
        return (data, None) if data else (None, f"empty image file: {p}")
    return None, f"unsupported image value of type {type(item).__name__}"


def _decode_error(e: Exception) -> str:
    """Why an image does not decode, without PIL's object addresses (reports stay reproducible)."""
    from PIL import UnidentifiedImageError

    from fairsets.vision.imageformat import ImageDecodeError, decode_failure

    if isinstance(e, UnidentifiedImageError) or (isinstance(e, ImageDecodeError) and e.kind == "not_image"):
        return "image does not decode: not a recognised image format"
    return "image does not decode: " + decode_failure(e)


class _Embedder:
    """Embeds images batch by batch, reusing embeddings of identical bytes (and a cache)."""

    def __init__(
        self, vlm: VLM, *, batch_size: int, cache: EmbeddingCache | None = None, flush_every: int = 512
    ) -> None:
        if batch_size < 1 or flush_every < 1:
            raise ValueError("batch_size and flush_every must be >= 1")
        if cache is not None and cache.model_id != vlm.model_id:
            raise ValueError(f"the embedding cache belongs to {cache.model_id!r}, not {vlm.model_id!r}")
        self.vlm = vlm
        self.dim = int(vlm.embed_dim)
        self.batch_size = batch_size
        self.cache = cache
        self.flush_every = flush_every
        self.known: dict[str, np.ndarray] = {}
        if cache is not None:
            self.known = {sha: vec for (_, sha), vec in cache.load_images().items()}
        self.pending: list[tuple[str, str, np.ndarray]] = []

    def embed(
        self,
        items: Sequence[Any],
        *,
        base_dir: Path | None = None,
        advance: Callable[[int], Any] | None = None,
    ) -> ImageEmbeddings:
        from fairsets.audit.dataset import sha256_bytes
        from fairsets.audit.embeddings import decode_image

        step = advance or (lambda n: None)
        if self.cache is None:  # without a cache, repeats are only looked for within one call
            self.known = {}
        n = len(items)
        vectors = np.full((n, self.dim), np.nan, dtype=np.float32)
        errors: dict[int, str] = {}
        shas: list[str | None] = [None] * n
        batch: list[tuple[int, str, Any]] = []
        computed = 0

        def run() -> int:
            if not batch:
                return 0
            vecs = np.asarray(self.vlm.embed_images([im for _, _, im in batch]), dtype=np.float32)
            if vecs.shape != (len(batch), self.dim):
                raise ValueError(
                    f"{self.vlm.model_id} returned embeddings of shape {vecs.shape}, "
                    f"expected ({len(batch)}, {self.dim})"
                )
            for (i, sha, _), vec in zip(batch, vecs, strict=True):
                vectors[i] = vec
                if sha not in self.known:
                    self.known[sha] = vec
                    if self.cache is not None:
                        self.pending.append((sha, sha, vec))
            done = len(batch)
            batch.clear()
            step(done)
            if self.cache is not None and len(self.pending) >= self.flush_every:
                self.flush()
            return done

        waiting: dict[str, list[int]] = {}  # repeats of an image already in the batch
        for i, item in enumerate(items):
            data, err = _read_item(item, base_dir)
            if err is not None:
                errors[i] = err
                step(1)
                continue
            sha = sha256_bytes(data)
            shas[i] = sha
            if sha in self.known:
                vectors[i] = self.known[sha]
                step(1)
                continue
            if sha in waiting:
                waiting[sha].append(i)
                continue
            try:
                image = decode_image(data)
            except Exception as e:  # a damaged image is a per-row rejection, not a failed run
                errors[i] = _decode_error(e)
                step(1)
                continue
            waiting[sha] = []
            batch.append((i, sha, image))
            if len(batch) >= self.batch_size:
                computed += run()
        computed += run()
        for sha, repeats in waiting.items():
            for i in repeats:
                vectors[i] = self.known[sha]
            step(len(repeats))
        return ImageEmbeddings(vectors=vectors, errors=errors, sha256=shas, computed=computed)

    def flush(self) -> None:
        if self.cache is not None and self.pending:
            self.cache.add_images(self.pending)
        self.pending = []


def embed_images(
    items: Sequence[str | os.PathLike[str] | bytes | dict[str, Any] | None],
    vlm: VLM,
    *,
    base_dir: str | os.PathLike[str] | None = None,
    batch_size: int = 32,
    cache: EmbeddingCache | None = None,
    progress: Progress | None = None,
) -> ImageEmbeddings:
    """Embed images given as paths, bytes or ``{"bytes", "path"}`` structs, in input order.

    Images that cannot be read or decoded get a NaN row and an entry in ``errors``: one bad image
    never fails the call. Identical bytes are embedded once.

    Args:
        items: The images.
        vlm: The encoder (:func:`fairsets.models.load_vlm`).
        base_dir: Folder that relative paths are relative to (default: the working directory).
        batch_size: Images per forward pass.
        cache: An embedding cache (:func:`embedding_cache`) to read from and add to.
        progress: Progress bars (default: on when stderr is a terminal).

    Returns:
        The embeddings, aligned with ``items``.

    Raises:
        ValueError: A bad ``batch_size``, a cache of another model, or a model that returns
            embeddings of the wrong shape.
    """
    embedder = _Embedder(vlm, batch_size=batch_size, cache=cache)
    progress = progress or Progress()
    with progress.stage(f"embedding images ({vlm.model_id})", len(items)) as advance:
        base = Path(base_dir) if base_dir is not None else None
        out = embedder.embed(items, base_dir=base, advance=advance)
    embedder.flush()
    return out


@dataclass
class AnnotatedEmbeddings:
    """Annotated rows with their embeddings (:func:`embed_annotations`).

    Attributes:
        source: The annotation CSV.
        entity: The entity.
        rows: The rows that have an embedding.
        X: ``(len(rows), dim)`` float32 embeddings.
        encoder: Provenance of the encoder (``VLM.provenance()`` plus ``spec``).
        rejected: Rows left out, each ``{"line", "image", "reason"}`` (sorted by line).
        has_country: Whether the CSV has a country column.
        other_entity: Rows about another entity (not used).
    """

    source: Path
    entity: str | None
    rows: list[Annotation]
    X: np.ndarray
    encoder: dict[str, Any]
    rejected: list[dict[str, Any]] = field(default_factory=list)
    has_country: bool = False
    other_entity: int = 0

    @property
    def labels(self) -> np.ndarray:
        """Boolean ``(n,)`` array of the ``present`` labels."""
        return np.array([r.present for r in self.rows], dtype=bool)

    @property
    def countries(self) -> list[str | None]:
        """The rows' ISO3 countries (None where a row names none)."""
        return [r.country for r in self.rows]


def encoder_info(vlm: VLM) -> dict[str, Any]:
    """The encoder provenance a classifier stores: ``vlm.provenance()`` plus ``spec`` (``family:name``)."""
    info = dict(vlm.provenance())
    info["spec"] = f"{vlm.family}:{vlm.name}"
    return json.loads(json.dumps(info, default=str, sort_keys=True))


def embed_annotations(
    annotations: Annotations,
    vlm: VLM,
    *,
    batch_size: int = 32,
    cache: EmbeddingCache | None = None,
    progress: Progress | None = None,
) -> AnnotatedEmbeddings:
    """Embed the annotated images; unreadable images and repeated image contents become rejected rows.

    A row whose image bytes equal an earlier row's is rejected ("same image as line N"): a
    duplicate could otherwise sit in both the training and the test split.

    Args:
        annotations: From :func:`load_annotations`.
        vlm: The encoder.
        batch_size: Images per forward pass.
        cache: An embedding cache (:func:`embedding_cache`).
        progress: Progress bars.

    Returns:
        The rows that have an embedding, and every rejected row with its reason.

    Raises:
        ValueError: No row could be embedded.
    """
    emb = embed_images(
        [r.image for r in annotations.rows], vlm, batch_size=batch_size, cache=cache, progress=progress
    )
    rejected = list(annotations.rejected)
    keep: list[int] = []
    first: dict[str, Annotation] = {}
    for i, row in enumerate(annotations.rows):
        where = {"line": row.line, "image": _shown(row.image, annotations.source)}
        if i in emb.errors:
            rejected.append({**where, "reason": emb.errors[i]})
            continue
        sha = emb.sha256[i]
        assert sha is not None
        if sha in first:
            prev = first[sha]
            clash = "" if prev.present == row.present else f" (with a different label: present={row.present})"
            rejected.append({**where, "reason": f"same image as line {prev.line}{clash}"})
            continue
        first[sha] = row
        keep.append(i)
    rejected.sort(key=lambda r: r["line"])
    if not keep:
        raise ValueError(
            f"{annotations.source}: no image could be embedded "
            f"({len(rejected)} rejected, e.g. {_first(rejected)})"
        )
    if rejected:
        log.warning("%d annotated row(s) rejected (first: %s)", len(rejected), _first(rejected))
    return AnnotatedEmbeddings(
        source=annotations.source,
        entity=annotations.entity,
        rows=[annotations.rows[i] for i in keep],
        X=np.ascontiguousarray(emb.vectors[keep]),
        encoder=encoder_info(vlm),
        rejected=rejected,
        has_country=annotations.has_country,
        other_entity=annotations.other_entity,
    )


def _shown(image: Path, source: Path) -> str:
    try:
        return image.relative_to(source.resolve().parent).as_posix()
    except ValueError:
        return str(image)
