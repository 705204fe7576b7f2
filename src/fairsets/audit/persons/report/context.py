"""The persons report's template values: title, version and the six sections as lists of blocks.

Sections 1 (setup) and 6 (skipped) are built here; sections 2 to 5 in :mod:`.composition`,
:mod:`.crime`, :mod:`.sentiment` and :mod:`.themes`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .checks import PERSONS_SCHEMA
from .common import (
    _count,
    _h,
    _kv,
    _map,
    _p,
    _seq,
    _table,
    _text,
)
from .composition import _composition
from .crime import _crime
from .sentiment import _sentiment
from .themes import _themes

# ----------------------------------------------------------------------------------------------------
# 1. Setup


def _setup(audit: Mapping[str, Any]) -> list[dict[str, Any]]:
    settings = _map(audit.get("settings"))
    rows: list[tuple[str, Any]] = [
        ("Annotation folder", audit.get("annotations")),
        ("fairsets version", audit.get("fairsets_version")),
        ("Attributes", ", ".join(map(str, _seq(audit.get("attributes")))) or "none"),
        ("Shards", _count(audit.get("n_shards"))),
        ("Minimum count", _count(settings.get("min_count"))),
        ("Group rule", settings.get("group_rule") or "exclusive"),
        ("Δ reference", settings.get("delta_reference") or "all"),
        ("Crime words", settings.get("crime_words")),
        ("Innocent-sense exclusions", settings.get("exclusions") or "default"),
        ("Sentiment scorer", settings.get("sentiment") or "none"),
    ]
    if _seq(settings.get("correct_with")):
        rows.append(("Corrected with", ", ".join(map(str, _seq(settings.get("correct_with"))))))
    themes = settings.get("themes")
    if isinstance(themes, Mapping):
        for key, value in themes.items():
            rows.append((f"Themes {key}", _count(value) if isinstance(value, int) else value))
    else:
        rows.append(("Themes", "not run"))
    blocks = [_kv(rows)]
    shared = _map(audit.get("definitions"))
    if shared:
        blocks.append(_h("Definitions", 3))
        blocks.append(_kv([(_text(k), _text(v)) for k, v in shared.items()]))
    comp_defs = _map(_map(audit.get("composition")).get("definitions"))
    if comp_defs:
        blocks.append(_h("Definitions of the composition", 3))
        blocks.append(_kv([(_text(k), _text(v)) for k, v in comp_defs.items()]))
    return blocks


# ----------------------------------------------------------------------------------------------------
# 6. Skipped


def _skipped(audit: Mapping[str, Any]) -> list[dict[str, Any]]:
    skipped = {k: v for k, v in _map(audit.get("skipped")).items() if v}
    missing = [
        k for k in ("composition", "crime", "sentiment", "themes") if not isinstance(audit.get(k), Mapping)
    ]
    rows = [[_text(k), _text(v)] for k, v in skipped.items()]
    rows += [[k, "not in the audit"] for k in missing if k not in skipped]
    if not rows:
        return [_p("Nothing was skipped.")]
    return [_table(["section", "reason"], rows)]


# ----------------------------------------------------------------------------------------------------
# The template's values


def build_context(audit: Mapping[str, Any]) -> dict[str, Any]:
    """The template's values: the title and the sections as lists of blocks (plots included)."""
    sections = [
        ("setup", "Setup", _setup),
        ("composition", "Composition", _composition),
        ("crime", "Crime words", _crime),
        ("sentiment", "Sentiment", _sentiment),
        ("themes", "Themes", _themes),
        ("skipped", "Skipped sections", _skipped),
    ]
    return {
        "title": _text(audit.get("annotations"), 200),
        "version": _text(audit.get("fairsets_version"), 100),
        "schema": PERSONS_SCHEMA,
        "sections": [{"id": i, "title": t, "blocks": fn(audit)} for i, t, fn in sections],
    }
