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

Labelled files: CSV, TSV, Parquet or JSONL with a caption column (``caption`` or ``text``) and a
label column (``country``, ``label``, ``gold`` or ``iso3``) holding ISO alpha-3/alpha-2 codes,
country names, or empty / "none" / "No" for no country.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .countries import CONTINENTS, countries, is_none_answer, normalize_country
from .profile import CAPTION_COLUMNS, read_table

__all__ = ["CAPTION_COLUMNS", "LABEL_COLUMNS", "LabelError", "evaluate", "load_labelled"]

LABEL_COLUMNS = ("country", "label", "gold", "iso3", "annotation")


class LabelError(ValueError):
    """A labelled file that cannot be used (missing columns, labels naming no country)."""


def load_labelled(path: str | Path) -> tuple[list[str], list[str | None]]:
    """Captions and ISO3 labels (``None`` = no country) from a labelled file."""
    rows, columns = read_table(path)
    cap = next((c for c in CAPTION_COLUMNS if c in columns), None)
    lab = next((c for c in LABEL_COLUMNS if c in columns), None)
    if cap is None or lab is None:
        raise LabelError(
            f"{path}: need a caption column ({', '.join(CAPTION_COLUMNS[:2])}) and a label column "
            f"({', '.join(LABEL_COLUMNS)}); found {', '.join(columns) or 'none'}"
        )
    captions, labels, bad = [], [], []
    for i, row in enumerate(rows):
        raw = row.get(lab)
        captions.append("" if row.get(cap) is None else str(row.get(cap)))
        if is_none_answer(raw):
            labels.append(None)
            continue
        iso3 = normalize_country(str(raw))
        if iso3 is None:
            bad.append(f"row {i + 2}: {raw!r}")
        labels.append(iso3)
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
) -> dict[str, Any]:
    """Scores of ``pred`` against ``gold`` (ISO3 or ``None``), as a JSON-friendly dict."""
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} labels but {len(pred)} predictions")
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
    if captions is not None:
        out["errors"] = [
            {"caption": c, "gold": g or "", "predicted": p or ""}
            for c, g, p in zip(captions, gold, pred, strict=True)
            if g != p
        ]
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
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=["caption", "gold", "predicted"], lineterminator="\n")
        w.writeheader()
        w.writerows(r.get("errors", []))
        atomic_write_text(out / f"errors-{m}.csv", buf.getvalue())
    return out
