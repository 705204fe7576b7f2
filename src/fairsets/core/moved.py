"""Old module paths kept importable for one release after their modules moved (an import hook).

A package whose modules moved writes, in its ``__init__``::

    install_moved({"fairsets.pkg.old": "fairsets.pkg.sub.new", ...}, removed_in="fairsets 0.3")

and ``import fairsets.pkg.old``, ``from fairsets.pkg import old`` and ``from fairsets.pkg.old import
f`` keep working: each warns (:class:`DeprecationWarning`, naming the new path, pointing at the
importing line) and gives the new module object itself, so a function, a class or a monkeypatch
seen through one path is the one seen through the other. No file stands at the old path.

A name that left a module for another one when it moved (``extra``: ``{old module: {name: the
module that now holds it}}``) is still found through the old path, on first use.

Names not in the mapping are not touched: an unknown module still raises
:class:`ModuleNotFoundError`.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Mapping
from types import ModuleType
from typing import Any

__all__ = ["MovedModules", "install_moved"]


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old paths of moved modules and loads each as its new module (a warning first).

    Args:
        moved: old dotted path → new dotted path.
        removed_in: the release that drops the old paths, named in the warning.
        extra: old dotted path → ``{name: dotted path of the module that now holds it}``, for names
            that the old module had and its new module does not.
    """

    def __init__(
        self,
        moved: Mapping[str, str],
        removed_in: str,
        extra: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.moved = dict(moved)
        self.removed_in = removed_in
        self.extra = {k: dict(v) for k, v in (extra or {}).items()}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self.moved:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: Any) -> None:
        return None  # the default module; exec_module replaces it in sys.modules

    def exec_module(self, module: ModuleType) -> None:
        old = module.__name__
        new = self.moved[old]
        # stacklevel 2 is the first frame outside importlib's own: the line that imported ``old``
        warnings.warn(
            f"{old} moved to {new}; the old path is removed in {self.removed_in}",
            DeprecationWarning,
            stacklevel=2,
        )
        target = importlib.import_module(new)
        if old in self.extra:
            _add_lookup(target, self.extra[old])
        sys.modules[old] = target  # the import system returns what sys.modules holds after exec_module


def _add_lookup(module: ModuleType, names: Mapping[str, str]) -> None:
    """Let ``module`` answer ``names`` it no longer holds (PEP 562), from the modules that hold them."""
    if getattr(module, "__getattr__", None) is not None and getattr(module.__getattr__, "_moved", False):
        return
    previous = getattr(module, "__getattr__", None)

    def __getattr__(name: str) -> Any:
        where = names.get(name)
        if where is not None:
            return getattr(importlib.import_module(where), name)
        if previous is not None:
            return previous(name)
        raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")

    __getattr__._moved = True  # type: ignore[attr-defined]
    module.__getattr__ = __getattr__  # type: ignore[method-assign]


def install_moved(
    moved: Mapping[str, str], *, removed_in: str, extra: Mapping[str, Mapping[str, str]] | None = None
) -> MovedModules:
    """Add a :class:`MovedModules` finder for ``moved`` to :data:`sys.meta_path` (once per mapping)."""
    for finder in sys.meta_path:
        if isinstance(finder, MovedModules) and finder.moved == dict(moved):
            return finder
    finder = MovedModules(moved, removed_in, extra)
    sys.meta_path.append(finder)
    return finder
