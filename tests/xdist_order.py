"""How the suite is spread over pytest-xdist workers (``-n auto --dist loadfile`` in pyproject.toml).

``loadfile`` keeps each test module on one worker, so its module fixtures are built once. The
modules are handed out longest first, so that no worker is left alone with a long module at the
end of the run: every run records each test's seconds in pytest's cache (``.pytest_cache``), and
the next one orders the modules by the sum over the tests it collected. Without a record (a fresh
clone, ``-p no:cacheprovider``) a test marked ``slow`` counts :data:`UNKNOWN_SLOW` seconds and any
other :data:`UNKNOWN` seconds. The order only changes under xdist; ``pytest -n 0`` (one process)
runs the files as they come.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

#: The cache key of the seconds per test id (setup + call + teardown).
CACHE_KEY = "fairsets/test-seconds"
UNKNOWN_SLOW = 30.0
UNKNOWN = 0.5

_seconds: dict[str, float] = {}


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def module_order(items: Iterable[Any], recorded: dict[str, float]) -> list[str]:
    """Module paths of ``items`` (in their order of appearance), the longest first (a stable sort)."""
    total: dict[str, float] = {}
    for item in items:
        guess = UNKNOWN_SLOW if item.get_closest_marker("slow") else UNKNOWN
        seconds = recorded.get(item.nodeid, guess)
        total[_module(item.nodeid)] = total.get(_module(item.nodeid), 0.0) + float(seconds)
    return sorted(total, key=lambda m: -total[m])


def pytest_collection_modifyitems(config: pytest.Config, items: list[Any]) -> None:
    if not hasattr(config, "workerinput"):  # not an xdist worker: keep the files' order
        return
    cache = getattr(config, "cache", None)
    recorded = cache.get(CACHE_KEY, {}) if cache is not None else {}
    rank = {m: i for i, m in enumerate(module_order(items, recorded if isinstance(recorded, dict) else {}))}
    items.sort(key=lambda item: rank[_module(item.nodeid)])  # stable: a module's tests keep their order


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # in the xdist controller, the workers' reports; in a plain run, this process's
    _seconds[report.nodeid] = _seconds.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    cache = getattr(config, "cache", None)
    if hasattr(config, "workerinput") or cache is None or not _seconds:
        return
    recorded = cache.get(CACHE_KEY, {})
    recorded = recorded if isinstance(recorded, dict) else {}
    recorded.update({k: round(v, 3) for k, v in _seconds.items()})
    root = Path(str(config.rootpath))
    cache.set(CACHE_KEY, {k: v for k, v in recorded.items() if (root / _module(k)).is_file()})
    _seconds.clear()
