"""How well an annotator's confidence predicts agreement: ``agreement.json``'s ``calibration``.

An annotator whose endpoint asks for log-probabilities gives, with each answer, the probability of
the letter it chose (the answers table's ``confidence``, :mod:`.ask`). A calibrated annotator that
says 0.8 agrees with the others about 80 % of the time. :func:`calibration` measures it, per
annotator, from the answers table alone:

* **which answers**: the annotator's ``ok`` answers with a confidence, on items where every
  *other* annotator answered ``ok`` with one same label, the *reference*: leave-one-out, so an
  answer is never compared with itself. Answers whose others disagree or did not all answer
  (``no_reference``) and ``ok`` answers without a confidence (``without_confidence``) are counted
  but left out. The minimum confidence of the consensus (``--min-vote-confidence``) plays no part:
  every ``ok`` answer is measured, so the calibration can be used to choose that minimum.
* **bins**: ``bins`` equal-width bins of the confidence (default 10): bin ``k`` holds
  confidences ``c`` with ``k/bins <= c < (k+1)/bins``, the last bin also ``c = 1``. Per bin the
  ``count`` of answers, their ``mean_confidence`` and ``agreement``, the share of them whose label
  equals the reference (``null`` for an empty bin).
* **ECE** (expected calibration error): ``sum over bins of count / answers *
  |agreement - mean_confidence|``, ``answers`` being the answers measured (with a confidence and a
  reference); ``null`` when there is none.

The numbers are plain float64 sums in the table's row order, so a re-run writes the same file. The
block is written only when at least one answer carries a confidence. :func:`calibration_html` is
its section of the report page.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .prompts import OK

__all__ = ["BINS", "CALIBRATION_RULE", "calibration", "calibration_html"]

#: Equal-width confidence bins by default.
BINS = 10
#: The rule :func:`calibration` states in its block (see the module docstring).
CALIBRATION_RULE = (
    "per annotator, its ok answers with a confidence (the probability of the letter it chose) on "
    "items where every other annotator answered ok with one same label (the reference; "
    "leave-one-out: an answer is never compared with itself); bin k of n equal-width bins holds "
    "confidences c with k/n <= c < (k+1)/n, the last bin also c = 1; per bin: count, "
    "mean_confidence, and agreement = share of answers whose label equals the reference; "
    "ece = sum over bins of count / answers * |agreement - mean_confidence|, answers = answers "
    "with a confidence and a reference; answers without a reference (no_reference) or without a "
    "confidence (without_confidence) are left out; the consensus' minimum confidence plays no part"
)


def _edges(bins: int) -> np.ndarray:
    return np.arange(bins + 1, dtype=np.float64) / bins  # k / bins exactly, as the rule says


def _annotator(conf: list[float], agree: list[bool], bins: int) -> dict[str, Any]:
    c = np.asarray(conf, dtype=np.float64)
    a = np.asarray(agree, dtype=np.float64)
    edges = _edges(bins)
    which = np.clip(np.searchsorted(edges, c, side="right") - 1, 0, bins - 1)
    out: list[dict[str, Any]] = []
    ece = 0.0
    for k in range(bins):
        inside = which == k
        count = int(inside.sum())
        row: dict[str, Any] = {
            "low": float(edges[k]),
            "high": float(edges[k + 1]),
            "count": count,
            "mean_confidence": None,
            "agreement": None,
        }
        if count:
            mean, share = float(c[inside].mean()), float(a[inside].mean())
            row.update(mean_confidence=mean, agreement=share)
            ece += count / c.size * abs(share - mean)
        out.append(row)
    return {
        "answers": int(c.size),
        "mean_confidence": float(c.mean()) if c.size else None,
        "agreement": float(a.mean()) if c.size else None,
        "ece": float(ece) if c.size else None,
        "bins": out,
    }


def calibration(
    rows: Iterable[Mapping[str, Any]], annotators: Sequence[str], *, bins: int = BINS
) -> dict[str, Any] | None:
    """The calibration block of a vote's answers (module docstring), or None when no answer has a
    confidence.

    Args:
        rows: Answer rows (:data:`~.ask.ANSWER_SCHEMA`: ``item``, ``annotator``, ``status``,
            ``label``, ``confidence``), one per item and annotator, in the order to sum them.
        annotators: The vote's annotators, in the order to report them.
        bins: Equal-width bins (1 or more).

    Returns:
        ``{"rule", "bins", "annotators": {name: {"answers", "without_confidence",
        "no_reference", "mean_confidence", "agreement", "ece", "bins": [{"low", "high", "count",
        "mean_confidence", "agreement"}]}}}``.
    """
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise ValueError(f"bins must be a positive number of bins, not {bins!r}")
    names = list(annotators)
    table = list(rows)
    if not any(r.get("confidence") is not None for r in table):
        return None
    said: dict[str, dict[str, str | None]] = {}
    for r in table:
        said.setdefault(str(r["item"]), {})[str(r["annotator"])] = r["label"] if r["status"] == OK else None
    conf: dict[str, list[float]] = {n: [] for n in names}
    agree: dict[str, list[bool]] = {n: [] for n in names}
    without = dict.fromkeys(names, 0)
    no_ref = dict.fromkeys(names, 0)
    for r in table:
        name = str(r["annotator"])
        if name not in conf or r["status"] != OK or r["label"] is None:
            continue
        if r.get("confidence") is None:
            without[name] += 1
            continue
        answers = said[str(r["item"])]
        others = [answers.get(o) for o in names if o != name]
        if not others or any(o is None for o in others) or len(set(others)) != 1:
            no_ref[name] += 1
            continue
        conf[name].append(float(r["confidence"]))
        agree[name].append(r["label"] == others[0])
    per = {}
    for name in names:
        block = _annotator(conf[name], agree[name], bins)
        per[name] = {
            "answers": block.pop("answers"),
            "without_confidence": without[name],
            "no_reference": no_ref[name],
            **block,
        }
    return {"rule": CALIBRATION_RULE, "bins": bins, "annotators": per}


def _num(value: Any) -> str:
    return "—" if value is None else f"{float(value):.3f}"


def calibration_html(block: Mapping[str, Any] | None) -> str:
    """The report's calibration section ("" without a block): the rule, and per annotator its ECE
    and a table of the non-empty bins. Every name is escaped."""
    if not block:
        return ""
    e = html.escape
    parts = [
        '<h2 id="calibration">Confidence calibration</h2>\n',
        f'<p class="note">{e(str(block.get("rule", "")))}</p>\n',
    ]
    for name, a in (block.get("annotators") or {}).items():
        rows = "".join(
            f"<tr><td>{_num(b.get('low'))}–{_num(b.get('high'))}</td>"
            + "".join(
                f'<td class="n">{v}</td>'
                for v in (
                    f"{int(b.get('count') or 0):,}",
                    _num(b.get("mean_confidence")),
                    _num(b.get("agreement")),
                )
            )
            + "</tr>"
            for b in a.get("bins") or []
            if b.get("count")
        )
        parts.append(
            f"<h3>{e(str(name))}</h3>\n<p>ECE {_num(a.get('ece'))} over {int(a.get('answers') or 0):,} "
            f"answers (mean confidence {_num(a.get('mean_confidence'))}, agreement with the others "
            f"{_num(a.get('agreement'))}); left out: {int(a.get('no_reference') or 0):,} without a "
            f"reference, {int(a.get('without_confidence') or 0):,} without a confidence</p>\n"
        )
        if rows:
            parts.append(
                "<table><tr><th>confidence</th><th>answers</th><th>mean confidence</th>"
                f"<th>agreement</th></tr>{rows}</table>\n"
            )
    return "".join(parts)
