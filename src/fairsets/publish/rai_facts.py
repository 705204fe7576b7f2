"""The Croissant RAI properties of a built face dataset, written from what the build ran.

:func:`face_rai` reads the build summary (:mod:`fairsets.publish.card`'s shape, plus ``rai_text``,
the recipe's ``[publish.rai]`` as a dict) and returns ``{property: value}`` for
:func:`fairsets.publish.croissant.build_croissant`. Every value is a string built from facts (the
recipe's sources, steps with their parameters and reject counts, the cells, the augmentation
counts); strings that came from data are quoted as data, never turned into markup; the rule
behind each number is said next to it. What only a person can write comes from ``rai_text``
and is absent otherwise (``fairsets card lint`` lists it).

:func:`face_biases` and :func:`face_limitations` are the card's ``Bias, risks and limitations``
bullets, so the card and ``croissant.json`` say the same thing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .rai_text import person_text_properties

__all__ = ["COLLECTION_TYPES", "face_biases", "face_limitations", "face_rai"]

#: rai:dataCollectionType of each source type (the vocabulary's recommended values).
COLLECTION_TYPES = {
    "wikidata": "Web API",
    "serpapi": "Web API",
    "urls": "Web Scraping",
    "local": "Others (a local listing of image files)",
}

_BIASES = (
    "The sources decide who is represented: people with public photographs (for example on "
    "Wikimedia Commons) are over-represented, and within a cell images may still differ "
    "systematically in age, pose, lighting, image quality or photographic era.",
    "Group labels are coarse and may be wrong; a filter or detector step may perform differently "
    "across groups, which changes who survives curation (compare the per-cell counts with the "
    "rejects table).",
)
_LIMITATION = (
    "Balancing equalises counts per cell, not every confounder; cells with few identities repeat "
    "the same people, and augmented images are not new people."
)


def face_biases(summary: Mapping[str, Any]) -> list[str]:
    """The card's bias bullets: the recipe's own (``biases``), then fairsets' standing ones."""
    return [*(str(b) for b in summary.get("biases") or []), *_BIASES]


def face_limitations(summary: Mapping[str, Any]) -> list[str]:
    """The card's limitation bullets: fairsets' standing one, then the recipe's (``limitations``)."""
    return [_LIMITATION, *(str(x) for x in summary.get("limitations") or [])]


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(", ", ": "))


def _source_line(src: Mapping[str, Any]) -> str:
    params = {k: v for k, v in src.items() if k not in ("type", "prepare")}
    return f"source type {src.get('type', 'local')} with parameters {_compact(params)}"


def _cell(cell: Mapping[str, Any], groups: list[str]) -> str:
    return ", ".join(f"{g}={cell.get(g)}" for g in groups)


def face_rai(summary: Mapping[str, Any]) -> dict[str, Any]:
    """``{RAI property: value}`` of a build (see the module docstring)."""
    recipe = summary.get("recipe") or {}
    person = summary.get("rai_text") or {}
    groups = list(summary.get("groups") or [])
    sources = [recipe.get("source") or {}, *(recipe.get("supplement") or [])]
    sources = [s for s in sources if s]
    cells = list(summary.get("cells") or [])
    out: dict[str, Any] = {}

    out["dataCollection"] = (
        f"Candidate images were gathered by fairsets from {len(sources) or 'an unrecorded number of'} "
        f"source(s): {'; '.join(_source_line(s) for s in sources) or 'not recorded'} (supplementary "
        f"sources are asked only for cells the ones before left below quota). "
        f"{summary.get('candidates', 'An unrecorded number of')} candidate images were read; "
        f"{summary.get('accepted', 'n/a')} passed the per-sample steps."
    )
    types = sorted({COLLECTION_TYPES.get(str(s.get("type")), "Others") for s in sources})
    if types:
        out["dataCollectionType"] = types
    src_counts = summary.get("sources") or {}
    lic = summary.get("licenses") or {}
    out["dataCollectionRawData"] = (
        "Photographs of people from the sources above, kept with their source URL, licence and "
        "author (metadata/{variant}/{split}.parquet, ATTRIBUTION.md). Published source images by "
        f"source: {_compact(src_counts) if src_counts else 'not recorded'}; by licence (SPDX id): "
        f"{_compact(lic) if lic else 'not recorded'}."
    )
    if person.get("data_collection_timeframe"):
        out["dataCollectionTimeframe"] = person["data_collection_timeframe"]

    empty = [_cell(c.get("cell") or {}, groups) for c in cells if not c.get("available")]
    out["dataCollectionMissingData"] = (
        "Every candidate that was not published is in rejects.parquet with the step and reason that "
        "dropped it. "
        + (
            f"Cells with no real image after curation (absent from every config): {'; '.join(empty)}."
            if empty
            else "Every declared cell has at least one real image."
        )
    )

    steps = summary.get("steps") or []
    dups = summary.get("duplicates") or {}
    step_text = "; ".join(
        f"{i + 1}. {s.get('name')} with parameters {_compact(s.get('params') or {})}: "
        f"{int(s.get('rejected') or 0)} rejected, {int(s.get('failed') or 0)} failed"
        for i, s in enumerate(steps)
    )
    out["dataPreprocessingProtocol"] = (
        "Every candidate went through the recipe's steps in order; a step keeps a candidate or "
        "rejects it with a reason (rejected: a decision; failed: an error such as an undecodable "
        f"file; counts are candidate images). Steps: {step_text or 'none recorded'}. Duplicates "
        f"removed: {int(dups.get('exact') or 0)} exact, {int(dups.get('near') or 0)} near. Then "
        f"exact balance per cell of the group attributes ({', '.join(groups) or 'none'}) at a quota of "
        f"{summary.get('quota', 'n/a')} published samples per cell, and identity-disjoint splits "
        f"(no person in two splits), seed {summary.get('seed', 'n/a')}."
    )

    aug = {
        v: sum(int(((c.get("variants") or {}).get(v) or {}).get("augmented") or 0) for c in cells)
        for v in sorted({v for c in cells for v in (c.get("variants") or {})})
    }
    aug_text = ", ".join(f"{v}: {n}" for v, n in aug.items()) or "none recorded"
    out["dataManipulationProtocol"] = (
        "Faces are cropped and resized by the crop step (parameters above). The balanced config "
        "fills a cell below its quota with mild augmentations (flip, small rotation, hue jitter, "
        "random crop) of that cell's own real images; the augmented config adds one colour "
        "augmentation (hue and brightness) of each balanced image; augmented_from names the source "
        f"image and augmentation the transform. Augmented samples per config: {aug_text}."
    )
    out["dataImputationProtocol"] = (
        "No value is imputed: a cell with no real image stays empty (reported, never filled), and "
        "a missing metadata value stays empty in the tables."
    )
    values = sorted({str((c.get("cell") or {}).get(g)) for c in cells for g in groups})
    out["personalSensitiveInformation"] = (
        "Photographs of real people's faces (biometric personal data in many jurisdictions). Group "
        f"attributes {', '.join(groups) or 'none'} with the values {', '.join(values) or 'none'}: "
        "labels from the source listing (not self-identification), which may be sensitive. An "
        "opaque identity id groups images of one person."
    )
    out["dataAnnotationProtocol"] = (
        f"Each image carries one value per group attribute ({', '.join(groups) or 'none'}), copied "
        "from the source's columns as the recipe names them; fairsets assigns no label and does not "
        "record who assigned them. A face detector only locates the face to crop."
    )
    out["annotationsPerItem"] = (
        f"One label per group attribute per image ({len(groups)} per image), as the source gave it."
    )
    out["dataBiases"] = face_biases(summary)
    out["dataLimitations"] = face_limitations(summary)
    out.update(person_text_properties(person))
    return out
