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

import importlib.util
import os
import re
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from fairsets.core.data import make_key
from fairsets.core.registry import SOURCES

from ..fetch.localfile import DEFAULT_MAX_BYTES, LocalFileRefused, read_local_file
from .base import (
    Source,
    SourceError,
    SourceParams,
    SourceReadError,
    SourceRejected,
    is_reserved_column,
)
from .hooks import _HOOK_SPEC, PREPARED, _HookLoader, check_hook
from .listing import (
    DEFAULT_MAX_LISTING_ROWS,
    MAX_LISTING_COLUMNS,
    OPTIONAL,
    _is_text,
    check_columns,
    keep_other_columns,
    listing_value,
    published_path,
    read_listing,
)

__all__ = [
    "DEFAULT_MAX_LISTING_ROWS",
    "IMAGE_EXTENSIONS",
    "MAX_LISTING_COLUMNS",
    "PREPARED",
    "LocalSource",
    "check_columns",
    "keep_other_columns",
    "listing_value",
    "published_path",
    "read_listing",
]

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff", ".gif")


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
