"""Opening a recipe's sources, and checking them without building (``fairsets validate``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fairsets.pipeline.config import Recipe

from ..sources import build_source

__all__ = ["check_sources"]


def _open_source(kind: str, params: dict[str, Any], recipe: Recipe, workdir: Path | None) -> Any:
    return build_source(kind, params, recipe.base_dir, recipe.groups, workdir=workdir)


def check_sources(recipe: Recipe) -> None:
    """What can be checked of the sources without building: their parameters and the files they name.

    Raises :class:`~fairsets.sources.SourceError` for a bad parameter, or a ``path`` (listing or
    folder) or ``states_file`` that does not exist. A source with a ``prepare`` hook writes its
    listing when the build starts, under the output's ``OUT/.fairsets/prepared/`` (a relative
    ``path``), so only the hook's file has to exist: the hook is not run and nothing is written.
    """
    from ..sources import SourceError

    configs = [("source", recipe.source)] + [
        (f"supplement {i + 1}", c) for i, c in enumerate(recipe.supplement)
    ]
    for where, cfg in configs:
        source = _open_source(cfg.type, cfg.params(), recipe, None)
        params = source.params
        prepare = getattr(params, "prepare", None)
        if prepare:
            hook = recipe.base_dir / str(prepare).partition(":")[0]
            if not hook.is_file():
                raise SourceError(
                    f"{where}.prepare: no such hook file {hook}; write it next to the recipe or fix the name"
                )
        for name in ("path", "states_file"):
            value = getattr(params, name, None)
            if not value or (name == "path" and prepare):
                continue
            target = source.resolve_path(str(value))
            if not target.exists():
                raise SourceError(
                    f"{where}.{name}: no such file or folder: {target}; fix the path (a relative one is "
                    "taken from the recipe's folder)"
                )
