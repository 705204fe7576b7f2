"""How good is a caption → country mapping? Precision and recall as the GeoProfiler paper
defines them (Table 9), with the "none" confusion and per-continent breakdowns.

* **precision** = correct / captions where a country is *predicted*;
* **recall** = correct / captions where a country is *annotated*;
  a prediction is correct when it equals the annotated country;
* **F1** = their harmonic mean;
* the **none confusion**: annotated none → predicted a country (false alarms), annotated a
  country → predicted none (misses), a country → another country (wrong), none → none;
* **per continent** of the annotated country (recall) and of the predicted one (precision);
* 95% bootstrap intervals for precision and recall (seeded).

Methods with a confidence (:class:`~fairsets.geo.methods.base.Prediction` ``score``, the
probability of the best country *before* the method's threshold) also get a **precision–recall
curve** (:func:`pr_curve`): every distinct score is tried as the threshold, a caption counting
as predicted when its score reaches it, with the same two definitions. Two **operating points**
are read off it (:func:`operating_points`): the threshold with the best F1, and the lowest
threshold whose precision reaches a target (0.86 by default, the paper's best precision) with the
recall it keeps. A method whose answers all lack a score (``string``, ``ner``, ``llm``), or only
some of them (``hybrid``: the LLM's answers have none), gets no curve: a threshold cannot be
swept over answers that have nothing to threshold.

Labelled files: CSV, TSV, Parquet or JSONL with a caption column (``caption`` or ``text``) and a
label column (``country``, ``label``, ``gold`` or ``iso3``) holding ISO alpha-3/alpha-2 codes,
country names, or empty / "none" / "No" for no country.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .countries import CONTINENTS, ambiguous_none_answers, countries, is_none_answer, normalize_country
from .profile import CAPTION_COLUMNS, read_table

if TYPE_CHECKING:
    from .methods.base import Prediction

__all__ = [
    "CAPTION_COLUMNS",
    "LABEL_COLUMNS",
    "TARGET_PRECISION",
    "THRESHOLD_RULES",
    "LabelError",
    "choose_threshold",
    "evaluate",
    "evaluate_predictions",
    "load_labelled",
    "operating_points",
    "plot_pr",
    "pr_curve",
    "write_evaluation",
]

log = logging.getLogger(__name__)

LABEL_COLUMNS = ("country", "label", "gold", "iso3", "annotation")

#: The precision the second operating point must reach by default (the paper's best precision).
TARGET_PRECISION = 0.86

#: Columns of ``errors-<method>.csv``; the last three only where the method gave a ``Prediction`` each.
ERROR_COLUMNS = ("caption", "gold", "predicted", "confidence", "evidence", "error")


class LabelError(ValueError):
    """A labelled file that cannot be used (missing columns, labels naming no country)."""


def load_labelled(path: str | Path) -> tuple[list[str], list[str | None]]:
    """Captions and ISO3 labels (``None`` = no country) from a labelled file.

    Labels follow :mod:`fairsets.geo.countries`: ISO codes in capitals first (``NO`` is Norway,
    ``NA`` Namibia), then "no country" answers (``No``, ``none``, empty), then names and codes in
    any case. A label naming no country, or a lower-case ``no``/``na`` in a column of lower-case
    codes (Norway or no country?), is a :class:`LabelError` naming its rows (``row 2`` is the
    first data row, the header being row 1).
    """
    rows, columns = read_table(path)
    cap = next((c for c in CAPTION_COLUMNS if c in columns), None)
    lab = next((c for c in LABEL_COLUMNS if c in columns), None)
    if cap is None or lab is None:
        raise LabelError(
            f"{path}: need a caption column ({', '.join(CAPTION_COLUMNS[:2])}) and a label column "
            f"({', '.join(LABEL_COLUMNS)}); found {', '.join(columns) or 'none'}"
        )
    captions, labels, bad = [], [], []
    raws = [row.get(lab) for row in rows]
    for i, (row, raw) in enumerate(zip(rows, raws, strict=True)):
        captions.append("" if row.get(cap) is None else str(row.get(cap)))
        text = raw if raw is None or isinstance(raw, float) else str(raw)  # NaN stays a float
        iso3 = normalize_country(text)
        if iso3 is None and not is_none_answer(text):
            bad.append(f"row {i + 2}: {raw!r}")
        labels.append(iso3)
    ambiguous = ambiguous_none_answers(raws)
    if ambiguous:
        where = ", ".join(f"row {i + 2}: {raws[i]!r}" for i in ambiguous[:5])
        more = f" (+{len(ambiguous) - 5} more)" if len(ambiguous) > 5 else ""
        raise LabelError(
            f"{path}: labels that may be Norway/Namibia or no country in a column of lower-case "
            f"country codes: {where}{more}; write NO/NA for the country or 'none' for no country"
        )
    if bad:
        more = f" (+{len(bad) - 5} more)" if len(bad) > 5 else ""
        raise LabelError(f"{path}: labels that name no known country: {'; '.join(bad[:5])}{more}")
    return captions, labels


def _prf(gold: Sequence[str | None], pred: Sequence[str | None]) -> tuple[float, float, float, int, int, int]:
    correct = sum(1 for g, p in zip(gold, pred, strict=True) if p is not None and p == g)
    n_pred = sum(p is not None for p in pred)
    n_gold = sum(g is not None for g in gold)
    precision = correct / n_pred if n_pred else 0.0
    recall = correct / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1, correct, n_pred, n_gold


def _bootstrap(
    gold: Sequence[str | None], pred: Sequence[str | None], n: int, seed: int
) -> dict[str, list[float]]:
    if n <= 0 or not gold:
        return {}
    rng = np.random.default_rng(seed)
    g = np.array([x or "" for x in gold], dtype=object)
    p = np.array([x or "" for x in pred], dtype=object)
    correct = (p != "") & (p == g)
    has_p = p != ""
    has_g = g != ""
    idx = rng.integers(0, len(g), size=(n, len(g)))
    c, np_, ng = correct[idx].sum(1), has_p[idx].sum(1), has_g[idx].sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        prec = np.where(np_ > 0, c / np.maximum(np_, 1), 0.0)
        rec = np.where(ng > 0, c / np.maximum(ng, 1), 0.0)
    return {
        "precision_ci95": [float(np.quantile(prec, 0.025)), float(np.quantile(prec, 0.975))],
        "recall_ci95": [float(np.quantile(rec, 0.025)), float(np.quantile(rec, 0.975))],
    }


def evaluate(
    gold: Sequence[str | None],
    pred: Sequence[str | None],
    *,
    captions: Sequence[str] | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    details: Sequence[Prediction] | None = None,
) -> dict[str, Any]:
    """Scores of ``pred`` against ``gold`` (ISO3 or ``None``), as a JSON-friendly dict.

    With ``captions``, ``errors`` lists the captions answered wrongly; with ``details`` too (the
    method's :class:`Prediction` per caption) each of them carries its confidence, evidence and
    failure reason, and captions the method failed on are listed even when the fallback answer
    happens to be right.
    """
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} labels but {len(pred)} predictions")
    if details is not None and len(details) != len(gold):
        raise ValueError(f"{len(gold)} labels but {len(details)} detailed predictions")
    precision, recall, f1, correct, n_pred, n_gold = _prf(gold, pred)
    conf = Counter()
    for g, p in zip(gold, pred, strict=True):
        if g is None and p is None:
            conf["none_none"] += 1
        elif g is None:
            conf["none_country"] += 1
        elif p is None:
            conf["country_none"] += 1
        elif p == g:
            conf["correct"] += 1
        else:
            conf["country_other"] += 1
    table = countries()

    def cont(code: str | None) -> str:
        return table[code].continent if code in table else "?"

    per_continent: dict[str, dict[str, Any]] = {}
    for code in [*CONTINENTS, "?"]:
        g_idx = [i for i, g in enumerate(gold) if g is not None and cont(g) == code]
        p_idx = [i for i, p in enumerate(pred) if p is not None and cont(p) == code]
        if not g_idx and not p_idx:
            continue
        hit_g = sum(pred[i] == gold[i] for i in g_idx)
        hit_p = sum(pred[i] == gold[i] for i in p_idx)
        per_continent[code] = {
            "annotated": len(g_idx),
            "predicted": len(p_idx),
            "recall": hit_g / len(g_idx) if g_idx else None,
            "precision": hit_p / len(p_idx) if p_idx else None,
        }
    out: dict[str, Any] = {
        "n": len(gold),
        "annotated": n_gold,
        "predicted": n_pred,
        "correct": correct,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "accuracy_with_none": (conf["none_none"] + conf["correct"]) / len(gold) if gold else 0.0,
        "none_confusion": {
            "none→none": conf["none_none"],
            "none→country": conf["none_country"],
            "country→none": conf["country_none"],
            "country→other country": conf["country_other"],
            "country→same country": conf["correct"],
        },
        "per_continent": per_continent,
        **_bootstrap(gold, pred, bootstrap, seed),
    }
    if details is not None:
        out["method_errors"] = sum(1 for d in details if d.error)
    if captions is not None:
        if len(captions) != len(gold):
            raise ValueError(f"{len(gold)} labels but {len(captions)} captions")
        rows = []
        for i, (c, g, p) in enumerate(zip(captions, gold, pred, strict=True)):
            d = details[i] if details is not None else None
            if g == p and (d is None or not d.error):
                continue
            row: dict[str, Any] = {"caption": c, "gold": g or "", "predicted": p or ""}
            if d is not None:
                row["confidence"] = "" if d.confidence is None else round(float(d.confidence), 4)
                row["evidence"] = d.evidence or ""
                row["error"] = d.error or ""
            rows.append(row)
        out["errors"] = rows
    return out


def pr_curve(
    gold: Sequence[str | None], candidates: Sequence[str | None], scores: Sequence[float | None]
) -> list[dict[str, Any]]:
    """The precision–recall curve of scored candidates, one point per distinct score, ascending.

    ``candidates[i]`` is the best country for caption ``i`` before any threshold (``None``: no
    candidate) and ``scores[i]`` its probability; at threshold ``t`` a caption is *predicted*
    when it has a candidate and ``score >= t``. Each point holds ``threshold``, ``precision``
    (correct / predicted), ``recall`` (correct / annotated, over every caption of ``gold``),
    ``f1`` and ``predicted`` (how many captions are predicted). A caption without a candidate or
    a score is never predicted; an empty list means nothing was scored. Raising the threshold
    never raises ``predicted`` or ``recall``; precision may go either way.

    Raises:
        ValueError: the three sequences differ in length, or a score is not a finite number.
    """
    if not len(gold) == len(candidates) == len(scores):
        raise ValueError(f"{len(gold)} labels, {len(candidates)} candidates and {len(scores)} scores")
    n_gold = sum(g is not None for g in gold)
    items: list[tuple[float, bool]] = []
    for i, (g, c, s) in enumerate(zip(gold, candidates, scores, strict=True)):
        if c is None or s is None:
            continue
        try:
            v = float(s)
        except (TypeError, ValueError):
            raise ValueError(f"caption {i + 1}: score {s!r} is not a number") from None
        if not math.isfinite(v):
            raise ValueError(f"caption {i + 1}: score {s!r} is not a finite number")
        items.append((v, c == g))
    items.sort(key=lambda x: -x[0])
    points: list[dict[str, Any]] = []
    correct = predicted = 0
    k = 0
    while k < len(items):  # highest threshold first: each step admits every caption at that score
        t = items[k][0]
        while k < len(items) and items[k][0] == t:
            predicted += 1
            correct += items[k][1]
            k += 1
        precision = correct / predicted
        recall = correct / n_gold if n_gold else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        points.append(
            {"threshold": t, "precision": precision, "recall": recall, "f1": f1, "predicted": predicted}
        )
    points.reverse()
    return points


def operating_points(
    curve: Sequence[dict[str, Any]], target_precision: float = TARGET_PRECISION
) -> dict[str, Any]:
    """Two thresholds read off a :func:`pr_curve`.

    ``best_f1``: the point with the highest F1 (the higher threshold on a tie). ``at_target``:
    the *lowest* threshold whose precision reaches ``target_precision`` — of all thresholds that
    reach it, the one that keeps the most recall — or ``None`` when no threshold does. Both are
    ``None`` for an empty curve.

    Raises:
        ValueError: ``target_precision`` is not in (0, 1].
    """
    t = float(target_precision)
    if not 0.0 < t <= 1.0:
        raise ValueError(f"target precision must be in (0, 1], not {target_precision!r}")
    best = max(curve, key=lambda p: (p["f1"], p["threshold"]), default=None)
    at = next((p for p in sorted(curve, key=lambda p: p["threshold"]) if p["precision"] >= t), None)
    return {
        "best_f1": None if best is None else dict(best),
        "target_precision": t,
        "at_target": None if at is None else dict(at),
    }


#: How :func:`choose_threshold` reads a threshold off a curve.
THRESHOLD_RULES = ("best-f1", "target")


def choose_threshold(
    gold: Sequence[str | None],
    predictions: Sequence[Prediction],
    *,
    rule: str = "best-f1",
    target_precision: float = TARGET_PRECISION,
) -> dict[str, Any]:
    """A threshold chosen on one labelled set (a validation split), to apply unchanged to another.

    ``rule`` ``best-f1``: the threshold with the best F1 on this set's :func:`pr_curve`;
    ``target``: the lowest threshold whose precision here reaches ``target_precision``. Returns
    the point (``threshold``, ``precision``, ``recall``, ``f1``, ``predicted``) with ``rule``,
    ``target_precision`` and ``n`` (captions). Scores on another set at this threshold are a test
    of it; scores on this set are its fit.

    Raises:
        ValueError: an unknown rule; answers without a score (no curve to choose on); no caption
            with a candidate; or no threshold reaching the target.
    """
    if rule not in THRESHOLD_RULES:
        raise ValueError(f"unknown threshold rule {rule!r}: use {' or '.join(THRESHOLD_RULES)}")
    if len(predictions) != len(gold):
        raise ValueError(f"{len(gold)} labels but {len(predictions)} predictions")
    unscored = sum(1 for p in predictions if p.score is None)
    if unscored:
        raise ValueError(f"{unscored} of {len(predictions)} answers have no score: no threshold to choose")
    curve = pr_curve(gold, [p.candidate for p in predictions], [p.score for p in predictions])
    ops = operating_points(curve, target_precision)
    point = ops["best_f1"] if rule == "best-f1" else ops["at_target"]
    if point is None:
        if not curve:
            raise ValueError("no caption has a candidate country: no threshold to choose")
        raise ValueError(f"no threshold reaches precision {target_precision:g}")
    return {**point, "rule": rule, "target_precision": ops["target_precision"], "n": len(gold)}


def evaluate_predictions(
    gold: Sequence[str | None],
    predictions: Sequence[Prediction],
    *,
    captions: Sequence[str] | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    target_precision: float = TARGET_PRECISION,
) -> dict[str, Any]:
    """:func:`evaluate` of a method's predictions (``predict_detailed``), plus its curve if it has one.

    Adds ``pr_curve`` and ``operating_points`` when every caption has a score; when only some
    do, ``pr_curve_skipped`` says how many lack one instead (no curve: the unscored answers could
    not be thresholded). ``method_errors`` counts the captions the method failed on.
    """
    if len(predictions) != len(gold):
        raise ValueError(f"{len(gold)} labels but {len(predictions)} predictions")
    pred = [p.country for p in predictions]
    out = evaluate(gold, pred, captions=captions, bootstrap=bootstrap, seed=seed, details=predictions)
    unscored = sum(1 for p in predictions if p.score is None)
    if predictions and unscored == 0:
        curve = pr_curve(gold, [p.candidate for p in predictions], [p.score for p in predictions])
        out["pr_curve"] = curve
        out["operating_points"] = operating_points(curve, target_precision)
    elif 0 < unscored < len(predictions):
        out["pr_curve_skipped"] = f"{unscored} of {len(predictions)} answers have no score"
    return out


def write_evaluation(results: dict[str, dict[str, Any]], out: str | Path) -> Path:
    """``OUT/evaluation.json`` (all methods) and ``OUT/errors-<method>.csv``; returns the folder."""
    import csv
    import io

    from fairsets.core.atomic import atomic_write_text

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    summary = {m: {k: v for k, v in r.items() if k != "errors"} for m, r in results.items()}
    atomic_write_text(out / "evaluation.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
    for m, r in results.items():
        rows = r.get("errors", [])
        detailed = "method_errors" in r or any("confidence" in row for row in rows)
        buf = io.StringIO()
        w = csv.DictWriter(
            buf, fieldnames=list(ERROR_COLUMNS if detailed else ERROR_COLUMNS[:3]), lineterminator="\n"
        )
        w.writeheader()
        w.writerows(rows)
        atomic_write_text(out / f"errors-{m}.csv", buf.getvalue())
    return out


def plot_pr(
    results: dict[str, dict[str, Any]], path: str | Path, *, title: str = "precision–recall"
) -> Path | None:
    """Draw the curves of ``results`` (method → :func:`evaluate_predictions` output) into one PNG.

    One line per method that has a ``pr_curve``; a dot marks the method's own operating point
    (its ``precision``/``recall``), a ring the lowest threshold reaching the target precision,
    and a dotted line the target itself. Returns ``path``, or ``None`` when no method has a
    curve or matplotlib is not installed (a log line says so). Written atomically.
    """
    curves = {m: r for m, r in results.items() if r.get("pr_curve")}
    if not curves:
        return None
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        log.warning("matplotlib is not installed: no plot %s (pip install matplotlib)", Path(path).name)
        return None
    from fairsets.core.atomic import atomic_path

    fig = Figure(figsize=(6.0, 4.5), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    target = None
    for name, r in curves.items():
        curve = r["pr_curve"]
        (line,) = ax.plot([p["recall"] for p in curve], [p["precision"] for p in curve], label=name)
        colour = line.get_color()
        ax.plot([r["recall"]], [r["precision"]], "o", color=colour, label=f"{name}: operating point")
        ops = r.get("operating_points") or {}
        target = ops.get("target_precision", target)
        at = ops.get("at_target")
        if at is not None:
            ax.plot(
                [at["recall"]],
                [at["precision"]],
                "o",
                mfc="none",
                color=colour,
                label=f"{name}: P≥{ops['target_precision']:g} at t={at['threshold']:.2f}",
            )
    if target is not None:
        ax.axhline(target, color="#888888", linestyle=":", linewidth=1)
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.02)
    ax.set_xlabel("recall (correct / captions with an annotated country)")
    ax.set_ylabel("precision (correct / captions with a predicted country)")
    ax.set_title(title)
    ax.legend(loc="lower left", fontsize="small")
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
    return path
