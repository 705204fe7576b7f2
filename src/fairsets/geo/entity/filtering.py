"""Dataset filtering: predict entity presence for every row of a Parquet/CSV file (:func:`filter_dataset`)."""

from __future__ import annotations

import contextlib
import csv
import logging
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fairsets.core.progress import Progress
from fairsets.core.textfile import decode_text

from .embedding import _Embedder

if TYPE_CHECKING:
    from fairsets.audit.embeddings import EmbeddingCache
    from fairsets.models import VLM

    from .classifier import EntityPresenceClassifier

log = logging.getLogger("fairsets.geo.entity")  # the package's name, as log lines always showed

_OUT_COLUMNS = ("entity_present", "entity_score", "entity_error")


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
