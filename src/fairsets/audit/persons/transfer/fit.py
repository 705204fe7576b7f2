"""How well data bias predicts model bias across categories: Pearson ρ, the R² of the
least-squares line, and what Chebyshev series of degree 2–5 add — in-sample and cross-validated.

The study reports that non-linear fits add only 1–3 points of R² to the line (first-order
co-occurrence carries most of the bias). An **in-sample** gain can never be negative and grows with
the degree whatever the data: with 12 categories and a model that is a line plus noise, degree 5
"gains" tens of points. So :func:`relation` also reports the **cross-validated** R² of every fit
(the line's too, on the same folds) and its gain: each category is predicted by a fit that did not
see it, and a gain that is only fitted noise comes out near zero or negative.

* **Scheme**: leave-one-out when there are fewer than :data:`LOO_BELOW` categories (5-fold would
  leave folds of under 10 categories, whose R² moves with the split; leave-one-out is deterministic
  and trains on n − 1), otherwise :data:`CV_FOLDS`-fold with the categories shuffled by
  ``numpy.random.default_rng(seed).permutation(n)`` and cut by ``numpy.array_split``.
* **Cross-validated R²** = 1 − Σᵢ (yᵢ − ŷᵢ)² / Σᵢ (yᵢ − ȳ)², ŷᵢ the prediction of the fit that
  left category i out, ȳ the mean over all categories (the predictive R², PRESS-style; it can be
  negative). A degree is cross-validated when every training set holds at least degree + 2
  categories (the in-sample rule).
* **Warning**: a degree-k series has k + 1 coefficients; with fewer than :data:`PER_COEFFICIENT`
  categories per coefficient (60 for degree 5, after the common rule of thumb of ten observations
  per estimated parameter) its in-sample gain is mostly fitted noise, and ``warning`` says so.

x is scaled to [−1, 1] by the min and max over all categories (the Chebyshev basis' domain; the
polynomials of a degree are the same space whatever the scaling, so this leaks nothing about y).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = [
    "CV_FOLDS",
    "DEFINITIONS",
    "LOO_BELOW",
    "MAX_DEGREE",
    "PER_COEFFICIENT",
    "cv_folds",
    "relation",
    "relation_or_reason",
]

#: The highest Chebyshev degree :func:`relation` fits.
MAX_DEGREE = 5
#: Folds of the cross-validation from :data:`LOO_BELOW` categories on.
CV_FOLDS = 5
#: Below this many categories the cross-validation is leave-one-out.
LOO_BELOW = 50
#: Categories per fitted coefficient below which a degree's in-sample gain is flagged.
PER_COEFFICIENT = 10


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    return 1.0 - float(np.sum((y - pred) ** 2)) / ss_tot


def cv_folds(n: int, folds: int | None = None, seed: int = 0) -> tuple[str, list[np.ndarray], int | None]:
    """``(scheme, test indices per fold, seed used)`` for ``n`` categories (module docstring).

    ``folds=None`` chooses by :data:`LOO_BELOW`; a number ≥ n is leave-one-out; otherwise k-fold
    with that many folds, shuffled by ``seed``.
    """
    if folds is None:
        folds = n if n < LOO_BELOW else CV_FOLDS
    if isinstance(folds, bool) or int(folds) < 2:
        raise ValueError(f"folds must be a whole number ≥ 2, not {folds!r}")
    if folds >= n:
        return "leave-one-out", [np.array([i]) for i in range(n)], None
    perm = np.random.default_rng(seed).permutation(n)
    return f"{int(folds)}-fold", [np.sort(f) for f in np.array_split(perm, int(folds))], int(seed)


def _fit_predict(t_fit: np.ndarray, y_fit: np.ndarray, t_new: np.ndarray, degree: int) -> np.ndarray:
    """The least-squares Chebyshev series of ``degree`` fitted on (t_fit, y_fit), at ``t_new``."""
    cheb = np.polynomial.chebyshev
    coef, *_ = np.linalg.lstsq(cheb.chebvander(t_fit, degree), y_fit, rcond=None)
    return cheb.chebvander(t_new, degree) @ coef


def _cv_r2(t: np.ndarray, y: np.ndarray, folds: list[np.ndarray], degree: int) -> float:
    pred = np.empty_like(y)
    for test in folds:
        train = np.setdiff1d(np.arange(len(y)), test)
        pred[test] = _fit_predict(t[train], y[train], t[test], degree)
    return _r2(y, pred)


def _warning(n: int, degrees: list[int]) -> str | None:
    thin = [d for d in degrees if n < PER_COEFFICIENT * (d + 1)]
    if not thin:
        return None
    return (
        f"{n} categories: fewer than {PER_COEFFICIENT} per coefficient for degree "
        f"{', '.join(map(str, thin))} (degree {thin[-1]} needs {PER_COEFFICIENT * (thin[-1] + 1)}); "
        "their in-sample gains are mostly fitted noise, read the cross-validated ones"
    )


def relation(x: Iterable[float], y: Iterable[float], *, folds: int | None = None, seed: int = 0) -> dict:
    """How well ``x`` (data bias) predicts ``y`` (model bias) across categories.

    Pairs where either value is None or not finite are left out (counted in ``n_skipped``).

    Args:
        x, y: one value per category.
        folds: cross-validation folds (None: leave-one-out below :data:`LOO_BELOW` categories,
            else :data:`CV_FOLDS`); a number ≥ the categories is leave-one-out.
        seed: shuffles the categories into k folds (unused by leave-one-out).

    Returns:
        ``{"n", "n_skipped", "pearson_r", "p_value" (None without scipy), "slope", "intercept",
        "r2", "chebyshev": {"in_sample": [{"degree", "r2", "r2_gain"}, ...], "cross_validated":
        [{"degree", "r2", "r2_gain"}, ...], "cv": {"scheme", "folds", "seed", "r2_line"},
        "warning"}, "definitions"}``; a degree that needs more categories than there are (degree
        + 2, in every training set for the cross-validated one) is left out.

    Raises:
        ValueError: x and y of different lengths, fewer than 3 usable pairs, or a constant x or y.
    """
    xs, ys = list(x), list(y)
    if len(xs) != len(ys):
        raise ValueError(f"relation: x has {len(xs)} values and y {len(ys)}; give one pair per category")

    def ok(v: Any) -> bool:
        return v is not None and math.isfinite(float(v))

    keep = [i for i in range(len(xs)) if ok(xs[i]) and ok(ys[i])]
    xa = np.array([float(xs[i]) for i in keep])
    ya = np.array([float(ys[i]) for i in keep])
    n = len(keep)
    if n < 3:
        raise ValueError(f"relation: {n} usable pairs; at least 3 are needed")
    if np.ptp(xa) == 0 or np.ptp(ya) == 0:
        raise ValueError("relation: x or y is constant; a correlation is undefined")
    r = float(np.corrcoef(xa, ya)[0, 1])
    p = None
    try:
        from scipy import stats
    except ImportError:
        pass
    else:
        p = float(stats.pearsonr(xa, ya).pvalue)
    slope, intercept = np.polyfit(xa, ya, 1)
    r2 = _r2(ya, slope * xa + intercept)
    lo, hi = float(xa.min()), float(xa.max())
    t = (2 * xa - (lo + hi)) / (hi - lo)
    degrees = [d for d in range(2, MAX_DEGREE + 1) if n >= d + 2]
    in_sample = []
    for deg in degrees:
        r2k = _r2(ya, _fit_predict(t, ya, t, deg))
        in_sample.append({"degree": deg, "r2": r2k, "r2_gain": r2k - r2})
    scheme, test_sets, used_seed = cv_folds(n, folds, seed)
    smallest = n - max(len(f) for f in test_sets)  # the smallest training set
    cv_line = _cv_r2(t, ya, test_sets, 1) if smallest >= 3 else None
    cross = []
    if cv_line is not None:
        for deg in (d for d in degrees if smallest >= d + 2):
            r2k = _cv_r2(t, ya, test_sets, deg)
            cross.append({"degree": deg, "r2": r2k, "r2_gain": r2k - cv_line})
    return {
        "n": n,
        "n_skipped": len(xs) - n,
        "pearson_r": r,
        "p_value": p,
        "slope": float(slope),
        "intercept": float(intercept),
        "r2": r2,
        "chebyshev": {
            "in_sample": in_sample,
            "cross_validated": cross,
            "cv": {"scheme": scheme, "folds": len(test_sets), "seed": used_seed, "r2_line": cv_line},
            "warning": _warning(n, degrees),
        },
        "definitions": dict(DEFINITIONS),
    }


#: What :func:`relation`'s numbers mean (its ``definitions``).
DEFINITIONS = {
    "pearson_r": "Pearson correlation of x and y across the categories",
    "p_value": "two-sided p-value of Pearson's r (scipy), None without scipy",
    "r2": "R² of the least-squares line y ≈ slope·x + intercept, the squared Pearson r: the share of "
    "y's variance across categories that x predicts linearly",
    "chebyshev.in_sample": "R² of a least-squares Chebyshev series of degree 2–5 in x (scaled to "
    "[-1, 1]) on all categories, and its gain over the line's R²; never negative, and it grows "
    "with the degree whatever the data",
    "chebyshev.cross_validated": f"1 − Σ(y − ŷ)² / Σ(y − ȳ)², ŷ predicted for each category by the "
    f"fit that left it out (leave-one-out below {LOO_BELOW} categories, else {CV_FOLDS}-fold with a "
    "seeded shuffle), and its gain over the line's cross-validated R² on the same folds; near zero "
    "or negative when a degree only fits noise",
    "chebyshev.warning": f"given when there are fewer than {PER_COEFFICIENT} categories per "
    "coefficient of a degree (degree + 1 coefficients)",
}


def relation_or_reason(
    x: list[Any], y: list[Any], what: str, *, folds: int | None = None, seed: int = 0
) -> dict[str, Any]:
    """``{"x", "y", "relation", "reason"}``: :func:`relation` of the pairs, or None and why not;
    ``what`` is ``"x name → y name"``."""
    xname, yname = what.split(" → ")
    try:
        rel = relation(x, y, folds=folds, seed=seed)
    except ValueError as e:
        return {"x": xname, "y": yname, "relation": None, "reason": str(e)}
    return {"x": xname, "y": yname, "relation": rel, "reason": None}
