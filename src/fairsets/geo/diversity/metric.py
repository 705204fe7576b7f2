"""The diversity metric ``div(S)`` and its per-country summary for one entity (GeoProfiler §4.3)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["country_diversity", "diversity", "l2_normalize"]


def l2_normalize(features: Any) -> np.ndarray:
    """Rows scaled to unit L2 norm (float64).

    Raises:
        ValueError: not a 2-D array, non-finite values, or a row of zeros (no direction).
    """
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"features must be a 2-D array (samples × dimensions), got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("features contain NaN or infinite values")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError(
            f"{int(np.sum(norms == 0))} feature vector(s) are all zeros and cannot be normalised"
        )
    return x / norms


def diversity(features: Any) -> float:
    """``div(S) = sqrt(mean_i ‖f_i − f̄‖²)`` over L2-normalised rows ``f_i`` (GeoProfiler §4.3).

    Args:
        features: ``(n, d)`` raw features of the ``n >= 1`` samples of the set.

    Returns:
        The diversity, in ``[0, 1]``.

    Raises:
        ValueError: an empty set or features :func:`l2_normalize` rejects.
    """
    f = l2_normalize(features)
    if f.shape[0] == 0:
        raise ValueError("diversity of an empty set is not defined")
    centred = f - f.mean(axis=0, keepdims=True)
    return float(math.sqrt(max(0.0, float(np.mean(np.sum(centred * centred, axis=1))))))


def _pearson(x: Sequence[float], y: Sequence[float]) -> dict[str, Any]:
    """Pearson r with its two-sided p-value, or an ``insufficient_data`` record."""
    from scipy import stats

    n = len(x)
    if n < 3:
        return {"status": "insufficient_data", "reason": f"{n} countries (at least 3 needed)", "n": n}
    if len(set(x)) < 2 or len(set(y)) < 2:
        return {"status": "insufficient_data", "reason": "constant input", "n": n}
    res = stats.pearsonr(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    return {"status": "ok", "r": float(res.statistic), "p": float(res.pvalue), "n": n}


def country_diversity(
    countries: Sequence[str],
    features: Any,
    frequencies: Mapping[str, int],
    *,
    min_samples: int,
    eligible: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Per-country diversity of one entity, its mean (± std) and ρ(frequency, diversity).

    Args:
        countries: the ISO3 code of each row of ``features``.
        features: ``(n, d)`` features of those rows (encoded samples only).
        frequencies: ISO3 → number of samples of the country in the entity (all rows, including
            those that could not be encoded); ``ρ`` uses these.
        min_samples: a country is scored when it has ``>= min_samples`` encoded samples.
        eligible: countries to score (default: those with ``frequencies >= min_samples``).

    Returns:
        ``{"countries": [{"iso3", "frequency", "n", "diversity"}], "n_countries", "mean", "std",
        "rho", "dropped"}``: ``std`` is the population standard deviation (ddof=0) over countries,
        ``rho`` a Pearson record (:func:`_pearson`), ``dropped`` the eligible countries with
        fewer than ``min_samples`` encoded samples.
    """
    if min_samples < 1:
        raise ValueError(f"min_samples must be >= 1, got {min_samples}")
    labels = np.asarray(list(countries), dtype=object)
    f = np.asarray(features, dtype=np.float64)
    if f.ndim != 2 or f.shape[0] != len(labels):
        raise ValueError(f"features of shape {f.shape} do not match {len(labels)} country labels")
    if eligible is None:
        eligible = [c for c, n in frequencies.items() if n >= min_samples]
    rows: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    for code in sorted(eligible, key=lambda c: (-int(frequencies.get(c, 0)), c)):
        mask = labels == code
        n = int(mask.sum())
        if n < min_samples:
            dropped.append({"iso3": code, "frequency": int(frequencies.get(code, 0)), "n": n})
            continue
        rows.append(
            {
                "iso3": code,
                "frequency": int(frequencies.get(code, 0)),
                "n": n,
                "diversity": diversity(f[mask]),
            }
        )
    values = [r["diversity"] for r in rows]
    return {
        "countries": rows,
        "n_countries": len(rows),
        "mean": float(np.mean(values)) if values else None,
        "std": float(np.std(values)) if values else None,
        "rho": _pearson([r["frequency"] for r in rows], values),
        "dropped": dropped,
    }
