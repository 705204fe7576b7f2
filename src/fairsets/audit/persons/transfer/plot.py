"""The scatter plot of the bias-transfer audit: one point per category, data bias against model
bias, with the least-squares line (:func:`.fit.relation`)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["scatter_plot"]


def scatter_plot(
    x: Sequence[float],
    y: Sequence[float],
    labels: Sequence[str],
    fit: Mapping[str, Any] | None,
    path: str | os.PathLike[str],
    *,
    xlabel: str = "data bias (female − male) / (female + male)",
    ylabel: str = "model bias d(c)",
    max_labels: int = 30,
) -> Path:
    """A PNG scatter of the categories with the fitted line (``fit``: a :func:`relation` dict, or
    None for no line), written atomically to ``path``.

    With many points only the most telling are named (the extremes of x and y and the largest
    residuals, up to ``max_labels``), and a name that would sit on one already drawn is skipped.
    Needs matplotlib.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from fairsets.core.atomic import atomic_path

    if not len(x) == len(y) == len(labels):
        raise ValueError("scatter_plot: x, y and labels must have one entry per category")
    pts = [
        (float(a), float(b), str(lab))
        for a, b, lab in zip(x, y, labels, strict=True)
        if a is not None and b is not None and math.isfinite(float(a)) and math.isfinite(float(b))
    ]
    fig = Figure(figsize=(7.0, 5.5), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if pts:
        xa = np.array([p[0] for p in pts])
        ya = np.array([p[1] for p in pts])
        ax.scatter(xa, ya, s=14, alpha=0.7)
        if fit and fit.get("slope") is not None:
            xs = np.linspace(xa.min(), xa.max(), 50)
            ax.plot(xs, fit["slope"] * xs + fit["intercept"], color="#c0392b", linewidth=1.2,
                    label=f"linear fit, R² = {fit['r2']:.2f}, ρ = {fit['pearson_r']:.2f}")  # fmt: skip
            ax.legend(loc="upper left", fontsize="small")
            resid = np.abs(ya - (fit["slope"] * xa + fit["intercept"]))
        else:
            resid = np.abs(ya - ya.mean())
        order = list(dict.fromkeys(
            [int(np.argmin(xa)), int(np.argmax(xa)), int(np.argmin(ya)), int(np.argmax(ya))]
            + [int(i) for i in np.argsort(-resid)]
        ))[: max(0, max_labels)]  # fmt: skip
        spanx = float(np.ptp(xa)) or 1.0
        spany = float(np.ptp(ya)) or 1.0
        placed: list[tuple[float, float]] = []
        for i in order:
            px, py = (xa[i] - xa.min()) / spanx, (ya[i] - ya.min()) / spany
            if any(abs(px - qx) < 0.08 and abs(py - qy) < 0.035 for qx, qy in placed):
                continue
            placed.append((px, py))
            ax.annotate(pts[i][2], (xa[i], ya[i]), xytext=(3, 3), textcoords="offset points", fontsize=7)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.axhline(0, color="#999999", linewidth=0.6)
    ax.axvline(0, color="#999999", linewidth=0.6)
    target = Path(path)
    with atomic_path(target) as tmp:
        fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
    return target
