"""The Source contract: list candidates cheaply on the driver, read their bytes in workers."""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from fairsets.core.errors import SaysTheFix

__all__ = [
    "RESERVED_COLUMNS",
    "Source",
    "SourceError",
    "SourceParams",
    "SourceReadError",
    "SourceRejected",
    "build_source",
    "is_reserved_column",
    "public_path",
    "public_paths",
]

#: Row fields that sources and the build set themselves (a listing may not supply them): the
#: sample key and origin, what the steps and the pool write (status, annotations, the image...),
#: what selection and publishing add (split, variant, sha256, augmentation...) and the review
#: state. Every ``_``-prefixed name is internal too (see :func:`is_reserved_column`).
RESERVED_COLUMNS = frozenset(
    {
        "key",
        "source",
        "source_path",
        "path",
        "url",
        "status",
        "step",
        "reason",
        "pixel_sha256",
        "phash",
        "annotations",
        "image",
        "pool",
        "priority",
        "split",
        "variant",
        "sha256",
        "augmented_from",
        "augmentation",
        "width",
        "height",
        "review",
        "reviewed_at",
        "license_text",
        "filename",  # DuckDB's name for the file a row came from (read_parquet(filename = true))
    }
)


def is_reserved_column(name: str) -> bool:
    """Whether ``name`` is a field the build sets itself (so a listing column must not carry it).

    Case is ignored: DuckDB, which reads the pool, treats ``Status`` and ``status`` as one name.
    """
    return name.startswith("_") or name.casefold() in RESERVED_COLUMNS


def public_path(value: str | Path, root: Path) -> str:
    """The form of a local path that may be published: never the curator's file system.

    ``value`` (relative to ``root``, or absolute; ``~`` expanded) is published relative to
    ``root`` when it lies inside it, normalised (``./a.jpg`` and ``sub/../a.jpg`` are ``a.jpg``).
    A path outside ``root`` (absolute elsewhere, or escaping with ``..``) is published as
    ``external/<hash>/<file name>``: the hash (12 hex digits of the SHA-256 of the absolute,
    normalised path) keeps it unique and stable for the same files, the name keeps it readable.
    Purely lexical: the file system is not consulted (symlinks are not resolved). A ``~user``
    that names no user stays as written (a file ``~x.jpg`` is that file).

    String operations only (a listing calls it once per row): the same results as the pathlib
    form ``Path(os.path.abspath(root / Path(value).expanduser())).relative_to(os.path.abspath(root))``
    (tests/sources/test_public_path.py checks that on many generated paths).
    """
    given = os.fspath(value)
    if given[:1] == "~":
        given = os.path.expanduser(given)
    full = os.path.abspath(given if given[:1] == "/" else os.path.join(os.fspath(root), given))
    base = os.fspath(root)
    base = _abspath_of_absolute(base) if base[:1] == "/" else os.path.abspath(base)  # cwd may change
    if full == base:
        return "."
    prefix = base if base.endswith("/") else base + "/"
    # "//" is a root of its own (POSIX keeps exactly two leading slashes): "//a" is not under "/"
    if full.startswith(prefix) and (full[:2] == "//") == (base[:2] == "//"):
        return full[len(prefix) :]
    digest = hashlib.sha256(full.encode()).hexdigest()[:12]
    return f"external/{digest}/{full.rpartition('/')[2]}"


@functools.lru_cache(maxsize=64)
def _abspath_of_absolute(root: str) -> str:
    return os.path.abspath(root)


_LOCAL_PATH = re.compile(r"^(/|~|\.\./|[A-Za-z]:[\\/])")


def public_paths(value: Any, root: Path) -> Any:
    """``value`` (a recipe as JSON: dicts, lists, scalars) with every string that is an absolute
    path, or starts with ``~`` or ``../``, replaced by its :func:`public_path` (``"file:func"``
    hooks keep their function)."""
    if isinstance(value, dict):
        return {k: public_paths(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [public_paths(v, root) for v in value]
    if isinstance(value, str) and _LOCAL_PATH.match(value):
        if ".py:" in value:  # a hook, "file.py:function"
            path, _, func = value.rpartition(":")
            return f"{public_path(path, root)}:{func}"
        return public_path(value, root)
    return value


class SourceError(SaysTheFix, ValueError):
    """A source is misconfigured or its listing is unusable (missing column, unreadable folder)."""


class SourceReadError(OSError):
    """Reading one candidate failed (transient/environmental): the sample is marked ``failed``."""

    def __init__(self, message: str, step: str = "read") -> None:
        super().__init__(message)
        self.step = step

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class SourceRejected(Exception):
    """A candidate can never be read (a policy decision: opt-out, blocked address, HTTP 404...).

    The sample is marked ``rejected`` by ``step`` with the message as reason (not retried).
    """

    def __init__(self, message: str, step: str = "read") -> None:
        super().__init__(message)
        self.step = step


def _param_problem(err: Any) -> str:
    """One pydantic error of a source's parameters, naming the key."""
    loc = ".".join(str(p) for p in err["loc"]) or "(params)"
    if err["type"] == "extra_forbidden":
        return f"unknown key {loc!r}"
    if err["type"] == "missing":
        return f"missing key {loc!r}"
    return f"{loc}: {str(err['msg']).removeprefix('Value error, ')}"


class SourceParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source:
    """Base class of every source.

    ``scan()`` runs on the driver and returns one JSON-friendly row per candidate, each with a
    unique dot-free ``key`` and its metadata (group attributes, ``identity``, ``license``,
    ``author``, ``source_url``, ``source``, and whatever ``read`` needs, e.g. ``path``).
    ``read(row)`` runs in a worker and returns the candidate's encoded bytes or raises
    :class:`SourceReadError` (``failed``, retried) or :class:`SourceRejected` (``rejected``).

    Sources whose candidates are URLs set ``downloads = True`` and put a ``url`` in each row;
    the build downloads them (``fairsets.fetch.download``) before the per-sample steps, and
    :meth:`read` returns the downloaded bytes. ``workdir`` is the build's work folder (for
    caches and downloads), set by the build before :meth:`scan`.

    A row the source lists but already knows to be unusable (a file the host lost) carries
    ``_rejected`` (the reason) and ``_rejected_step``: it is rejected before any step runs.

    A source used as a *supplement* is asked through :meth:`scan_for` only for the cells that the
    sources before it left below quota.
    """

    Params: ClassVar[type[SourceParams]] = SourceParams
    registered_name: ClassVar[str] = ""
    downloads: ClassVar[bool] = False
    workdir: Path | None = None
    max_bytes: int | None = None
    """The byte cap of one candidate's encoded image (the ``decode`` step's ``max_bytes``), set by
    the build's tasks; sources that read files refuse larger ones without reading them."""

    def __init__(self, params: dict[str, Any], base_dir: Path, groups: list[str]) -> None:
        try:
            self.params = self.Params(**params)
        except ValidationError as exc:
            problems = "; ".join(_param_problem(e) for e in exc.errors())
            raise SourceError(f"source {self.registered_name!r}: {problems}") from None
        self.base_dir = base_dir
        self.groups = groups

    def resolve_path(self, value: str) -> Path:
        """A path from the recipe: ``~`` expanded, relative ones taken from the recipe's folder."""
        p = Path(value).expanduser()
        return p if p.is_absolute() else self.base_dir / p

    def scan(self) -> list[dict[str, Any]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def read(self, row: dict[str, Any]) -> bytes:
        if self.downloads:
            return read_downloaded(self.workdir, row)
        raise NotImplementedError  # pragma: no cover - abstract

    def scan_for(self, need: dict[tuple[str, ...], int]) -> list[dict[str, Any]]:
        """Candidates for the cells (tuples of group values, in ``groups`` order) with need > 0.

        The default scans everything and keeps the rows of those cells; sources that can ask
        for specific cells (web search) override it.
        """
        wanted = {cell for cell, n in need.items() if n > 0}
        return [r for r in self.scan() if tuple(str(r.get(g)) for g in self.groups) in wanted]


def read_downloaded(workdir: Path | None, row: dict[str, Any]) -> bytes:
    """The bytes the download phase fetched for ``row`` (see ``fairsets.pipeline.download``)."""
    status = row.get("_dl_status")
    if status == "ok":
        from ..fetch.download import read_image

        if workdir is None:
            raise SourceReadError("source has no work folder to read downloads from", step="download")
        try:
            stored = {
                "key": row["key"],
                "status": "ok",
                "shard": row["_dl_shard"],
                "member": row["_dl_member"],
            }
            return read_image(workdir / row["_dl_dir"], stored)
        except (OSError, KeyError, ValueError) as exc:
            raise SourceReadError(f"downloaded image is unreadable: {exc}", step="download") from exc
    if status == "rejected":
        raise SourceRejected(row.get("_dl_error") or "download refused", step="download")
    if status == "skipped":
        raise SourceRejected(row.get("_dl_error") or "not downloaded", step="download")
    raise SourceReadError(row.get("_dl_error") or "not downloaded", step="download")


def build_source(
    kind: str, params: dict[str, Any], base_dir: Path, groups: list[str], workdir: Path | None = None
) -> Source:
    from fairsets.core.registry import SOURCES

    try:
        cls = SOURCES.get(kind)
    except KeyError as exc:
        raise SourceError(str(exc.args[0])) from None
    source = cls(params, base_dir, groups)
    source.workdir = workdir
    return source
