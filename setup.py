"""Build hook: the repository's data folders go into the package as real files.

The recipes (``builders/``), card templates (``cards/``) and licence policy (``licenses/``) live at
the top of the repository, where they are edited, read by the tests and named in the docs. A wheel
carries copies of them as ``fairsets/_builders``, ``fairsets/_cards`` and ``fairsets/_licenses``
(read through :func:`fairsets.core.datafiles.find_data_file`; ``fairsets example`` writes the
recipes out). They are copied here, at build time, instead of being symbolic links inside ``src/``:
links are checked out as small text files on Windows and by some archivers, which broke the
package data there. Everything else is in ``pyproject.toml``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent

#: Package folder → the repository folder it is copied from.
DATA_FOLDERS = {"_builders": "builders", "_cards": "cards", "_licenses": "licenses"}


def data_files(folder: Path) -> list[Path]:
    """The files of a data folder that ship: regular files, no hidden or compiled ones."""
    return sorted(
        p
        for p in folder.iterdir()
        if p.is_file() and not p.name.startswith(".") and p.suffix not in (".pyc", ".pyo")
    )


class BuildPyWithData(build_py):
    """``build_py``, then the data folders copied into the built package (not in editable mode:
    an editable install reads them from the checkout)."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for target, source in DATA_FOLDERS.items():
            src = ROOT / source
            if not src.is_dir():
                raise FileNotFoundError(f"{src}: missing; the package data is copied from it")
            dst = Path(self.build_lib) / "fairsets" / target
            if dst.is_symlink() or dst.is_file():
                dst.unlink()
            elif dst.is_dir():
                shutil.rmtree(dst)
            dst.mkdir(parents=True)
            for path in data_files(src):
                shutil.copyfile(path, dst / path.name)  # the content, even of a link


setup(cmdclass={"build_py": BuildPyWithData})
