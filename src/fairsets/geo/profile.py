"""Profile captions: one country (ISO alpha-3 or empty) per caption, in input order.

Two modes:

* **one file** (:func:`profile_file`): a text file with one caption a line (every line is an
  input, empty lines included), or CSV/TSV/Parquet/JSONL with a caption column. The file is
  *streamed*: read, profiled and written ``batch_size`` rows at a time (text formats line by
  line, Parquet by record batches), so memory stays flat however long the file is. The output
  goes to a temporary file beside ``out`` and is renamed onto it only when every row is written
  (a bad line half-way leaves no partial output). Columns: ``caption``, ``country``,
  ``confidence`` (4 decimals in CSV/TSV, a float in Parquet/JSONL, empty where the method gives
  none), ``evidence`` (+ ``error`` when a method failed on some captions), then the input's other
  columns. CSV output needs its columns before the first row, so a ``.jsonl`` input (whose
  objects may carry different keys) is read twice: once for the keys, then for the rows.
* **shards** (:func:`profile_shards`): LAION-style Parquet metadata shards, one pipeline task per
  shard on the local or the Ray executor. A shard's output is the shard plus ``country``,
  ``country_confidence``, ``country_evidence`` (+ ``geo_error``). Each task writes
  ``OUT/<shard>.parquet`` atomically and then a completion marker, so an interrupted run resumes
  where it stopped; an LLM method's disk cache is shared by all tasks and runs.

Methods travel as *specs* (``{"method": name, **options}``, :func:`method_spec`), never as
instances: the driver checks a spec against the method's constructor signature without building
anything (a gazetteer, a model, a server check), and each worker process builds the method once,
on its first task, and keeps it for the next tasks of the same spec (:func:`release_methods`
frees it). Output is deterministic: a re-run writes byte-identical files.
"""

from __future__ import annotations

import csv
import hashlib
import inspect
import json
import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from fairsets.core.atomic import atomic_path, atomic_write_text, sha256_file
from fairsets.core.progress import Progress

from .methods import GEO_METHODS, GeoMethod, Prediction, method_from_spec

__all__ = [
    "CAPTION_FORMATS",
    "ProfileError",
    "method_spec",
    "profile_captions",
    "profile_file",
    "profile_shards",
    "read_table",
    "release_methods",
    "run_profile_task",
    "takes_option",
    "write_table",
]

log = logging.getLogger(__name__)

CAPTION_FORMATS = (".txt", ".csv", ".tsv", ".parquet", ".jsonl")
OUTPUT_FORMATS = (".csv", ".tsv", ".parquet", ".jsonl")
CAPTION_COLUMNS = ("caption", "text", "TEXT")
SCHEMA = "fairsets.geo.profile/1"
#: Decimals a confidence keeps in Parquet and JSONL outputs (CSV/TSV show 4).
CONFIDENCE_DECIMALS = 6
#: Rows read, profiled and written at a time in one-file mode.
BATCH_ROWS = 8192
#: Rows per Parquet row group written in one-file mode.
_ROW_GROUP = 65536
#: Non-null values per JSONL key kept by the first pass to type a Parquet output column.
_TYPE_SAMPLES = 256
#: What a shard task's marker depends on beyond the method spec (the output columns).
_TASK_VERSION = 2
#: Columns the profile writes in one-file mode (an input column of the same name is replaced).
_OWN_COLUMNS = ("caption", "country", "confidence", "evidence", "error")


class ProfileError(ValueError):
    """An input that cannot be profiled (unknown format, no caption column, a bad line)."""


def _reason(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


# -- method specs ---------------------------------------------------------------------------------
def _parameters(cls: type) -> tuple[dict[str, inspect.Parameter], bool]:
    """A method class's keyword options and whether it also takes free ``**options``."""
    params = dict(inspect.signature(cls.__init__).parameters)
    params.pop("self", None)
    free = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    named = {
        k: p
        for k, p in params.items()
        if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    }
    return named, free


def takes_option(name: str, option: str) -> bool:
    """Whether the registered method ``name`` names ``option`` in its constructor."""
    return option in _parameters(GEO_METHODS.get(name))[0]


def _check_options(name: str, options: dict[str, Any]) -> None:
    cls = GEO_METHODS.get(name)  # UnknownName: "unknown geo method 'x' (known: …)"
    named, _ = _parameters(cls)
    unknown = sorted(k for k in options if k not in named)
    if unknown:
        raise ValueError(
            f"method {name} has no option {unknown[0]!r} (options: {', '.join(sorted(named)) or 'none'})"
        )
    missing = [
        k
        for k, p in named.items()
        if p.default is inspect.Parameter.empty
        and p.kind is inspect.Parameter.KEYWORD_ONLY
        and k not in options
    ]
    if missing:
        raise ValueError(f"method {name} needs the option {missing[0]!r}")
    if name == "hybrid":  # nested specs: the first method's options and the LLM's
        first = options.get("first", named["first"].default)
        if not isinstance(first, str):
            raise ValueError(f"hybrid: first must be a method name, not {first!r}")
        for key, inner in (("first_options", first), ("llm", "llm")):
            sub = options.get(key) or {}
            if not isinstance(sub, dict):
                raise ValueError(f"hybrid: {key} must be KEY=VALUE options (-O {key}.KEY=VALUE), not {sub!r}")
            _check_options(inner, sub)
        if options.get("min_confidence") is not None and not takes_option(first, "min_confidence"):
            raise ValueError(f"hybrid: min_confidence needs a first method with a confidence, not {first!r}")


def method_spec(name: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{"method": name, **options}`` after a cheap check, without building the method.

    Raises ``ValueError`` (an unknown method is :class:`~fairsets.core.registry.UnknownName`,
    also a ``KeyError``) for an unknown method or an option its constructor does not name;
    ``hybrid``'s nested ``first_options`` and ``llm`` are checked against those methods. What
    only a constructor can tell (an LLM endpoint that does not answer) is found where the method
    is built.
    """
    options = dict(options or {})
    _check_options(name, options)
    return {"method": name, **options}


_BUILT: dict[str, GeoMethod] = {}


def _method_for(spec: dict[str, Any]) -> GeoMethod:
    """The method of ``spec``, built once per process (a worker keeps it for its next tasks)."""
    key = _spec_hash(spec)
    method = _BUILT.get(key)
    if method is None:
        release_methods()  # one at a time: a worker serves one run
        method = _BUILT[key] = method_from_spec(spec)
    return method


def release_methods() -> None:
    """Close and forget the methods this process built for shard tasks."""
    while _BUILT:
        _, method = _BUILT.popitem()
        try:
            method.close()
        except Exception as exc:  # closing a client must not hide the run's own result
            log.warning("closing geo method %s failed: %s", method.name, _reason(exc))


# -- reading --------------------------------------------------------------------------------------
def _lines(path: Path, *, bom: bool) -> Iterator[str]:
    """The lines of a UTF-8 file with their line ends, decoded one at a time.

    A byte that is not UTF-8 is a :class:`ProfileError` naming the line and the file's byte
    offset (as :func:`fairsets.core.textfile.decode_text` does for a whole file); ``bom`` drops
    a leading byte-order mark.
    """
    if path.is_dir():
        raise ProfileError(f"{path}: is a folder, not a file")
    offset = 0
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                at = offset + exc.start
                raise ProfileError(
                    f"{path}: not UTF-8 text (line {number}, byte offset {at}: {exc.reason}); "
                    "save it as UTF-8 (a binary file given by mistake?)"
                ) from None
            if number == 1 and bom and line.startswith("\ufeff"):
                line = line[1:]
            offset += len(raw)
            yield line


def _count_lines(path: Path) -> int:
    """Lines of a text file (a last line without a newline counts), read in binary chunks."""
    n, last = 0, b"\n"
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 22):
            n += chunk.count(b"\n")
            last = chunk[-1:]
    return n + (last != b"\n")


def _batched(rows: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


class _Source:
    """A caption file opened for streaming: its columns, a row estimate and its row batches.

    ``types``: Arrow types of the columns where the input tells them (Parquet, or a JSONL
    first pass), so that a Parquet output keeps them; text columns are strings otherwise.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = path = Path(path)
        self.suffix = suffix = path.suffix.lower()
        self.types: dict[str, Any] = {}
        if suffix not in CAPTION_FORMATS:
            raise ProfileError(
                f"{path}: unsupported format {suffix or '(none)'}; use one of {', '.join(CAPTION_FORMATS)}"
            )
        if not path.exists():
            raise ProfileError(f"{path}: no such file")
        if path.is_dir():
            raise ProfileError(f"{path}: is a folder, not a file")
        if suffix == ".txt":
            self.columns = ["caption"]
            self.rows = _count_lines(path)
        elif suffix in (".csv", ".tsv"):
            reader = csv.reader(_lines(path, bom=True), delimiter=self._delimiter)
            try:
                self.columns = next(reader, [])
            except csv.Error as exc:
                raise ProfileError(f"{path}: line {reader.line_num}: not valid CSV ({exc})") from None
            self.rows = max(0, _count_lines(path) - 1)
        elif suffix == ".jsonl":
            self._first_pass()
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            try:
                self._parquet = pq.ParquetFile(path)
            except (pa.ArrowException, OSError) as exc:
                raise ProfileError(f"{path}: not a readable Parquet file ({_reason(exc)})") from None
            schema = self._parquet.schema_arrow
            self.columns = list(schema.names)
            self.types = {f.name: f.type for f in schema}
            self.rows = self._parquet.metadata.num_rows

    @property
    def _delimiter(self) -> str:
        return "\t" if self.suffix == ".tsv" else ","

    def _json_rows(self, lines: Iterator[str] | None = None) -> Iterator[dict[str, Any]]:
        for number, line in enumerate(lines or _lines(self.path, bom=True), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise ProfileError(f"{self.path}: line {number}: not JSON ({exc})") from None
            if not isinstance(row, dict):
                kind = type(row).__name__
                raise ProfileError(
                    f"{self.path}: line {number}: one JSON object per line expected, not {kind}"
                )
            yield row

    def _first_pass(self) -> None:
        """Every key in order of appearance, the row count and value samples (for Arrow types)."""
        columns: dict[str, None] = {}
        samples: dict[str, list[Any]] = {}
        n = 0
        lines = _lines(self.path, bom=True)
        rows = self._json_rows(lines)
        try:
            for row in rows:
                n += 1
                for k, v in row.items():
                    if k not in columns:
                        columns[k] = None
                        samples[k] = []
                    if v is not None and len(samples[k]) < _TYPE_SAMPLES:
                        samples[k].append(v)
        except ProfileError:
            for _ in lines:  # a file that is not text at all says so first, as for the other formats
                pass
            raise
        self.columns, self.rows, self._samples = list(columns), n, samples

    def arrow_type(self, column: str) -> Any:
        """The Arrow type a Parquet output gives ``column``."""
        import pyarrow as pa

        if column in self.types:
            return self.types[column]
        if self.suffix == ".jsonl":
            values = self._samples.get(column) or []
            if not values:
                return pa.null()
            try:
                self.types[column] = pa.infer_type(values)
            except (pa.ArrowException, TypeError, ValueError) as exc:
                raise ProfileError(
                    f"{self.path}: key {column!r} holds values of different types ({_reason(exc)}); "
                    "write the output as .jsonl or .csv"
                ) from None
            return self.types[column]
        return pa.string()

    def batches(self, size: int) -> Iterator[list[dict[str, Any]]]:
        """Rows as dicts, ``size`` at a time, in file order."""
        path = self.path
        if self.suffix == ".txt":
            rows = ({"caption": line.removesuffix("\n").rstrip("\r")} for line in _lines(path, bom=False))
            yield from _batched(rows, size)
        elif self.suffix in (".csv", ".tsv"):
            yield from _batched(self._csv_rows(), size)
        elif self.suffix == ".jsonl":
            yield from _batched(self._json_rows(), size)
        else:
            import pyarrow as pa

            try:
                for batch in self._parquet.iter_batches(batch_size=size):
                    yield batch.to_pylist()
            except (pa.ArrowException, OSError) as exc:
                raise ProfileError(f"{path}: not a readable Parquet file ({_reason(exc)})") from None

    def _csv_rows(self) -> Iterator[dict[str, Any]]:
        path = self.path
        reader = csv.DictReader(_lines(path, bom=True), delimiter=self._delimiter)
        try:
            for row in reader:
                if None in row:  # fields beyond the header: the columns would be shifted
                    n, have = len(reader.fieldnames or []), len(reader.fieldnames or []) + len(row[None])
                    raise ProfileError(
                        f"{path}: line {reader.line_num}: {have} fields where the header has {n}; "
                        "quote values that contain the delimiter"
                    )
                yield row
        except csv.Error as exc:
            raise ProfileError(f"{path}: line {reader.line_num}: not valid CSV ({exc})") from None


def read_table(path: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows and column names of a caption file (``.txt`` → one ``caption`` per line), all in memory."""
    source = _Source(path)
    rows = [row for batch in source.batches(BATCH_ROWS) for row in batch]
    return rows, source.columns


def caption_column(columns: Sequence[str], wanted: str | None, path: Path | str) -> str:
    if wanted:
        if wanted not in columns:
            raise ProfileError(f"{path}: no column {wanted!r} (columns: {', '.join(columns)})")
        return wanted
    for c in CAPTION_COLUMNS:
        if c in columns:
            return c
    raise ProfileError(f"{path}: no caption column (caption, text); columns: {', '.join(columns) or 'none'}")


# -- writing --------------------------------------------------------------------------------------
class _Writer:
    """Rows appended batch by batch to ``path`` (a temporary file) as CSV/TSV/Parquet/JSONL.

    ``decimals``: columns written with 4 decimals in CSV/TSV (a float stays a float in Parquet
    and JSONL). ``schema``: the Parquet schema; without one, the first batch's inferred schema.
    """

    def __init__(
        self,
        path: Path,
        suffix: str,
        columns: Sequence[str],
        *,
        schema: Any = None,
        decimals: Sequence[str] = (),
    ) -> None:
        if suffix not in OUTPUT_FORMATS:
            raise ProfileError(
                f"{path}: unsupported output format {suffix or '(none)'}; use .csv, .tsv, .parquet or .jsonl"
            )
        self.path, self.suffix, self.columns = path, suffix, list(columns)
        self.schema, self.decimals = schema, tuple(decimals)
        self._pending: list[dict[str, Any]] = []
        self._pq: Any = None
        self._fh: Any = None
        if suffix in (".csv", ".tsv", ".jsonl"):
            self._fh = path.open("w", encoding="utf-8", newline="")
        if suffix in (".csv", ".tsv"):
            self._csv = csv.DictWriter(
                self._fh,
                fieldnames=self.columns,
                delimiter="\t" if suffix == ".tsv" else ",",
                lineterminator="\n",
                extrasaction="ignore",
            )
            self._csv.writeheader()

    def write(self, rows: Sequence[dict[str, Any]]) -> None:
        if self.suffix in (".csv", ".tsv"):
            cols, dec = self.columns, self.decimals
            self._csv.writerows(
                {
                    k: ""
                    if (v := r.get(k)) is None
                    else (f"{v:.4f}" if k in dec and isinstance(v, float) else v)
                    for k in cols
                }
                for r in rows
            )
        elif self.suffix == ".jsonl":
            cols = self.columns
            self._fh.write(
                "".join(
                    json.dumps({k: r.get(k) for k in cols}, ensure_ascii=False, default=str) + "\n"
                    for r in rows
                )
            )
        else:
            self._pending.extend(rows)
            if len(self._pending) >= _ROW_GROUP:
                self._flush()

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self._pending and self._pq is not None:
            return
        cols = self.columns
        data = [{k: r.get(k) for k in cols} for r in self._pending]
        self._pending = []
        try:
            table = pa.Table.from_pylist(data, schema=self.schema)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise ProfileError(
                f"{self.path.name}: a column's values do not fit one Parquet type ({_reason(exc)}); "
                "write the output as .jsonl or .csv"
            ) from None
        if self._pq is None:
            self.schema = table.schema
            self._pq = pq.ParquetWriter(self.path, table.schema)
        self._pq.write_table(table)

    def close(self) -> None:
        if self.suffix == ".parquet":
            self._flush()
            self._pq.close()
        else:
            self._fh.close()

    def abort(self) -> None:
        if self._fh is not None:
            self._fh.close()
        if self._pq is not None:
            self._pq.close()


def _check_out(out: Path) -> str:
    suffix = out.suffix.lower()
    if suffix not in OUTPUT_FORMATS:
        raise ProfileError(
            f"{out}: unsupported output format {suffix or '(none)'}; use .csv, .tsv, .parquet or .jsonl"
        )
    return suffix


def write_table(rows: list[dict[str, Any]], columns: list[str], out: str | Path) -> Path:
    """Write rows atomically as CSV/TSV/Parquet/JSONL, by the suffix of ``out``."""
    out = Path(out)
    suffix = _check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        w = _Writer(tmp, suffix, columns)
        try:
            w.write(rows)
            w.close()
        except BaseException:
            w.abort()
            raise
    return out


# -- one file -------------------------------------------------------------------------------------
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
    written at a time. ``out`` appears only once it is complete.
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


# -- shards ---------------------------------------------------------------------------------------
def _marker(out_dir: Path, stem: str) -> Path:
    return out_dir / ".fairsets" / "markers" / f"{stem}.json"


def _spec_hash(spec: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_profile_task(task: dict[str, Any]) -> dict[str, Any]:
    """Pipeline task: profile one Parquet shard → ``out_dir/<stem>.parquet`` + marker.

    ``task``: ``input``, ``out_dir``, ``stem``, ``method`` (a method spec), ``spec_hash``,
    ``caption_column``, ``batch_size``. Deterministic given its inputs; safe to re-run. The
    method is built on a process's first task and kept for its next ones.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = Path(task["input"])
    out_dir = Path(task["out_dir"])
    stem = task["stem"]
    marker = _marker(out_dir, stem)
    out = out_dir / f"{stem}.parquet"
    done = _read_marker(marker)
    if (
        done
        and done.get("spec") == task["spec_hash"]
        and out.exists()
        and sha256_file(out) == done.get("sha256")
    ):
        return done | {"skipped": True}
    table = pq.read_table(src)
    cap = caption_column(table.column_names, task.get("caption_column"), src)
    captions = ["" if c is None else str(c) for c in table.column(cap).to_pylist()]
    method = _method_for(task["method"])
    size = max(1, int(task.get("batch_size", 4096)))
    preds: list[Prediction] = []
    sent = _sent(method)
    for start in range(0, len(captions), size):
        preds.extend(_predict(method, captions[start : start + size]))
    cols = {
        "country": pa.array([p.country or "" for p in preds], pa.string()),
        "country_confidence": pa.array([_confidence(p.confidence) for p in preds], pa.float64()),
        "country_evidence": pa.array([p.evidence or "" for p in preds], pa.string()),
    }
    if any(p.error for p in preds):
        cols["geo_error"] = pa.array([p.error or "" for p in preds], pa.string())
    for name, arr in cols.items():
        if name in table.column_names:
            table = table.drop_columns([name])
        table = table.append_column(name, arr)
    out_dir.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        pq.write_table(table, tmp)
    result = {
        "input": str(src),
        "output": out.name,
        "sha256": sha256_file(out),
        "spec": task["spec_hash"],
        "provenance": method.provenance(),
        **_summary([p.country for p in preds], [p.error for p in preds]),
    }
    _with_sent(result, method, sent)
    marker.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(marker, json.dumps(result, sort_keys=True, default=str) + "\n")
    return result


def _read_marker(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def shard_inputs(inputs: Sequence[str | Path]) -> list[Path]:
    """Parquet shards from files and folders (a folder contributes its ``*.parquet``, sorted)."""
    out: list[Path] = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            out.extend(sorted(x for x in p.glob("*.parquet") if not x.name.startswith(".")))
        elif p.suffix.lower() == ".parquet" and p.is_file():
            out.append(p)
        else:
            raise ProfileError(f"{p}: not a Parquet shard or a folder of them")
    stems = Counter(p.stem for p in out)
    dup = [s for s, n in stems.items() if n > 1]
    if dup:
        raise ProfileError(f"two shards share a name ({', '.join(dup[:3])}); outputs are named after shards")
    if not out:
        where = ", ".join(str(i) for i in list(inputs)[:3])
        raise ProfileError(f"no Parquet shards found in {where}; give .parquet files or folders of them")
    return out


def check_shard_out(shards: Sequence[Path], out_dir: str | Path) -> None:
    """Refuse an output folder where a shard's output (``OUT/<stem>.parquet``) is the shard itself."""
    out_dir = Path(out_dir)
    clash = [p for p in shards if (out_dir / f"{p.stem}.parquet").resolve() == p.resolve()]
    if clash:
        raise ProfileError(
            f"--out {out_dir} holds the input shard {clash[0].name}, which its output would replace; "
            "choose another --out folder"
        )


def profile_shards(
    inputs: Sequence[str | Path],
    method: dict[str, Any] | GeoMethod,
    out_dir: str | Path,
    *,
    executor: str = "local",
    workers: int = 1,
    ray_address: str | None = None,
    caption_col: str | None = None,
    batch_size: int = 4096,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Profile Parquet shards as pipeline tasks; writes ``OUT/profile.json`` and returns it.

    ``method``: a spec (:func:`method_spec`; the driver never builds it, each worker does once)
    or an already built method (its :meth:`~GeoMethod.spec` is sent).
    """
    from ..pipeline.executors import get_executor

    spec = dict(method.spec() if isinstance(method, GeoMethod) else method)
    name = str(spec.get("method"))
    shards = shard_inputs(inputs)
    out_dir = Path(out_dir)
    check_shard_out(shards, out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    spec_hash = _spec_hash({"method": spec, "caption_column": caption_col, "v": _TASK_VERSION})
    tasks = [
        {
            "input": str(p.resolve()),
            "out_dir": str(out_dir.resolve()),
            # the executor holds a shared lock here while the task writes (an orphaned worker is seen)
            "workdir": str((out_dir / ".fairsets").resolve()),
            "stem": p.stem,
            "method": spec,
            "spec_hash": spec_hash,
            "caption_column": caption_col,
            "batch_size": batch_size,
        }
        for p in shards
    ]
    progress = progress or Progress()
    results: dict[str, dict[str, Any]] = {}
    try:
        with progress.stage(f"geo-profiling shards ({name})", len(tasks)) as advance:

            def done(task: dict[str, Any], result: dict[str, Any]) -> None:
                results[task["stem"]] = result
                advance(1)

            with get_executor(executor, workers=workers, ray_address=ray_address) as ex:
                ex.map(run_profile_task, tasks, on_done=done)
    finally:
        release_methods()  # what inline tasks built in this process
    total: Counter[str] = Counter()
    for r in results.values():
        total.update(r.get("countries", {}))
    provenance = next(
        (r["provenance"] for _, r in sorted(results.items()) if r.get("provenance")),
        {"method": name, "options": {k: v for k, v in spec.items() if k != "method"}},
    )
    summary = {
        "schema": SCHEMA,
        "method": provenance,
        "shards": {
            k: {kk: vv for kk, vv in v.items() if kk not in ("countries", "provenance")}
            for k, v in sorted(results.items())
        },
        "captions": sum(r["captions"] for r in results.values()),
        "with_country": sum(r["with_country"] for r in results.values()),
        "errors": sum(r["errors"] for r in results.values()),
        "skipped": sum(1 for r in results.values() if r.get("skipped")),
        **(
            {"sent_to_llm": sum(r["sent_to_llm"] for r in results.values())}
            if results and all("sent_to_llm" in r for r in results.values())
            else {}
        ),
        "countries": dict(sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))),
    }
    atomic_write_text(
        out_dir / "profile.json", json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n"
    )
    return summary
