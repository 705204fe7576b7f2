"""The Croissant Responsible-AI (RAI) 1.0 vocabulary, and checks of a document's ``rai:`` keys.

The term list ships as ``cards/croissant_rai.toml`` (package data ``fairsets/_cards/``): the 20
dataset-level properties of mlcommons/croissant ``docs/croissant_rai.ttl`` (its header names the
commit), each with the type of value the vocabulary allows. mlcroissant ignores unknown or
misspelled ``rai:`` keys, and two of its own constants are spelled unlike the vocabulary
(``dataCollectionTimeFrame``, ``dataDataManipulationProtocol``), so :func:`check_rai` checks against
the vocabulary itself.

Rules of :func:`check_rai`:

* every ``rai:`` key of the dataset is a property of the vocabulary (exact spelling);
* a ``Text`` value is a non-empty string or a non-empty list of non-empty strings;
* a ``DateTime`` value is an ISO 8601 date, date-time or interval (``2020/2022``), or a list of them;
* a document with any ``rai:`` key declares ``conformsTo`` :data:`RAI_CONFORMS_TO` and its
  ``@context`` maps ``rai`` to the vocabulary's namespace.

:func:`missing_rai` names the required properties a document lacks (:data:`REQUIRED`, and
``annotatorDemographics`` where the document says items carry labels, ``rai:annotationsPerItem``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from fairsets.core.datafiles import find_data_file

from .rai_text import ISO_INTERVAL

__all__ = [
    "RAI_CONFORMS_TO",
    "RAI_NAMESPACE",
    "REQUIRED",
    "VOCABULARY_FILE",
    "check_rai",
    "missing_rai",
    "rai_properties",
    "rai_values",
]

VOCABULARY_FILE = "croissant_rai.toml"
RAI_NAMESPACE = "http://mlcommons.org/croissant/RAI/"
#: What a dataset conforming to the RAI specification declares (croissant-rai-spec.md, Prerequisites).
RAI_CONFORMS_TO = "http://mlcommons.org/croissant/RAI/1.0"

#: Properties fairsets requires in every published ``croissant.json``: those it fills from what it
#: ran, and those only a person can write (use cases, social impact, maintenance plan).
REQUIRED = (
    "dataCollection",
    "dataCollectionRawData",
    "dataPreprocessingProtocol",
    "personalSensitiveInformation",
    "dataBiases",
    "dataLimitations",
    "dataUseCases",
    "dataSocialImpact",
    "dataReleaseMaintenancePlan",
)


@cache
def rai_properties() -> dict[str, dict[str, str]]:
    """``{property: {"range", "meaning"}}`` of the shipped vocabulary file."""
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    data = tomllib.loads(find_data_file("cards", VOCABULARY_FILE).read_text(encoding="utf-8"))
    return {name: dict(entry) for name, entry in data["properties"].items()}


def _type_problem(value: Any, range_: str) -> str | None:
    items = value if isinstance(value, list) else [value]
    if not items:
        return "an empty list"
    for item in items:
        if not isinstance(item, str) or not item.strip():
            return f"a {type(item).__name__} where the vocabulary wants {range_} (a non-empty string)"
        if range_ == "DateTime" and not ISO_INTERVAL.match(item.strip()):
            return f"{item[:40]!r} is not an ISO 8601 date or interval (DateTime)"
    return None


def check_rai(doc: Mapping[str, Any]) -> list[str]:
    """The problems of ``doc``'s ``rai:`` keys against the vocabulary (empty: none); one line each."""
    vocab = rai_properties()
    problems = []
    keys = sorted(k for k in doc if isinstance(k, str) and k.startswith("rai:"))
    for key in keys:
        name = key[4:]
        if name not in vocab:
            close = [p for p in vocab if p.lower() == name.lower()]
            hint = f" (the vocabulary spells it {close[0]})" if close else ""
            problems.append(f"{key}: not a property of the Croissant RAI 1.0 vocabulary{hint}")
            continue
        why = _type_problem(doc[key], vocab[name]["range"])
        if why:
            problems.append(f"{key}: {why}")
    if keys:
        conforms = doc.get("conformsTo")
        conforms = conforms if isinstance(conforms, list) else [conforms]
        if RAI_CONFORMS_TO not in conforms:
            problems.append(f"conformsTo does not declare {RAI_CONFORMS_TO}")
        ctx = doc.get("@context")
        if not isinstance(ctx, Mapping) or ctx.get("rai") != RAI_NAMESPACE:
            problems.append(f"@context does not map rai to {RAI_NAMESPACE}")
    return problems


def missing_rai(doc: Mapping[str, Any]) -> list[str]:
    """The required RAI properties ``doc`` lacks (see the module docstring), in vocabulary order."""
    required = set(REQUIRED)
    if doc.get("rai:annotationsPerItem"):
        required.add("annotatorDemographics")
    return [p for p in rai_properties() if p in required and not doc.get(f"rai:{p}")]


def rai_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """``{"rai:" + property: value}`` of the non-empty ``values`` (a list of one string becomes the
    string), checked against the vocabulary.

    Raises:
        ValueError: a property outside the vocabulary or a value of the wrong type (a bug in the
            caller: the values are built by fairsets).
    """
    out: dict[str, Any] = {}
    for name, value in values.items():
        if value is None or value == "" or value == []:
            continue
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        out[f"rai:{name}"] = value
    problems = [
        p for p in check_rai({**out, "conformsTo": RAI_CONFORMS_TO, "@context": {"rai": RAI_NAMESPACE}}) if p
    ]
    if problems:
        raise ValueError("; ".join(problems))
    return dict(sorted(out.items()))
