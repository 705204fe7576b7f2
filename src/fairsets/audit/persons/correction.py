"""Composition shares corrected for the classifier's errors (``audit persons --correct-with VERIFY``).

The persons audit counts the classifier's labels. When the classifier confuses, say, East Asian
with Southeast Asian more often than the reverse, the raw shares are biased even when every count
is right. ``fairsets annotate verify`` measures the confusion against humans on a sample of boxes;
this module turns it into corrected shares — beyond the paper, which reports raw shares.

**Method** (the Rogan–Gladen estimator generalised to several classes; also called matrix
inversion or confusion-matrix correction): with ``M[i][j] = P(classifier says j | human says i)``
estimated from the verification sample (rows normalised), the expected observed label shares are
``p_obs = Mᵀ · p_true``. The corrected shares solve that system by least squares (the exact
inverse when ``M`` is square and regular; least squares when the classifier has labels that no
human gave, e.g. ``unclear`` dropped from the human labels), are clipped at 0 and renormalised to
sum to 1 (the estimate can leave the simplex with small samples; a warning says so when it did).
Human labels are the truth; a label no verification box has as its human label gets no corrected
share (``None``) and a warning: the correction assumes no box truly has it.

**Interval**: a percentile bootstrap of ``n_boot`` resamples (seeded) over both sources of error:
the verification sample, resampled per human label (each row of the confusion redrawn with its own
size from its estimated row: the same as resampling that label's boxes with replacement), and the
audited counts (multinomial with their total and observed shares).

API: :func:`corrected_shares` (counts + confusion → shares) and :func:`load_confusion` (the
confusion of an ``annotate verify`` report, format :data:`CONFUSION_FORMAT`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "CONDITION_WARNING",
    "CONFUSION_FORMAT",
    "MIN_PER_LABEL",
    "MIN_VERIFIED",
    "CorrectionError",
    "corrected_shares",
    "load_confusion",
]

#: What :func:`load_confusion` returns and :func:`corrected_shares` takes.
CONFUSION_FORMAT = "confusion[human label][classifier label] = boxes (human = truth)"
#: Fewer verified boxes than this in all is a warning; so is a human label with fewer than MIN_PER_LABEL.
MIN_VERIFIED = 100
MIN_PER_LABEL = 20
#: A condition number of the row-normalised confusion above this is a warning (noise is amplified).
CONDITION_WARNING = 100.0
METHOD = (
    "matrix inversion (Rogan-Gladen generalised): observed shares = M^T * true shares with "
    "M[i][j] = P(classifier j | human i) from the verification sample; solved by least squares, "
    "clipped at 0 and renormalised to sum to 1; percentile bootstrap over the verification sample "
    "(per human label) and the audited counts (multinomial)"
)


class CorrectionError(ValueError):
    """The counts or the confusion cannot be corrected with; the message says how to fix it."""


def _solve(m: Any, p: Any) -> tuple[Any, bool]:
    """Shares ``t`` with ``mᵀ t ≈ p`` (least squares), clipped and renormalised; ``(t, clipped)``."""
    import numpy as np

    t, *_ = np.linalg.lstsq(m.T, p, rcond=None)
    clipped = bool((t < 0).any())
    t = np.clip(t, 0.0, None)
    total = t.sum()
    return (t / total if total > 0 else np.full_like(t, np.nan)), clipped


def _labels(counts: Mapping[str, int], confusion: Mapping[str, Mapping[str, int]]) -> list[str]:
    order: list[str] = []
    for true, row in confusion.items():
        for lab in (true, *row):
            if lab not in order:
                order.append(str(lab))
    return order


def _check(counts: Mapping[str, int], confusion: Mapping[str, Mapping[str, int]]) -> None:
    if not confusion or not any(sum(int(v) for v in row.values()) for row in confusion.values()):
        raise CorrectionError(
            "the confusion matrix is empty; run fairsets annotate verify with human labels first"
        )
    bad = [(k, v) for k, v in counts.items() if int(v) < 0] + [
        (f"{t}/{p}", v) for t, row in confusion.items() for p, v in row.items() if int(v) < 0
    ]
    if bad:
        raise CorrectionError(f"negative count {bad[0][1]} for {bad[0][0]}; counts are numbers of boxes")
    if sum(int(v) for v in counts.values()) <= 0:
        raise CorrectionError("no labelled box to correct: the counts are all 0")


def corrected_shares(
    counts: Mapping[str, int],
    confusion: Mapping[str, Mapping[str, int]],
    *,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> dict[str, Any]:
    """Label shares corrected for the classifier's confusion, with bootstrap intervals.

    Args:
        counts: the classifier's label counts over the audited (labelled) boxes.
        confusion: ``confusion[human label][classifier label]`` = boxes of the verification sample.
        n_boot: bootstrap resamples (0: no interval); ``seed`` seeds them.
        ci: the interval's level (0.95: the 2.5th and 97.5th percentiles).

    Returns:
        ``{"labels", "raw", "corrected", "ci95", "method", "definitions", "warnings"}`` and
        ``ci_level``, ``n`` (counts total, counts used, verification boxes per human label),
        ``condition_number``, ``clipped``, ``bootstrap``. ``raw`` is over every label of
        ``counts``; ``corrected`` and ``ci95`` are ``None`` for labels that cannot be estimated.

    Raises:
        CorrectionError: an empty confusion, negative counts, or no counted box.
    """
    import numpy as np

    if not 0.0 < ci < 1.0:
        raise CorrectionError(f"ci {ci}: give a level between 0 and 1, e.g. 0.95")
    _check(counts, confusion)
    known = _labels(counts, confusion)
    unknown = [str(k) for k in counts if str(k) not in known]
    labels = known + unknown
    total = sum(int(v) for v in counts.values())
    raw = {lab: int(counts.get(lab, 0)) / total for lab in labels}
    rows_n = {lab: sum(int(v) for v in (confusion.get(lab) or {}).values()) for lab in known}
    truths = [lab for lab in known if rows_n[lab] > 0]
    cm = np.array([[int((confusion.get(t) or {}).get(p, 0)) for p in known] for t in truths], dtype=float)
    sizes = cm.sum(axis=1)
    m = cm / sizes[:, None]
    y = np.array([int(counts.get(lab, 0)) for lab in known], dtype=np.int64)
    used = int(y.sum())
    warnings: list[str] = []
    for lab in unknown:
        if int(counts[lab]):
            warnings.append(
                f"{int(counts[lab])} boxes labelled {lab!r} by the classifier: a label the verification "
                "sample never has, left out of the correction (corrected shares are over the other labels)"
            )
    for j, lab in enumerate(known):
        if int(counts.get(lab, 0)) and truths and not cm[:, j].sum():
            warnings.append(
                f"{int(counts[lab])} boxes labelled {lab!r} by the classifier, a label it never gave in the "
                "verification sample: nothing says what they truly are, so they only scale the other shares"
            )
    for lab in known:
        if rows_n[lab] == 0:
            warnings.append(
                f"no verified box has the human label {lab!r}: its true share cannot be estimated and the "
                f"correction assumes no box is truly {lab!r}"
            )
    n_verified = int(cm.sum())
    small = [lab for lab in truths if rows_n[lab] < MIN_PER_LABEL]
    if n_verified < MIN_VERIFIED or small:
        warnings.append(
            f"a small verification sample ({n_verified} boxes"
            + (f"; fewer than {MIN_PER_LABEL} with the human label {', '.join(small)}" if small else "")
            + "): the corrected shares are uncertain, read the intervals"
        )
    sv = np.linalg.svd(m, compute_uv=False)
    singular = sv.size < len(truths) or sv.min() <= 1e-10 * sv.max()
    cond = None if singular else float(sv.max() / sv.min())
    if singular:
        warnings.append(
            "the confusion matrix is singular (two human labels give the same classifier labels): the "
            "shares among them cannot be told apart and the least-squares solution splits them arbitrarily"
        )
    elif cond is not None and cond > CONDITION_WARNING:
        warnings.append(
            f"the confusion matrix is ill-conditioned (condition number {cond:.0f} > {CONDITION_WARNING:g}): "
            "errors of the raw shares are amplified; read the intervals"
        )
    corrected: dict[str, float | None] = dict.fromkeys(labels)
    interval: dict[str, list[float] | None] = dict.fromkeys(labels)
    clipped = False
    boot_ok = 0
    if used > 0:
        t, clipped = _solve(m, y / used)
        if clipped:
            warnings.append(
                "the solution had negative shares, clipped to 0 and renormalised: the confusion does not "
                "fit the counts well (a small or unrepresentative verification sample)"
            )
        corrected.update({lab: float(v) for lab, v in zip(truths, t, strict=True)})
        if n_boot > 0:
            rng = np.random.default_rng(seed)
            draws = []
            for _ in range(n_boot):
                cm_b = np.stack([rng.multinomial(int(n), row) for n, row in zip(sizes, m, strict=True)])
                y_b = rng.multinomial(used, y / used)
                t_b, _ = _solve(cm_b / sizes[:, None], y_b / used)
                if np.isfinite(t_b).all():
                    draws.append(t_b)
            boot_ok = len(draws)
            if draws:
                tail = (1.0 - ci) / 2 * 100
                lo, hi = np.percentile(np.array(draws), [tail, 100 - tail], axis=0)
                interval.update({lab: [float(a), float(b)] for lab, a, b in zip(truths, lo, hi, strict=True)})
    else:
        warnings.append("none of the counted labels is in the confusion matrix: nothing to correct")
    return {
        "labels": labels,
        "raw": raw,
        "corrected": corrected,
        "ci95": interval,
        "ci_level": ci,
        "method": METHOD,
        "n": {
            "counts": total,
            "counts_corrected": used,
            "verification": n_verified,
            "verification_per_label": {lab: rows_n[lab] for lab in known},
        },
        "condition_number": cond,
        "clipped": clipped,
        "bootstrap": {"resamples": n_boot, "usable": boot_ok, "seed": seed},
        "definitions": _definitions(ci),
        "warnings": warnings,
    }


def _definitions(ci: float) -> dict[str, str]:
    return {
        "raw": "classifier label count / all counted boxes (every label of the counts)",
        "corrected": "the true-label shares p_true solving M^T p_true = p_obs by least squares, where "
        "p_obs are the observed shares of the labels the confusion knows and M[i][j] = confusion[i][j] / "
        "sum_j confusion[i][j] (human label i = truth); clipped at 0 and renormalised to sum to 1; None "
        "for a label no verified box has as its human label",
        "ci95": f"the {100 * (1 - ci) / 2:g}th and {100 * (1 + ci) / 2:g}th percentiles of the corrected "
        "share over bootstrap resamples: each human label's verified boxes redrawn with replacement "
        "(multinomial from its confusion row, same size) and the counts redrawn (multinomial, same total)",
        "warnings": f"a singular or ill-conditioned M (condition number > {CONDITION_WARNING:g}), counted "
        "labels the confusion lacks or the classifier never gave in the verification sample, a label no "
        f"verified box has as its human label, fewer than {MIN_VERIFIED} verified boxes or fewer than "
        f"{MIN_PER_LABEL} for a human label, a clipped solution",
    }


def load_confusion(
    path: str | os.PathLike[str], attr: str, *, human_col: str | None = None
) -> dict[str, dict[str, int]]:
    """The confusion (``confusion[human][classifier]``) of an ``annotate verify`` report.

    Args:
        path: ``verify_{attr}.json`` or the folder ``annotate verify --out`` wrote it to.
        attr: the attribute, e.g. ``race``; the report must be of it.
        human_col: the human column to take as truth (default: the report's ``default_column``,
            its first human column).

    Raises:
        CorrectionError: no such file, not a verify report, another attribute, no such column.
    """
    p = Path(path)
    if p.is_dir():
        p = p / f"verify_{attr}.json"
    fix = (
        f"give the verify_{attr}.json that fairsets annotate verify --attribute {attr} wrote (or its folder)"
    )
    try:
        report = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CorrectionError(f"{p}: no such file; {fix}") from None
    except (OSError, ValueError) as exc:
        raise CorrectionError(f"{p}: unreadable ({exc}); {fix}") from None
    if not isinstance(report, dict) or "human_vs_classifier" not in report:
        raise CorrectionError(f"{p}: not an annotate verify report; {fix}")
    if report.get("attribute") != attr:
        raise CorrectionError(f"{p}: verifies {report.get('attribute')!r}, not {attr!r}; {fix}")
    block = report.get("confusion")
    if isinstance(block, dict) and "by_human_column" in block:
        col = human_col or block["default_column"]
        matrices = block["by_human_column"]
        labels = block["labels"]
    else:  # a report written before the confusion block: the per-column confusions
        cols = list(report["human_vs_classifier"])
        col = human_col or (cols[0] if cols else "")
        matrices = {c: v["confusion"]["matrix"] for c, v in report["human_vs_classifier"].items()}
        labels = report.get("classes") or []
    if col not in matrices:
        raise CorrectionError(f"{p}: no human column {col!r} (columns: {', '.join(matrices)}); name one")
    matrix = matrices[col]
    return {
        str(t): {str(c): int(n) for c, n in zip(labels, row, strict=True)}
        for t, row in zip(labels, matrix, strict=True)
    }
