"""Self-contained HTML report of a geographic analysis (the ``analysis.json`` of ``fairsets geo analyze``).

One HTML file with inline CSS and every plot embedded as a base64 PNG: nothing is fetched from
anywhere (no script, font, stylesheet or image URL), so the file can be archived or mailed. Text
from the analysis (entity names, paths) is HTML-escaped by Jinja2's autoescaping. Plots are drawn
with matplotlib's Agg canvas (pyplot and the global backend are not touched), as in
:mod:`fairsets.audit.report`, whose number formatting and bar-chart helper are reused.

Layout: setup; Table 1 (shares); the most frequent countries; continents (Table 11); the power
law (rank–frequency on log–log axes with the fitted law, and the fit table); correlations with GDP
and population (scatter plots and table); geographic representativeness (Table 2 and the most
over/under-represented countries); diversity (Tables 16, 3 and 15, and frequency vs diversity).

API:
    * ``check_analysis(doc) -> list[str]`` — structural problems (empty: OK).
    * ``render_report(doc, path) -> Path`` — write the report atomically.
"""

from __future__ import annotations

import base64
import io
import math
import os
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fairsets.core.atomic import atomic_write_text

from ..audit.report import _bar_png, _mpl_label, format_number
from .countries import CONTINENTS, countries

__all__ = ["check_analysis", "render_report"]

_DPI = 100
_CONTINENT_ORDER = ("NA", "EU", "AS", "OC", "AF", "SA", "AN")
_CONTINENT_COLOURS = {
    "NA": "#4c72b0",
    "EU": "#55a868",
    "AS": "#dd8452",
    "OC": "#8172b3",
    "AF": "#c44e52",
    "SA": "#937860",
    "AN": "#8c8c8c",
}
_ALT_NAMES = {"truncated_power_law": "truncated power law", "stretched_exponential": "stretched exp."}
_TOP_N = 20  # countries in the bar chart
_LIST_N = 8  # over/under-represented countries named per group
_MAX_PANELS = 12  # rank–frequency panels


def _num(x: Any, digits: int = 3) -> str:
    return format_number(x, digits)


def _pct(x: Any, digits: int = 1) -> str:
    return "–" if not isinstance(x, (int, float)) or isinstance(x, bool) else f"{100.0 * x:.{digits}f}"


def _p(x: Any) -> str:
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return "–"
    return "< 0.001" if x < 1e-3 else f"{x:.3f}"


def _name(code: str) -> str:
    c = countries().get(code)
    return c.name if c else code


# --------------------------------------------------------------------------- checks


def check_analysis(doc: Any) -> list[str]:
    """Structural problems of an analysis dict (empty list: it can be reported)."""
    from .analyze import ANALYSIS_SCHEMA

    if not isinstance(doc, Mapping):
        return [f"the analysis must be a JSON object, got {type(doc).__name__}"]
    problems = []
    if doc.get("schema") != ANALYSIS_SCHEMA:
        problems.append(f"schema is {doc.get('schema')!r}, expected {ANALYSIS_SCHEMA!r}")
    for key in ("input", "settings", "overall", "entities", "diversity"):
        if not isinstance(doc.get(key), Mapping):
            problems.append(f"{key!r} must be an object")
    if problems:
        return problems
    for name, g in [("overall", doc["overall"]), *doc["entities"].items()]:
        for key in ("shares", "counts", "continents", "power_law", "correlations", "representation"):
            if not isinstance(g.get(key), Mapping):
                problems.append(f"group {name!r}: {key!r} must be an object")
    return problems


# --------------------------------------------------------------------------- plots


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _uri(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _continents_png(groups: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """Stacked horizontal bars: continent shares of the country-specified rows, per group."""
    import numpy as np

    fig = _figure(9.0, 1.2 + 0.38 * len(groups))
    ax = fig.add_subplot()
    labels = [_mpl_label(n) for n, _ in groups]
    y = np.arange(len(groups))[::-1]
    left = np.zeros(len(groups))
    present = [
        c for c in _CONTINENT_ORDER if any((g["continents"]["shares"].get(c) or 0) > 0 for _, g in groups)
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
    return _uri(fig)


def _rank_frequency_png(groups: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """Rank–frequency (log–log) per group with the fitted discrete power law above x_min."""
    import numpy as np
    from scipy.special import zeta

    groups = list(groups)[:_MAX_PANELS]
    cols = min(4, len(groups))
    rows = math.ceil(len(groups) / cols)
    fig = _figure(3.0 * cols + 0.6, 2.7 * rows + 0.4)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat[len(groups) :]:
        ax.set_visible(False)
    for ax, (name, g) in zip(axes.flat, groups, strict=False):
        counts = np.array(list(g["counts"].values()), dtype=float)
        pl = g["power_law"]
        if len(counts):
            ax.loglog(np.arange(1, len(counts) + 1), counts, "o", ms=3, color="#4c72b0", label="countries")
        title = _mpl_label(name)
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
    return _uri(fig)


def _scatter_png(
    counts: Mapping[str, int], values: Mapping[str, float], corr: Mapping[str, Any], label: str
) -> str:
    """Reference value (log x) vs rows + 1 (log y), the most frequent countries labelled."""
    import numpy as np

    codes = sorted(values)
    x = np.array([values[c] for c in codes], dtype=float)
    y = np.array([counts.get(c, 0) for c in codes], dtype=float)
    keep = x > 0
    fig = _figure(6.4, 4.4)
    ax = fig.add_subplot()
    ax.scatter(x[keep], y[keep] + 1, s=12, alpha=0.7, color="#4c72b0", edgecolors="none")
    ax.set_xscale("log")
    ax.set_yscale("log")
    top = sorted((c for c in codes if counts.get(c, 0) > 0 and values[c] > 0), key=lambda c: -counts[c])[:10]
    for c in top:
        ax.annotate(c, (values[c], counts[c] + 1), fontsize=7, xytext=(3, 2), textcoords="offset points")
    title = f"Rows per country vs {label}"
    if corr.get("status") == "ok":
        title += (
            f" — Pearson r={corr['pearson']['r']:.2f} (p {_p(corr['pearson']['p'])}),"
            f" Spearman ρ={corr['spearman']['rho']:.2f}, n={corr['n']}"
        )
    ax.set_title(textwrap.fill(title, 72), fontsize=9)
    ax.set_xlabel(label + " (log)")
    ax.set_ylabel("rows + 1 (log)")
    ax.grid(alpha=0.3, which="both", lw=0.4)
    return _uri(fig)


def _diversity_png(div: Mapping[str, Any]) -> str | None:
    """Frequency (log x) vs diversity per country, one colour per group, one panel per modality."""
    mods = [(m, div[m]) for m in ("text", "image") if div.get(m)]
    if not any(g["countries"] for _, d in mods for g in d["groups"].values()):
        return None
    fig = _figure(5.2 * len(mods) + 1.6, 4.0)
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
                lab = _mpl_label(name) + (f" (ρ={rho:.2f})" if rho is not None else "")
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
    return _uri(fig)


# --------------------------------------------------------------------------- context


def _under_text(rep: Mapping[str, Any]) -> str:
    """The most under-represented countries that have rows, then how many have none."""
    counts = {c["iso3"]: c["count"] for c in rep.get("countries") or []}
    with_rows = [c for c in rep["under"] if counts.get(c, 0) > 0]
    without = len(rep["under"]) - len(with_rows)
    text = ", ".join(_name(c) for c in with_rows[:_LIST_N])
    if len(with_rows) > _LIST_N:
        text += f" (+{len(with_rows) - _LIST_N} more)"
    if without:
        text += ("; " if text else "") + f"{without} countries without rows"
    return text or "–"


def _context(doc: Mapping[str, Any]) -> dict[str, Any]:
    entities = list(doc["entities"].items())
    groups = [*entities, ("Overall", doc["overall"])]
    settings = doc["settings"]
    overall = doc["overall"]
    inp = doc["input"]

    share_rows = []
    for name, g in groups:
        s = g["shares"]
        share_rows.append(
            {
                "name": name,
                "overall": g is overall,
                "n_rows": g["n_rows"],
                "cells": [_pct(s["underspecified"]), _pct(s["top"]), _pct(s["remaining"])],
                "n_countries": g["n_countries"],
                "top": ", ".join(_name(c) for c in s["top_countries"][:5]),
            }
        )

    counts = overall["counts"]
    top_codes = list(counts)[:_TOP_N]
    top_png = None
    if top_codes:
        spec = max(1, overall["n_specified"])
        top_png = _bar_png(
            [_name(c) for c in top_codes],
            [("overall", [100.0 * counts[c] / spec for c in top_codes])],
            title=f"The {len(top_codes)} most frequent countries (all entities)",
            ylabel="% of country-specified rows",
        )

    present_conts = [
        c for c in _CONTINENT_ORDER if any((g["continents"]["shares"].get(c) or 0) > 0 for _, g in groups)
    ]
    continent_rows = [
        {
            "name": name,
            "overall": g is overall,
            "cells": [_pct(g["continents"]["shares"].get(c)) for c in present_conts],
        }
        for name, g in groups
    ]

    pl_rows = []
    alts: list[str] = []
    for name, g in groups:
        pl = g["power_law"]
        row: dict[str, Any] = {"name": name, "overall": g is overall, "status": pl["status"]}
        if pl["status"] == "ok":
            gof = pl.get("gof") or {}
            row["cells"] = [
                str(pl["n_countries"]),
                _num(pl["alpha"]),
                _num(pl["sigma"]),
                format_number(pl["xmin"]),
                str(pl["n_tail"]),
                _num(pl["ks_d"]),
                _p(gof.get("p")) if gof.get("status") == "ok" else "–",
                {True: "yes", False: "no"}.get(gof.get("plausible"), "–"),
            ]
            cmp_cells = []
            for alt, c in pl["comparisons"].items():
                if alt not in alts:
                    alts.append(alt)
                cmp_cells.append(
                    "–"
                    if c.get("R") is None
                    else f"{c['R']:+.2f} ({_p(c['p'])})"
                    + (" ✱" if c.get("favours") not in ("neither", None) else "")
                )
            row["cmp"] = cmp_cells
        else:
            row["reason"] = pl.get("reason", "")
        pl_rows.append(row)

    corr_rows = []
    for name, g in groups:
        cells = []
        for var in ("gdp", "population"):
            c = g["correlations"].get(var) or {}
            if c.get("status") == "ok":
                cells += [
                    f"{c['pearson']['r']:.2f} ({_p(c['pearson']['p'])})",
                    f"{c['spearman']['rho']:.2f} ({_p(c['spearman']['p'])})",
                    str(c["n"]),
                ]
            else:
                cells += ["–", "–", str(c.get("n", "–"))]
        corr_rows.append({"name": name, "overall": g is overall, "cells": cells})
    ref_vals = doc.get("reference_values") or {}
    scatter_pngs = []
    for var, label in (("gdp", "GDP (current US$)"), ("population", "population")):
        vals = ref_vals.get(var)
        corr = overall["correlations"].get(var) or {}
        if vals and corr.get("status") in ("ok", "insufficient_data"):
            scatter_pngs.append({"label": label, "png": _scatter_png(counts, vals, corr, label)})

    gr_rows = []
    for name, g in groups:
        rep = g["representation"]
        if rep.get("status") == "ok":
            gr_rows.append(
                {
                    "name": name,
                    "overall": g is overall,
                    "cells": [
                        str(rep["n_countries"]),
                        _pct(rep["under_share"]),
                        _pct(rep["over_share"]),
                        str(rep["n_rows_outside_reference"]),
                    ],
                    "over": ", ".join(_name(c) for c in rep["over"][:_LIST_N]) or "–",
                    "under": _under_text(rep),
                }
            )
        else:
            gr_rows.append(
                {"name": name, "overall": g is overall, "cells": None, "reason": rep.get("reason", "")}
            )
    rep_all = overall["representation"]
    gr_detail = [
        {
            "iso3": c["iso3"],
            "name": _name(c["iso3"]),
            "cells": [str(c["count"]), _num(c["p"], 4), _num(c["p_true"], 4), _num(c["gr"], 3), c["status"]],
        }
        for c in (rep_all.get("countries") or [])
        if c["count"] > 0 or c["status"] != "under"
    ]

    div = doc["diversity"]
    div_mods = [m for m in ("text", "image") if div.get(m)]
    div_names = list(dict.fromkeys(n for m in div_mods for n in div[m]["groups"]))
    div_rows = []
    for name in div_names:
        cells = []
        for m in div_mods:
            g = div[m]["groups"].get(name)
            if g and g["mean"] is not None:
                cells += [f"{g['mean']:.3f} ± {g['std']:.3f}", str(g["n_countries"])]
                rho = g["rho"]
                cells.append(f"{rho['r']:+.2f} (p {_p(rho['p'])})" if rho.get("status") == "ok" else "–")
            else:
                cells += ["–", str(g["n_countries"]) if g else "0", "–"]
        div_rows.append({"name": name, "cells": cells})
    div_summary = []
    for m in div_mods:
        s = div[m]["summary"]
        div_summary.append(
            {
                "mod": "captions" if m == "text" else "images",
                "encoder": div[m]["encoder"],
                "mean": _num(s["mean_diversity"]),
                "rho": _num(s["mean_rho"]),
                "n_encoded": div[m]["n_encoded"],
                "n_skipped": div[m]["n_skipped"],
            }
        )
    div_detail = []
    for m in div_mods:
        for name, g in div[m]["groups"].items():
            for c in g["countries"]:
                div_detail.append(
                    {
                        "mod": "captions" if m == "text" else "images",
                        "group": name,
                        "country": _name(c["iso3"]),
                        "cells": [str(c["frequency"]), str(c["n"]), _num(c["diversity"])],
                    }
                )

    ref = doc.get("reference") or {}
    gr_ref = doc.get("gr_reference") or {}
    setup = [
        ("Input", inp.get("path") or "(in-memory table)"),
        ("Rows analysed", f"{inp['n_rows']} of {inp['n_rows_input']}"),
        ("Excluded (entity_present = False)", str(inp["n_excluded_entity_absent"])),
        ("Entity column", inp.get("entity_column") or "none (one group)"),
        ("Entities", ", ".join(inp.get("entities") or []) or "–"),
        ("GDP source", ref.get("gdp_source") or "none (no GDP correlation)"),
        ("Population source", ref.get("population_source") or "–"),
        ("GR reference", gr_ref.get("description", "–")),
        ("GR threshold r", f"{settings['r']:g}"),
        ("Power-law bootstrap", f"{settings['bootstrap']} synthetic sets, seed {settings['seed']}"),
        ("Diversity rule", div.get("rule", "–")),
    ]
    return {
        "doc": doc,
        "setup": setup,
        "top_k": settings["top_k"],
        "share_rows": share_rows,
        "top_png": top_png,
        "continents": present_conts,
        "continent_names": {c: CONTINENTS[c] for c in present_conts},
        "continent_rows": continent_rows,
        "continents_png": _continents_png(groups),
        "pl_png": _rank_frequency_png([("Overall", overall), *entities]),
        "pl_rows": pl_rows,
        "alts": alts,
        "alt_names": _ALT_NAMES,
        "plausible_p": settings.get("plausible_p", 0.1),
        "compare_p": settings.get("compare_p", 0.1),
        "corr_rows": corr_rows,
        "scatter_pngs": scatter_pngs,
        "gr_rows": gr_rows,
        "gr_detail": gr_detail,
        "gr_r": f"{settings['r']:g}",
        "div_mods": ["captions" if m == "text" else "images" for m in div_mods],
        "div_rows": div_rows,
        "div_summary": div_summary,
        "div_detail": div_detail,
        "div_png": _diversity_png(div) if div_mods else None,
        "min_samples": div.get("min_samples"),
    }


_TEMPLATE = """\
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Geographic analysis{% if doc.input.path %}: {{ doc.input.path }}{% endif %}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 1.5rem auto;
       max-width: 1200px; padding: 0 1rem; box-sizing: border-box; color: #1a1a1a; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: .2rem; margin-top: 2rem; }
table { border-collapse: collapse; margin: .6rem 0; font-size: .88rem; display: block; max-width: 100%;
        overflow-x: auto; }
th, td { border: 1px solid #d0d0d0; padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.overall td { font-weight: 600; background: #fafafa; }
table.kv th { width: 16rem; }
.fig { overflow-x: auto; margin: .6rem 0; }
.fig img { display: block; max-width: 100%; height: auto; }
.note { color: #555; font-size: .88rem; }
.sub { color: #555; font-size: .95rem; margin-top: 0; }
details { margin: .5rem 0; }
summary { cursor: pointer; }
</style>
</head>
<body>
<h1>Geographic analysis</h1>
<p class="sub">{{ doc.input.n_rows }} rows{% if doc.input.entities %}, {{ doc.input.entities | length }}
entities{% endif %}, {{ doc.overall.n_countries }} countries named,
{{ "%.1f" | format(100 * doc.overall.shares.underspecified) }}% underspecified.</p>

<h2 id="setup">Setup</h2>
<table class="kv">
{% for k, v in setup %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>
{% endfor %}</table>

<h2 id="shares">Where the rows come from (Table 1)</h2>
<p class="note">Percent of all rows: captions naming no country (underspecified), naming one of the
{{ top_k }} most frequent countries of the group, or another country; the three add up to 100.</p>
<table>
<tr><th>Group</th><th>Rows</th><th>Underspecified %</th><th>Top {{ top_k }} %</th><th>Remaining %</th>
<th>Countries</th><th>Most frequent</th></tr>
{% for r in share_rows %}<tr{% if r.overall %} class="overall"{% endif %}><td>{{ r.name }}</td>
<td class="n">{{ r.n_rows }}</td>{% for c in r.cells %}<td class="n">{{ c }}</td>{% endfor %}
<td class="n">{{ r.n_countries }}</td><td>{{ r.top }}</td></tr>
{% endfor %}</table>
{% if top_png %}<div class="fig"><img alt="Most frequent countries" src="{{ top_png }}"></div>{% endif %}

<h2 id="continents">Continents (Table 11)</h2>
<p class="note">Percent of the country-specified rows per continent (GeoNames continents).</p>
<div class="fig"><img alt="Continent shares per group" src="{{ continents_png }}"></div>
<table>
<tr><th>Group</th>{% for c in continents %}<th title="{{ continent_names[c] }}">{{ c }}</th>{% endfor %}</tr>
{% for r in continent_rows %}<tr{% if r.overall %} class="overall"{% endif %}><td>{{ r.name }}</td>
{% for c in r.cells %}<td class="n">{{ c }}</td>{% endfor %}</tr>
{% endfor %}</table>

<h2 id="power-law">Power law</h2>
<p class="note">Discrete power law fitted to the rows per country (Clauset, Shalizi &amp; Newman 2009):
x_min minimises the KS distance D; σ is the standard error of α. The goodness-of-fit p is the share
of semi-parametric bootstrap sets whose refitted D is at least the data's; the power law is
plausible when p ≥ {{ plausible_p }}. R is the log-likelihood ratio against each alternative
(R &gt; 0 favours the power law; ✱ marks p &lt; {{ compare_p }}). The line in each panel is the fitted
law in rank–frequency form (rank = n_tail · P(X ≥ x)).</p>
<div class="fig"><img alt="Rank-frequency plots with fitted power laws" src="{{ pl_png }}"></div>
<table>
<tr>{% for h in ["Group", "Countries", "α", "σ", "x_min", "n_tail", "D", "GOF p", "Plausible"] %}
<th{% if alts %} rowspan="2"{% endif %}>{{ h }}</th>{% endfor %}
{% if alts %}<th colspan="{{ alts | length }}">R (p) against</th>{% endif %}</tr>
{% if alts %}<tr>{% for a in alts %}<th>{{ alt_names.get(a, a) }}</th>{% endfor %}</tr>{% endif %}
{% for r in pl_rows %}<tr{% if r.overall %} class="overall"{% endif %}><td>{{ r.name }}</td>
{% if r.status == "ok" %}{% for c in r.cells %}<td class="n">{{ c }}</td>{% endfor %}
{% for c in r.cmp %}<td class="n">{{ c }}</td>{% endfor %}
{% else %}<td colspan="{{ 8 + alts | length }}">{{ r.reason }}</td>{% endif %}</tr>
{% endfor %}</table>

<h2 id="correlations">Frequency vs GDP and population</h2>
<p class="note">Correlation of rows per country with the reference value over every country of the
reference that has one; countries absent from the data count as 0 rows; countries missing from the
reference are left out. Cells: coefficient (p-value).</p>
{% for s in scatter_pngs %}
<div class="fig"><img alt="Rows per country vs {{ s.label }}" src="{{ s.png }}"></div>
{% endfor %}
<table>
<tr><th rowspan="2">Group</th><th colspan="3">GDP</th><th colspan="3">Population</th></tr>
<tr><th>Pearson r</th><th>Spearman ρ</th><th>n</th><th>Pearson r</th><th>Spearman ρ</th><th>n</th></tr>
{% for r in corr_rows %}<tr{% if r.overall %} class="overall"{% endif %}><td>{{ r.name }}</td>
{% for c in r.cells %}<td class="n">{{ c }}</td>{% endfor %}</tr>
{% endfor %}</table>

<h2 id="representation">Geographic representativeness (Table 2)</h2>
<p class="note">GR(c) = p(c) / p_true(c) against {{ doc.gr_reference.description }}; a country is
over-represented if GR &gt; {{ gr_r }} and under-represented if GR &lt; 1/{{ gr_r }}. Percentages are of
the reference's countries; countries without rows are under-represented. Rows naming countries outside
the reference are left out of p.</p>
<table>
<tr><th>Group</th><th>Countries</th><th>Under %</th><th>Over %</th><th>Rows outside reference</th>
<th>Most over-represented</th><th>Most under-represented</th></tr>
{% for r in gr_rows %}<tr{% if r.overall %} class="overall"{% endif %}><td>{{ r.name }}</td>
{% if r.cells %}{% for c in r.cells %}<td class="n">{{ c }}</td>{% endfor %}
<td>{{ r.over }}</td><td>{{ r.under }}</td>
{% else %}<td colspan="6">{{ r.reason }}</td>{% endif %}</tr>
{% endfor %}</table>
{% if gr_detail %}<details><summary>Overall: every country with rows or not under-represented
({{ gr_detail | length }})</summary>
<table><tr><th>Country</th><th>ISO3</th><th>Rows</th><th>p</th><th>p_true</th><th>GR</th><th>Status</th></tr>
{% for c in gr_detail %}<tr><td>{{ c.name }}</td><td>{{ c.iso3 }}</td>
{% for v in c.cells %}<td class="n">{{ v }}</td>{% endfor %}</tr>
{% endfor %}</table></details>{% endif %}

<h2 id="diversity">Diversity (Tables 3, 15, 16)</h2>
{% if div_rows %}
<p class="note">div(S) = sqrt(mean ‖f(x) − f̄‖²) over L2-normalised features of the samples of one
entity and country, for countries with at least {{ min_samples }} samples; an entity's diversity is the
mean (± population std) over its countries; ρ is Pearson's correlation of country frequency with
diversity (ρ_fc for captions, ρ_fi for images). div lies in [0, 1].</p>
<table>
<tr><th rowspan="2">Group</th>{% for m in div_mods %}<th colspan="3">{{ m }}</th>{% endfor %}</tr>
<tr>{% for m in div_mods %}<th>div (mean ± std)</th><th>countries</th><th>ρ (p)</th>{% endfor %}</tr>
{% for r in div_rows %}<tr><td>{{ r.name }}</td>
{% for c in r.cells %}<td class="n">{{ c }}</td>{% endfor %}</tr>
{% endfor %}</table>
<table>
<tr><th>Features</th><th>Encoder</th><th>Mean diversity over groups</th><th>Mean ρ</th>
<th>Encoded</th><th>Skipped</th></tr>
{% for s in div_summary %}<tr><td>{{ s.mod }}</td><td>{{ s.encoder }}</td><td class="n">{{ s.mean }}</td>
<td class="n">{{ s.rho }}</td><td class="n">{{ s.n_encoded }}</td><td class="n">{{ s.n_skipped }}</td></tr>
{% endfor %}</table>
{% if div_png %}<div class="fig"><img alt="Frequency vs diversity" src="{{ div_png }}"></div>{% endif %}
{% if div_detail %}<details><summary>Every scored country ({{ div_detail | length }})</summary>
<table><tr><th>Features</th><th>Group</th><th>Country</th><th>Frequency</th><th>Encoded</th><th>div</th></tr>
{% for d in div_detail %}<tr><td>{{ d.mod }}</td><td>{{ d.group }}</td><td>{{ d.country }}</td>
{% for v in d.cells %}<td class="n">{{ v }}</td>{% endfor %}</tr>
{% endfor %}</table></details>{% endif %}
{% elif div_mods %}<p>No entity has a country with at least {{ min_samples }} samples.</p>
{% else %}<p>Diversity was not computed (no text encoder or image model).</p>{% endif %}

<p class="note">Generated by fairsets {{ doc.fairsets_version }} ({{ doc.schema }}).</p>
</body>
</html>
"""


def render_report(doc: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Render an analysis as one self-contained HTML file and write it atomically.

    Args:
        doc: the analysis (schema ``fairsets.geo.analysis/1``).
        path: the HTML file to write (parent folders are created).

    Returns:
        The path written.

    Raises:
        ValueError: :func:`check_analysis` finds problems.
    """
    problems = check_analysis(doc)
    if problems:
        raise ValueError("cannot report this analysis:\n- " + "\n- ".join(problems))
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    html = env.from_string(_TEMPLATE).render(**_context(doc))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(out, html)
