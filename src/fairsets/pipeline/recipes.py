"""The recipes that ship with fairsets, and ``fairsets example``, which writes them into a folder.

A clone has them in ``builders/``; a wheel carries copies as package data (``fairsets/_builders``,
copied there by ``setup.py`` when the wheel is built). Either way, ``fairsets example --out DIR``
writes every recipe with the files it names (the ``prepare`` hooks ``example.py`` and
``example_audit.py``, the states table ``india_states.csv``) into DIR, so that a pip-installed
fairsets builds the example with nothing but the command line::

    fairsets example --out recipes && fairsets build recipes/example.toml --out example-out

A file already in DIR with the same bytes is left as it is; one that differs is refused (nothing is
written) unless ``--force``. Every file is written atomically.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from fairsets.core.atomic import atomic_write_bytes

__all__ = ["RecipeCopyError", "shipped_files", "shipped_recipes_dir", "write_recipes"]

#: The repository checkout this module lies in, when it runs from one (src/fairsets/pipeline/…).
_CHECKOUT = Path(__file__).resolve().parents[3]


class RecipeCopyError(Exception):
    """The recipes cannot be written where asked (the message says what to do instead)."""


def shipped_recipes_dir() -> Path:
    """The folder of the shipped recipes: ``builders/`` of the checkout fairsets runs from (an
    editable install or a clone), else the package data of an installed wheel."""
    checkout = _CHECKOUT / "builders"
    if (_CHECKOUT / "pyproject.toml").is_file() and checkout.is_dir():
        return checkout
    packaged = Path(str(importlib.resources.files("fairsets") / "_builders"))
    if packaged.is_dir():
        return packaged
    raise RecipeCopyError(
        f"the shipped recipes are missing (neither {checkout} nor {packaged} exists): "
        "reinstall fairsets from a wheel or an sdist"
    )


def shipped_files(folder: Path | None = None) -> list[Path]:
    """The recipe files that ship: the folder's regular files, no hidden or compiled ones (the
    same rule as setup.py's copy into the wheel)."""
    folder = shipped_recipes_dir() if folder is None else folder
    return sorted(
        p
        for p in folder.iterdir()
        if p.is_file() and not p.name.startswith(".") and p.suffix not in (".pyc", ".pyo")
    )


def _lexists(path: Path) -> bool:
    """The name exists, a dangling symbolic link included."""
    return path.is_symlink() or path.exists()


def _same(path: Path, data: bytes) -> bool:
    return path.is_file() and not path.is_symlink() and path.read_bytes() == data


def write_recipes(out: Path, *, force: bool = False) -> list[tuple[Path, bool]]:
    """Write every shipped recipe file into ``out``; ``(path, written)`` per file, ``written``
    False where an identical file was already there.

    Raises:
        RecipeCopyError: ``out`` is not a folder, or holds a different file (or a folder) of the
            same name as a shipped file and ``force`` is off; nothing is written then.
    """
    files = {p.name: p.read_bytes() for p in shipped_files()}
    if not files:
        raise RecipeCopyError("the shipped recipes folder is empty: reinstall fairsets")
    if out.exists() and not out.is_dir():
        raise RecipeCopyError(f"{out}: not a folder; give --out a new or existing folder")
    blocked = sorted(n for n in files if (out / n).is_dir() and not (out / n).is_symlink())
    if blocked:
        raise RecipeCopyError(
            f"{out}: {', '.join(blocked)} is a folder there; choose another --out or move it"
        )
    differ = sorted(n for n, data in files.items() if _lexists(out / n) and not _same(out / n, data))
    if differ and not force:
        raise RecipeCopyError(
            f"{out}: {', '.join(differ)} already there and not the shipped version; "
            "choose another --out, or add --force to overwrite"
        )
    out.mkdir(parents=True, exist_ok=True)
    done: list[tuple[Path, bool]] = []
    for name, data in files.items():
        target = out / name
        if _same(target, data):
            done.append((target, False))
            continue
        if target.is_symlink():  # --force: replace the link itself, never write through it
            target.unlink()
        atomic_write_bytes(target, data)
        done.append((target, True))
    return done
