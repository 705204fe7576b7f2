"""The Croissant RAI properties of published person annotations, written from the prepared manifest.

:func:`annotation_rai` reads what the annotate stages recorded (the inputs, the detector and its
thresholds, each head with its classes and test metrics, the human verification with κ and its
intervals, the chat-model votes that made training labels with their models, question, consensus
rule and agreement (:mod:`.votes`), the counts) and returns ``{RAI property: value}``; the
person-written facts (:class:`fairsets.publish.rai_text.RaiText` from ``fairsets publish ANN --rai
FILE.toml``, stored in the manifest as ``rai_text``) add the use cases, social impact, maintenance
plan and the human annotators' demographics. Every number comes with its rule. :data:`LIMITATIONS`
are the card's limitation bullets, so the card and ``croissant.json`` say the same.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fairsets.annotate.publish.votes import (
    vote_analysis,
    vote_models,
    vote_per_item,
    vote_protocol,
    vote_tools,
)
from fairsets.publish.rai_text import person_text_properties

__all__ = ["BIASES", "LIMITATIONS", "annotation_rai", "human_coders"]

BIASES = (
    "Errors are not spread evenly. They concentrate on small boxes (hence the minimum side), low "
    "resolution, blur, occlusion, unusual poses, crowds, drawings, statues and posters, and they may "
    "be larger for some groups than for others, since the heads learned from labels that carry their "
    "own biases.",
    "The detector misses some people and takes some non-people for persons; the confidence "
    "threshold favours recall. Counts are estimates of the dataset's composition, with these errors.",
)
LIMITATIONS = (
    "The attribute labels are perceived: a classifier's guess of how a person in a box appears, from "
    "that crop alone. They are not self-identified, and they say nothing reliable about how any "
    "individual identifies. Never use them as facts about a person.",
    "The class lists are annotation choices, not claims about people. A gender scheme with two "
    'classes (plus options such as "unclear") does not assert that gender is binary; people whose '
    "appearance or identity fits none of the classes are misdescribed by construction.",
    "Race and ethnicity categories are social constructs whose meaning differs between places and "
    "times. Perceiving them from appearance is highly subjective: human annotators disagree with each "
    'other often, so even a perfect classifier could not match "the" truth.',
    "Use the annotations for aggregate questions about datasets and models (who appears, with what, "
    "how often). Do not use them to identify people, to infer or publish the attributes of an "
    "individual, to target or exclude people, or to train a classifier of protected attributes for "
    "deployment.",
    "Web images change or disappear: a re-downloaded image may differ from the annotated one (check "
    "it as the re-download instructions above say).",
)


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(", ", ": "))


def _num(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _ci(d: Mapping[str, Any], key: str) -> str:
    ci = d.get(f"{key}_ci")
    text = _num(d.get(key, "n/a"))
    if isinstance(ci, list | tuple) and len(ci) == 2:
        text += f" [{_num(ci[0])}, {_num(ci[1])}]"
    return text


def human_coders(m: Mapping[str, Any]) -> dict[str, list[str]]:
    """``{attribute: [human coder, ...]}`` of the attributes verified against human labels."""
    out = {}
    for attr, entry in sorted((m.get("attributes") or {}).items()):
        v = (entry or {}).get("verification")
        if isinstance(v, Mapping):
            coders = sorted((v.get("human_vs_classifier") or {}).keys())
            out[attr] = coders or ["unnamed"]
    return out


def annotation_rai(m: Mapping[str, Any]) -> dict[str, Any]:
    """``{RAI property: value}`` of a prepared annotation folder's manifest ``m``."""
    person = m.get("rai_text") or {}
    det = m.get("detector") or {}
    params = m.get("params") or {}
    counts = m.get("counts") or {}
    images, boxes = counts.get("images") or {}, counts.get("boxes") or {}
    attrs = m.get("attributes") or {}
    inputs = [str(i.get("name") or i.get("file") or "?") for i in m.get("inputs") or []]
    out: dict[str, Any] = {}
    out["dataCollection"] = (
        f"fairsets collected no image: it annotated the images of {len(inputs)} existing image-text "
        f"shard(s) ({', '.join(inputs) or 'not recorded'}), as their own downloader had fetched them. "
        f"Images read: {images.get('total', 'n/a')} ({images.get('ok', 'n/a')} decoded, "
        f"{images.get('rejected', 'n/a')} rejected, {images.get('failed', 'n/a')} failed)."
    )
    out["dataCollectionType"] = "Others (annotations of existing image-text shards)"
    out["dataCollectionRawData"] = (
        "The images of the input shards, referenced in the images table by url, caption and the sha256 "
        "of the bytes the boxes were computed on; the images themselves are not published."
    )
    if person.get("data_collection_timeframe"):
        out["dataCollectionTimeframe"] = person["data_collection_timeframe"]
    out["dataCollectionMissingData"] = (
        "Images that could not be decoded are rows with status rejected or failed and a reason; dropped "
        "boxes stay in the boxes table with kept = false and a drop_reason; a kept box without a label "
        "has null attribute columns and a {attr}_reason."
    )
    out["dataPreprocessingProtocol"] = (
        f"Person detection with confidence >= {params.get('conf', 'n/a')}"
        + (f" at input size {params['imgsz']} px" if params.get("imgsz") else "")
        + f"; boxes with a side shorter than {params.get('min_side', 'n/a')} px are kept in the table "
        f"but not classified (kept = false). Boxes: {boxes.get('total', 'n/a')} detected, "
        f"{boxes.get('kept', 'n/a')} kept, {boxes.get('dropped', 'n/a')} dropped (by reason: "
        f"{_compact(boxes.get('drop_reasons') or {})}). All parameters: {_compact(params)}."
    )
    out["dataImputationProtocol"] = "No value is imputed: what was not measured is null, with a reason."
    out["dataManipulationProtocol"] = (
        "Boxes refer to the decoded image with its EXIF orientation applied; no image is altered or "
        "published."
    )
    heads = [
        f"perceived {a} with classes {', '.join(((e or {}).get('head') or {}).get('classes') or [])}"
        for a, e in sorted(attrs.items())
    ]
    out["personalSensitiveInformation"] = (
        "Boxes around real people in web images, referenced by URL, with their captions"
        + (f"; {'; '.join(heads)}" if heads else "")
        + ". The labels are perceived from appearance by a model, not self-identified, and may be "
        "sensitive (gender, race, ethnicity)."
    )
    out["dataAnnotationProtocol"] = (
        "Machine annotation: a person detector finds boxes; every kept box gets, per attribute, the "
        "most probable class and the class probabilities of a classifier head on an image embedding "
        "of the box crop"
        + (f" ({'; '.join(heads)})" if heads else " (no head was applied)")
        + ". Heads were trained on labelled boxes (fairsets annotate train) and checked on held-out "
        "boxes."
    )
    votes = vote_protocol(m)
    if votes:
        out["dataAnnotationProtocol"] += " " + votes
    tools = [
        f"fairsets {m.get('fairsets_version', 'n/a')}",
        f"person detector {det.get('model_id', 'n/a')} (weights sha256 {det.get('weights_sha256', 'n/a')})",
    ]
    for a, e in sorted(attrs.items()):
        head = (e or {}).get("head") or {}
        tools.append(
            f"{a} head on encoder {head.get('encoder', 'n/a')}, pretrained weights "
            f"{head.get('pretrained') or 'none'} (head sha256 {(e or {}).get('head_sha256', 'n/a')})"
        )
    out["machineAnnotationTools"] = tools + vote_tools(m)
    coders = human_coders(m)
    per_item = f"one machine label per attribute per kept box ({len(attrs)} attribute(s))"
    voted = vote_per_item(m)
    if voted:
        out["annotationsPerItem"] = f"{per_item}; {voted}"
    if coders:
        n = {a: ((attrs[a].get("verification") or {}).get("rows")) for a in coders}
        per_item += "; human labels for verification only: " + "; ".join(
            f"{a}: {len(c)} coder(s) ({', '.join(c)}), label rows {n[a] if n[a] is not None else 'n/a'}"
            for a, c in coders.items()
        )
        out["annotationsPerItem"] = per_item + (f"; {voted}" if voted else "")
        out["dataAnnotationPlatform"] = (
            "The human labels were read from a CSV file by fairsets annotate verify; the tool the "
            "coders labelled with is not recorded."
        )
    analysis = []
    for a in coders:
        v = attrs[a].get("verification") or {}
        same = (v.get("same_boxes") or {}).get("human_vs_classifier") or v.get("human_vs_classifier") or {}
        for coder, d in sorted(same.items()):
            if isinstance(d, Mapping):
                analysis.append(
                    f"{a}, human coder {coder} vs classifier over {d.get('n', 'n/a')} boxes: accuracy "
                    f"{_ci(d, 'accuracy')}, Cohen's kappa {_ci(d, 'kappa')}"
                )
        hh = v.get("human_vs_human")
        if isinstance(hh, Mapping):
            analysis.append(
                f"{a}, human vs human over {hh.get('n', 'n/a')} boxes: Cohen's kappa {_ci(hh, 'kappa')}"
            )
        boot = v.get("bootstrap") or {}
        if boot.get("resamples"):
            analysis.append(
                f"{a}: intervals are 95% bootstrap intervals over {boot['resamples']} resamples, seed "
                f"{boot.get('seed', 'n/a')}"
            )
    out["dataAnnotationAnalysis"] = (
        "Agreement with human labels of the same boxes (each interval in brackets): "
        + "; ".join(analysis)
        + "."
        if analysis
        else "No comparison with human labels was recorded: the labels are unverified model outputs."
    )
    among = vote_analysis(m)
    if among:
        out["dataAnnotationAnalysis"] += " Training labels from chat-model votes: " + "; ".join(among) + "."
    out["dataBiases"] = list(BIASES)
    out["dataLimitations"] = list(LIMITATIONS)
    out.update(person_text_properties(person))
    return out


def card_context(m: Mapping[str, Any]) -> dict[str, Any]:
    """The card's template sections written from the same facts as :func:`annotation_rai`."""
    from fairsets.publish.card.sections import person_sections

    rai = annotation_rai(m)
    coders = human_coders(m)
    machine = "The labels are machine-generated by the models under Models (see Annotation process)."
    humans = (
        f" Human coders ({'; '.join(f'{a}: ' + ', '.join(c) for a, c in coders.items())}) labelled a "
        "sample of boxes to measure agreement (Agreement with human annotators); their labels are not "
        "published."
        if coders
        else " No person labelled the published boxes."
    )
    voters = vote_models(m)
    if voters:
        machine += (
            " Chat models voted on a sample of boxes to make the labels heads are trained on ("
            + "; ".join(voters)
            + "; see Annotation process); their answers are not published."
        )
    return {
        "collection": rai["dataCollection"],
        "preprocessing": rai["dataPreprocessingProtocol"],
        "annotation_process": rai["dataAnnotationProtocol"],
        "annotation_analysis": rai["dataAnnotationAnalysis"],
        "personal": rai["personalSensitiveInformation"],
        "limitations": [*LIMITATIONS, *BIASES],
        "vote_models": voters,
        "sections": person_sections(
            m.get("rai_text") or {},
            "the --rai file's",
            producers=(
                "The images and captions were made by their owners on the web and collected by the "
                "input shards' own download (see Sources); fairsets does not know their authors.",
            ),
            annotators=(machine + humans,),
            annotators_required=bool(coders),
        ),
    }
