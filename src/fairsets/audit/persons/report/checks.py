"""The persons audit's schema id and the structural check run before a report is rendered."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import _cut

PERSONS_SCHEMA = "fairsets.audit.persons/1"


def check_persons_audit(audit: Any) -> list[str]:
    """Return the structural problems of a persons-audit dict (empty list: it can be reported).

    Checks the schema id; that ``annotations`` is a folder name (not a path), ``fairsets_version`` a
    string, ``attributes`` a list of strings, ``n_shards`` a non-negative integer, ``settings`` an
    object with an integer ``min_count``; and that ``composition``, ``crime``, ``sentiment``,
    ``themes``, ``skipped`` and ``definitions`` are objects or null (absent counts as null).
    """
    if not isinstance(audit, Mapping):
        return [f"the audit must be a JSON object, got {type(audit).__name__}"]
    problems: list[str] = []
    if audit.get("schema") != PERSONS_SCHEMA:
        problems.append(f"schema is {_cut(repr(audit.get('schema')), 80)}, expected {PERSONS_SCHEMA!r}")
    name = audit.get("annotations")
    if not isinstance(name, str) or not name:
        problems.append("'annotations' must be a non-empty string (the annotation folder's name)")
    elif "/" in name or "\\" in name:
        problems.append("'annotations' must be the folder's name, not a path")
    if not isinstance(audit.get("fairsets_version"), str):
        problems.append("'fairsets_version' must be a string")
    attrs = audit.get("attributes")
    if not isinstance(attrs, list) or not all(isinstance(a, str) for a in attrs):
        problems.append("'attributes' must be a list of strings")
    n = audit.get("n_shards")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        problems.append("'n_shards' must be a non-negative integer")
    settings = audit.get("settings")
    if not isinstance(settings, Mapping):
        problems.append("'settings' must be an object")
    else:
        mc = settings.get("min_count")
        if not isinstance(mc, int) or isinstance(mc, bool):
            problems.append("'settings.min_count' must be an integer")
        if settings.get("themes") is not None and not isinstance(settings.get("themes"), Mapping):
            problems.append("'settings.themes' must be an object or null")
    for key in ("composition", "crime", "sentiment", "themes", "skipped", "definitions"):
        if audit.get(key) is not None and not isinstance(audit.get(key), Mapping):
            problems.append(f"{key!r} must be an object or null")
    for key in ("sentiment", "crime"):
        sec = audit.get(key)
        if isinstance(sec, Mapping):
            person = sec.get("person")
            if person is not None and not isinstance(person, Mapping):
                problems.append(f"'{key}.person' must be an object or null")
    themes = audit.get("themes")
    if isinstance(themes, Mapping):
        by = themes.get("by_attribute")
        if by is not None and not isinstance(by, Mapping):
            problems.append("'themes.by_attribute' must be an object")
    return problems
