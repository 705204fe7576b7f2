"""Caption files streamed in and outputs streamed out: the reading (:class:`_Source`, one row batch
at a time), the writing (:class:`_Writer`, CSV/TSV/Parquet/JSONL appended batch by batch) and
the in-memory :func:`read_table` / :func:`write_table` built on them."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from fairsets.core.atomic import atomic_path

CAPTION_FORMATS = (".txt", ".csv", ".tsv", ".parquet", ".jsonl")
OUTPUT_FORMATS = (".csv", ".tsv", ".parquet", ".jsonl")
CAPTION_COLUMNS = ("caption", "text", "TEXT")
#: Rows read, profiled and written at a time in one-file mode.
BATCH_ROWS = 8192
#: Rows per Parquet row group written in one-file mode.
_ROW_GROUP = 65536
#: Non-null values per JSONL key kept by the first pass to type a Parquet output column.
_TYPE_SAMPLES = 256


class ProfileError(ValueError):
    """An input that cannot be profiled (unknown format, no caption column, a bad line)."""


def _reason(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


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
