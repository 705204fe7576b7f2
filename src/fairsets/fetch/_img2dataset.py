"""img2dataset's Downloader, Reader, Resizer and Writer without the libraries fairsets never uses.

``import img2dataset`` runs the package ``__init__``, which imports ``img2dataset.main`` and with it
wandb, ray and pandas; its submodules import wandb (``logger``: wandb logging), pandas (``reader``:
JSON input), albumentations (``resizer``: resize modes other than ``"no"``) and webdataset
(``writer``: only ``webdataset.TarWriter``), the last two importing torch, at their top. That is
~2.5 s of CPU and ~430 MiB in every process that downloads (the driver and each worker), for code
that fairsets' downloads (Parquet input, ``resize_mode="no"``, no wandb) never run.

:func:`load` returns ``img2dataset.<name>``, the same code, loaded like this:

* the ``img2dataset`` package module is registered in ``sys.modules`` with its ``__path__`` (so its
  submodules import as usual) without running its ``__init__``; so is ``webdataset`` when
  ``webdataset.writer`` is needed. The first access to a name such a package does not have
  (``img2dataset.download``, ``webdataset.WebDataset``) runs its ``__init__`` then, so that
  ``import img2dataset; img2dataset.download(...)`` later in the same process works as ever;
* the submodules loaded here run with their top-level ``import wandb`` / ``import pandas as pd`` /
  ``import albumentations as A`` / ``import webdataset as wds`` bound to stand-ins that import the
  real module on their first attribute access (``wandb.log``, ``pd.read_json``,
  ``A.LongestMaxSize``), i.e. only on a path fairsets does not take; ``wds.TarWriter`` comes from
  ``webdataset.writer`` alone. The stand-ins come from a private ``__import__`` of those submodules
  and never go into ``sys.modules``.

Anything else is a normal import: img2dataset already imported (its modules are used as they are),
img2dataset or one of the deferred libraries not installed (the usual ``ImportError``, as before),
or any failure of the above (what it registered is removed first).
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import logging
import sys
import threading
import types
from typing import Any

__all__ = ["DEFERRED", "load"]

log = logging.getLogger(__name__)

#: Packages whose submodules are loaded here without the package ``__init__``.
LIGHT_PACKAGES = frozenset({"img2dataset", "webdataset"})
#: Imported at the top of img2dataset's submodules but used only on paths fairsets does not take,
#: with the names that can be had from one submodule (``{attribute: submodule}``).
DEFERRED: dict[str, dict[str, str]] = {
    "albumentations": {},  # img2dataset.resizer: resize modes other than "no"
    "pandas": {},  # img2dataset.reader: JSON input
    "wandb": {},  # img2dataset.logger: wandb logging
    "webdataset": {"TarWriter": "webdataset.writer"},  # img2dataset.writer: wds.TarWriter only
}

_LOCK = threading.RLock()
_registered: dict[str, types.ModuleType] = {}  # packages registered here, their __init__ not run (yet)


class _Deferred(types.ModuleType):
    """Stands for a module until its first attribute access, which imports the real one."""

    def __init__(self, name: str, light: dict[str, str]) -> None:
        super().__init__(name)
        self.__light = light

    def __getattr__(self, attr: str) -> Any:
        submodule = self.__light.get(attr)
        name = self.__name__
        if submodule is not None and (name not in sys.modules or sys.modules[name] is _registered.get(name)):
            with _LOCK:
                return getattr(_light_module(submodule), attr)
        return getattr(importlib.import_module(self.__name__), attr)


def _import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    """``__import__`` of the submodules loaded here: stand-ins for :data:`DEFERRED`, light submodules."""
    unloaded = name not in sys.modules or sys.modules[name] is _registered.get(name)
    if level == 0 and not fromlist and name in DEFERRED and unloaded:
        return _Deferred(name, DEFERRED[name])
    absolute = importlib.util.resolve_name("." * level + name, (globals or {}).get("__package__"))
    top = absolute.partition(".")[0]
    if top in LIGHT_PACKAGES and sys.modules.get(top) is _registered.get(top, False):
        if absolute != top and absolute not in sys.modules:
            _load_submodule(absolute)
        package = sys.modules[absolute]
        for item in fromlist or ():  # `from . import x`: x may be a submodule
            sub = f"{absolute}.{item}"
            if (
                hasattr(package, "__path__")
                and item not in package.__dict__
                and sub not in sys.modules
                and importlib.util.find_spec(sub) is not None
            ):
                _load_submodule(sub)
    return builtins.__import__(name, globals, locals, fromlist, level)


_BUILTINS = dict(builtins.__dict__, __import__=_import)


def _load_submodule(fullname: str) -> types.ModuleType:
    """Run ``fullname`` (its parent package in ``sys.modules``) with :func:`_import` for its imports."""
    spec = importlib.util.find_spec(fullname)
    if spec is None or spec.loader is None:
        raise ImportError(f"No module named {fullname!r}", name=fullname)
    module = importlib.util.module_from_spec(spec)
    module.__dict__["__builtins__"] = _BUILTINS
    sys.modules[fullname] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(fullname, None)
        raise
    parent, _, child = fullname.rpartition(".")
    setattr(sys.modules[parent], child, module)
    return module


def _register_package(name: str) -> types.ModuleType:
    """The package module ``name`` in ``sys.modules``, its ``__init__`` run on first use of a missing name."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or not spec.submodule_search_locations:
        raise ImportError(f"No module named {name!r}", name=name)
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def run_init(attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        with _LOCK:
            if package.__dict__.pop("__getattr__", None) is not None:
                log.debug("%s.%s asked for: running the package's __init__", name, attr)
                loader.exec_module(package)
        return getattr(package, attr)

    package.__dict__["__getattr__"] = run_init
    sys.modules[name] = package
    _registered[name] = package
    return package


def _light_module(fullname: str) -> types.ModuleType:
    """``fullname`` (in a :data:`LIGHT_PACKAGES` package) loaded here, else imported as usual."""
    if fullname in sys.modules:
        return sys.modules[fullname]
    top = fullname.partition(".")[0]
    package = sys.modules.get(top)
    if package is not None and package is not _registered.get(top):  # imported as usual: use it
        return importlib.import_module(fullname)
    before = set(sys.modules)
    try:
        if package is None:
            _register_package(top)
        return _load_submodule(fullname)
    except Exception as exc:  # anything unexpected: undo, and import as usual
        for added in set(sys.modules) - before:
            if added.partition(".")[0] in LIGHT_PACKAGES:
                if _registered.get(added) is sys.modules[added]:
                    del _registered[added]
                del sys.modules[added]
        log.debug("%s: light load failed (%s), importing it as usual", fullname, exc)
        return importlib.import_module(fullname)


def _installed(name: str) -> bool:
    """Whether ``import name`` can work, without importing it (``sys.modules[name] = None`` blocks it)."""
    if name in sys.modules:
        return sys.modules[name] is not None
    return importlib.util.find_spec(name) is not None


def load(name: str) -> types.ModuleType:
    """``img2dataset.<name>`` (``downloader``, ``reader``, ``resizer`` or ``writer``), light if it can be."""
    fullname = f"img2dataset.{name}"
    with _LOCK:
        if fullname in sys.modules:
            return sys.modules[fullname]
        if "img2dataset" not in sys.modules and not all(map(_installed, DEFERRED)):
            return importlib.import_module(fullname)  # as before: the usual ImportError (or import)
        return _light_module(fullname)
