"""The fairsets version and the installed versions of other distributions (for manifests)."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["__version__", "package_versions"]

__version__ = "0.1.0"


def package_versions(names: Iterable[str]) -> dict[str, str | None]:
    """Return ``{name: installed version or None}`` for distribution ``names``, sorted by name.

    A name that no distribution of that name provides, but another distribution installs as its
    import package, gets that distribution's version: ``ultralytics`` comes from Ultralytics'
    ``ultralytics-opencv-headless`` (the same package with the headless OpenCV) in the ``persons``
    extra, and a manifest must not call the detector "not installed".
    """
    import importlib.metadata

    out: dict[str, str | None] = {}
    providers: dict[str, list[str]] | None = None
    for name in sorted(set(names)):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            if providers is None:
                providers = importlib.metadata.packages_distributions()
            dists = providers.get(name.replace("-", "_"), [])
            out[name] = importlib.metadata.version(min(dists)) if dists else None
    return out
