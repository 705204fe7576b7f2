"""fairsets.core.light_import: a package's submodules without its ``__init__``, deferred imports, fallbacks.

Each test builds packages of its own (unique names) under ``tmp_path``; their ``__init__`` records that it
ran, so that a test can tell whether it did.
"""

from __future__ import annotations

import importlib
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairsets.core import light_import

_COUNT = itertools.count()


@pytest.fixture
def names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """``pkg`` (a package: ``sub``, ``helper``, ``writer``), ``other`` (a package: ``writer``), ``heavy``."""
    n = next(_COUNT)
    got = {"pkg": f"lightpkg{n}", "other": f"lightother{n}", "heavy": f"lightheavy{n}"}
    pkg, other, heavy = got["pkg"], got["other"], got["heavy"]
    init = "import sys\nsys.modules[__name__].INIT_RAN = True\n"
    files = {
        f"{pkg}/__init__.py": init + "from .sub import VALUE as EXPORTED\n",
        f"{pkg}/sub.py": (
            f"import {heavy}\nimport {other} as o\nfrom . import helper\nfrom .writer import W\nVALUE = 42\n"
            f"def use():\n    return {heavy}.THING\n"
            "def writer():\n    return o.Writer\n"
        ),
        f"{pkg}/helper.py": "X = 1\n",
        f"{pkg}/writer.py": "class W:\n    pass\n",
        f"{other}/__init__.py": init + "from .writer import Writer\n",
        f"{other}/writer.py": "class Writer:\n    pass\n",
        f"{heavy}.py": "THING = 'real'\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield got
    for mod in list(sys.modules):
        if mod.partition(".")[0] in got.values():
            del sys.modules[mod]
    for name in got.values():
        light_import._registered.pop(name, None)


def test_light_module_runs_no_package_init_and_defers_imports(names: dict[str, str]) -> None:
    pkg, other, heavy = names["pkg"], names["other"], names["heavy"]
    light_import.light_packages(pkg, other)
    light_import.defer(heavy)
    light_import.defer(other, {"Writer": f"{other}.writer"})
    sub = light_import.light_module(f"{pkg}.sub")
    assert sub is sys.modules[f"{pkg}.sub"] and sub.VALUE == 42
    assert "INIT_RAN" not in vars(sys.modules[pkg])
    assert {f"{pkg}.helper", f"{pkg}.writer"} <= set(sys.modules)  # `from . import x`, `from .x import y`
    assert heavy not in sys.modules and other not in sys.modules
    assert sub.writer() is sys.modules[f"{other}.writer"].Writer  # from that submodule alone
    assert "INIT_RAN" not in vars(sys.modules[other])
    assert sub.use() == "real" and heavy in sys.modules  # the real module, on first use
    assert sys.modules[pkg].EXPORTED == 42 and sys.modules[pkg].INIT_RAN is True  # __init__ runs when asked
    assert light_import.light_module(f"{pkg}.sub") is sub


def test_a_package_imported_as_usual_is_used_as_it_is(names: dict[str, str]) -> None:
    pkg = names["pkg"]
    light_import.light_packages(pkg)
    package = importlib.import_module(pkg)
    assert package.INIT_RAN is True
    assert light_import.light_module(f"{pkg}.helper") is importlib.import_module(f"{pkg}.helper")


def test_a_failed_light_load_is_undone_and_imported_as_usual(
    names: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = names["pkg"]
    light_import.light_packages(pkg)

    def fail(fullname: str) -> None:
        raise RuntimeError("light load failed")

    monkeypatch.setattr(light_import, "_load_submodule", fail)
    helper = light_import.light_module(f"{pkg}.helper")
    assert helper.X == 1 and sys.modules[pkg].INIT_RAN is True
    assert pkg not in light_import._registered


def test_a_package_not_declared_light_is_refused(names: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="not a light package"):
        light_import.light_module(f"{names['pkg']}.helper")
    assert names["pkg"] not in sys.modules


def test_a_missing_package_raises_the_usual_import_error() -> None:
    light_import.light_packages("fairsets_no_such_package")
    with pytest.raises(ModuleNotFoundError, match="fairsets_no_such_package"):
        light_import.light_module("fairsets_no_such_package.sub")
    assert "fairsets_no_such_package" not in sys.modules


def test_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert light_import.installed("json") and not light_import.installed("fairsets_no_such_package")
    monkeypatch.setitem(sys.modules, "json", None)
    assert not light_import.installed("json")


def test_preset_attributes_and_a_submodule_importing_its_own_package_path(
    tmp_path: Path, monkeypatch
) -> None:
    """A submodule may ``from pkg import __version__`` (preset) and ``import pkg.a.b as x`` while ``pkg.a``
    is still loading (albumentations does both); neither runs the package ``__init__``."""
    name = f"lightpre{next(_COUNT)}"
    files = {
        f"{name}/__init__.py": "import sys\nsys.modules[__name__].INIT_RAN = True\n__version__ = '9.9'\n",
        f"{name}/a/__init__.py": f"from {name} import __version__ as V\nfrom .c import C\n",
        f"{name}/a/b.py": "B = 2\n",
        f"{name}/a/c.py": f"import {name}.a.b as bee\nC = bee.B + 1\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    try:
        light_import.light_packages(name)
        light_import.preset(name, __version__=lambda: "9.9")
        a = light_import.light_module(f"{name}.a")
        assert (a.V, a.C) == ("9.9", 3)
        assert "INIT_RAN" not in vars(sys.modules[name])  # (hasattr would run the __init__)
    finally:
        for mod in list(sys.modules):
            if mod.partition(".")[0] == name:
                del sys.modules[mod]
        light_import._registered.pop(name, None)
