"""Candidate sources. Importing this package registers them."""

from . import local, web  # noqa: F401
from .base import Source, SourceError, SourceReadError, SourceRejected, build_source

__all__ = ["Source", "SourceError", "SourceReadError", "SourceRejected", "build_source"]
