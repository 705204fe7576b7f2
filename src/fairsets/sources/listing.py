"""Listings of images (CSV or Parquet): reading them within bounds, and mapping their columns to ours.

Used by the ``local`` source and by URL listings (``urls``): the size and width limits, the column
checks (required, reserved, renamed, defaulted) and what is published about an image's path.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from fairsets.core.textfile import TextFileError, read_text

from .base import SourceError, is_reserved_column, public_path

__all__ = [
    "DEFAULT_MAX_LISTING_ROWS",
    "MAX_LISTING_COLUMNS",
    "check_columns",
    "keep_other_columns",
    "listing_value",
    "published_path",
    "read_listing",
]

OPTIONAL = ("identity", "author", "source_url", "title")
"""Listing columns read when present (besides the image column, the group attributes and ``license``)."""
MAX_LISTING_COLUMNS = 1_000
"""Most columns a listing may have: every one is kept as metadata of every image and published."""
DEFAULT_MAX_LISTING_ROWS = 2_000_000
"""Rows a listing may have unless ``max_listing_rows`` says otherwise: each row costs ~1.5 kB of
memory once read (a 63 MB CSV of a million rows took 1.5 GB and 84 s to scan)."""
_CSV_BYTES_PER_ROW = 1024
"""A CSV listing larger than ``max_listing_rows`` × this is refused before it is read whole."""


def read_listing(path: Path, max_rows: int = DEFAULT_MAX_LISTING_ROWS) -> list[dict[str, Any]]:
    """The rows of a CSV or Parquet listing, each a dict keyed by the header's column names.

    A listing of more than ``max_rows`` rows is refused before it is read whole (a Parquet file by
    its row count, a CSV by its size, more than ``max_rows`` KiB, and by its rows as they are read).

    A CSV is read as UTF-8 (a byte-order mark is dropped); blank lines are skipped. Raises
    :class:`SourceError` naming the file (and the line, for a CSV) when the listing is not a
    regular file, not UTF-8, has an empty, unnamed or repeated column name, a row with more or
    fewer fields than the header, a NUL byte, a field beyond the CSV field limit (usually an
    unclosed quote), or no rows at all.
    """
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq"):
        raise SourceError(f"source.path: {path} is neither a folder nor a .csv/.parquet listing")
    if not path.is_file():
        raise SourceError(
            f"source.path: listing {path} is not a regular file; point it at a .csv or .parquet file"
        )
    try:
        _check_listing_size(path, suffix, max_rows)
        header, rows = _read_csv(path, max_rows) if suffix == ".csv" else _read_parquet(path)
    except TextFileError as exc:  # names the file, the line and the byte offset
        raise SourceError(f"source.path: listing {exc}") from None
    except SourceError:
        raise
    except (OSError, ValueError, NotImplementedError, csv.Error) as exc:  # pyarrow's errors subclass these
        why = " ".join(str(exc).split())[:300]  # one line: pyarrow's messages span several
        raise SourceError(f"source.path: cannot read listing {path}: {type(exc).__name__}: {why}") from None
    if not header:
        raise SourceError(f"source.path: listing {path} is empty; its first line must name the columns")
    folded = Counter(h.casefold() for h in header)  # counted once: a wide header is not quadratic
    for i, name in enumerate(header):
        if not name:
            raise SourceError(
                f"source.path: listing {path}: column {i + 1} of the header has no name; name it"
            )
        if folded[name.casefold()] > 1:  # DuckDB, which reads the pool, ignores case
            raise SourceError(
                f"source.path: listing {path}: column {name!r} appears {folded[name.casefold()]} times "
                "in the header (ignoring case); give each column its own name"
            )
    if not rows:
        raise SourceError(
            f"source.path: listing {path} has no rows (columns: {', '.join(header)}); add one line per image"
        )
    return rows


def _too_many_rows(path: Path, what: str, max_rows: int) -> SourceError:
    return SourceError(
        f"source.path: listing {path} {what}; a listing may have at most {max_rows} rows (each costs "
        "memory while the build runs): split it into several builds, or raise source.max_listing_rows"
    )


def _check_width(path: Path, header: list[str]) -> None:
    """Refuse a header of more than :data:`MAX_LISTING_COLUMNS` columns (before reading the rows)."""
    if len(header) > MAX_LISTING_COLUMNS:
        raise SourceError(
            f"source.path: listing {path} has {len(header)} columns, more than the {MAX_LISTING_COLUMNS} "
            "a listing may have (a transposed table, or the wrong delimiter?); keep one row per image "
            "and drop the columns the dataset does not need"
        )


def _check_listing_size(path: Path, suffix: str, max_rows: int) -> None:
    """Refuse, before reading it, a listing that holds more than ``max_rows`` rows."""
    if suffix == ".csv":
        size = path.stat().st_size
        if size > max_rows * _CSV_BYTES_PER_ROW:
            raise _too_many_rows(path, f"is {size:,} bytes, more than {max_rows} rows of 1 KiB", max_rows)
        return
    import pyarrow.parquet as pq

    n = pq.read_metadata(path).num_rows
    if n > max_rows:
        raise _too_many_rows(path, f"has {n} rows", max_rows)


def _read_csv(path: Path, max_rows: int = DEFAULT_MAX_LISTING_ROWS) -> tuple[list[str], list[dict[str, Any]]]:
    def bad(line: int, problem: str) -> SourceError:
        return SourceError(f"source.path: listing {path}, line {line}: {problem}")

    with io.StringIO(read_text(path), newline="") as fh:  # UTF-8, a BOM dropped
        reader = csv.reader(fh)
        header: list[str] = []
        rows: list[dict[str, Any]] = []
        try:
            for fields in reader:
                if any("\x00" in f for f in fields):
                    raise bad(
                        reader.line_num,
                        "contains a NUL byte (a binary or UTF-16 file?); save it as UTF-8 CSV",
                    )
                if not header:
                    header = [f.strip() for f in fields]
                    if not any(header):  # a blank first line: the header comes later
                        header = []
                    _check_width(path, header)
                    continue
                if not fields or (len(fields) == 1 and not fields[0].strip()):
                    continue  # a blank line
                if len(fields) != len(header):
                    raise bad(
                        reader.line_num,
                        f"{len(fields)} field(s) where the header has {len(header)}; "
                        "quote values that contain commas, and give every row every column",
                    )
                if len(rows) == max_rows:
                    raise _too_many_rows(path, f"goes on past line {reader.line_num - 1}", max_rows)
                rows.append(dict(zip(header, fields, strict=True)))
        except csv.Error as exc:
            hint = " (an unclosed quote?)" if "field limit" in str(exc) else ""
            raise bad(reader.line_num, f"{exc}{hint}") from None
    return header, rows


def _read_parquet(path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    import pyarrow.parquet as pq

    schema = pq.read_schema(path)
    header = [str(n).strip() for n in schema.names]
    _check_width(path, header)
    if len(set(header)) != len(header) or any(not n for n in header):
        return header, []  # read_listing names the bad column (reading would fail or merge them)
    for name, field in zip(header, schema, strict=True):
        if not _scalar_type(field.type):
            raise SourceError(
                f"source.path: listing {path}: column {name!r} holds {field.type}, not text or numbers "
                "(it would be published as a Python repr); cast it to string or drop it"
            )
    return header, pq.read_table(path).rename_columns(header).to_pylist()


def _scalar_type(t: Any) -> bool:
    """Whether a Parquet column of Arrow type ``t`` holds values a listing cell can be: text,
    numbers, booleans, dates/times (a dictionary column by its values); not bytes or nested data."""
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        t = t.value_type
    return not (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or pa.types.is_nested(t)
        or getattr(pa.types, "is_binary_view", lambda _t: False)(t)
    )


def _is_text(name: str) -> bool:
    """Whether ``name`` (from the file system) is valid Unicode, i.e. holds no surrogate escapes."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _ours(col: str, theirs: dict[str, str]) -> str:
    """Our name for a listing column (the ``rename`` entry that maps to it, else its own name)."""
    return next((o for o, t in theirs.items() if t == col), col)


def check_columns(
    rows: list[dict[str, Any]],
    required: list[str],
    theirs: dict[str, str],
    defaults: dict[str, str],
    where: str,
) -> None:
    """Raise :class:`SourceError` naming a problem with a listing's columns.

    Every ``required`` column (our names; ``theirs`` maps them to the listing's) must be present
    or have a default. No other column may carry a name the build sets itself (``key``,
    ``status``, ``split``, ``_``-prefixed names... see :data:`~fairsets.sources.base.RESERVED_COLUMNS`):
    it would overwrite or forge internal fields (a ``_rejected`` column would reject rows). Such
    a column can be kept under another name with ``rename``.
    """
    if not rows:
        raise SourceError(f"{where}: the listing has no rows; add one line per image")
    present = list(rows[0])
    used = {theirs.get(c, c) for c in (*required, *OPTIONAL)}
    for col in present:
        if col in used:
            continue
        ours = _ours(col, theirs)
        if is_reserved_column(ours):
            keep = "listing_" + (re.sub(r"\W+", "_", ours).strip("_") or "column")
            raise SourceError(
                f"{where}: column {ours!r} is a name fairsets uses itself; rename it in the listing, "
                f"or keep it under another name with rename = {{{keep} = {json.dumps(col)}}}"
            )
        if ours in (*required, *OPTIONAL):  # e.g. a column "identity" while rename reads "pid"
            raise SourceError(
                f"{where}: column {col!r} is not read because rename takes {ours!r} from "
                f"{theirs[ours]!r}; drop or rename one of the two columns"
            )
        if not ours.isprintable() or any(c.isspace() for c in ours):  # a Croissant @id cannot hold them
            keep = re.sub(r"\W+", "_", ours).strip("_") or "column"
            raise SourceError(
                f"{where}: column {col!r} has spaces or control characters in its name, which the published "
                f"metadata cannot hold; rename it, or keep it with rename = {{{keep} = {json.dumps(col)}}}"
            )
        # Column names are case-insensitive in DuckDB (which reads the pool): "State" beside
        # "state" would be renamed "State_1" on the way.
        same = next((c for c in (*required, *OPTIONAL) if c.casefold() == ours.casefold()), None)
        if same is not None:
            raise SourceError(
                f"{where}: column {col!r} differs only in case from {same!r}, a column fairsets fills; "
                f"map it with rename = {{{same} = {json.dumps(col)}}}, or rename it"
            )
    missing = [c for c in required if theirs.get(c, c) not in present and c not in defaults]
    if missing:
        raise SourceError(
            f"{where}: missing required column(s) {', '.join(missing)} (columns: {', '.join(present)}); "
            "add them, map them with rename, or give them defaults"
        )


def listing_value(raw: dict[str, Any], name: str, theirs: dict[str, str], defaults: dict[str, str]) -> Any:
    """Our column ``name`` of a listing row (renamed via ``theirs``), else its default; stripped."""
    v = raw.get(theirs.get(name, name))
    if v is None or (isinstance(v, str) and not v.strip()) or v != v:  # v != v: NaN
        v = defaults.get(name)
    return v.strip() if isinstance(v, str) else v


def keep_other_columns(row: dict[str, Any], raw: dict[str, Any], theirs: dict[str, str], skip: str) -> None:
    """Copy the listing's remaining columns (under our names) into ``row`` as metadata strings.

    :func:`check_columns` has refused the columns that would overwrite fields the build sets.
    """
    for col, v in raw.items():
        ours = _ours(col, theirs)
        if ours not in row and ours != skip:
            row[ours] = None if v is None else str(v)


def published_path(value: str, root: Path) -> tuple[Path, str]:
    """Where to read a listed image, and the path published for it (``source_path``, the key).

    The image is read where the listing says (relative to ``root``, the listing's folder, or
    absolute); what is published is :func:`~fairsets.sources.base.public_path`: relative to
    ``root`` when inside it, else ``external/<hash>/<file name>`` — never the curator's file system.
    """
    given = Path(os.path.expanduser(value))  # "~nosuchuser.jpg" stays itself (Path.expanduser raises)
    return (given if given.is_absolute() else root / given), public_path(value, root)
