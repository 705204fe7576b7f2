"""fairsets: build, annotate, audit and publish image(-text) datasets for fairness research."""

from __future__ import annotations

__version__ = "0.1.0"

from .config import Recipe, RecipeError, load_recipe
from .data import Sample, Status, make_key

__all__ = ["Recipe", "RecipeError", "Sample", "Status", "__version__", "build", "load_recipe", "make_key"]


def build(*args, **kwargs):
    """Run a recipe (see :func:`fairsets.pipeline.build.build`); imported lazily."""
    from .pipeline.build import build as _build

    return _build(*args, **kwargs)
