"""Caption → country methods (``fairsets.geo.methods``): a registry of :class:`GeoMethod`."""

from __future__ import annotations

from . import hybrid, offline, string  # noqa: F401  (imports register the methods)
from .base import GEO_METHODS, GeoMethod, Prediction, get_method, method_from_spec

# Registered on first use: their modules import an HTTP client and numpy (llm) or spaCy's glue (ner).
GEO_METHODS.lazy("llm", "fairsets.geo.methods.llm")
GEO_METHODS.lazy("ner", "fairsets.geo.methods.ner")

__all__ = ["GEO_METHODS", "GeoMethod", "Prediction", "get_method", "method_from_spec"]
