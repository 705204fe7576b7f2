"""Package attributes imported on first use (PEP 562), so importing a package stays cheap.

A package ``__init__`` that re-exports names from its modules writes::

    __getattr__, __dir__ = lazy_exports(__name__, {"Name": "fairsets.pkg.module", ...})

and ``pkg.Name`` imports ``fairsets.pkg.module`` the first time it is asked for. A worker process
that imports one module of a package then pays for that module only, not for its siblings.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for ``package`` that import ``names[attr]`` on first access.

    Args:
        package: the package's ``__name__``.
        names: attribute → absolute module name it comes from.
    """

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__
