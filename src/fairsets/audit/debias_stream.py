"""Apply a debias transform to an embedding file in row blocks: bounded memory, any file size.

``fairsets debias apply`` reads the input in blocks of :data:`BLOCK_ROWS` rows (``.npy``: plain
reads at the rows' offsets, never a whole-file load or a memory map that would keep the file's pages
in the process; Parquet: the reader's record batches), debiases each block with
:class:`fairsets.debias.rows32.Rows32` (float32, within ``1e-5 * |x|`` of
:meth:`~fairsets.debias.transform.DebiasTransform.apply`, rows independent) and writes it at once
into a temporary file beside the output, renamed into place at the end (:func:`atomic_path`).

The same input gives the same bytes: rows are computed independently, and the outputs are cut at
fixed row numbers whatever the block size (a ``.npy`` is one header and the rows in order, the
bytes :func:`numpy.save` writes for the whole array; a Parquet output has row groups of
:data:`ROW_GROUP_ROWS` rows).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from fairsets.core.atomic import atomic_path

__all__ = ["BLOCK_ROWS", "ROW_GROUP_ROWS", "apply_in_blocks"]

#: Rows per block: 8,192 rows of 512 float32 are 16 MiB, small enough to stay near the caches and
#: bounded whatever the file's size; large enough that the matrix product runs at full speed.
BLOCK_ROWS = 8192
#: Rows per row group of a Parquet output (the last one holds the rest): fixed, so the bytes do not
#: depend on the block size or on the input's own row groups.
ROW_GROUP_ROWS = 65536
_SUFFIXES = (".npy", ".parquet")
#: At most this many threads share a block's per-row passes (the matrix product has the BLAS's own).
_MAX_PARTS = 4


def apply_in_blocks(transform: Any, src: Path, dst: Path, block_rows: int = BLOCK_ROWS) -> Path:
    """Debias the embeddings of ``src`` (``.npy`` (n, d) or Parquet with ``embedding``) into ``dst``.

    A Parquet output of a Parquet input keeps the other columns; otherwise the output holds the
    embeddings only (``.npy``, or Parquet with one ``embedding`` column).

    Raises:
        ValueError: on an unsupported suffix, a malformed file, a dimension other than the
            transform's, or non-finite values (the message names the rows); nothing is written.
        OSError: if a file cannot be read or written.
    """
    from fairsets.debias.rows32 import Rows32

    for p in (src, dst):
        if p.suffix not in _SUFFIXES:
            raise ValueError(f"{p}: embeddings must be .npy or .parquet")
    if block_rows < 1:
        raise ValueError(f"block_rows must be at least 1, got {block_rows}")
    rows = Rows32(transform)
    reader = _npy_blocks if src.suffix == ".npy" else _parquet_blocks
    keep = src.suffix == dst.suffix == ".parquet"
    with atomic_path(dst) as tmp:
        n, blocks = reader(src, block_rows)
        writer = _NpyWriter(tmp, n, rows.dim) if dst.suffix == ".npy" else _ParquetWriter(tmp, rows.dim)
        start = _pipeline(blocks, rows, writer, src, keep, min(block_rows, n))
        if start != n:
            raise ValueError(f"{src}: holds {start} rows, its header says {n}")
    return dst


def _pipeline(
    blocks: Iterator[tuple[np.ndarray, Any]], rows: Any, writer: Any, src: Path, keep: bool, size: int
) -> int:
    """Read block k+1 and write block k-1 in threads while block k is computed; return the rows done.

    Two output buffers take turns: block k's is free again once block k-2's write has returned, and
    each write is waited for before the next is started (one writer thread: the order is kept).
    """
    from concurrent.futures import ThreadPoolExecutor

    bufs = [np.empty((size, rows.dim), np.float32) for _ in range(2)]
    start = k = 0
    parts = min(os.cpu_count() or 1, _MAX_PARTS)
    with (
        ThreadPoolExecutor(1) as read_pool,
        ThreadPoolExecutor(1) as write_pool,
        ThreadPoolExecutor(parts) as pool,
    ):
        written = None
        try:
            ahead = read_pool.submit(next, blocks, None)
            while (item := ahead.result()) is not None:
                ahead = read_pool.submit(next, blocks, None)
                raw, batch = item
                x = _checked(raw, src, start, rows.dim)
                out = rows(x, bufs[k % 2][: len(x)] if len(x) <= size else None, pool, parts)
                if written is not None:
                    written.result()
                written = write_pool.submit(writer.write, out, batch if keep else None)
                start, k = start + len(x), k + 1
            if written is not None:
                written.result()
            writer.close()
        finally:
            for f in (ahead, written):
                if f is not None:
                    f.cancel()
                    with contextlib.suppress(Exception):
                        f.result()
            writer.abort()
    return start


def _checked(raw: np.ndarray, src: Path, start: int, dim: int) -> np.ndarray:
    if raw.ndim != 2 or raw.shape[1] != dim:
        raise ValueError(
            f"{src}: embedding dimension {raw.shape[-1]} does not match the transform's dimension {dim}"
        )
    with np.errstate(over="ignore"):  # too large for float32: inf, refused below
        x = np.ascontiguousarray(raw, dtype=np.float32)
    if not np.isfinite(x).all():
        row = int(np.flatnonzero(~np.isfinite(x).all(axis=1))[0])
        what = (
            "non-finite values (NaN or inf)"
            if not np.isfinite(raw[row]).all()
            else "values beyond float32's range"
        )
        raise ValueError(f"{src}: row {start + row} holds {what}; fix or drop it")
    return x


def _npy_blocks(src: Path, block_rows: int) -> tuple[int, Iterator[tuple[np.ndarray, None]]]:
    # np.load reads and checks the header (any version; object arrays refused); the memory map is
    # only for its shape, dtype and data offset: the rows are read with plain reads.
    try:
        meta = np.load(src, mmap_mode="r", allow_pickle=False)
    except ValueError as e:
        raise ValueError(f"{src}: not a readable .npy array ({e})") from e
    if meta.ndim != 2:
        raise ValueError(f"{src}: expected a 2-D array of embeddings, got shape {meta.shape}")
    if meta.dtype.kind not in "fiub" or meta.dtype.fields is not None:
        raise ValueError(f"{src}: embeddings must hold real numbers, got dtype {meta.dtype}")
    n, d = (int(v) for v in meta.shape)
    dtype, offset, fortran = meta.dtype, int(meta.offset), bool(meta.flags.f_contiguous and n > 1 and d > 1)

    def gen() -> Iterator[tuple[np.ndarray, None]]:
        if fortran:  # columns first on disk: rows are not contiguous, read them through the map
            for i in range(0, n, block_rows):
                yield np.array(meta[i : i + block_rows], order="C"), None
            return
        row_bytes = d * dtype.itemsize
        # two read buffers in turn: block k+1 is read (ahead, in a thread) while block k is computed
        whole = [np.empty((min(block_rows, n), d), dtype) for _ in range(2)]
        with open(src, "rb") as f:
            for k, i in enumerate(range(0, n, block_rows)):
                buf = whole[k % 2][: min(block_rows, n - i)]
                f.seek(offset + i * row_bytes)
                if f.readinto(memoryview(buf).cast("B")) != buf.nbytes:
                    raise ValueError(f"{src}: truncated at row {i}")
                yield buf, None

    return n, gen()


def _parquet_blocks(src: Path, block_rows: int) -> tuple[int, Iterator[tuple[np.ndarray, Any]]]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(src, pre_buffer=False)  # pre-buffering keeps every row group read so far
    except Exception as e:  # pyarrow raises its own error types for a damaged file
        raise ValueError(f"{src}: not a readable Parquet file ({e})") from e
    names = pf.schema_arrow.names
    if "embedding" not in names:
        raise ValueError(f"{src}: no 'embedding' column (columns: {', '.join(names)})")

    def gen() -> Iterator[tuple[np.ndarray, Any]]:
        for batch in pf.iter_batches(batch_size=block_rows):
            yield _batch_vectors(batch.column("embedding"), src), batch

    return int(pf.metadata.num_rows), gen()


def _batch_vectors(col: Any, src: Path) -> np.ndarray:
    """A (fixed-size) list column of numbers as an (n, d) array, without a Python object per row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = col.type
    if not (pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t)):
        raise ValueError(f"{src}: 'embedding' must be a list of numbers, got {t}")
    if col.null_count:
        raise ValueError(f"{src}: 'embedding' has {col.null_count} empty (null) rows")
    n = len(col)
    if n == 0:
        return np.zeros((0, 0), np.float32)
    if pa.types.is_fixed_size_list(t):
        d = t.list_size
    else:
        lengths = pc.list_value_length(col).to_numpy(zero_copy_only=False)
        d = int(lengths[0])
        if (lengths != d).any():
            raise ValueError(f"{src}: 'embedding' rows have different lengths ({d} and {int(lengths.max())})")
    values = col.flatten()
    if not (pa.types.is_floating(values.type) or pa.types.is_integer(values.type)):
        raise ValueError(f"{src}: 'embedding' must be a list of numbers, got {t}")
    return values.to_numpy(zero_copy_only=False).reshape(n, d)


class _NpyWriter:
    """The bytes :func:`numpy.save` writes for the whole ``(n, dim)`` float32 array, block by block."""

    def __init__(self, path: Path, n: int, dim: int) -> None:
        self.f = open(path, "wb")  # noqa: SIM115 - closed by close() or abort()
        descr = np.lib.format.dtype_to_descr(np.dtype(np.float32))
        header = {"descr": descr, "fortran_order": False, "shape": (n, dim)}
        np.lib.format.write_array_header_1_0(self.f, header)  # as np.save for this array

    def write(self, block: np.ndarray, batch: Any) -> None:
        self.f.write(memoryview(block).cast("B"))

    def close(self) -> None:
        self.f.close()

    def abort(self) -> None:
        self.f.close()


class _ParquetWriter:
    """Row groups of exactly :data:`ROW_GROUP_ROWS` rows, whatever the size of the blocks written."""

    def __init__(self, path: Path, dim: int) -> None:
        self.path, self.dim = path, dim
        self.writer: Any = None
        self.pending: list[Any] = []
        self.rows = 0

    def write(self, block: np.ndarray, batch: Any) -> None:
        import pyarrow as pa

        values = pa.array(block.reshape(-1).copy(), pa.float32())  # a copy: the block's buffer is reused
        col = pa.FixedSizeListArray.from_arrays(values, self.dim)
        if batch is None:
            out = pa.record_batch({"embedding": col})
        else:
            i = batch.schema.get_field_index("embedding")
            out = pa.RecordBatch.from_arrays(
                [col if j == i else batch.column(j) for j in range(batch.num_columns)],
                schema=batch.schema.set(i, pa.field("embedding", col.type)),
            )
        self.pending.append(out)
        self.rows += out.num_rows
        while self.rows >= ROW_GROUP_ROWS:
            self._flush(ROW_GROUP_ROWS)

    def _flush(self, count: int) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_batches(self.pending)
        if self.writer is None:
            # no dictionary for the embeddings (float values rarely repeat: it would be tried and
            # dropped for every page, ~30% of the write); the other columns as pyarrow's default
            others = [name for name in table.schema.names if name != "embedding"]
            self.writer = pq.ParquetWriter(os.fspath(self.path), table.schema, use_dictionary=others)
        self.writer.write_table(table.slice(0, count), row_group_size=ROW_GROUP_ROWS)
        rest = table.slice(count)
        self.pending = rest.to_batches() if rest.num_rows else []
        self.rows -= count

    def close(self) -> None:
        import pyarrow as pa

        if self.rows or self.writer is None:
            if self.writer is None and not self.pending:  # no rows at all: one empty column
                col = pa.FixedSizeListArray.from_arrays(pa.array([], pa.float32()), self.dim)
                self.pending = [pa.record_batch({"embedding": col})]
            self._flush(self.rows)
        self.writer.close()
        self.writer = None

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
