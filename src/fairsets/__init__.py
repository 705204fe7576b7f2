"""fairsets: build, annotate, audit and publish image(-text) datasets for fairness research."""

from __future__ import annotations

from .core.lazy import lazy_exports
from .core.version import __version__


def _startup_sigint(signum: int, frame: object) -> None:  # pragma: no cover - exits the process
    """Ctrl-C while the ``fairsets`` command is still importing: exit 130 quietly, not a traceback
    through the import machinery. :class:`fairsets.cli.FairsetsApp` restores Python's handler."""
    import os

    os._exit(130)


def _guard_startup() -> None:
    import os
    import signal
    import sys

    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if name in ("fairsets", "fairsets.exe") and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _startup_sigint)


_guard_startup()

__all__ = ["Recipe", "RecipeError", "Sample", "Status", "__version__", "build", "load_recipe", "make_key"]

# The public names are imported on first use (PEP 562), so that ``import fairsets`` -- and every
# worker process that imports one of its modules -- pays only for what it runs.
_LAZY = {
    "Recipe": "fairsets.pipeline.config",
    "RecipeError": "fairsets.pipeline.config",
    "load_recipe": "fairsets.pipeline.config",
    "Sample": "fairsets.core.data",
    "Status": "fairsets.core.data",
    "make_key": "fairsets.core.data",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


def build(*args, **kwargs):
    """Run a recipe (see :func:`fairsets.pipeline.build.build`); imported lazily."""
    from .pipeline.build import build as _build

    return _build(*args, **kwargs)
