"""The figures of the geographic report: continent shares, rank–frequency with the fitted power law,
frequency vs GDP/population, frequency vs diversity (base64 PNGs, drawn on matplotlib's Agg canvas)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from ...audit.report.plots import figure, mpl_label, png_uri
from ..countries import CONTINENTS
from .formatting import p_value

__all__ = [
    "CONTINENT_ORDER",
    "continents_png",
    "diversity_png",
    "place_labels",
    "rank_frequency_png",
    "scatter_png",
]

CONTINENT_ORDER = ("NA", "EU", "AS", "OC", "AF", "SA", "AN")
_CONTINENT_COLOURS = {
    "NA": "#4c72b0",
    "EU": "#55a868",
    "AS": "#dd8452",
    "OC": "#8172b3",
    "AF": "#c44e52",
    "SA": "#937860",
    "AN": "#8c8c8c",
}
_MAX_PANELS = 12  # rank–frequency panels


def continents_png(groups: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """Stacked horizontal bars: continent shares of the country-specified rows, per group."""
    import numpy as np

    fig = figure(9.0, 1.2 + 0.38 * len(groups))
    ax = fig.add_subplot()
    labels = [mpl_label(n) for n, _ in groups]
    y = np.arange(len(groups))[::-1]
    left = np.zeros(len(groups))
    present = [
        c for c in CONTINENT_ORDER if any((g["continents"]["shares"].get(c) or 0) > 0 for _, g in groups)
    ]
    for code in present:
        vals = np.array([100.0 * (g["continents"]["shares"].get(code) or 0.0) for _, g in groups])
        ax.barh(y, vals, left=left, color=_CONTINENT_COLOURS[code], label=f"{code} {CONTINENTS[code]}")
        for yi, li, v in zip(y, left, vals, strict=True):
            if v >= 6:
                ax.text(li + v / 2, yi, f"{v:.0f}", ha="center", va="center", fontsize=7, color="white")
        left += vals
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=9)
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of country-specified rows")
    ax.set_title("Continents per entity (Table 11)", fontsize=10)
    if present:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return png_uri(fig)


def rank_frequency_png(groups: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """Rank–frequency (log–log) per group with the fitted discrete power law above x_min."""
    import numpy as np
    from scipy.special import zeta

    groups = list(groups)[:_MAX_PANELS]
    cols = min(4, len(groups))
    rows = math.ceil(len(groups) / cols)
    fig = figure(3.0 * cols + 0.6, 2.7 * rows + 0.4)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat[len(groups) :]:
        ax.set_visible(False)
    for ax, (name, g) in zip(axes.flat, groups, strict=False):
        counts = np.array(list(g["counts"].values()), dtype=float)
        pl = g["power_law"]
        if len(counts):
            ax.loglog(np.arange(1, len(counts) + 1), counts, "o", ms=3, color="#4c72b0", label="countries")
        title = mpl_label(name)
        if pl.get("status") == "ok":
            alpha, xmin, n_tail = float(pl["alpha"]), float(pl["xmin"]), int(pl["n_tail"])
            xs = np.unique(np.round(np.geomspace(xmin, max(counts.max(), xmin + 1), 200)))
            ranks = n_tail * zeta(alpha, xs) / zeta(alpha, xmin)
            ax.loglog(ranks, xs, "-", color="#c44e52", lw=1.5, label=f"power law α={alpha:.2f}")
            ax.axhline(xmin, color="#999999", lw=0.8, ls=":", label=f"x_min={xmin:g}")
            gof = pl.get("gof") or {}
            if gof.get("p") is not None:
                title += f"\nα={alpha:.2f}, GOF p={gof['p']:.2f}"
            else:
                title += f"\nα={alpha:.2f}"
        else:
            title += "\n(insufficient data)"
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("rank", fontsize=8)
        ax.set_ylabel("rows", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3, which="both", lw=0.4)
    first = axes.flat[0]
    if first.get_legend_handles_labels()[0]:
        first.legend(fontsize=7, loc="upper right", frameon=False)
    return png_uri(fig)


_LABEL_OFFSETS = ((4, 3), (4, -9), (-4, 3), (-4, -9), (6, -3), (-6, -3))  # points: NE, SE, NW, SW, E, W
_MAX_LABELS = 15


def place_labels(ax: Any, points: Sequence[tuple[str, float, float]], *, fontsize: float = 7) -> list[str]:
    """Label points without overlap, greedily: each label (in the given order, most important
    first) takes the first of a few offsets around its point whose box overlaps no label placed
    before and stays inside the axes; a label with no free offset is left out. Needs a drawn
    figure (the layout fixed). Returns the labels placed."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    boxes: list[Any] = []
    placed = []
    for text, x, y in points:
        for dx, dy in _LABEL_OFFSETS:
            ann = ax.annotate(
                text,
                (x, y),
                xytext=(dx, dy),
                textcoords="offset points",
                fontsize=fontsize,
                ha="left" if dx > 0 else "right",
                va="bottom" if dy > 0 else "center" if dy == -3 else "top",
            )
            ann.set_in_layout(False)
            box = ann.get_window_extent(renderer).expanded(1.05, 1.1)
            inside = box.x0 >= frame.x0 and box.x1 <= frame.x1 and box.y0 >= frame.y0 and box.y1 <= frame.y1
            if inside and not any(box.overlaps(b) for b in boxes):
                boxes.append(box)
                placed.append(text)
                break
            ann.remove()
    return placed


def scatter_png(
    counts: Mapping[str, int], values: Mapping[str, float], corr: Mapping[str, Any], label: str
) -> str:
    """Reference value (log x) vs rows (log y) over the correlation's country set, the most frequent
    countries labelled without overlap.

    Over the ``present`` set the points are the countries with rows (y = rows); over the
    ``reference`` set every reference country is a point (y = rows + 1, so zeros show). Countries
    whose value is not positive cannot sit on the log axis: the title says how many of the
    correlation's ``n`` are plotted.
    """
    import numpy as np

    present = corr.get("over") == "present"
    codes = sorted(c for c in values if not present or counts.get(c, 0) > 0)
    x = np.array([values[c] for c in codes], dtype=float)
    y = np.array([counts.get(c, 0) for c in codes], dtype=float) + (0 if present else 1)
    keep = x > 0
    fig = figure(6.4, 4.6)
    ax = fig.add_subplot()
    ax.scatter(x[keep], y[keep], s=12, alpha=0.7, color="#4c72b0", edgecolors="none")
    ax.set_xscale("log")
    ax.set_yscale("log")
    over = "countries with rows" if present else "every reference country (no rows: 0)"
    title = f"Rows per country vs {label}, over {over}"
    if corr.get("status") == "ok":
        title += (
            f" — Pearson r={corr['pearson']['r']:.2f} (p {p_value(corr['pearson']['p'])}),"
            f" Spearman ρ={corr['spearman']['rho']:.2f}, n={corr['n']}"
        )
    n_counted = corr.get("n", len(codes))
    n_plotted = int(keep.sum())
    if n_plotted != n_counted:
        title += f"; {n_plotted} of the {n_counted} plotted ({n_counted - n_plotted} with {label} ≤ 0)"
    ax.set_title(textwrap.fill(title.replace("p < ", "p\u00a0<\u00a0"), 78), fontsize=9)
    ax.set_xlabel(label + " (log)")
    ax.set_ylabel(("rows" if present else "rows + 1") + " (log)")
    ax.grid(alpha=0.3, which="both", lw=0.4)
    fig.canvas.draw()  # fixes the layout, so label boxes are where they will be drawn
    top = sorted((c for c in codes if counts.get(c, 0) > 0 and values[c] > 0), key=lambda c: (-counts[c], c))
    place_labels(
        ax, [(c, values[c], counts[c] + (0 if present else 1)) for c in top[:_MAX_LABELS]], fontsize=7
    )
    return png_uri(fig)


def diversity_png(div: Mapping[str, Any]) -> str | None:
    """Frequency (log x) vs diversity per country, one colour per group, one panel per modality."""
    mods = [(m, div[m]) for m in ("text", "image") if div.get(m)]
    if not any(g["countries"] for _, d in mods for g in d["groups"].values()):
        return None
    fig = figure(5.2 * len(mods) + 1.6, 4.0)
    axes = fig.subplots(1, len(mods), squeeze=False)[0]
    from matplotlib import colormaps
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    cmap = colormaps["tab10"]
    for ax, (mod, d) in zip(axes, mods, strict=True):
        for i, (name, g) in enumerate(d["groups"].items()):
            xs = [c["frequency"] for c in g["countries"]]
            ys = [c["diversity"] for c in g["countries"]]
            if xs:
                rho = g["rho"].get("r") if g["rho"].get("status") == "ok" else None
                lab = mpl_label(name) + (f" (ρ={rho:.2f})" if rho is not None else "")
                ax.scatter(xs, ys, s=16, color=cmap(i % 10), label=lab, alpha=0.8)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("samples of the country (log)")
        ax.set_ylabel("div(S)")
        ax.set_title(f"{'Captions' if mod == 'text' else 'Images'}: frequency vs diversity", fontsize=9)
        ax.grid(alpha=0.3, which="both", lw=0.4)
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return png_uri(fig)
