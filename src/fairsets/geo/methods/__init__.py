"""Caption → country methods (``fairsets.geo.methods``): a registry of :class:`GeoMethod`."""

from __future__ import annotations

from . import hybrid, llm, ner, offline, string  # noqa: F401  (imports register the methods)
from .base import GEO_METHODS, GeoMethod, Prediction, get_method, method_from_spec

__all__ = ["GEO_METHODS", "GeoMethod", "Prediction", "get_method", "method_from_spec"]
