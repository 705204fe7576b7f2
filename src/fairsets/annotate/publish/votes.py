"""The chat-model votes of an annotation folder, as published: manifest entries and RAI sentences.

``fairsets annotate vote`` records a summary of each vote in ``ANN/manifest.json``'s ``votes``,
keyed by the VOTES file's name (:mod:`fairsets.annotate.vote.record`). :func:`release_votes` copies
what may be published into the prepared manifest (the known keys only, file names only, the
directories of any absolute path cut off, never a host or a key); the other functions write from it
the sentences :func:`fairsets.annotate.publish.rai.annotation_rai` and the card use: the protocol
(models, question, consensus rule), the tools, the answers per item and the agreement.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fairsets.annotate.publish.tables import scrub_paths

__all__ = [
    "release_votes",
    "vote_analysis",
    "vote_models",
    "vote_per_item",
    "vote_protocol",
    "vote_tools",
]

_KEYS = (
    "attribute",
    "view",
    "seed",
    "sample",
    "answers",
    "answers_per_item",
    "question",
    "consensus",
    "counts",
    "agreement",
    "recall",
)
_VIEWS = {"crop": "crop of the box", "redbox": "whole image with the box framed in red"}


def release_votes(source: Mapping[str, Any]) -> dict[str, Any]:
    """``{VOTES name: summary}`` for the prepared manifest, from the annotation manifest ``source``."""
    out: dict[str, Any] = {}
    for name, entry in sorted((source.get("votes") or {}).items()):
        if not isinstance(entry, Mapping):
            continue
        kept = {k: entry[k] for k in _KEYS if entry.get(k) is not None}
        kept["annotators"] = [
            {"name": str(a.get("name")), "model": str(a.get("model"))}
            for a in entry.get("annotators") or []
            if isinstance(a, Mapping)
        ]
        files = entry.get("files") or {}
        kept["files"] = {
            k: (Path(str(v)).name if k != "votes_sha256" else str(v)) for k, v in sorted(files.items())
        }
        out[Path(str(name)).name] = scrub_paths(kept)
    return out


def _votes(m: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    return [(n, v) for n, v in sorted((m.get("votes") or {}).items()) if isinstance(v, Mapping)]


def _num(value: Any) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _models(v: Mapping[str, Any]) -> list[str]:
    return [str(a.get("model")) for a in v.get("annotators") or []]


def _rule(v: Mapping[str, Any]) -> str:
    c = v.get("consensus") or {}
    n = v.get("answers_per_item") or len(_models(v))
    relax = c.get("relax") or {}
    text = f"a label is kept when all {n} models give it"
    if relax:
        text += " or, relaxed, " + ", ".join(
            f"{lab} when at least {k} of {n} give it and no other label gets as many votes"
            for lab, k in sorted(relax.items())
        )
    floor = c.get("min_vote_confidence")
    if isinstance(floor, Mapping) and floor.get("threshold") is not None:
        text += (
            f"; a model's answer counts only when its probability of the chosen option is at least "
            f"{_num(floor['threshold'])} (an answer under it or without a probability does not count)"
        )
    cap = c.get("per_class_cap")
    return text + (f"; at most {cap} boxes per label are kept" if cap else "; no cap per label")


def vote_models(m: Mapping[str, Any]) -> list[str]:
    """One line per vote: the attribute, the models that voted and the VOTES file (for the card)."""
    return [
        f"{v.get('attribute', 'n/a')} ({name}): {', '.join(_models(v)) or 'n/a'}" for name, v in _votes(m)
    ]


def vote_protocol(m: Mapping[str, Any]) -> str:
    """The votes in the annotation protocol: models, view, sample, question, rule, labels kept."""
    parts = []
    for name, v in _votes(m):
        q = v.get("question") or {}
        counts = v.get("counts") or {}
        options = "; ".join(
            f"{o.get('label')} = {o.get('text')!r}" for o in q.get("options") or [] if isinstance(o, Mapping)
        )
        kept = ", ".join(f"{lab} {k}" for lab, k in (counts.get("kept") or {}).items())
        view = _VIEWS.get(str(v.get("view")), v.get("view"))
        asked = f"{q.get('text', 'n/a')!r} with the options {options or 'n/a'}"
        models = _models(v)
        parts.append(
            f"Training labels for perceived {v.get('attribute', 'n/a')} were bootstrapped by a vote of "
            f"{len(models)} chat models ({', '.join(models)}; file {name}): each was shown "
            f"{counts.get('asked', 'n/a')} sampled kept boxes (seed {v.get('seed', 'n/a')}), each as the "
            f"{view}, and asked {asked}, shuffled per model and box, and {q.get('instruction', '')!r} "
            f"(prompt template sha256 {q.get('prompt_sha256', 'n/a')}, temperature 0). Consensus: "
            f"{_rule(v)}. Boxes answered by every model: {counts.get('answered', 'n/a')}; labels kept: "
            f"{kept or 'none'}."
        )
    return " ".join(parts)


def vote_tools(m: Mapping[str, Any]) -> list[str]:
    """One tool per voting model: ``"gender vote (votes.parquet): chat model M (annotator N)"``."""
    return [
        f"{v.get('attribute', 'n/a')} vote ({name}): chat model {a.get('model')} (annotator {a.get('name')})"
        for name, v in _votes(m)
        for a in v.get("annotators") or []
    ]


def vote_per_item(m: Mapping[str, Any]) -> str:
    """The answers per voted box of every vote ("" when there is none)."""
    return "; ".join(
        f"{v.get('attribute', 'n/a')} vote ({name}): {v.get('answers_per_item', 'n/a')} chat-model "
        f"answers per voted box, one per model, over {(v.get('counts') or {}).get('asked', 'n/a')} boxes"
        for name, v in _votes(m)
    )


def vote_analysis(m: Mapping[str, Any]) -> list[str]:
    """The agreement among the models of every vote, with the consensus rule it was kept by."""
    out = []
    for name, v in _votes(m):
        a = v.get("agreement") or {}
        alpha = _num(a.get("krippendorff_alpha"))
        ci = a.get("krippendorff_alpha_ci")
        if isinstance(ci, list | tuple) and len(ci) == 2:
            alpha += f" [{_num(ci[0])}, {_num(ci[1])}]"
        pairs = ", ".join(
            f"{p.get('a')}-{p.get('b')} {_num(p.get('cohen_kappa'))} over {p.get('items', 'n/a')} boxes"
            for p in a.get("pairs") or []
        )
        calib = a.get("calibration") if isinstance(a.get("calibration"), Mapping) else {}
        calibration = ", ".join(
            f"{who} {_num(c.get('ece'))} over {c.get('answers', 'n/a')} answers"
            for who, c in (calib.get("annotators") or {}).items()
            if isinstance(c, Mapping)
        )
        out.append(
            f"{v.get('attribute', 'n/a')}, agreement among the {len(_models(v))} chat models of the vote "
            f"({name}): Fleiss' kappa {_num(a.get('fleiss_kappa'))} over {_num(a.get('fleiss_items'))} "
            f"boxes every model answered, Krippendorff's alpha (nominal) {alpha} over "
            f"{_num(a.get('krippendorff_items'))} boxes with two answers or more"
            + (f", Cohen's kappa per pair: {pairs}" if pairs else "")
            + (
                f", expected calibration error of each model's confidence against the other models' "
                f"agreement ({calib.get('bins', 'n/a')} equal-width bins, leave-one-out): {calibration}"
                if calibration
                else ""
            )
            + f"; consensus rule: {_rule(v)}"
        )
    return out
