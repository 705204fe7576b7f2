"""Data files shipped with fairsets: licence policy and texts, card templates."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

__all__ = ["find_data_file"]

_REPO = Path(__file__).resolve().parents[3]


def find_data_file(kind: str, name: str) -> Path:
    """Locate a data file shipped with fairsets (``kind`` is ``"licenses"`` or ``"cards"``).

    Looks first in the repository checkout (``<repo>/<kind>/<name>``), then in the installed
    package (``fairsets/_<kind>/<name>``: copies of ``<repo>/<kind>/`` that setup.py puts in the wheel;
    tests/test_packaging.py checks them byte for byte).

    Raises:
        FileNotFoundError: naming both places looked in.
    """
    repo_path = _REPO / kind / name
    if repo_path.is_file():
        return repo_path
    try:
        res = importlib.resources.files("fairsets") / f"_{kind}" / name
        if res.is_file():
            return Path(str(res))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover
        pass
    raise FileNotFoundError(f"{name} not found in {repo_path.parent} nor in package data fairsets/_{kind}/")
