"""Local source: a folder of images, or a CSV/Parquet listing of images with metadata columns.

Listing (CSV or Parquet): one row per image; the image column (default ``path``) is a path
relative to the listing's folder (or absolute). Required columns: the image column, every group
attribute of the recipe, and ``license``. Optional: ``identity`` (person id; without it every
image is its own identity), ``author``, ``source_url``, ``title``; any other column is kept as
metadata. ``rename`` maps our column names to yours (``rename = {state = "region"}``) and
``defaults`` fills missing or empty values (``defaults = {license = "CC0-1.0"}``).

Folder: every image file under it (recursively, sorted); group attributes come from the
sub-folder names through ``layout`` (``layout = "{state}/{gender}"``) and the rest from
``defaults``.
"""

from __future__ import annotations

import csv
import importlib.util
import re
from pathlib import Path
from typing import Any

from pydantic import Field

from ..data import make_key
from ..registry import SOURCES
from .base import Source, SourceError, SourceParams, SourceReadError

__all__ = [
    "IMAGE_EXTENSIONS",
    "LocalSource",
    "check_columns",
    "keep_other_columns",
    "listing_value",
    "read_listing",
]

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff", ".gif")
OPTIONAL = ("identity", "author", "source_url", "title")


class LocalParams(SourceParams):
    path: str
    image_column: str = "path"
    rename: dict[str, str] = Field(default_factory=dict)
    defaults: dict[str, str] = Field(default_factory=dict)
    layout: str | None = None
    extensions: list[str] = Field(default_factory=lambda: list(IMAGE_EXTENSIONS))
    prepare: str | None = None
    """``file.py:function`` (relative to the recipe) called with the listing path to create it."""


def read_listing(path: Path) -> list[dict[str, Any]]:
    """The rows of a CSV or Parquet listing; :class:`SourceError` if unreadable or of another kind."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            with path.open(newline="", encoding="utf-8") as fh:
                return [dict(r) for r in csv.DictReader(fh)]
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            return pq.read_table(path).to_pylist()
    except (OSError, UnicodeDecodeError, csv.Error, ValueError) as exc:
        raise SourceError(f"source.path: cannot read listing {path}: {exc}") from None
    raise SourceError(f"source.path: {path} is neither a folder nor a .csv/.parquet listing")


def check_columns(
    rows: list[dict[str, Any]],
    required: list[str],
    theirs: dict[str, str],
    defaults: dict[str, str],
    where: str,
) -> None:
    """Raise :class:`SourceError` naming every required column a listing lacks (and has no default for)."""
    present = set(rows[0]) if rows else set()
    missing = [c for c in required if theirs.get(c, c) not in present and c not in defaults]
    if missing:
        have = ", ".join(sorted(present)) or "none"
        raise SourceError(f"{where}: missing required column(s) {', '.join(missing)} (columns: {have})")


def listing_value(raw: dict[str, Any], name: str, theirs: dict[str, str], defaults: dict[str, str]) -> Any:
    """Our column ``name`` of a listing row (renamed via ``theirs``), else its default; stripped."""
    v = raw.get(theirs.get(name, name))
    if v is None or (isinstance(v, str) and not v.strip()) or v != v:  # v != v: NaN
        v = defaults.get(name)
    return v.strip() if isinstance(v, str) else v


def keep_other_columns(row: dict[str, Any], raw: dict[str, Any], theirs: dict[str, str], skip: str) -> None:
    """Copy the listing's remaining columns (under our names) into ``row`` as metadata strings."""
    for col, v in raw.items():
        ours = next((o for o, t in theirs.items() if t == col), col)
        if ours not in row and ours != skip:
            row[ours] = None if v is None else str(v)


@SOURCES.register("local")
class LocalSource(Source):
    Params = LocalParams

    @property
    def location(self) -> Path:
        return self.resolve_path(self.params.path)

    def _prepare(self) -> None:
        if not self.params.prepare:
            return
        file, _, func = self.params.prepare.partition(":")
        hook = self.base_dir / file
        if not hook.is_file() or not func:
            raise SourceError(
                f"source.prepare: expected 'file.py:function' next to the recipe, got {self.params.prepare!r}"
            )
        spec = importlib.util.spec_from_file_location(f"fairsets_hook_{hook.stem}", hook)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        getattr(module, func)(self.location)

    def scan(self) -> list[dict[str, Any]]:
        self._prepare()
        loc = self.location
        if loc.is_dir():
            rows, root = self._scan_folder(loc), loc
        elif loc.is_file():
            rows, root = read_listing(loc), loc.parent
        else:
            raise SourceError(f"source.path: no such file or folder: {loc}")
        return self._normalise(rows, root)

    def _scan_folder(self, root: Path) -> list[dict[str, Any]]:
        exts = {e.lower() for e in self.params.extensions}
        try:
            files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in exts)
        except OSError as exc:
            raise SourceError(f"source.path: cannot read folder {root}: {exc}") from None
        if not files:
            raise SourceError(f"source.path: no images ({', '.join(sorted(exts))}) under {root}")
        pattern = self._layout_regex()
        rows = []
        for f in files:
            rel = f.relative_to(root).as_posix()
            row: dict[str, Any] = {self.params.image_column: rel}
            if pattern is not None:
                m = pattern.match(str(Path(rel).parent.as_posix()))
                if not m:
                    raise SourceError(f"source.layout {self.params.layout!r} does not match folder of {rel}")
                row.update(m.groupdict())
            rows.append(row)
        return rows

    def _layout_regex(self) -> re.Pattern[str] | None:
        if not self.params.layout:
            return None
        parts = re.split(r"(\{[A-Za-z_][A-Za-z0-9_]*\})", self.params.layout.strip("/"))
        rx = "".join(f"(?P<{p[1:-1]}>[^/]+)" if p.startswith("{") else re.escape(p) for p in parts)
        return re.compile(f"^{rx}$")

    # -- normalisation ----------------------------------------------------------------------
    def _normalise(self, rows: list[dict[str, Any]], root: Path) -> list[dict[str, Any]]:
        p = self.params
        theirs = {ours: col for ours, col in p.rename.items()}
        required = [p.image_column, *self.groups, "license"]
        check_columns(rows, required, theirs, p.defaults, where=f"source {self.location}")
        out, seen = [], set()
        for i, raw in enumerate(rows):

            def get(name: str, raw: dict[str, Any] = raw) -> Any:
                return listing_value(raw, name, theirs, p.defaults)

            img = get(p.image_column)
            if not img:
                raise SourceError(f"source {self.location}: row {i + 1} has an empty {p.image_column!r}")
            path = Path(str(img)).expanduser()
            rel = path.as_posix()
            path = path if path.is_absolute() else root / path
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
            out.append(row)
        return out

    def read(self, row: dict[str, Any]) -> bytes:
        try:
            return Path(row["path"]).read_bytes()
        except OSError as exc:
            raise SourceReadError(
                f"cannot read {row.get('source_path', row['path'])}: {exc.strerror or exc}"
            ) from exc
