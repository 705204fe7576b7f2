"""``prepare`` hooks: a recipe's ``file.py:function`` that writes a source's listing when a build starts.

The hook is checked without running it (``fairsets validate``), loaded without caching its bytecode,
and writes into the build's work folder (:data:`PREPARED`), never beside the recipe.
"""

from __future__ import annotations

import importlib.machinery
import re
from pathlib import Path

from .base import SourceError

__all__ = ["PREPARED", "check_hook"]

_HOOK_SPEC = re.compile(r"^[^:]+\.py:[A-Za-z_][A-Za-z0-9_]*$")

PREPARED = "prepared"
"""The folder, in a build's work folder (``OUT/.fairsets/``), where ``prepare`` hooks write their
listings: a relative ``path`` of a source with a hook is taken from there."""


class _HookLoader(importlib.machinery.SourceFileLoader):
    """Loads a ``prepare`` hook without caching its bytecode: nothing is written beside the recipe."""

    def set_data(self, path: str, data: bytes, *, _mode: int = 0o666) -> None:
        pass


def check_hook(hook: Path, func: str, where: str = "source") -> None:
    """Without running it: the hook file parses as Python and defines ``func`` at its top level.

    Raises :class:`SourceError` (problem + fix) otherwise, so ``fairsets validate`` catches a typo in
    ``prepare`` before a build runs the hook.
    """
    import ast

    try:
        tree = ast.parse(hook.read_bytes(), filename=str(hook))
    except (OSError, SyntaxError, ValueError) as exc:
        raise SourceError(
            f"{where}.prepare: {hook} is not readable Python ({exc}); fix the hook file"
        ) from None
    defined = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
    if func not in defined:
        funcs = sorted(n.name for n in tree.body if isinstance(n, ast.FunctionDef))
        raise SourceError(
            f"{where}.prepare: {hook.name} defines no function {func!r} (functions: "
            f"{', '.join(funcs) or 'none'}); fix the name after the colon"
        )
