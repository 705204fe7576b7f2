"""Local source: a folder of images, or a CSV/Parquet listing of images with metadata columns.

Listing (CSV or Parquet): one row per image; the image column (default ``path``) is a path
relative to the listing's folder (or absolute). Required columns: the image column, every group
attribute of the recipe, and ``license``. Optional: ``identity`` (person id; without it every
image is its own identity), ``author``, ``source_url``, ``title``; any other column is kept as
metadata. ``rename`` maps our column names to yours (``rename = {state = "region"}``) and
``defaults`` fills missing or empty values (``defaults = {license = "CC0-1.0"}``).

A CSV listing is UTF-8 (a byte-order mark is fine) with one header line; every row has exactly
the header's fields. Columns named like the fields fairsets sets itself (``key``, ``status``,
``step``, ``reason``, ``split``, ``filename``, any ``_``-prefixed name...: see
:data:`~fairsets.sources.base.RESERVED_COLUMNS`) are refused; keep one under another name with
``rename = {listing_status = "status"}``.

What is published about an image's location (``source_path``, and the sample key made from it)
is its path relative to the listing's folder (the folder source's root), never an absolute path:
an image outside that folder is published as ``external/<hash>/<file name>``
(see :func:`~fairsets.sources.base.public_path`).

A ``prepare`` hook (``prepare = "file.py:function"``, next to the recipe) writes the listing when a
build starts. It writes into the build's work folder, never beside the recipe (for an installed
package that is site-packages): a relative ``path`` is taken from ``OUT/.fairsets/prepared/``
(:data:`PREPARED`), and may not leave it (``..``); an absolute one is used as it is.

Folder: every image file under it (recursively, sorted); group attributes come from the
sub-folder names through ``layout`` (``layout = "{state}/{gender}"``) and the rest from
``defaults``. A scanned file's path is used exactly as found (a name that starts or ends with a
space, or starts with ``~``, included). In a listing, every value is stripped of surrounding
whitespace, the image path too (``" a.jpg"`` is ``a.jpg``), and a path starting with ``~`` is
expanded as in a shell (``~/a.jpg``): list such a file through a folder source, or rename it.
"""

from __future__ import annotations

import csv
import importlib.machinery
import importlib.util
import io
import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from fairsets.core.data import make_key
from fairsets.core.registry import SOURCES
from fairsets.core.textfile import TextFileError, read_text

from ..fetch.localfile import DEFAULT_MAX_BYTES, LocalFileRefused, read_local_file
from .base import (
    Source,
    SourceError,
    SourceParams,
    SourceReadError,
    SourceRejected,
    is_reserved_column,
    public_path,
)

__all__ = [
    "IMAGE_EXTENSIONS",
    "PREPARED",
    "LocalSource",
    "check_columns",
    "keep_other_columns",
    "listing_value",
    "published_path",
    "read_listing",
]

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff", ".gif")
OPTIONAL = ("identity", "author", "source_url", "title")
MAX_LISTING_COLUMNS = 1_000
"""Most columns a listing may have: every one is kept as metadata of every image and published."""
DEFAULT_MAX_LISTING_ROWS = 2_000_000
"""Rows a listing may have unless ``max_listing_rows`` says otherwise: each row costs ~1.5 kB of
memory once read (a 63 MB CSV of a million rows took 1.5 GB and 84 s to scan)."""
_CSV_BYTES_PER_ROW = 1024
"""A CSV listing larger than ``max_listing_rows`` × this is refused before it is read whole."""


class LocalParams(SourceParams):
    path: str
    image_column: str = "path"
    rename: dict[str, str] = Field(default_factory=dict)
    defaults: dict[str, str] = Field(default_factory=dict)
    layout: str | None = None
    extensions: list[str] = Field(default_factory=lambda: list(IMAGE_EXTENSIONS))
    prepare: str | None = None
    """``file.py:function`` (relative to the recipe) called with the listing path to create it; a
    relative ``path`` is then taken from the build's ``OUT/.fairsets/prepared/`` folder."""
    max_listing_rows: int = Field(DEFAULT_MAX_LISTING_ROWS, gt=0)
    """Most rows a listing may have; a larger one is refused before it is read whole."""

    @field_validator("prepare")
    @classmethod
    def _prepare_spec(cls, v: str | None) -> str | None:
        if v is not None and not _HOOK_SPEC.match(v):
            raise ValueError(
                f"expected 'file.py:function' (a Python file next to the recipe and the function in it "
                f"that writes the listing), got {v!r}"
            )
        return v


_HOOK_SPEC = re.compile(r"^[^:]+\.py:[A-Za-z_][A-Za-z0-9_]*$")

PREPARED = "prepared"
"""The folder, in a build's work folder (``OUT/.fairsets/``), where ``prepare`` hooks write their
listings: a relative ``path`` of a source with a hook is taken from there."""


class _HookLoader(importlib.machinery.SourceFileLoader):
    """Loads a ``prepare`` hook without caching its bytecode: nothing is written beside the recipe."""

    def set_data(self, path: str, data: bytes, *, _mode: int = 0o666) -> None:
        pass


def check_hook(hook: Path, func: str, where: str = "source") -> None:
    """Without running it: the hook file parses as Python and defines ``func`` at its top level.

    Raises :class:`SourceError` (problem + fix) otherwise, so ``fairsets validate`` catches a typo in
    ``prepare`` before a build runs the hook.
    """
    import ast

    try:
        tree = ast.parse(hook.read_bytes(), filename=str(hook))
    except (OSError, SyntaxError, ValueError) as exc:
        raise SourceError(
            f"{where}.prepare: {hook} is not readable Python ({exc}); fix the hook file"
        ) from None
    defined = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
    if func not in defined:
        funcs = sorted(n.name for n in tree.body if isinstance(n, ast.FunctionDef))
        raise SourceError(
            f"{where}.prepare: {hook.name} defines no function {func!r} (functions: "
            f"{', '.join(funcs) or 'none'}); fix the name after the colon"
        )


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


@SOURCES.register("local")
class LocalSource(Source):
    Params = LocalParams

    def __init__(self, params: dict[str, Any], base_dir: Path, groups: list[str]) -> None:
        super().__init__(params, base_dir, groups)
        if self.params.prepare:  # a typo in the hook's function is found by validate, not mid-build
            file, _, func = self.params.prepare.partition(":")
            if (self.base_dir / file).is_file():  # a missing file is check_sources' to report
                check_hook(self.base_dir / file, func)
            given = Path(os.path.expanduser(self.params.path))  # "~nosuchuser" stays itself
            if not given.is_absolute() and os.path.normpath(given).split(os.sep)[0] == os.pardir:
                raise SourceError(
                    f"source.path: {self.params.path!r} leaves the folder where the prepare hook writes "
                    f"(OUT/.fairsets/{PREPARED}/); name a path inside it, or an absolute path"
                )

    @property
    def location(self) -> Path:
        """The folder or listing; for a source with a ``prepare`` hook, a relative ``path`` is taken
        from the build's ``OUT/.fairsets/prepared/`` (:data:`PREPARED`), never the recipe's folder."""
        if not self.params.prepare:
            return self.resolve_path(self.params.path)
        given = Path(os.path.expanduser(self.params.path))
        if given.is_absolute():
            return given
        if self.workdir is None:
            raise SourceError(
                f"source.path: {self.params.path!r} is written by the prepare hook under the build's "
                f"OUT/.fairsets/{PREPARED}/ folder, which only a build has; build the recipe to list it"
            )
        return self.workdir.absolute() / PREPARED / given

    def _prepare(self) -> None:
        if not self.params.prepare:
            return
        file, _, func = self.params.prepare.partition(":")
        hook = self.base_dir / file
        if not hook.is_file() or not func:
            raise SourceError(
                f"source.prepare: expected 'file.py:function' next to the recipe, got {self.params.prepare!r}"
            )
        check_hook(hook, func)
        listing = self.location
        try:
            listing.parent.mkdir(parents=True, exist_ok=True)  # OUT/.fairsets/prepared/... is new
        except OSError as exc:
            raise SourceError(
                f"source.prepare: cannot create {listing.parent} for the listing: {exc.strerror or exc}"
            ) from None
        name = f"fairsets_hook_{hook.stem}"
        spec = importlib.util.spec_from_file_location(name, hook, loader=_HookLoader(name, str(hook)))
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
            fn = getattr(module, func, None)
            if not callable(fn):
                raise TypeError(f"{func!r} is not a function")
            fn(listing)
        except Exception as exc:  # the hook is the curator's code: its failure is named, not a crash
            what = " ".join(str(exc).split()) or type(exc).__name__
            raise SourceError(
                f"source.prepare: {self.params.prepare} failed: {type(exc).__name__}: {what}; fix the hook "
                "(fairsets --debug build … shows its traceback)"
            ) from exc

    def scan(self) -> list[dict[str, Any]]:
        self._prepare()
        loc = self.location
        if loc.is_dir():
            rows, root = self._scan_folder(loc), loc
            return self._normalise(rows, root, exact_paths=True)
        elif loc.exists():  # read_listing refuses what is not a regular file (a FIFO would hang)
            rows, root = read_listing(loc, self.params.max_listing_rows), loc.parent
        elif loc.is_symlink():  # a link whose target is missing, or a loop of links
            raise SourceError(
                f"source.path: {loc} is a symbolic link that leads nowhere (its target is missing, or the "
                "links loop); point source.path at the folder or listing itself"
            )
        else:
            raise SourceError(f"source.path: no such file or folder: {loc}")
        return self._normalise(rows, root)

    def _scan_folder(self, root: Path) -> list[dict[str, Any]]:
        exts = {e.lower() for e in self.params.extensions}
        try:
            # Not only regular files: a FIFO or device named like an image becomes a candidate
            # that read() rejects with its reason (never read, never silently dropped).
            files = sorted(p for p in root.rglob("*") if p.suffix.lower() in exts and not p.is_dir())
        except OSError as exc:
            raise SourceError(f"source.path: cannot read folder {root}: {exc}") from None
        if not files:
            raise SourceError(f"source.path: no images ({', '.join(sorted(exts))}) under {root}")
        pattern = self._layout_regex()
        rows = []
        self._refused = {}
        for f in files:
            rel = f.relative_to(root).as_posix()
            if not _is_text(rel):  # bytes that are not UTF-8 (surrogate escapes): not publishable
                shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                self._refused[shown] = (
                    f"file name is not UTF-8 (bytes shown as \\xNN): {shown}; rename it with a UTF-8 name"
                )
                rel = shown
            row: dict[str, Any] = {self.params.image_column: rel}
            if pattern is not None:
                m = pattern.match(str(Path(rel).parent.as_posix()))
                if not m:
                    raise SourceError(f"source.layout {self.params.layout!r} does not match folder of {rel}")
                row.update(m.groupdict())
            rows.append(row)
        return rows

    _refused: dict[str, str]
    """Folder files listed but refused before reading (file name → reason)."""

    def _layout_regex(self) -> re.Pattern[str] | None:
        if not self.params.layout:
            return None
        parts = re.split(r"(\{[A-Za-z_][A-Za-z0-9_]*\})", self.params.layout.strip("/"))
        names = [p[1:-1] for p in parts if p.startswith("{")]
        for name in names:
            if names.count(name) > 1:
                raise SourceError(f"source.layout {self.params.layout!r} names {{{name}}} twice; use it once")
            if is_reserved_column(name) or name == self.params.image_column:
                raise SourceError(
                    f"source.layout {self.params.layout!r}: {{{name}}} is a name fairsets uses itself; "
                    "name the folder level after a group attribute"
                )
        rx = "".join(f"(?P<{p[1:-1]}>[^/]+)" if p.startswith("{") else re.escape(p) for p in parts)
        return re.compile(f"^{rx}$")

    # -- normalisation ----------------------------------------------------------------------
    def _normalise(
        self, rows: list[dict[str, Any]], root: Path, exact_paths: bool = False
    ) -> list[dict[str, Any]]:
        """Rows as candidates. ``exact_paths``: the image paths come from a folder scan (relative,
        normalised) and are used exactly as found: not stripped, not ``~``-expanded."""
        p = self.params
        theirs = {ours: col for ours, col in p.rename.items()}
        required = [p.image_column, *self.groups, "license"]
        check_columns(rows, required, theirs, p.defaults, where=f"source {self.location}")
        out, seen = [], set()
        for i, raw in enumerate(rows):

            def get(name: str, raw: dict[str, Any] = raw) -> Any:
                return listing_value(raw, name, theirs, p.defaults)

            img = raw[p.image_column] if exact_paths else get(p.image_column)
            if not img:
                raise SourceError(f"source {self.location}: row {i + 1} has an empty {p.image_column!r}")
            # a scanned file is read where it was found (" a.jpg", "~user/a.jpg" included)
            path, rel = (root / img, img) if exact_paths else published_path(str(img), root)
            key = make_key("local", rel)
            if key in seen:
                raise SourceError(f"source {self.location}: image {rel!r} is listed twice")
            seen.add(key)
            row: dict[str, Any] = {
                "key": key,
                "source": "local",
                "source_path": rel,
                "path": str(path),
            }
            for g in self.groups:
                v = get(g)
                if v is None:
                    raise SourceError(f"source {self.location}: row {i + 1} ({rel}) has no value for {g!r}")
                row[g] = str(v)
            row["license"] = str(get("license")) if get("license") is not None else None
            for name in OPTIONAL:
                v = get(name)
                row[name] = None if v is None else str(v)
            keep_other_columns(row, raw, theirs, skip=p.image_column)
            if str(img) in getattr(self, "_refused", {}):
                row.update(_rejected=self._refused[str(img)], _rejected_step="source")
            out.append(row)
        return out

    def read(self, row: dict[str, Any]) -> bytes:
        """The candidate's bytes: a regular file of at most ``max_bytes``, read without hanging.

        A FIFO, device, socket or directory, or a file larger than the cap, is rejected (final)
        without reading it; a missing or unreadable file is a failure (retried with
        ``--retry-failed``). See :func:`fairsets.fetch.localfile.read_local_file`.
        """
        name = row.get("source_path", row["path"])
        try:
            return read_local_file(row["path"], self.max_bytes or DEFAULT_MAX_BYTES)
        except LocalFileRefused as exc:
            raise SourceRejected(f"cannot read {name}: {exc}") from exc
        except OSError as exc:
            raise SourceReadError(f"cannot read {name}: {exc.strerror or exc}") from exc
