"""The Source contract: list candidates cheaply on the driver, read their bytes in workers."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = ["Source", "SourceError", "SourceParams", "SourceReadError", "build_source"]


class SourceError(ValueError):
    """A source is misconfigured or its listing is unusable (missing column, unreadable folder)."""


class SourceReadError(OSError):
    """Reading one candidate failed (transient/environmental): the sample is marked ``failed``."""


class SourceParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source:
    """Base class of every source.

    ``scan()`` runs on the driver and returns one JSON-friendly row per candidate, each with a
    unique dot-free ``key`` and its metadata (group attributes, ``identity``, ``license``,
    ``author``, ``source_url``, ``source``, and whatever ``read`` needs, e.g. ``path``).
    ``read(row)`` runs in a worker and returns the candidate's encoded bytes or raises
    :class:`SourceReadError`.
    """

    Params: ClassVar[type[SourceParams]] = SourceParams
    registered_name: ClassVar[str] = ""

    def __init__(self, params: dict[str, Any], base_dir: Path, groups: list[str]) -> None:
        try:
            self.params = self.Params(**params)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'unknown key' if e['type'] == 'extra_forbidden' else e['msg']} "
                f"{'.'.join(str(p) for p in e['loc'])!r}"
                for e in exc.errors()
            )
            raise SourceError(f"source {self.registered_name!r}: {problems}") from None
        self.base_dir = base_dir
        self.groups = groups

    def scan(self) -> list[dict[str, Any]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def read(self, row: dict[str, Any]) -> bytes:  # pragma: no cover - abstract
        raise NotImplementedError


def build_source(kind: str, params: dict[str, Any], base_dir: Path, groups: list[str]) -> Source:
    from ..registry import SOURCES

    try:
        cls = SOURCES.get(kind)
    except KeyError as exc:
        raise SourceError(str(exc.args[0])) from None
    return cls(params, base_dir, groups)
