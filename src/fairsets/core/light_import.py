"""Submodules of a package loaded without running the package ``__init__`` (nor what it imports).

Some libraries import everything from their package ``__init__`` (``import webdataset`` imports
PyTorch; ``import img2dataset`` imports wandb, ray and pandas), so that importing even one small
submodule costs seconds of CPU and hundreds of MiB. :func:`light_module` returns such a submodule,
the same code, loaded like this:

* the package module (one of :func:`light_packages`) is registered in ``sys.modules`` with its
  ``__path__`` (so its submodules import as usual) without running its ``__init__``. The first
  access to a name the package does not have (``img2dataset.download``, ``webdataset.WebDataset``)
  runs its ``__init__`` then, so that ``import webdataset; webdataset.WebDataset(...)`` later in the
  same process works as ever;
* the submodules loaded here run with their top-level ``import X`` of a library declared with
  :func:`defer` bound to a stand-in that imports the real module on its first attribute access,
  i.e. only on a path the caller does not take; names declared as coming from one submodule
  (``defer("webdataset", {"TarWriter": "webdataset.writer"})``) come from that submodule alone,
  loaded here. The stand-ins come from a private ``__import__`` of those submodules and never go
  into ``sys.modules``.

Anything else is a normal import: the package already imported as usual (its modules are used as
they are), or any failure of the above (what it registered is removed first, so the usual import,
and its usual ``ImportError``, follows).

API:
    * ``light_packages(*names)`` — allow :func:`light_module` for the submodules of these packages.
    * ``preset(name, **values)`` — attributes a light package has before its ``__init__`` runs.
    * ``defer(name, light=None)`` — ``import name`` in a light-loaded submodule gives a stand-in;
      ``light`` maps attribute names to the submodule that provides them.
    * ``light_module(fullname) -> module`` — ``fullname`` loaded light, else imported as usual.
    * ``installed(name) -> bool`` — whether ``import name`` can work, without importing it.
    * ``LOCK`` — the re-entrant lock held while modules are loaded here.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import logging
import sys
import threading
import types
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["LOCK", "defer", "installed", "light_module", "light_packages"]

log = logging.getLogger(__name__)

#: Packages whose submodules are loaded here without the package ``__init__``.
_LIGHT_PACKAGES: set[str] = set()
_PRESETS: dict[str, dict[str, Callable[[], Any]]] = {}
#: Libraries imported as stand-ins by the submodules loaded here, with the names that can be had
#: from one submodule (``{attribute: submodule}``).
_DEFERRED: dict[str, dict[str, str]] = {}

LOCK = threading.RLock()
_registered: dict[str, types.ModuleType] = {}  # packages registered here, their __init__ not run (yet)


def light_packages(*names: str) -> None:
    """Let :func:`light_module` load the submodules of the packages ``names`` without their ``__init__``."""
    with LOCK:
        _LIGHT_PACKAGES.update(names)


def preset(name: str, **values: Callable[[], Any]) -> None:
    """Attributes a light package has before its ``__init__`` runs: ``values`` maps each name to a
    function that computes what the ``__init__`` would set (``__version__`` read from the installed
    distribution's metadata, as many packages do), for submodules that import it from the package."""
    with LOCK:
        _PRESETS.setdefault(name, {}).update(values)


def defer(name: str, light: Mapping[str, str] | None = None) -> None:
    """Bind ``import name`` in the submodules loaded here to a stand-in (see the module docstring).

    ``light`` maps an attribute of ``name`` to the submodule (of a :func:`light_packages` package)
    that provides it; any other attribute imports ``name`` as usual.
    """
    with LOCK:
        _DEFERRED.setdefault(name, {}).update(light or {})


class _Deferred(types.ModuleType):
    """Stands for a module until its first attribute access, which imports the real one."""

    def __init__(self, name: str, light: dict[str, str]) -> None:
        super().__init__(name)
        self.__light = light

    def __getattr__(self, attr: str) -> Any:
        submodule = self.__light.get(attr)
        name = self.__name__
        if submodule is not None and (name not in sys.modules or sys.modules[name] is _registered.get(name)):
            with LOCK:
                return getattr(_light_module(submodule), attr)
        return getattr(importlib.import_module(self.__name__), attr)


def _import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    """``__import__`` of the submodules loaded here: stand-ins for deferred libraries, light submodules."""
    unloaded = name not in sys.modules or sys.modules[name] is _registered.get(name)
    if level == 0 and not fromlist and name in _DEFERRED and unloaded:
        return _Deferred(name, _DEFERRED[name])
    absolute = importlib.util.resolve_name("." * level + name, (globals or {}).get("__package__"))
    top = absolute.partition(".")[0]
    if top in _LIGHT_PACKAGES and sys.modules.get(top) is _registered.get(top, False):
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
        submodule = sys.modules.get(f"{name}.{attr}")
        if submodule is not None:  # `import pkg.sub.x as y` inside pkg.sub, while pkg.sub is loading
            return submodule
        with LOCK:
            if package.__dict__.pop("__getattr__", None) is not None:
                log.debug("%s.%s asked for: running the package's __init__", name, attr)
                loader.exec_module(package)
        return getattr(package, attr)

    for attr, compute in _PRESETS.get(name, {}).items():
        package.__dict__[attr] = compute()
    package.__dict__["__getattr__"] = run_init
    sys.modules[name] = package
    _registered[name] = package
    return package


def _light_module(fullname: str) -> types.ModuleType:
    """``fullname`` (in a :func:`light_packages` package) loaded here, else imported as usual."""
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
            if added.partition(".")[0] in _LIGHT_PACKAGES:
                if _registered.get(added) is sys.modules[added]:
                    del _registered[added]
                del sys.modules[added]
        log.debug("%s: light load failed (%s), importing it as usual", fullname, exc)
        return importlib.import_module(fullname)


def light_module(fullname: str) -> types.ModuleType:
    """``fullname``, a submodule of a :func:`light_packages` package, loaded light if it can be.

    Raises:
        ValueError: ``fullname`` is not in a package declared with :func:`light_packages`.
        ImportError: the usual one, where the module cannot be imported at all.
    """
    top = fullname.partition(".")[0]
    with LOCK:
        if top not in _LIGHT_PACKAGES:
            raise ValueError(f"{top!r} is not a light package: declare it with light_packages({top!r})")
        return _light_module(fullname)


def installed(name: str) -> bool:
    """Whether ``import name`` can work, without importing it (``sys.modules[name] = None`` blocks it)."""
    if name in sys.modules:
        return sys.modules[name] is not None
    return importlib.util.find_spec(name) is not None
