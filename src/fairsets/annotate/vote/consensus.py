"""Consensus of an annotator vote: which boxes keep a label, and how well the annotators agreed.

Several annotators (multimodal models) each give one label per item, or none when their reply
was invalid or refused (:func:`fairsets.annotate.vote.prompts.parse_answer`). Only consensus
labels are kept, so the heads train on clean labels:

* **all**: every annotator gave the same label. An invalid or refused reply is not agreement, so
  it blocks the item.
* **relaxed** (optional, per label): ``relax={"mixed": 2}`` also keeps ``mixed`` when at least 2
  annotators voted ``mixed`` and no other label got as many votes. With three annotators this is
  "2 of 3" whatever the third said (a model that sees only one of two people answers ``male`` or
  ``female``, which is why the method relaxes the rare ``mixed`` class). Invalid and refused
  replies count for no label.

**Minimum confidence** (optional, ``min_confidence=P``): an ``ok`` answer counts only when the
annotator's probability of the letter it chose (the ballot's ``confidences``, from the server's
log-probabilities) is at least ``P``. Any other answer is treated as an abstention, like an
invalid reply: ``low_confidence`` (a probability under ``P``) or ``no_confidence`` (no probability
came back: an answer whose confidence is unknown does not count). It blocks the item under
**all**, counts for no label under **relaxed**, and is missing in every κ and α. The denominator of
a row's ``agreement`` stays every annotator of the vote.

Then each label keeps at most ``per_class_cap`` items (default 25000, as in the method), chosen
by a hash of ``(seed, label, item)``: the same seed keeps the same items, and adding items to the
vote never swaps out items already kept unless the cap forces it.

The rows are a LABELS table (:mod:`fairsets.annotate.heads.labels`: ``shard, key, box_id, label``) with
the extra columns ``agreement`` (share of annotators that voted the label), ``rule`` (``all`` or
``relaxed``) and ``votes`` (JSON: annotator → label, or ``invalid`` / ``refused`` /
``low_confidence`` / ``no_confidence``), which LABELS
readers ignore. The statistics (:func:`consensus`'s ``stats``) are JSON-ready; every κ comes from
:mod:`fairsets.annotate.agreement`.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

from fairsets.core.atomic import atomic_write_text
from fairsets.core.data import derive_seed

from ..agreement import (
    confusion_matrix,
    fleiss_kappa,
    fleiss_table,
    kappa_from_confusion,
    krippendorff_alpha,
    ratings_table,
)
from ..heads.labels import item_id
from .prompts import INVALID, OK, REFUSED

__all__ = [
    "CONFIDENCE_RULE",
    "DEFAULT_CAP",
    "LOW_CONFIDENCE",
    "NO_CONFIDENCE",
    "ROW_COLUMNS",
    "Ballot",
    "Consensus",
    "consensus",
    "write_labels",
]

#: Items kept per label by default.
DEFAULT_CAP = 25_000
#: Column order of the consensus rows.
ROW_COLUMNS = ("shard", "key", "box_id", "label", "agreement", "rule", "votes")
_STATUSES = (OK, INVALID, REFUSED)
#: Why an ``ok`` answer did not count under a minimum confidence (see the module docstring).
LOW_CONFIDENCE = "low_confidence"
NO_CONFIDENCE = "no_confidence"
#: The minimum-confidence rule in words, as ``stats["min_confidence"]["rule"]`` states it.
CONFIDENCE_RULE = (
    "an ok answer counts toward consensus only when the annotator's probability of the letter it "
    "chose is at least the threshold; an answer under it (low_confidence) or without a probability "
    "(no_confidence: the server returned none) is treated as an abstention, like an invalid answer: "
    "it blocks full agreement, counts for no label under a relaxed rule and is missing in every "
    "kappa and alpha; a row's agreement stays the share of all the vote's annotators"
)


@dataclass(frozen=True)
class Ballot:
    """The annotators' answers for one item (a box, or the whole image when ``box_id`` is None).

    Attributes:
        shard, key, box_id: The item, as in a LABELS file.
        labels: One label per annotator, in the order of ``annotators``; ``None`` = no usable answer.
        statuses: One parse status per annotator (``ok``, ``invalid``, ``refused``); empty means
            ``ok`` where a label is given and ``invalid`` elsewhere.
        confidences: One probability per annotator (of the letter it chose; ``None``: none came
            back), read only under a minimum confidence; empty: none for anyone.
    """

    shard: str
    key: str
    box_id: int | None
    labels: tuple[str | None, ...]
    statuses: tuple[str, ...] = ()
    confidences: tuple[float | None, ...] = ()

    @property
    def item(self) -> str:
        return item_id(self.shard, self.key, self.box_id)


@dataclass
class Consensus:
    """The kept rows (a LABELS table, see the module docstring) and the vote's statistics."""

    rows: list[dict[str, Any]]
    stats: dict[str, Any]


def _finite(x: float) -> float | None:
    """``x`` as a float at full precision (so any other implementation can check it), None if undefined."""
    return None if x is None or math.isnan(x) else float(x)


def _statuses(ballot: Ballot, n: int) -> tuple[str, ...]:
    if not ballot.statuses:
        return tuple(OK if lab is not None else INVALID for lab in ballot.labels)
    if len(ballot.statuses) != n:
        raise ValueError(f"{ballot.item}: {len(ballot.statuses)} statuses for {n} annotators")
    for lab, status in zip(ballot.labels, ballot.statuses, strict=True):
        if status not in _STATUSES:
            raise ValueError(f"{ballot.item}: unknown status {status!r}; use {', '.join(_STATUSES)}")
        if (status == OK) != (lab is not None):
            raise ValueError(f"{ballot.item}: status {status!r} with label {lab!r}; only 'ok' has a label")
    return ballot.statuses


def _counted(
    ballot: Ballot, n: int, min_confidence: float | None
) -> tuple[tuple[str | None, ...], tuple[str, ...]]:
    """The labels and statuses that count: under ``min_confidence``, an ok answer without a
    probability, or with one under it, becomes an abstention (module docstring)."""
    statuses = _statuses(ballot, n)
    if min_confidence is None:
        return tuple(ballot.labels), statuses
    confidences = ballot.confidences or (None,) * n
    if len(confidences) != n:
        raise ValueError(f"{ballot.item}: {len(confidences)} confidences for {n} annotators")
    labels, out = list(ballot.labels), list(statuses)
    for i, (status, p) in enumerate(zip(statuses, confidences, strict=True)):
        if status != OK:
            continue
        if p is None or p < min_confidence:
            labels[i], out[i] = None, NO_CONFIDENCE if p is None else LOW_CONFIDENCE
    return tuple(labels), tuple(out)


def _check_confidence(p: float | None) -> float | None:
    if p is None:
        return None
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"min_confidence must be a probability from 0 to 1, not {p!r}")
    return float(p)


def _check_relax(relax: Mapping[str, int], n: int) -> dict[str, int]:
    out = {}
    for label, k in relax.items():
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n:
            raise ValueError(f"relax[{label!r}] = {k!r}: give a number of annotators from 1 to {n}")
        out[str(label)] = k
    return out


def _decide(labels: Sequence[str | None], relax: Mapping[str, int]) -> tuple[str, str, int] | None:
    """``(label, rule, votes)`` for one item, or None when there is no consensus."""
    if labels and all(lab is not None and lab == labels[0] for lab in labels):
        return labels[0], "all", len(labels)  # type: ignore[return-value]
    tally = Counter(lab for lab in labels if lab is not None).most_common()
    if not tally:
        return None
    (top, votes), runner_up = tally[0], (tally[1][1] if len(tally) > 1 else 0)
    if top in relax and votes >= relax[top] and votes > runner_up:
        return top, "relaxed", votes
    return None


def _rank(seed: int, label: str, item: str) -> tuple[int, str]:
    return derive_seed("vote-cap", int(seed), label, item), item


def _order(ballot: Ballot) -> tuple[str, str, int]:
    return (ballot.shard, ballot.key, -1 if ballot.box_id is None else ballot.box_id)


def _pairs(
    names: Sequence[str], votes: list[tuple[str | None, ...]], order: list[str]
) -> list[dict[str, Any]]:
    out = []
    for i, j in combinations(range(len(names)), 2):
        both = [(v[i], v[j]) for v in votes if v[i] is not None and v[j] is not None]
        cm, _ = confusion_matrix([a for a, _ in both], [b for _, b in both], order)
        n = int(cm.sum())
        out.append(
            {
                "a": names[i],
                "b": names[j],
                "items": n,
                "agreement": _finite(cm.trace() / n) if n else None,
                "cohen_kappa": _finite(kappa_from_confusion(cm)) if n else None,
                "confusion": cm.tolist(),  # rows: a's label, columns: b's, in stats["labels"] order
            }
        )
    return out


def consensus(
    ballots: Iterable[Ballot],
    annotators: Sequence[str],
    *,
    labels: Sequence[str] | None = None,
    relax: Mapping[str, int] | None = None,
    per_class_cap: int | None = DEFAULT_CAP,
    seed: int = 0,
    min_confidence: float | None = None,
) -> Consensus:
    """Keep the consensus labels of a vote and measure the annotators' agreement.

    Args:
        ballots: One per item; each item at most once.
        annotators: The annotators' names, in the order of every ballot's ``labels`` (at least 2).
        labels: The label set (e.g. the question's labels); a vote outside it is an error. Default:
            every label voted, sorted.
        relax: Per label, the votes that keep it without full agreement (see the module docstring).
        per_class_cap: Items kept per label at most (None: no cap).
        seed: Chooses which items a capped label keeps.
        min_confidence: An ok answer counts only with a confidence at least this (module
            docstring); None: every ok answer counts and ``confidences`` are not read.

    Returns:
        The kept rows sorted by ``(shard, key, box_id)``, and ``stats``: ``annotators``, ``labels``,
        ``items``, ``invalid`` / ``refused`` (per annotator), ``counts`` (``votes`` per annotator and
        label, ``consensus`` before the cap and ``kept`` after it, per label), ``no_consensus``,
        ``relaxed`` (items kept by a relaxation), ``fleiss_kappa`` and ``fleiss_items`` (over the
        items every annotator answered), ``krippendorff_alpha`` (nominal α over every item with two
        answers or more, invalid and refused answers missing; the dict of
        :func:`~fairsets.annotate.agreement.krippendorff_alpha`), and ``pairs`` (per pair of
        annotators: ``items`` both answered, ``agreement``, ``cohen_kappa`` and ``confusion``).
        Undefined κ and α are ``None``. With ``min_confidence``, ``stats["min_confidence"]``:
        ``threshold``, ``rule`` (:data:`CONFIDENCE_RULE`) and per annotator the answers dropped,
        ``low_confidence`` and ``no_confidence``; every other count and κ is over the answers that count.

    Raises:
        ValueError: Fewer than two annotators or repeated names, a ballot with the wrong number of
            labels, an item twice, a label outside ``labels``, a bad ``relax``, cap or
            ``min_confidence``.
    """
    names = [str(a) for a in annotators]
    n = len(names)
    if n < 2 or len(set(names)) != n:
        raise ValueError(f"a vote needs at least two annotators with distinct names, not {names}")
    if per_class_cap is not None and (isinstance(per_class_cap, bool) or per_class_cap < 1):
        raise ValueError(f"per_class_cap must be a positive number of items or None, not {per_class_cap!r}")
    rules = _check_relax(relax or {}, n)
    threshold = _check_confidence(min_confidence)
    allowed = list(labels) if labels is not None else None
    seen: set[str] = set()
    votes: list[tuple[str | None, ...]] = []
    status_counts = {s: Counter[str]() for s in (INVALID, REFUSED, LOW_CONFIDENCE, NO_CONFIDENCE)}
    per_annotator = {name: Counter[str]() for name in names}
    kept: dict[str, list[tuple[Ballot, str, int, dict[str, str]]]] = {}
    no_consensus = 0
    items = sorted(ballots, key=_order)
    for ballot in items:
        if ballot.item in seen:
            raise ValueError(f"{ballot.item} has two ballots; give each item once")
        seen.add(ballot.item)
        if len(ballot.labels) != n:
            raise ValueError(f"{ballot.item}: {len(ballot.labels)} labels for {n} annotators")
        for name, lab in zip(names, ballot.labels, strict=True):
            if lab is not None and allowed is not None and lab not in allowed:
                raise ValueError(f"{ballot.item}: {name} voted {lab!r}, which is not among {allowed}")
        counted, statuses = _counted(ballot, n, threshold)
        for name, lab, status in zip(names, counted, statuses, strict=True):
            if lab is None:
                status_counts[status][name] += 1
            else:
                per_annotator[name][lab] += 1
        votes.append(counted)
        decision = _decide(counted, rules)
        if decision is None:
            no_consensus += 1
            continue
        label, rule, count = decision
        said = zip(names, counted, statuses, strict=True)
        answers = {name: lab if lab is not None else st for name, lab, st in said}
        kept.setdefault(label, []).append((ballot, rule, count, answers))

    order = allowed if allowed is not None else sorted({lab for v in votes for lab in v if lab is not None})
    rows: list[dict[str, Any]] = []
    before, after = {}, {}
    for label in sorted(kept):
        chosen = kept[label]
        before[label] = len(chosen)
        if per_class_cap is not None and len(chosen) > per_class_cap:
            chosen = sorted(chosen, key=lambda c: _rank(seed, label, c[0].item))[:per_class_cap]
        after[label] = len(chosen)
        for ballot, rule, count, answers in chosen:
            rows.append(
                {
                    "shard": ballot.shard,
                    "key": ballot.key,
                    "box_id": ballot.box_id,
                    "label": label,
                    "agreement": count / n,
                    "rule": rule,
                    "votes": json.dumps(answers, ensure_ascii=False, sort_keys=False),
                }
            )
    rows.sort(key=lambda r: (r["shard"], r["key"], -1 if r["box_id"] is None else r["box_id"]))

    complete = [v for v in votes if all(lab is not None for lab in v)]
    fleiss = _finite(fleiss_kappa(fleiss_table(complete, order))) if complete and order else None
    stats: dict[str, Any] = {
        "annotators": names,
        "labels": list(order),
        "items": len(votes),
        "invalid": {name: status_counts[INVALID][name] for name in names},
        "refused": {name: status_counts[REFUSED][name] for name in names},
        "counts": {
            "votes": {name: {lab: per_annotator[name][lab] for lab in order} for name in names},
            "consensus": {lab: before.get(lab, 0) for lab in order},
            "kept": {lab: after.get(lab, 0) for lab in order},
        },
        "no_consensus": no_consensus,
        "relaxed": sum(1 for r in rows if r["rule"] == "relaxed"),
        "relax": rules,
        "per_class_cap": per_class_cap,
        "seed": seed,
        "fleiss_kappa": fleiss,
        "fleiss_items": len(complete),
        # α over every item with two answers or more: an invalid or refused answer is missing
        "krippendorff_alpha": krippendorff_alpha(ratings_table(votes, list(order))) if order else None,
        "pairs": _pairs(names, votes, list(order)),
    }
    if threshold is not None:
        stats["min_confidence"] = {
            "threshold": threshold,
            "rule": CONFIDENCE_RULE,
            LOW_CONFIDENCE: {name: status_counts[LOW_CONFIDENCE][name] for name in names},
            NO_CONFIDENCE: {name: status_counts[NO_CONFIDENCE][name] for name in names},
        }
    return Consensus(rows=rows, stats=stats)


def write_labels(path: str | os.PathLike[str], rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write consensus rows as a LABELS file, atomically: ``.csv``, ``.parquet`` or ``.jsonl`` by suffix.

    Raises:
        ValueError: Another suffix.
    """
    target = Path(path)
    suffix = target.suffix.lower()
    data = [{c: row.get(c) for c in ROW_COLUMNS} for row in rows]
    if suffix in (".parquet", ".pq"):
        from fairsets.core.tables import write_table

        write_table(target, data, order=ROW_COLUMNS)
        return target
    if suffix in (".jsonl", ".ndjson"):
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in data)
    elif suffix == ".csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=ROW_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: "" if v is None else v for k, v in r.items()} for r in data)
        text = buf.getvalue()
    else:
        raise ValueError(f"{target}: unknown LABELS format {suffix!r}; use .csv, .parquet or .jsonl")
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, text)
    return target
