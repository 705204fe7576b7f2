"""Python as on a machine without some packages: :func:`hide` makes them not found.

``hide("img2dataset")`` makes ``importlib.util.find_spec("img2dataset")`` return None and
``import img2dataset`` raise ModuleNotFoundError in this interpreter, as when it is not installed
(the tests of what a newcomer meets run a child interpreter that calls it first).
"""

from __future__ import annotations

import sys
from importlib.machinery import PathFinder
from typing import Any


def hide(*names: str) -> None:
    """Make the top-level packages ``names`` (and their modules) not found from now on."""
    hidden = frozenset(names)
    for mod in [m for m in sys.modules if m.split(".", 1)[0] in hidden]:
        del sys.modules[mod]

    class _Without(PathFinder):
        @classmethod
        def find_spec(cls, fullname: str, path: Any = None, target: Any = None) -> Any:
            if fullname.split(".", 1)[0] in hidden:
                return None
            return PathFinder.find_spec(fullname, path, target)

    sys.meta_path[:] = [_Without if f is PathFinder else f for f in sys.meta_path]
