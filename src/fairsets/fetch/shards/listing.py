"""Reading a listing (Parquet, CSV or JSONL) into img2dataset's input, with per-row rejections.

:func:`read_listing` returns the rows as one Arrow table with img2dataset's column names: the
extra columns (kept: they land in ``{key}.json`` and the shard's status Parquet), ``caption`` and
``url``, plus :data:`REJECT_COL` (why fairsets refused the row, null when it did not; img2dataset
never reads it). A refused row keeps its place (img2dataset's keys follow the row order), with an
empty ``url`` so that nothing is fetched for it. Refused rows: a URL that is null, not a string or
longer than :data:`MAX_URL_CHARS`; a cell longer than :data:`MAX_CELL_CHARS`; a JSONL line that is
not a JSON object, or holds a lone surrogate (``"\\ud800"``: valid JSON, not text), named by its
line number. A listing fairsets cannot use at all (missing, not a regular file, unreadable, empty,
a column missing, URLs of a non-string type, a column name img2dataset keeps for itself) raises
:class:`ListingError`, whose message says what to fix.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..guard.urls import MAX_URL_CHARS as GUARD_MAX_URL_CHARS

#: Why fairsets refused a row (null: not refused); in fairsets' copy of the listing only.
REJECT_COL = "fairsets_rejected"
#: Longest URL downloaded, in characters (the guard's own limit).
MAX_URL_CHARS = GUARD_MAX_URL_CHARS
#: Longest caption or kept cell, in characters (its text or JSON form).
MAX_CELL_CHARS = 65536
#: Columns img2dataset writes itself; a listing column of one of these names cannot be kept.
RESERVED = frozenset(
    {
        "key",
        "status",
        "error_message",
        "width",
        "height",
        "original_width",
        "original_height",
        "exif",
        "md5",
        "sha256",
        "sha512",
        "url",
        "caption",
        REJECT_COL,
    }
)
FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
_PLAIN = (
    pa.types.is_string,
    pa.types.is_integer,
    pa.types.is_floating,
    pa.types.is_boolean,
    pa.types.is_null,
)


class ListingError(ValueError):
    """A listing that cannot be downloaded; the message says what is wrong and how to fix it."""


@dataclass
class Listing:
    """A listing read for img2dataset: ``table`` (extras, ``caption``, ``url``, :data:`REJECT_COL`)."""

    table: pa.Table
    extras: tuple[str, ...]

    @property
    def n_rejected(self) -> int:
        return self.table.num_rows - self.table.column(REJECT_COL).null_count


def listing_format(path: Path) -> str:
    """``parquet``, ``csv`` or ``jsonl`` from the file name (``.gz`` is not read)."""
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ListingError(
            f"{path.name}: unknown listing format {path.suffix or '(no suffix)'!r}; give a .parquet, .csv "
            "or .jsonl file"
        )
    return fmt


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _not_a_file(path: Path, mode: int) -> ListingError:
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return ListingError(
        f"{path}: is {kind}, not a file; give the path of a Parquet, CSV or JSONL listing file"
    )


def check_listing_file(path: Path) -> None:
    """Raise :class:`ListingError` unless ``path`` is a regular file (following links): a missing
    path is "no such file", a folder, FIFO, socket or device says what it is. Nothing is opened."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ListingError(
            f"{path}: no such file; give the path of a Parquet, CSV or JSONL listing"
        ) from None
    except OSError as exc:  # a link loop, a name too long, no permission
        raise ListingError(
            f"{path}: cannot be read ({exc.strerror or type(exc).__name__}); give the path of a Parquet, CSV "
            "or JSONL listing"
        ) from None
    if not stat.S_ISREG(mode):
        raise _not_a_file(path, mode)


def fingerprint(path: Path, url_col: str, caption_col: str) -> str:
    """sha256 of the listing's bytes and the two column names: what a download's shards come from.

    The file is opened without blocking and read only if it is a regular file (a FIFO swapped in
    after :func:`check_listing_file` is refused, never waited on)."""
    h = hashlib.sha256(f"{url_col}\0{caption_col}\0".encode())
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_a_file(path, mode)
        os.set_blocking(fd, True)
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def read_listing(path: str | os.PathLike[str], url_col: str = "url", caption_col: str = "caption") -> Listing:
    """Read a listing and check it; see the module docstring.

    Args:
        path: a ``.parquet``, ``.csv`` or ``.jsonl`` file.
        url_col: the column of image URLs.
        caption_col: the column of captions (saved as ``{key}.txt``).

    Raises:
        ListingError: the listing cannot be used (the message says why and what to do).
    """
    path = Path(path)
    check_listing_file(path)
    fmt = listing_format(path)
    rejected: list[str | None] | None = None
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
        elif fmt == "csv":
            table = _read_csv(path, url_col, caption_col)
        else:
            table, rejected = _read_jsonl(path, url_col)
    except ListingError:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ListingError(
            f"{path.name}: not a readable {fmt.upper()} listing ({first}); check the file"
        ) from exc
    return _normalize(path.name, table, url_col, caption_col, rejected)


def _read_csv(path: Path, url_col: str, caption_col: str) -> pa.Table:
    from pyarrow import csv

    return csv.read_csv(
        path,
        read_options=csv.ReadOptions(block_size=1 << 24),
        parse_options=csv.ParseOptions(newlines_in_values=True),
        convert_options=csv.ConvertOptions(column_types={url_col: pa.string(), caption_col: pa.string()}),
    )


def _read_jsonl(path: Path, url_col: str) -> tuple[pa.Table, list[str | None]]:
    """JSONL line by line: a line that is not a JSON object, or whose URL is not a string, is a
    refused row, not an error."""
    columns: dict[str, list[Any]] = {}
    rejected: list[str | None] = []
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError as exc:  # bad JSON or bad UTF-8
                obj, why = None, f"invalid_row: line {n} is not JSON ({type(exc).__name__})"
            else:
                why = None if isinstance(obj, dict) else f"invalid_row: line {n} is not a JSON object"
                surrogate = _lone_surrogate(obj) if why is None else None
                if surrogate is not None:  # "\ud800" is valid JSON but not text: no table can hold it
                    why = f"invalid_row: line {n} holds a lone surrogate ({surrogate}), which is not text"
                    obj = None
                if why is None and obj.get(url_col) is not None and not isinstance(obj[url_col], str):
                    why = "invalid_url: the URL is missing or not a string"
                    obj[url_col] = None
            i = len(rejected)
            rejected.append(why)
            for k, v in obj.items() if isinstance(obj, dict) else ():
                col = columns.get(k)
                if col is None:
                    col = columns[k] = [None] * i
                col.append(v)
            for col in columns.values():
                if len(col) == i:
                    col.append(None)
    arrays = {k: _array(v) for k, v in columns.items()}
    return pa.table(arrays) if arrays else pa.table({"": pa.nulls(len(rejected))}), rejected


def _lone_surrogate(value: Any) -> str | None:
    """The first lone surrogate in a JSON value's strings (keys included), escaped (``\\ud800``),
    or None. JSON's ``\\uXXXX`` escapes can spell half a surrogate pair; such a string cannot be
    encoded as UTF-8, so no table or file can hold it."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            bad = next((c for c in v if 0xD800 <= ord(c) <= 0xDFFF), None)
            if bad is not None:
                return f"\\u{ord(bad):04x}"
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return None


def _array(values: list[Any]) -> pa.Array:
    """A column of JSON values: typed when Arrow can, else each non-string value as JSON text."""
    try:
        return pa.array(values)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return pa.array(
            [v if v is None or isinstance(v, str) else json.dumps(v) for v in values], pa.string()
        )


def _jsonable(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """A kept column as img2dataset can write it to ``{key}.json``: plain types as they are,
    anything else (dates, decimals, bytes, nested values) as its JSON text."""
    if pa.types.is_large_string(col.type) or pa.types.is_dictionary(col.type):
        try:
            return col.cast(pa.string())
        except pa.ArrowException:
            pass
    if any(test(col.type) for test in _PLAIN):
        return col
    values = col.to_pylist()
    try:
        json.dumps(values)
        return col
    except (TypeError, ValueError):
        return pa.chunked_array([pa.array([None if v is None else _text(v) for v in values], pa.string())])


def _text_lengths(col: pa.ChunkedArray) -> list[int]:
    if pa.types.is_string(col.type):
        return pc.fill_null(pc.utf8_length(col), 0).to_pylist()
    if any(test(col.type) for test in _PLAIN):
        return [0] * len(col)
    return [0 if v is None else len(json.dumps(v, default=str)) for v in col.to_pylist()]


def _normalize(
    name: str, table: pa.Table, url_col: str, caption_col: str, rejected: list[str | None] | None
) -> Listing:
    cols = table.column_names
    n = table.num_rows
    if n == 0:
        raise ListingError(f"{name}: the listing has no rows; give a listing with at least one URL")
    for col, flag in ((url_col, "--url-col"), (caption_col, "--caption-col")):
        if col not in cols:
            shown = ", ".join(repr(c) for c in cols[:12]) + (", ..." if len(cols) > 12 else "")
            raise ListingError(
                f"{name}: no column {col!r} (columns: {shown}); name the right one with {flag}"
            )
    if url_col == caption_col:
        raise ListingError(f"{name}: {url_col!r} is both the URL and the caption column; give two columns")
    if len(set(cols)) != len(cols):
        dup = sorted({c for c in cols if cols.count(c) > 1})
        raise ListingError(f"{name}: columns named more than once: {dup}; give each column its own name")
    extras = tuple(c for c in cols if c not in (url_col, caption_col))
    clash = sorted(c for c in extras if c in RESERVED or not c.strip())
    if clash:
        raise ListingError(
            f"{name}: column names {clash} are taken by img2dataset's own columns (or blank); rename them"
        )
    urls = table.column(url_col)
    if pa.types.is_large_string(urls.type) or pa.types.is_dictionary(urls.type):
        urls = urls.cast(pa.string())
    if pa.types.is_null(urls.type):
        urls = urls.cast(pa.string())
    if not pa.types.is_string(urls.type):
        raise ListingError(
            f"{name}: column {url_col!r} holds {urls.type} values, not URL strings; name the URL column with "
            "--url-col"
        )
    captions = table.column(caption_col)
    if not pa.types.is_string(captions.type):
        captions = pa.chunked_array(
            [pa.array([None if v is None else _text(v) for v in captions.to_pylist()], pa.string())]
        )
    kept = {c: _jsonable(table.column(c)) for c in extras}

    why: list[str | None] = list(rejected) if rejected is not None else [None] * n
    url_len = pc.fill_null(pc.utf8_length(urls), -1).to_pylist()
    for i, length in enumerate(url_len):
        if why[i] is None and length < 0:
            why[i] = "invalid_url: the URL is missing or not a string"
        elif why[i] is None and length > MAX_URL_CHARS:
            why[i] = f"invalid_url: longer than {MAX_URL_CHARS} characters"
    blank: dict[str, list[bool]] = {}
    for col_name, col in (("caption", captions), *kept.items()):
        lengths = _text_lengths(col)
        too_long = [x > MAX_CELL_CHARS for x in lengths]
        if any(too_long):
            blank[col_name] = too_long
            for i, long in enumerate(too_long):
                if long and why[i] is None:
                    orig = caption_col if col_name == "caption" else col_name
                    why[i] = (
                        f"invalid_row: column {orig!r} holds {lengths[i]} characters (limit {MAX_CELL_CHARS})"
                    )
    refused = pa.array([w is not None for w in why])
    out: dict[str, pa.ChunkedArray | pa.Array] = {}
    for col_name, col in (*kept.items(), ("caption", captions)):
        if col_name in blank:  # a huge cell is not copied
            col = pc.if_else(pa.array(blank[col_name]), pa.scalar(None, col.type), col)
        out[col_name] = col
    out["url"] = pc.if_else(refused, pa.scalar("", pa.string()), urls)
    out[REJECT_COL] = pa.array(why, pa.string())
    return Listing(pa.table(out), extras)


def _text(value: Any) -> str:
    """A value as text: strings as they are, bytes decoded (bad UTF-8 replaced), JSON values
    (lists, dicts, numbers) as JSON, anything else (dates, decimals) as ``str``."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (dict, list, tuple, int, float, bool)):
        return json.dumps(value, default=str)
    return str(value)
