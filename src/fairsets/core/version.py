"""The fairsets version and the installed versions of other distributions (for manifests)."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["__version__", "package_versions"]

__version__ = "0.1.0"


def package_versions(names: Iterable[str]) -> dict[str, str | None]:
    """Return ``{name: installed version or None}`` for distribution ``names``, sorted by name."""
    import importlib.metadata

    out: dict[str, str | None] = {}
    for name in sorted(set(names)):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out
