"""The analysis document of ``fairsets geo analyze``: its schema id, its file names and its structural check.

Both sides of the analysis import this module: :mod:`fairsets.geo.analyze` writes documents of
this schema and :mod:`fairsets.geo.report` renders them; neither needs the other for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ANALYSIS_FILE", "ANALYSIS_SCHEMA", "OVERALL", "REPORT_FILE", "check_analysis"]

ANALYSIS_SCHEMA = "fairsets.geo.analysis/1"
ANALYSIS_FILE = "analysis.json"
REPORT_FILE = "report.html"
OVERALL = "overall"


def check_analysis(doc: Any) -> list[str]:
    """Structural problems of an analysis dict (empty list: it can be reported)."""
    if not isinstance(doc, Mapping):
        return [f"the analysis must be a JSON object, got {type(doc).__name__}"]
    problems = []
    if doc.get("schema") != ANALYSIS_SCHEMA:
        problems.append(f"schema is {doc.get('schema')!r}, expected {ANALYSIS_SCHEMA!r}")
    for key in ("input", "settings", "overall", "entities", "diversity"):
        if not isinstance(doc.get(key), Mapping):
            problems.append(f"{key!r} must be an object")
    if problems:
        return problems
    for name, g in [("overall", doc["overall"]), *doc["entities"].items()]:
        for key in ("shares", "counts", "continents", "power_law", "correlations", "representation"):
            if not isinstance(g.get(key), Mapping):
                problems.append(f"group {name!r}: {key!r} must be an object")
    return problems
