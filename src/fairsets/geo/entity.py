r"""Entity-presence filtering (GeoProfiler §3.2, Appendix A.3): does an image show the entity?

Captions that mention an entity ("house") often come with images that do not show it. GeoProfiler
annotates a few hundred geo-diverse images per entity (Table 6), trains an SVM on CLIP image
features, reports F1 of the positive class on an in-distribution (ID) test set and on an
out-of-distribution (OOD) one made of held-out countries (Table 7: China, Chile, New Zealand,
Philippines and Spain in the paper), and drops the images it predicts do not show the entity.

Workflow::

    ann = load_annotations("house.csv", entity="house")       # image, present[, country, entity]
    data = embed_annotations(ann, vlm)                         # vlm = fairsets.models.load_vlm(...)
    result = fit_entity_classifier(data, ood_countries=PAPER_OOD_COUNTRIES, seed=0)
    result.classifier.save("house.npz")
    filter_dataset("captions.parquet", result.classifier, vlm, "filtered.parquet")

(:func:`train_entity_classifier` runs the first three steps; ``fairsets geo entity-train`` and
``fairsets geo entity-filter`` are the commands.)

Split
-----
OOD test: every row of the held-out countries (named, or a seeded choice that puts 15-20% of the
rows there). ID test: a seeded sample of ``id_test_size`` rows (the paper's 100) from the other
rows, stratified by label. Train: the rest. Without a country column there is no OOD test.
Rows whose image is missing or unreadable, and rows whose image content repeats an earlier row
(a duplicate would leak between train and test), are rejected with a reason before the split.

Model
-----
A linear SVM (scikit-learn ``SVC(kernel="linear", class_weight="balanced")``) on standardised,
L2-normalised embeddings; ``C`` is chosen from a small grid by seeded stratified k-fold
cross-validation on the training split (F1 of positives; ties go to the smaller ``C``). The
fitted model is four arrays, so it needs only numpy to apply.

File format (``.npz``, no pickle)
---------------------------------
A numpy zip archive with deterministic bytes (fixed member order and timestamps) holding
``mean``, ``scale``, ``coef`` (``(d,)`` float64 each), ``intercept`` (``(1,)`` float64) and
``header``, a 0-d unicode array holding JSON::

    {"format": "fairsets.geo.entity/1", "entity": "house", "dim": 512, "l2_normalize": true,
     "threshold": 0.0, "C": 0.1, "encoder": {model_id, spec, family, model, pretrained, embed_dim,
     package, weights}, "meta": {split, counts, cv, metrics, seed, ...},
     "fairsets_version": "...", "sha256": {"mean": ..., "scale": ..., "coef": ..., "intercept": ...}}

(SHA-256 of each array's little-endian C-order bytes; :meth:`EntityPresenceClassifier.load`
verifies them.) Applying it::

    z = np.load("house.npz", allow_pickle=False); h = json.loads(str(z["header"]))
    x = X.astype(np.float64)
    if h["l2_normalize"]:
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
    score = ((x - z["mean"]) / z["scale"]) @ z["coef"] + z["intercept"][0]
    present = score >= h["threshold"]
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
import logging
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fairsets.core.checked_npz import array_sha256, read_checked_npz, write_checked_npz
from fairsets.core.progress import Progress
from fairsets.core.textfile import decode_text, read_text
from fairsets.geo.countries import country as country_info
from fairsets.geo.countries import fold, is_none_answer, normalize_country

if TYPE_CHECKING:
    from fairsets.audit.embeddings import EmbeddingCache
    from fairsets.models import VLM

__all__ = [
    "DEFAULT_C_GRID",
    "FORMAT",
    "OOD_FRACTION",
    "PAPER_ID_TEST_SIZE",
    "PAPER_OOD_COUNTRIES",
    "REPORT_SCHEMA",
    "AnnotatedEmbeddings",
    "Annotation",
    "Annotations",
    "EntityPresenceClassifier",
    "FilterResult",
    "ImageEmbeddings",
    "Split",
    "TrainResult",
    "binary_metrics",
    "embed_annotations",
    "embed_images",
    "embedding_cache",
    "encoder_info",
    "filter_dataset",
    "fit_classifier",
    "fit_entity_classifier",
    "load_annotations",
    "parse_present",
    "split_annotations",
    "train_entity_classifier",
]

log = logging.getLogger(__name__)

#: Value of ``header["format"]`` in a saved classifier.
FORMAT = "fairsets.geo.entity/1"
#: ``schema`` of the training report (:attr:`TrainResult.report`).
REPORT_SCHEMA = "fairsets.geo.entity-train/1"
#: The paper's OOD test countries (Appendix A.3.1): China, Chile, New Zealand, Philippines, Spain.
PAPER_OOD_COUNTRIES: tuple[str, ...] = ("CHN", "CHL", "NZL", "PHL", "ESP")
#: The paper's test-set size (§3.2: "100 form the test set").
PAPER_ID_TEST_SIZE = 100
#: The share of rows a seeded choice of held-out countries aims for.
OOD_FRACTION: tuple[float, float] = (0.15, 0.20)
#: The SVM's C values tried by cross-validation.
DEFAULT_C_GRID: tuple[float, ...] = (0.001, 0.01, 0.1, 1.0, 10.0)

_ARRAYS = ("mean", "scale", "coef", "intercept")
_TRUE = frozenset({"1", "1.0", "true", "t", "yes", "y"})
_FALSE = frozenset({"0", "0.0", "false", "f", "no", "n"})
_OUT_COLUMNS = ("entity_present", "entity_score", "entity_error")
_OOD_ATTEMPTS = 4096


# ------------------------------------------------------------------------------------- annotations
@dataclass(frozen=True)
class Annotation:
    """One usable row of an annotation CSV.

    Attributes:
        line: The row's line number in the CSV (the header is line 1).
        image: Absolute path of the image.
        present: Whether annotators saw the entity.
        country: ISO 3166-1 alpha-3 code, or None when the row names no country.
        entity: The row's ``entity`` cell (None without that column or when blank).
    """

    line: int
    image: Path
    present: bool
    country: str | None = None
    entity: str | None = None


@dataclass
class Annotations:
    """A parsed annotation CSV (:func:`load_annotations`).

    Attributes:
        source: The CSV.
        entity: The entity the rows are about (the argument, or the CSV's single ``entity`` value).
        rows: Usable rows, in file order.
        rejected: Rows left out, each ``{"line", "image", "reason"}``.
        has_country: Whether the CSV has a ``country`` column.
        other_entity: Rows about another entity (multi-entity CSVs), not used and not rejected.
    """

    source: Path
    entity: str | None
    rows: list[Annotation]
    rejected: list[dict[str, Any]] = field(default_factory=list)
    has_country: bool = False
    other_entity: int = 0


def parse_present(value: Any) -> bool:
    """Read an annotation label: ``1/0``, ``true/false``, ``yes/no`` (any case; ``t/f``, ``y/n``).

    Raises:
        ValueError: Anything else (an empty cell included).
    """
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if value is not None else ""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"present must be 1/0, true/false or yes/no, got {value!r}")


def _resolve(path: str, base: Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else base / p


def load_annotations(csv_path: str | os.PathLike[str], *, entity: str | None = None) -> Annotations:
    """Read an annotation CSV: ``image``, ``present`` and optional ``country`` and ``entity`` columns.

    ``image`` is a path, relative to the CSV's folder or absolute. ``present`` is 1/0, true/false
    or yes/no. ``country`` is an ISO code or a name (normalised to ISO alpha-3; blank or "none"
    means no country). With an ``entity`` column holding several entities, ``entity`` picks the
    rows (blank cells count as the file's entity). Column names are case-insensitive.

    Args:
        csv_path: The CSV (UTF-8, a BOM is fine).
        entity: The entity; default: the CSV's single ``entity`` value, or None.

    Returns:
        The rows; rows whose image file is missing are rejected with a reason, not an error.

    Raises:
        FileNotFoundError: The CSV does not exist.
        ValueError: A missing column, a bad ``present`` or ``country`` value (the message names the
            line), no rows, or an ambiguous entity.
    """
    path = Path(csv_path)
    if not path.is_file():
        raise FileNotFoundError(f"annotation CSV not found: {path}")
    base = path.resolve().parent
    with io.StringIO(read_text(path), newline="") as f:  # TextFileError names the file and line
        reader = csv.reader(f)
        try:
            header = [h.strip().lower() for h in next(reader)]
        except StopIteration:
            raise ValueError(f"{path}: empty file (expected columns image, present)") from None
        missing = [c for c in ("image", "present") if c not in header]
        if missing:
            raise ValueError(
                f"{path}: missing column(s) {', '.join(missing)} (found: {', '.join(h for h in header if h)})"
            )
        known = ("image", "present", "country", "entity")
        col = {name: header.index(name) for name in known if name in header}
        raw: list[tuple[int, dict[str, str]]] = []
        for cells in reader:
            if not any(c.strip() for c in cells):
                continue
            if any(c.strip() for c in cells[len(header) :]):  # an unquoted comma shifts the columns
                raise ValueError(
                    f"{path}: line {reader.line_num}: {len(cells)} fields where the header has "
                    f"{len(header)}; quote values that contain commas"
                )
            cells = cells + [""] * (len(header) - len(cells))
            raw.append((reader.line_num, {name: cells[i].strip() for name, i in col.items()}))
    if not raw:
        raise ValueError(f"{path}: no data rows")

    chosen = entity.strip() if entity is not None and entity.strip() else None
    if "entity" in col:
        values = {fold(r["entity"]): r["entity"] for _, r in raw if r["entity"]}
        if chosen is None and len(values) > 1:
            raise ValueError(
                f"{path}: the CSV holds several entities ({', '.join(sorted(values.values()))}); choose one"
            )
        if chosen is None and values:
            chosen = next(iter(values.values()))
        elif chosen is not None and values and fold(chosen) not in values:
            raise ValueError(
                f"{path}: no row is about entity {chosen!r} "
                f"(the CSV has: {', '.join(sorted(values.values()))})"
            )

    out = Annotations(source=path, entity=chosen, rows=[], has_country="country" in col)
    errors: list[str] = []
    for line, r in raw:
        if chosen is not None and r.get("entity") and fold(r["entity"]) != fold(chosen):
            out.other_entity += 1
            continue
        where = f"{path}: line {line} (image {r['image']!r})"
        try:
            present = parse_present(r["present"])
        except ValueError as e:
            errors.append(f"{where}: {e}")
            continue
        iso3 = None
        if "country" in col and not is_none_answer(r["country"]):
            iso3 = normalize_country(r["country"])
            if iso3 is None:
                errors.append(f"{where}: unknown country {r['country']!r} (use an ISO code or a name)")
                continue
        if not r["image"]:
            out.rejected.append({"line": line, "image": "", "reason": "no image path"})
            continue
        image = _resolve(r["image"], base)
        if not image.is_file():
            reason = "image is not a file" if image.exists() else "image not found"
            out.rejected.append({"line": line, "image": r["image"], "reason": f"{reason}: {image}"})
            continue
        out.rows.append(Annotation(line, image, present, iso3, r.get("entity") or None))
    if errors:
        more = f" (and {len(errors) - 1} more bad row(s))" if len(errors) > 1 else ""
        raise ValueError(errors[0] + more)
    if not out.rows:
        raise ValueError(
            f"{path}: no usable rows ({len(out.rejected)} rejected, e.g. {_first(out.rejected)})"
        )
    return out


def _first(rejected: Sequence[dict[str, Any]]) -> str:
    if not rejected:
        return "none"
    r = rejected[0]
    where = f"line {r['line']}" if "line" in r else f"row {r.get('row')}"
    return f"{where}: {r['reason']}"


# -------------------------------------------------------------------------------------- embeddings
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
        from ..fetch.localfile import LocalFileRefused, read_local_file

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

    from ..vision.imageformat import ImageDecodeError, decode_failure

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


# ------------------------------------------------------------------------------------------- split
@dataclass(frozen=True)
class Split:
    """Row indices of the three sets (sorted, disjoint, covering every row).

    Attributes:
        train: Training rows.
        id_test: In-distribution test rows (countries seen in training, or no country).
        ood_test: Rows of the held-out countries.
        ood_countries: The held-out countries (ISO3, sorted).
        ood_missing: Held-out countries that were named but have no rows.
        seed: The seed of the random choices.
    """

    train: np.ndarray
    id_test: np.ndarray
    ood_test: np.ndarray
    ood_countries: tuple[str, ...]
    ood_missing: tuple[str, ...] = ()
    seed: int = 0

    def sets(self) -> dict[str, np.ndarray]:
        """``{"train", "id", "ood"}`` → indices."""
        return {"train": self.train, "id": self.id_test, "ood": self.ood_test}


def _norm_countries(names: Iterable[str]) -> tuple[str, ...]:
    out = []
    for name in names:
        if not str(name).strip():
            continue
        iso3 = normalize_country(name)
        if iso3 is None:
            raise ValueError(f"unknown held-out country {name!r} (use an ISO code or a name)")
        out.append(iso3)
    return tuple(sorted(set(out)))


def _choose_ood(
    labels: np.ndarray,
    countries: Sequence[str | None],
    k: int | None,
    fraction: tuple[float, float],
    rng: np.random.Generator,
) -> tuple[str, ...]:
    """A seeded set of countries holding a ``fraction`` of the rows, with both labels inside and out."""
    names = sorted({c for c in countries if c is not None})
    if k is not None and not 1 <= k < len(names):
        raise ValueError(
            f"n_ood_countries must be between 1 and {len(names) - 1} (the data has {len(names)} countries)"
        )
    if len(names) < 2:
        return ()
    lo, hi = fraction
    n = len(labels)
    index = {c: i for i, c in enumerate(names)}
    codes = np.array([index[c] if c is not None else -1 for c in countries], dtype=np.int64)
    has = codes >= 0
    count = np.bincount(codes[has], minlength=len(names))
    weights = labels[has].astype(np.float64)
    pos = np.bincount(codes[has], weights=weights, minlength=len(names)).astype(np.int64)
    total_pos = int(labels.sum())
    total_neg = n - total_pos
    best: tuple[float, tuple[str, ...]] | None = None
    for _ in range(_OOD_ATTEMPTS):
        order = rng.permutation(len(names))
        # every prefix of this order (or the k-prefix), scored lexicographically: both labels left
        # for training (4), both labels held out (2), then the distance of the share to [lo, hi]
        rows = np.cumsum(count[order])[:-1]
        held_pos = np.cumsum(pos[order])[:-1]
        held_neg = rows - held_pos
        share = rows / n
        gap = np.maximum(np.maximum(lo - share, share - hi), 0.0)
        train_ok = (total_pos - held_pos >= 2) & (total_neg - held_neg >= 2)
        held_ok = (held_pos > 0) & (held_neg > 0)
        score = 4.0 * ~train_ok + 2.0 * ~held_ok + gap
        at = k - 1 if k is not None else int(np.argmin(score))  # argmin: the shortest best prefix
        if best is None or score[at] < best[0]:
            best = (float(score[at]), tuple(sorted(names[i] for i in order[: at + 1])))
            if best[0] == 0.0:
                break
    assert best is not None
    share = float(sum(count[index[c]] for c in best[1]) / n)
    if not lo <= share <= hi:
        log.warning(
            "the held-out countries (%s) hold %.1f%% of the rows; no choice of %s countries holds %g-%g%%",
            ", ".join(best[1]), 100 * share, k if k is not None else "whole", 100 * lo, 100 * hi,
        )  # fmt: skip
    return best[1]


def _stratified(labels: np.ndarray, pool: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    pos = pool[labels[pool]]
    neg = pool[~labels[pool]]
    n_pos = round(size * len(pos) / len(pool)) if len(pool) else 0
    n_pos = min(max(n_pos, 1 if size >= 2 and len(pos) >= 3 else 0), len(pos))
    n_neg = size - n_pos
    if n_neg > len(neg):
        n_neg, n_pos = len(neg), size - len(neg)
    picked = np.concatenate([rng.permutation(pos)[:n_pos], rng.permutation(neg)[:n_neg]])
    return np.sort(picked.astype(np.int64))


def split_annotations(
    labels: Sequence[bool] | np.ndarray,
    countries: Sequence[str | None] | None = None,
    *,
    ood_countries: Iterable[str] | None = None,
    n_ood_countries: int | None = None,
    id_test_size: int = PAPER_ID_TEST_SIZE,
    seed: int = 0,
    ood_fraction: tuple[float, float] = OOD_FRACTION,
) -> Split:
    """Split annotated rows into train, ID test and OOD test sets (deterministic given ``seed``).

    Held-out countries: ``ood_countries`` (codes or names; an empty list means no OOD test), else
    a seeded choice of ``n_ood_countries`` countries (or, when None, as many as it takes) whose
    rows make up ``ood_fraction`` of the data, preferring choices with both labels on each side.
    Without countries (``countries`` None or all None) there is no OOD test.

    Args:
        labels: ``present`` per row.
        countries: ISO3 per row (None for rows without a country), or None.
        ood_countries: Countries to hold out.
        n_ood_countries: How many countries to hold out when ``ood_countries`` is None.
        id_test_size: Rows in the ID test set, sampled from the non-OOD rows stratified by label.
        seed: Seed of the choice of countries and of the ID test sample.
        ood_fraction: The share of rows a seeded choice aims for, ``(low, high)``.

    Returns:
        The split.

    Raises:
        ValueError: Both ``ood_countries`` and ``n_ood_countries``, an unknown country, held-out
            countries with no rows, or too few rows of a label left for training (2 per label).
    """
    y = np.asarray(labels, dtype=bool).reshape(-1)
    n = len(y)
    if countries is not None and len(countries) != n:
        raise ValueError(f"{len(countries)} countries for {n} labels")
    if id_test_size < 0:
        raise ValueError(f"id_test_size must be >= 0, got {id_test_size}")
    if ood_countries is not None and n_ood_countries is not None:
        raise ValueError("give ood_countries or n_ood_countries, not both")
    lo, hi = ood_fraction
    if not 0.0 < lo <= hi < 1.0:
        raise ValueError(f"ood_fraction must satisfy 0 < low <= high < 1, got {ood_fraction}")
    rng = np.random.default_rng(seed)
    cs: list[str | None] = list(countries) if countries is not None else [None] * n
    have = {c for c in cs if c is not None}
    missing: tuple[str, ...] = ()
    if ood_countries is not None:
        held = _norm_countries(ood_countries)
        missing = tuple(c for c in held if c not in have)
        if held and len(missing) == len(held):
            raise ValueError(f"none of the held-out countries ({', '.join(held)}) occurs in the annotations")
        held = tuple(c for c in held if c in have)
    elif have:
        held = _choose_ood(y, cs, n_ood_countries, ood_fraction, rng)
    else:
        if n_ood_countries is not None:
            raise ValueError("n_ood_countries needs a country column")
        held = ()
    is_ood = np.array([c in held for c in cs], dtype=bool) if held else np.zeros(n, dtype=bool)
    ood = np.flatnonzero(is_ood)
    pool = np.flatnonzero(~is_ood)
    rest_pos, rest_neg = int(y[pool].sum()), int((~y[pool]).sum())
    if rest_pos < 2 or rest_neg < 2:
        raise ValueError(
            f"outside the held-out countries there are {rest_pos} present and {rest_neg} absent rows; "
            "training needs at least 2 of each"
        )
    if id_test_size > len(pool) - 4:
        raise ValueError(
            f"id_test_size {id_test_size} leaves too few rows for training ({len(pool)} rows outside the "
            "held-out countries)"
        )
    id_test = _stratified(y, pool, id_test_size, rng) if id_test_size else np.zeros(0, np.int64)
    train = np.setdiff1d(pool, id_test)
    tp, tn = int(y[train].sum()), int((~y[train]).sum())
    if tp < 2 or tn < 2:
        raise ValueError(
            f"the training split has {tp} present and {tn} absent rows (at least 2 of each needed); "
            "lower id_test_size"
        )
    return Split(
        train=train.astype(np.int64),
        id_test=id_test,
        ood_test=ood.astype(np.int64),
        ood_countries=held,
        ood_missing=missing,
        seed=seed,
    )


# ----------------------------------------------------------------------------------------- metrics
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


# -------------------------------------------------------------------------------------- classifier
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


# ---------------------------------------------------------------------------------------- training
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


# ----------------------------------------------------------------------------------------- filter
@dataclass
class FilterResult:
    """What :func:`filter_dataset` did.

    Attributes:
        out: The output Parquet.
        rejects: The rejects Parquet (``drop`` only).
        rows: Input rows.
        present: Rows predicted to show the entity.
        absent: Rows predicted not to.
        errors: Rows whose image could not be read (``entity_present`` null).
        computed: Images the model embedded (the rest came from the cache or repeats).
        threshold: The decision threshold used.
        model_id: The encoder.
    """

    out: Path
    rejects: Path | None
    rows: int
    present: int
    absent: int
    errors: int
    computed: int
    threshold: float
    model_id: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {
            "out": str(self.out),
            "rejects": str(self.rejects) if self.rejects else None,
            "rows": self.rows,
            "present": self.present,
            "absent": self.absent,
            "errors": self.errors,
            "computed": self.computed,
            "threshold": self.threshold,
            "model_id": self.model_id,
        }


def _open_table(path: Path, image_column: str | None, chunk_rows: int) -> tuple[Any, str, int, Iterable[Any]]:
    """(schema, image column, row count, record batches) of a Parquet or CSV file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    suffix = path.suffix.lower()
    if suffix == ".parquet":
        pf = pq.ParquetFile(path)
        schema = pf.schema_arrow
        rows = pf.metadata.num_rows
        batches: Iterable[Any] = pf.iter_batches(batch_size=chunk_rows)
    elif suffix == ".csv":
        import pyarrow.csv as pcsv

        with open(path, "rb") as f:
            first = f.readline(1 << 20)
        head = next(csv.reader([decode_text(first, path).rstrip("\r\n")]), [])
        strings = {name: pa.string() for name in head if name in ("image", "image_path", image_column)}
        table = pcsv.read_csv(
            path, convert_options=pcsv.ConvertOptions(column_types=strings, strings_can_be_null=True)
        )
        schema, rows, batches = table.schema, table.num_rows, table.to_batches(max_chunksize=chunk_rows)
    else:
        raise ValueError(f"{path}: expected a .parquet or .csv file")
    names = schema.names
    if image_column is None:
        image_column = next((c for c in ("image", "image_path") if c in names), None)
        if image_column is None:
            raise ValueError(f"{path}: no 'image' or 'image_path' column (columns: {', '.join(names)})")
    elif image_column not in names:
        raise ValueError(f"{path}: no column {image_column!r} (columns: {', '.join(names)})")
    clash = [c for c in (*_OUT_COLUMNS, "reject_reason", "source_row") if c in names]
    if clash:
        raise ValueError(f"{path}: already has column(s) {', '.join(clash)} (an already filtered file?)")
    return schema, image_column, rows, batches


def filter_dataset(
    input_path: str | os.PathLike[str],
    classifier: EntityPresenceClassifier,
    vlm: VLM,
    out: str | os.PathLike[str],
    *,
    drop: bool = False,
    rejects: str | os.PathLike[str] | None = None,
    threshold: float | None = None,
    image_column: str | None = None,
    batch_size: int = 32,
    chunk_rows: int = 1024,
    cache: EmbeddingCache | None = None,
    allow_other_encoder: bool = False,
    progress: Progress | None = None,
) -> FilterResult:
    """Predict entity presence for every row of a Parquet/CSV file and write a Parquet file.

    The input has an ``image`` column (bytes, a path, or an ``{"bytes", "path"}`` struct) or an
    ``image_path`` column; paths are relative to the input's folder. The output holds every input
    row, in order, plus ``entity_present`` (bool; null where the image could not be read),
    ``entity_score`` (the SVM score; null likewise) and ``entity_error`` (why the image could not
    be read; null otherwise): no row is dropped. With ``drop``, ``out`` holds only the rows
    predicted present and ``rejects`` (default ``OUT.rejects.parquet``) the others, each with
    ``source_row`` (0-based input row) and ``reject_reason``. Files are written atomically and
    streamed ``chunk_rows`` rows at a time.

    Args:
        input_path: The dataset (``.parquet`` or ``.csv``).
        classifier: A trained classifier.
        vlm: The encoder; must be the classifier's (its ``model_id``), unless ``allow_other_encoder``.
        out: The output Parquet.
        drop: Write the rows predicted absent or unreadable to ``rejects`` instead of ``out``.
        rejects: Where rejected rows go with ``drop``.
        threshold: Override of the classifier's threshold.
        image_column: The image column (default ``image``, else ``image_path``).
        batch_size: Images per forward pass.
        chunk_rows: Rows read and written at a time.
        cache: An embedding cache (:func:`embedding_cache`).
        allow_other_encoder: Accept an encoder other than the classifier's (same dimension only).
        progress: Progress bars.

    Returns:
        Counts and paths.

    Raises:
        ValueError: Another encoder or dimension, a missing image column, output columns that
            already exist, an output path equal to the input, an unsupported file type.
        FileNotFoundError: The input does not exist.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fairsets.core.atomic import atomic_path

    src = Path(input_path)
    if not src.is_file():
        raise FileNotFoundError(f"input not found: {src}")
    dst = Path(out)
    rej = Path(rejects) if rejects is not None else dst.with_name(f"{dst.stem}.rejects.parquet")
    if dst.resolve() == src.resolve() or (drop and rej.resolve() in (src.resolve(), dst.resolve())):
        raise ValueError(f"the output must not overwrite the input or the other output ({dst}, {rej})")
    if rejects is not None and not drop:
        raise ValueError("rejects is only used with drop=True")
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    classifier.check_encoder(vlm.model_id, int(vlm.embed_dim), allow_other=allow_other_encoder)
    t = classifier.threshold if threshold is None else float(threshold)
    if not math.isfinite(t):
        raise ValueError(f"threshold must be finite, got {threshold!r}")

    schema, column, total, batches = _open_table(src, image_column, chunk_rows)
    added = [
        pa.field("entity_present", pa.bool_()),
        pa.field("entity_score", pa.float64()),
        pa.field("entity_error", pa.string()),
    ]
    out_schema = pa.schema([*schema, *added], metadata=schema.metadata)
    rej_schema = pa.schema(
        [*out_schema, pa.field("source_row", pa.int64()), pa.field("reject_reason", pa.string())],
        metadata=schema.metadata,
    )
    embedder = _Embedder(vlm, batch_size=batch_size, cache=cache)
    progress = progress or Progress()
    counts = {"rows": 0, "present": 0, "absent": 0, "errors": 0, "computed": 0}
    base = src.resolve().parent
    with (
        atomic_path(dst) as tmp_out,
        atomic_path(rej) if drop else contextlib.nullcontext() as tmp_rej,
        progress.stage(f"entity filter ({vlm.model_id})", total) as advance,
    ):
        writer = pq.ParquetWriter(tmp_out, out_schema)
        rwriter = pq.ParquetWriter(tmp_rej, rej_schema) if drop else None
        try:
            for batch in batches:
                n = batch.num_rows
                emb = embedder.embed(batch.column(column).to_pylist(), base_dir=base, advance=advance)
                ok = emb.ok
                scores = np.full(n, np.nan)
                if ok.any():
                    scores[ok] = classifier.decision_function(emb.vectors[ok])
                present = [bool(s >= t) if k else None for s, k in zip(scores, ok, strict=True)]
                score_col = [float(s) if k else None for s, k in zip(scores, ok, strict=True)]
                error_col = [emb.errors.get(i) for i in range(n)]
                columns = [
                    *batch.columns,
                    pa.array(present, pa.bool_()),
                    pa.array(score_col, pa.float64()),
                    pa.array(error_col, pa.string()),
                ]
                table = pa.Table.from_arrays(columns, schema=out_schema)
                first = counts["rows"]
                counts["rows"] += n
                counts["present"] += sum(1 for p in present if p)
                counts["absent"] += sum(1 for p in present if p is False)
                counts["errors"] += len(emb.errors)
                counts["computed"] += emb.computed
                if rwriter is None:
                    writer.write_table(table)
                    continue
                keep = np.array([p is True for p in present], dtype=bool)
                writer.write_table(table.filter(pa.array(keep)))
                drop_idx = np.flatnonzero(~keep)
                if drop_idx.size:
                    reasons = [
                        f"unreadable image: {emb.errors[i]}"
                        if i in emb.errors
                        else f"entity absent: score {scores[i]:.4g} < threshold {t:g}"
                        for i in drop_idx.tolist()
                    ]
                    dropped = table.take(pa.array(drop_idx))
                    source_rows = pa.array(drop_idx + first, pa.int64())
                    dropped = dropped.append_column(rej_schema.field("source_row"), source_rows)
                    dropped = dropped.append_column(
                        rej_schema.field("reject_reason"), pa.array(reasons, pa.string())
                    )
                    rwriter.write_table(dropped)
        finally:
            writer.close()
            if rwriter is not None:
                rwriter.close()
            embedder.flush()
    if counts["errors"]:
        log.warning("%d row(s) have an unreadable image (entity_present is null there)", counts["errors"])
    return FilterResult(
        out=dst,
        rejects=rej if drop else None,
        rows=counts["rows"],
        present=counts["present"],
        absent=counts["absent"],
        errors=counts["errors"],
        computed=counts["computed"],
        threshold=t,
        model_id=vlm.model_id,
    )
