"""Plots for the HTML reports: matplotlib figures on their own Agg canvas, embedded as base64 PNGs.

Shared by the audit report and the geographic report (:mod:`fairsets.geo.report`). matplotlib is
imported only when a figure is drawn; pyplot and the global backend are not touched. Figures are
drawn at 100 dpi and saved without a ``Software`` stamp, so the same figure gives the same bytes.
"""

from __future__ import annotations

import base64
import io
import math
import textwrap
from collections.abc import Sequence
from typing import Any

from fairsets.audit.metrics import box_stats

__all__ = ["DPI", "bar_png", "box_png", "box_stats", "figure", "group_ticks", "mpl_label", "png_uri"]

DPI = 100
_COLOURS = {"original": "#4c72b0", "debiased": "#dd8452"}


def group_ticks(ax: Any, groups: Sequence[Any]) -> None:
    """One x tick per group at 0 … n−1, labels rotated when there are many or long ones."""
    n = len(groups)
    rotate = n > 6 or max((len(str(g)) for g in groups), default=0) > 10
    ax.set_xticks(range(n))
    ax.set_xticklabels(
        [mpl_label(g) for g in groups],
        rotation=60 if rotate else 0,
        ha="right" if rotate else "center",
        rotation_mode="anchor",
        fontsize=8 if n > 20 else 9,
    )
    ax.set_xlim(-0.6, n - 0.4)


def figure(width: float, height: float) -> Any:
    """A figure of ``width`` × ``height`` inches with constrained layout on its own Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png_uri(fig: Any) -> str:
    """The figure as a ``data:image/png;base64`` URI."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def mpl_label(text: str) -> str:
    """Keep matplotlib from reading ``$...$`` in a label as mathtext."""
    return str(text).replace("$", r"\$")


def _grouped_axes(groups: Sequence[Any], n_series: int, per_series: float) -> tuple[Any, Any, float]:
    """A figure and its axes for one slot per group holding ``n_series`` marks side by side: the
    width grows with the groups (``per_series`` inches per mark, capped at 30), the height with
    the longest group name (its tick label is turned); also returns the width (inches)."""
    per_group = 0.18 + per_series * max(1, n_series)
    width = min(max(6.0, 1.6 + per_group * len(groups)), 30.0)
    longest = max((len(str(g)) for g in groups), default=1)
    fig = figure(width, 3.2 + min(longest, 40) * 0.055)
    return fig, fig.add_subplot(), width


def bar_png(
    groups: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    title: str,
    ylabel: str,
    reference: float | None = None,
    reference_label: str = "",
    zoom: bool = False,
    ylim: tuple[float, float] | None = None,
    integer: bool = False,
) -> str:
    """Grouped bar chart as a ``data:image/png;base64`` URI."""
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    n = len(groups)
    fig, ax, width = _grouped_axes(groups, len(series), 0.12)
    x = np.arange(n)
    bar_w = 0.8 / max(1, len(series))
    all_values: list[float] = []
    for i, (label, values) in enumerate(series):
        vals = [float(v) for v in values]
        all_values += [v for v in vals if math.isfinite(v)]
        offset = (i - (len(series) - 1) / 2) * bar_w
        ax.bar(x + offset, vals, bar_w, label=mpl_label(label), color=_COLOURS.get(label))
    if reference is not None:
        ax.axhline(reference, color="#333333", linestyle="--", linewidth=1, label=mpl_label(reference_label))
    group_ticks(ax, groups)
    ax.set_ylabel(mpl_label(ylabel))
    ax.set_title(textwrap.fill(mpl_label(title), width=max(40, int(width * 11))), fontsize=10)
    if ylim is not None:
        ax.set_ylim(*ylim)
    elif zoom and all_values:
        lo, hi = min(all_values), max(all_values)
        pad = (hi - lo) * 0.15 or max(abs(hi) * 0.05, 1e-3)
        ax.set_ylim(lo - pad, hi + pad)
    if integer:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    if len(series) > 1 or reference is not None:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return png_uri(fig)


def box_png(
    groups: Sequence[str],
    series: Sequence[tuple[str, Sequence[Any]]],
    *,
    title: str,
    ylabel: str,
) -> str:
    """Box plots per group from precomputed statistics (:func:`box_stats`: the box spans the
    quartiles, the line is the median, the whiskers reach min and max, a dot marks the mean); a
    group whose statistics are ``None`` (no image) gets an "empty" mark at the axis bottom.

    Args:
        groups: the x positions, in order.
        series: ``[(label, [stats or None per group])]``, e.g. original and debiased.
    """
    from matplotlib.patches import Patch

    fig, ax, width = _grouped_axes(groups, len(series), 0.14)
    box_w = 0.8 / max(1, len(series))
    handles = []
    empty: set[int] = set()
    for i, (label, stats) in enumerate(series):
        offset = (i - (len(series) - 1) / 2) * box_w
        colour = _COLOURS.get(label, "#4c72b0")
        drawn, positions = [], []
        for j, st in enumerate(stats):
            if not st:
                empty.add(j)
                continue
            drawn.append(
                {
                    "med": st["median"],
                    "q1": st["q1"],
                    "q3": st["q3"],
                    "whislo": st["min"],
                    "whishi": st["max"],
                    "mean": st.get("mean", st["median"]),
                    "fliers": [],
                }
            )
            positions.append(j + offset)
        if drawn:
            ax.bxp(
                drawn,
                positions=positions,
                widths=box_w * 0.8,
                showmeans=True,
                showfliers=False,
                patch_artist=True,
                boxprops={"facecolor": colour, "alpha": 0.55, "edgecolor": colour},
                medianprops={"color": "#222222"},
                meanprops={
                    "marker": "o",
                    "markerfacecolor": "white",
                    "markeredgecolor": "#222222",
                    "markersize": 4,
                },
                whiskerprops={"color": colour},
                capprops={"color": colour},
                manage_ticks=False,
            )
        handles.append(Patch(facecolor=colour, alpha=0.55, label=mpl_label(label)))
    lo, hi = ax.get_ylim()
    for j in sorted(empty):
        ax.annotate(
            "empty",
            (j, 0),
            xycoords=("data", "axes fraction"),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            fontsize=7,
            color="#b00020",
        )
    ax.set_ylim(lo, hi)
    group_ticks(ax, groups)
    ax.set_ylabel(mpl_label(ylabel))
    ax.set_title(textwrap.fill(mpl_label(title), width=max(40, int(width * 11))), fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    if len(series) > 1:
        ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return png_uri(fig)
