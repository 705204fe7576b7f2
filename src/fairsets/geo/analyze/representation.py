"""4. Geographic representativeness ``GR(c) = p(c) / p_true(c)`` (§4.2, Tables 2, 14)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["representativeness"]


def representativeness(counts: pd.Series, p_true: pd.Series, *, r: float = 3.0) -> dict[str, Any]:
    """Geographic representativeness ``GR(c) = p(c) / p_true(c)`` and the under/over sets (§4.2).

    Args:
        counts: rows per ISO3 code.
        p_true: the reference probability per ISO3 code; countries with ``p_true <= 0`` are
            outside the reference. Renormalised to sum to 1.
        r: the threshold (``>= 1``): over if ``GR > r``, under if ``GR < 1/r``.

    Returns:
        ``{"status": "ok", "r", "n_countries", "n_under", "n_over", "under_share", "over_share",
        "under", "over", "n_rows", "n_rows_outside_reference", "outside_reference", "countries"}``
        where ``countries`` lists ``{"iso3", "count", "p", "p_true", "gr", "status"}`` by
        decreasing GR and the shares are fractions of the reference's countries; or an
        ``insufficient_data`` record when no row is in the reference. ``under`` is ordered by
        increasing GR, ``over`` by decreasing GR (ties by ISO3 code).
    """
    if not r >= 1:
        raise ValueError(f"r must be >= 1, got {r}")
    ref = pd.to_numeric(p_true, errors="coerce").astype("float64")
    ref = ref[np.isfinite(ref) & (ref > 0)]
    if not len(ref):
        raise ValueError("the reference distribution is empty")
    ref = ref / ref.sum()
    inside = counts.reindex(ref.index, fill_value=0).astype("int64")
    outside = counts[~counts.index.isin(ref.index)]
    total = int(inside.sum())
    base = {
        "r": r,
        "n_countries": len(ref),
        "n_rows": total,
        "n_rows_outside_reference": int(outside.sum()),
        "outside_reference": {str(k): int(v) for k, v in outside.items()},
    }
    if total == 0:
        return {"status": "insufficient_data", "reason": "no row names a country of the reference", **base}
    p = inside / total
    gr = p / ref
    status = np.where(gr > r, "over", np.where(gr < 1.0 / r, "under", "ok"))
    order = sorted(ref.index, key=lambda c: (-float(gr[c]), c))
    pos = {c: i for i, c in enumerate(ref.index)}
    rows = [
        {
            "iso3": c,
            "count": int(inside[c]),
            "p": float(p[c]),
            "p_true": float(ref[c]),
            "gr": float(gr[c]),
            "status": str(status[pos[c]]),
        }
        for c in order
    ]
    under = [x["iso3"] for x in sorted(rows, key=lambda x: (x["gr"], x["iso3"])) if x["status"] == "under"]
    over = [x["iso3"] for x in rows if x["status"] == "over"]
    return {
        "status": "ok",
        **base,
        "n_under": len(under),
        "n_over": len(over),
        "under_share": len(under) / len(ref),
        "over_share": len(over) / len(ref),
        "under": under,
        "over": over,
        "countries": rows,
    }
