"""Name → class registries for steps, detectors, sources and executors.

Recipes refer to components by name; adding one touches its module, one import line in the
package's ``__init__`` (so registration runs) and its test.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

__all__ = ["DETECTORS", "EXECUTORS", "MODELS", "SOURCES", "STEPS", "Registry", "UnknownName", "register"]


class UnknownName(KeyError, ValueError):
    """A name no component is registered under. A ``KeyError`` (a failed lookup) and a
    ``ValueError`` (a bad recipe or option value), so callers that validate parameters report it as
    the bad value it is; its message is plain text (not the quoted repr ``KeyError`` prints)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown name"


class Registry(Generic[T]):
    """A named collection of factories."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._lazy: dict[str, str] = {}

    def lazy(self, name: str, module: str) -> None:
        """Register ``name`` as provided by ``module``, imported (and so registered) on first use.

        For components whose module is costly to import (an HTTP client, numpy): a worker that
        never uses them does not pay for them.
        """
        if name not in self._items:
            self._lazy[name] = module

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._items and self._items[name] is not obj:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._lazy.pop(name, None)
            self._items[name] = obj
            with contextlib.suppress(AttributeError, TypeError):  # e.g. functions with __slots__
                obj.registered_name = name  # type: ignore[attr-defined]
            return obj

        return deco

    def get(self, name: str) -> T:
        if name not in self._items and name in self._lazy:
            import importlib

            importlib.import_module(self._lazy[name])
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(self.names()) or "none"
            raise UnknownName(f"unknown {self.kind} {name!r} (known: {known})") from None

    def names(self) -> list[str]:
        return sorted({*self._items, *self._lazy})

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._lazy


STEPS: Registry[Any] = Registry("step")
DETECTORS: Registry[Any] = Registry("face detector")
SOURCES: Registry[Any] = Registry("source")
EXECUTORS: Registry[Any] = Registry("executor")
MODELS: Registry[Any] = Registry("model family")


def register(registry: Registry[Any], name: str) -> Callable[[Any], Any]:
    """Shorthand: ``@register(STEPS, "decode")``."""
    return registry.register(name)
