"""One-file mode: :func:`profile_file` streams a caption file through a method into one output, and
the helpers a shard task shares with it (predictions checked for length, confidences rounded as
written, the ``sent_to_llm`` count and the summary counts)."""

from __future__ import annotations

import csv
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from fairsets.core.atomic import atomic_path, remove_orphan_temps
from fairsets.core.progress import Progress

from ..methods import GeoMethod, Prediction
from .streams import BATCH_ROWS, _batched, _check_out, _Source, _Writer, caption_column

#: Decimals a confidence keeps in Parquet and JSONL outputs (CSV/TSV show 4).
CONFIDENCE_DECIMALS = 6
#: Columns the profile writes in one-file mode (an input column of the same name is replaced).
_OWN_COLUMNS = ("caption", "country", "confidence", "evidence", "error")


def _predict(method: GeoMethod, captions: Sequence[str]) -> list[Prediction]:
    preds = method.predict_detailed(captions)
    if len(preds) != len(captions):
        raise RuntimeError(f"geo method {method.name} gave {len(preds)} answers for {len(captions)} captions")
    return preds


def profile_captions(
    method: GeoMethod, captions: Sequence[str], *, batch_size: int = 4096, progress: Progress | None = None
) -> tuple[list[str | None], list[str | None]]:
    """Predictions and per-caption errors for ``captions``, in batches with a progress bar."""
    progress = progress or Progress()
    preds: list[str | None] = []
    errors: list[str | None] = []
    with progress.stage(f"geo-profiling ({method.name})", len(captions)) as advance:
        for start in range(0, len(captions), batch_size):
            batch = [c or "" for c in captions[start : start + batch_size]]
            p, e = method.predict_with_errors(batch)
            preds.extend(p)
            errors.extend(e)
            advance(len(batch))
    return preds, errors


def _sent(method: GeoMethod) -> int | None:
    """Captions a method has sent to an LLM so far (``hybrid``'s ``sent_to_llm``), else ``None``."""
    n = getattr(method, "sent_to_llm", None)
    return n if isinstance(n, int) else None


def _with_sent(summary: dict[str, Any], method: GeoMethod, before: int | None) -> dict[str, Any]:
    after = _sent(method)
    if before is not None and after is not None:
        summary["sent_to_llm"] = after - before
    return summary


def _confidence(value: float | None) -> float | None:
    """A confidence as written: rounded to 6 decimals, so that the last bits of a float sum
    (which may change with the order a method adds terms in) do not change the output."""
    return None if value is None else round(float(value), CONFIDENCE_DECIMALS)


def profile_file(
    path: str | Path,
    method: GeoMethod,
    out: str | Path,
    *,
    caption_col: str | None = None,
    batch_size: int = 4096,
    read_batch: int = BATCH_ROWS,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Profile one caption file and write ``out`` (its suffix picks the format). Returns a summary.

    Streams: ``read_batch`` rows are read, profiled (``batch_size`` captions per method call) and
    written at a time. ``out`` appears only once it is complete; the temporary file of a killed
    earlier run is removed first.
    """
    out = Path(out)
    suffix = _check_out(out)
    source = _Source(path)
    cap = caption_column(source.columns, caption_col, path)
    extra = [c for c in source.columns if c not in (cap, *_OWN_COLUMNS)]
    columns = ["caption", "country", "confidence", "evidence", *extra]
    schema = None
    if suffix == ".parquet":
        import pyarrow as pa

        own = {"caption": source.arrow_type(cap), "country": pa.string(), "confidence": pa.float64()}
        own["evidence"] = pa.string()
        schema = pa.schema([pa.field(c, own[c] if c in own else source.arrow_type(c)) for c in columns])
    progress = progress or Progress()
    counts: Counter[str] = Counter()
    errors: dict[int, str] = {}
    sent = _sent(method)
    n = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_orphan_temps(out)  # what a killed run was writing
    with atomic_path(out) as tmp:
        writer = _Writer(tmp, suffix, columns, schema=schema, decimals=("confidence",))
        try:
            with progress.stage(f"geo-profiling ({method.name})", source.rows) as advance:
                for rows in source.batches(max(1, int(read_batch))):
                    captions = ["" if (c := r.get(cap)) is None else str(c) for r in rows]
                    preds: list[Prediction] = []
                    for start in range(0, len(captions), max(1, int(batch_size))):
                        preds.extend(_predict(method, captions[start : start + max(1, int(batch_size))]))
                    out_rows = []
                    for i, (row, p) in enumerate(zip(rows, preds, strict=True)):
                        r = {k: row.get(k) for k in extra}
                        r.update(
                            caption=row.get(cap),
                            country=p.country or "",
                            confidence=_confidence(p.confidence),
                            evidence=p.evidence or "",
                        )
                        if p.country:
                            counts[p.country] += 1
                        if p.error:
                            errors[n + i] = p.error
                        out_rows.append(r)
                    writer.write(out_rows)
                    n += len(rows)
                    advance(len(rows))
            writer.close()
        except BaseException:
            writer.abort()
            raise
        if errors:  # rare (a remote model failed): one more pass adds the error column
            _add_errors(tmp, suffix, columns, writer.schema, errors)
    summary = _summary_counts(n, counts, len(errors)) | {"input": str(path), "output": str(out)}
    return _with_sent(summary, method, sent)


def _add_errors(path: Path, suffix: str, columns: list[str], schema: Any, errors: dict[int, str]) -> None:
    """Rewrite a finished output with an ``error`` column after ``evidence``."""
    at = columns.index("evidence") + 1
    new_cols = [*columns[:at], "error", *columns[at:]]
    if schema is not None:
        import pyarrow as pa

        schema = schema.insert(at, pa.field("error", pa.string()))
    with atomic_path(path) as tmp:
        writer = _Writer(tmp, suffix, new_cols, schema=schema, decimals=("confidence",))
        try:
            n = 0
            for rows in _own_rows(path, suffix):
                for i, r in enumerate(rows):
                    r["error"] = errors.get(n + i, "")
                n += len(rows)
                writer.write(rows)
            writer.close()
        except BaseException:
            writer.abort()
            raise


def _own_rows(path: Path, suffix: str) -> Iterator[list[dict[str, Any]]]:
    """Read back an output this module wrote, in batches (``confidence`` as written)."""
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS):
            yield batch.to_pylist()
        return
    with path.open(encoding="utf-8", newline="") as fh:
        if suffix == ".jsonl":
            yield from _batched((json.loads(line) for line in fh), BATCH_ROWS)
        else:
            reader = csv.DictReader(fh, delimiter="\t" if suffix == ".tsv" else ",")
            yield from _batched(iter(reader), BATCH_ROWS)


def _summary_counts(captions: int, counts: Counter[str], errors: int) -> dict[str, Any]:
    return {
        "captions": captions,
        "with_country": sum(counts.values()),
        "errors": errors,
        "countries": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def _summary(preds: Sequence[str | None], errors: Sequence[str | None]) -> dict[str, Any]:
    return _summary_counts(len(preds), Counter(p for p in preds if p), sum(1 for e in errors if e))
