"""3. Correlations of country frequency with a reference value (GDP, population)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["frequency_correlation"]


def frequency_correlation(
    counts: pd.Series, values: pd.Series, *, include_zero: bool = True
) -> dict[str, Any]:
    """Pearson and Spearman correlation of country frequency with a reference value.

    Args:
        counts: rows per ISO3 code.
        values: the reference value per ISO3 code (GDP, population); non-finite values are
            dropped.
        include_zero: count reference countries that are absent from the data as frequency 0
            (the ``reference`` set); False restricts to countries with at least one row (the
            ``present`` set, which :func:`~fairsets.geo.analyze.run_analysis` makes the headline).

    Returns:
        ``{"status": "ok", "n", "n_zero_count", "n_not_in_reference", "zero_counts_included",
        "pearson": {"r", "p"}, "spearman": {"rho", "p"}}`` or an ``insufficient_data`` record
        (fewer than 3 countries, or constant input).
    """
    from scipy import stats

    v = pd.to_numeric(values, errors="coerce").astype("float64")
    v = v[np.isfinite(v)]
    c = counts.reindex(v.index, fill_value=0).astype("float64")
    if not include_zero:
        keep = c > 0
        c, v = c[keep], v[keep]
    base = {
        "n": len(c),
        "n_zero_count": int((c == 0).sum()),
        "n_not_in_reference": int((~counts.index.isin(v.index) & (counts > 0)).sum()),
        "zero_counts_included": include_zero,
    }
    if len(c) < 3:
        return {"status": "insufficient_data", "reason": f"{len(c)} countries (at least 3 needed)", **base}
    if c.nunique() < 2 or v.nunique() < 2:
        return {"status": "insufficient_data", "reason": "constant input", **base}
    pr = stats.pearsonr(c.to_numpy(), v.to_numpy())
    sr = stats.spearmanr(c.to_numpy(), v.to_numpy())
    return {
        "status": "ok",
        **base,
        "pearson": {"r": float(pr.statistic), "p": float(pr.pvalue)},
        "spearman": {"rho": float(sr.statistic), "p": float(sr.pvalue)},
    }
