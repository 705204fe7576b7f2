"""What only a person can write about a dataset: the person-written RAI and card facts.

fairsets fills every Croissant RAI property it can from what it ran (:mod:`fairsets.publish.rai_facts`
for a build, :mod:`fairsets.annotate.publish.rai` for an annotation folder). Intended uses, social
impact, a maintenance plan, who the annotators were, whom to contact: those a person writes, in a
recipe's ``[publish.rai]`` section or, for an annotation folder, a TOML file given to
``fairsets publish ANN --rai FILE.toml`` with the same keys. What is required and missing is listed
by ``fairsets card lint``; the card shows a visible placeholder where it is.

Every value is plain text (one string, or a list of strings: one bullet each); the card renders it
escaped, never as markup, and ``croissant.json`` holds it as a string.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

__all__ = ["PERSON_WRITTEN", "RaiText", "as_lines", "as_text", "load_rai_text", "person_text_properties"]

Text = str | list[str] | None

#: ISO 8601: a date or date-time, or an interval of two (``2020/2022``, ``2024-01-01/2024-06-30``).
_ISO_POINT = r"\d{4}(-\d{2}(-\d{2}(T\d{2}(:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?)?)?)?"
ISO_INTERVAL = re.compile(rf"^{_ISO_POINT}(/{_ISO_POINT})?$")


class RaiText(BaseModel):
    """Person-written RAI and card facts (every field optional; unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data_use_cases: Text = None
    """Intended uses (rai:dataUseCases; the card's Direct Use)."""
    out_of_scope_uses: Text = None
    """Uses that are out of scope, added to the ones fairsets always names (the card's Out-of-Scope Use)."""
    data_social_impact: Text = None
    """The data's possible social impact (rai:dataSocialImpact)."""
    data_release_maintenance_plan: Text = None
    """Who maintains the data, how often it is updated, how versions are deprecated
    (rai:dataReleaseMaintenancePlan; the card's Maintenance and versioning)."""
    annotator_demographics: Text = None
    """Who made the human labels (rai:annotatorDemographics; the card's Who are the annotators?)."""
    contact: Text = None
    """Whom to contact, for removal requests too (the card's Dataset Card Contact)."""
    recommendations: Text = None
    """Recommendations to users, added to fairsets' own (the card's Recommendations)."""
    source_data_producers: Text = None
    """Who produced the source data, added to what the build recorded (the card's Source Data)."""
    data_collection_timeframe: str | None = None
    """When the data was collected, an ISO 8601 date or interval such as ``2024-01/2024-03``
    (rai:dataCollectionTimeframe, whose type is a DateTime)."""

    @field_validator(
        "data_use_cases",
        "out_of_scope_uses",
        "data_social_impact",
        "data_release_maintenance_plan",
        "annotator_demographics",
        "contact",
        "recommendations",
        "source_data_producers",
    )
    @classmethod
    def _text(cls, v: Text) -> Text:
        if isinstance(v, list):
            items = [" ".join(str(x).split()) for x in v]
            return [x for x in items if x] or None
        if isinstance(v, str):
            return " ".join(v.split()) or None
        return v

    @field_validator("data_collection_timeframe")
    @classmethod
    def _timeframe(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        v = v.strip()
        if not ISO_INTERVAL.match(v):
            raise ValueError(
                f"{v[:40]!r} is not an ISO 8601 date or interval (rai:dataCollectionTimeframe is a "
                "DateTime); write e.g. 2024-01-01/2024-03-31"
            )
        return v


#: Person-written fields that are RAI properties: ``{field: rai property}``.
PERSON_WRITTEN = {
    "data_use_cases": "dataUseCases",
    "data_social_impact": "dataSocialImpact",
    "data_release_maintenance_plan": "dataReleaseMaintenancePlan",
    "annotator_demographics": "annotatorDemographics",
    "data_collection_timeframe": "dataCollectionTimeframe",
}


def person_text_properties(person: Mapping[str, Any]) -> dict[str, str]:
    """``{rai property: text}`` of the person-written text fields that are filled (the timeframe,
    a DateTime, is left to the caller)."""
    out = {}
    for field, prop in PERSON_WRITTEN.items():
        if field == "data_collection_timeframe":
            continue
        text = as_text(person.get(field))
        if text:
            out[prop] = text
    return out


def as_lines(value: Text) -> list[str]:
    """A field as a list of lines (a string is one line)."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def as_text(value: Text) -> str | None:
    """A field as one string (a list joined with spaces, each item ending with its own full stop)."""
    lines = as_lines(value)
    if not lines:
        return None
    return (
        " ".join(x if x.endswith((".", "!", "?")) else f"{x}." for x in lines) if len(lines) > 1 else lines[0]
    )


def load_rai_text(path: str | os.PathLike[str]) -> RaiText:
    """Read a ``--rai FILE.toml`` (the keys of :class:`RaiText`, at the top or under ``[publish.rai]``).

    Raises:
        ValueError: the file cannot be read or parsed, or holds an unknown key or a bad value
            (one line, naming the key).
    """
    import pydantic

    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(f"{p}: cannot be read ({e.strerror or e})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: not valid TOML ({' '.join(str(e).split())})") from None
    if isinstance(data.get("publish"), dict) and isinstance(data["publish"].get("rai"), dict):
        data = data["publish"]["rai"]
    try:
        return RaiText.model_validate(data)
    except pydantic.ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err.get("loc") or ()) or "?"
        raise ValueError(f"{p}: {where}: {err.get('msg')}") from None
