"""Recipes, the build, executors (local default, ray), tasks, downloads, review and publishing a build.

The Step contract lives in :mod:`fairsets.core.step`; its names are re-exported here, imported on
first use.
"""

from fairsets.core.lazy import lazy_exports

_LAZY = {name: "fairsets.core.step" for name in ("MissingDependency", "Step", "StepContext", "StepParams")}
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
