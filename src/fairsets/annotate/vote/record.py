"""What a finished vote records in the annotation folder: ``ANN/manifest.json``'s ``votes``.

``fairsets annotate vote ANN --out VOTES`` writes its own files next to VOTES; so that publishing
``ANN`` can describe how its training labels were made (the Croissant RAI annotation protocol and
the card), :func:`record_vote` then copies a summary into ``manifest["votes"][NAME]``, ``NAME``
being the VOTES file's name (never a path). A re-run of the same vote replaces its entry; another
VOTES name adds one. The summary (:func:`vote_summary`) holds:

* ``attribute``, ``view``, ``seed``, ``sample`` (asked, kept boxes, chosen) and, for ``race``, the
  keyword file's name and the recall per label;
* ``annotators``: each voter's ``name`` and ``model`` only (no host, no key), and per annotator the
  answers by status (ok, invalid, refused, failed);
* ``answers_per_item``: the number of voters (each voted box is asked once of each);
* ``question``: the question's text, its options (``label`` and the ``text`` shown, in the
  question's order), the instruction, and
  ``prompt_sha256``, the SHA-256 of that template (the options are shuffled per annotator and box,
  by the seed);
* ``consensus``: the rule (every annotator gives the label, or a relaxed ``{label: k}``) and the
  per-class cap; under a minimum confidence also ``min_vote_confidence`` (the threshold, its rule
  and per annotator the answers it dropped, ``low_confidence`` and ``no_confidence``);
* ``counts``: boxes asked, answered by every voter, pending (a failed request), rejected (no
  image), and per label the consensus before and after the cap; boxes without consensus;
* ``agreement``: Fleiss' κ over the boxes every voter answered, Krippendorff's α (with its interval
  when one was computed) and Cohen's κ of every pair, as in ``agreement.json``; when answers carry
  a confidence, ``calibration``: the number of ``bins`` and per annotator (``annotators``) its
  ``ece`` and the ``answers`` it is over (:mod:`.calibration`);
* ``files``: the names of VOTES and the files beside it, and VOTES' SHA-256.

No time and no request counter goes in: a re-run answered from the cache writes the same entry.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fairsets.core.atomic import LayoutBusy, layout_lock, sha256_file

from .. import layout
from .prompts import INSTRUCTION, OPTIONS

__all__ = ["MANIFEST_KEY", "prompt_template", "record_vote", "vote_summary"]

#: The manifest key of the votes' summaries.
MANIFEST_KEY = "votes"
_PAIR_KEYS = ("a", "b", "items", "agreement", "cohen_kappa")


def prompt_template(attribute: str) -> dict[str, Any]:
    """The question an annotator is asked about ``attribute``, before its options are shuffled."""
    question, options = OPTIONS[attribute]
    template = {
        "text": question,
        "options": [{"label": label, "text": text} for label, text in options],
        "instruction": INSTRUCTION,
    }
    digest = hashlib.sha256(json.dumps(template, sort_keys=True, ensure_ascii=False).encode("utf-8"))
    return {**template, "prompt_sha256": digest.hexdigest()}


def vote_summary(
    run: Mapping[str, Any],
    stats: Mapping[str, Any],
    votes: Path,
    files: Mapping[str, str],
    calibration: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest entry of a vote from ``agreement.json``'s ``run``, ``stats`` and ``calibration``
    (module docstring)."""
    attribute = str(run["attribute"])
    annotators = [{"name": a["name"], "model": a["model"]} for a in run["annotators"]]
    alpha = stats.get("krippendorff_alpha") or {}
    summary: dict[str, Any] = {
        "attribute": attribute,
        "view": run["view"],
        "seed": run["seed"],
        "sample": dict(run["sample"]),
        "annotators": annotators,
        "answers": {a["name"]: dict(a["answers"]) for a in run["annotators"]},
        "answers_per_item": len(annotators),
        "question": prompt_template(attribute),
        "consensus": {
            "rule": "a label is kept when every annotator gives it, or by a relaxed rule "
            "{label: k}: at least k annotators give it and no other label gets as many votes",
            "relax": dict(stats.get("relax") or {}),
            "per_class_cap": stats.get("per_class_cap"),
        },
        "counts": {
            "asked": run["sample"]["chosen"],
            "answered": stats["items"],
            "pending": run["failed"]["pending"],
            "rejected": run["failed"]["rejected"],
            "consensus": dict(stats["counts"]["consensus"]),
            "kept": dict(stats["counts"]["kept"]),
            "no_consensus": stats.get("no_consensus"),
            "relaxed": stats.get("relaxed"),
        },
        "agreement": {
            "fleiss_kappa": stats.get("fleiss_kappa"),
            "fleiss_items": stats.get("fleiss_items"),
            "krippendorff_alpha": alpha.get("alpha"),
            "krippendorff_alpha_ci": alpha.get("alpha_ci"),
            "krippendorff_items": alpha.get("items"),
            "pairs": [{k: p.get(k) for k in _PAIR_KEYS} for p in stats.get("pairs") or []],
        },
        "files": {**{k: Path(v).name for k, v in files.items()}, "votes_sha256": sha256_file(votes)},
    }
    floor = stats.get("min_confidence")
    if floor:
        summary["consensus"]["min_vote_confidence"] = {
            k: floor[k] for k in ("threshold", "rule", "low_confidence", "no_confidence")
        }
    if calibration:
        per = {
            name: {"ece": a["ece"], "answers": a["answers"]} for name, a in calibration["annotators"].items()
        }
        summary["agreement"]["calibration"] = {"bins": calibration["bins"], "annotators": per}
    if "recall" in run:
        summary["recall"] = {"keywords": run.get("keywords"), "labels": dict(run["recall"])}
    return summary


def record_vote(ann: str | Path, summary: Mapping[str, Any], *, wait: float = 30.0) -> dict[str, Any]:
    """Put ``summary`` in ``ANN/manifest.json`` under ``votes[VOTES name]``, under the folder's lock.

    Returns:
        The manifest's ``votes`` as written.

    Raises:
        AnnotationError: the folder stayed busy for ``wait`` seconds (another command holds its lock);
            the vote's own files are written all the same, and the same vote run again records it.
    """
    folder = Path(ann)
    name = summary["files"]["votes"]
    try:
        with layout_lock(folder, wait=wait):
            manifest = layout.read_manifest(folder)
            votes = dict(manifest.get(MANIFEST_KEY) or {})
            if votes.get(name) != summary:
                votes[name] = dict(summary)
                manifest[MANIFEST_KEY] = dict(sorted(votes.items()))
                layout.write_manifest(folder, manifest)
            return votes
    except LayoutBusy:
        raise layout.AnnotationError(
            f"{folder}: the vote's files are written ({name}), but the folder stayed busy (another "
            "command holds its lock), so its manifest does not record the vote; run the same vote "
            "again when that command has ended (every answer comes from the cache)"
        ) from None
