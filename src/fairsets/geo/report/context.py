"""The values the geographic report's template shows, computed from an analysis (plots included)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...audit.report.formatting import format_number
from ...audit.report.plots import bar_png
from ..analyze.power_law import PAPER_P
from ..countries import CONTINENTS
from .formatting import country_name, num, p_value, pct
from .plots import CONTINENT_ORDER, continents_png, diversity_png, rank_frequency_png, scatter_png

__all__ = ["build_context", "gof_readings"]


_ALT_NAMES = {"truncated_power_law": "truncated power law", "stretched_exponential": "stretched exp."}
_TOP_N = 20  # countries in the bar chart
_LIST_N = 8  # over/under-represented countries named per group


def _under_text(rep: Mapping[str, Any]) -> str:
    """The most under-represented countries that have rows, then how many have none."""
    counts = {c["iso3"]: c["count"] for c in rep.get("countries") or []}
    with_rows = [c for c in rep["under"] if counts.get(c, 0) > 0]
    without = len(rep["under"]) - len(with_rows)
    text = ", ".join(country_name(c) for c in with_rows[:_LIST_N])
    if len(with_rows) > _LIST_N:
        text += f" (+{len(with_rows) - _LIST_N} more)"
    if without:
        text += ("; " if text else "") + f"{without} countries without rows"
    return text or "–"


def gof_readings(gof: Mapping[str, Any], plausible_p: float = 0.1) -> tuple[bool | None, bool | None]:
    """Both readings of a power-law GOF p-value: the paper's "follows" (``p < 0.05``) and Clauset,
    Shalizi & Newman's "plausible" (``p >= plausible_p``); the record's own fields when it has them
    (``paper_follows_power_law``, ``csn_plausible``, or the older ``plausible``), else from ``p``;
    ``None`` without a p-value."""
    p = gof.get("p") if gof.get("status", "ok") == "ok" else None
    has_p = isinstance(p, (int, float)) and not isinstance(p, bool)
    follows = gof.get("paper_follows_power_law", (p < PAPER_P) if has_p else None)
    plausible = gof.get("csn_plausible", gof.get("plausible", (p >= plausible_p) if has_p else None))
    return follows, plausible


def build_context(doc: Mapping[str, Any]) -> dict[str, Any]:
    entities = list(doc["entities"].items())
    groups = [*entities, ("Overall", doc["overall"])]
    settings = doc["settings"]
    overall = doc["overall"]
    inp = doc["input"]
    plausible_p = settings.get("plausible_p", 0.1)

    share_rows = []
    for name, g in groups:
        s = g["shares"]
        share_rows.append(
            {
                "name": name,
                "overall": g is overall,
                "n_rows": g["n_rows"],
                "cells": [pct(s["underspecified"]), pct(s["top"]), pct(s["remaining"])],
                "n_countries": g["n_countries"],
                "top": ", ".join(country_name(c) for c in s["top_countries"][:5]),
            }
        )

    counts = overall["counts"]
    top_codes = list(counts)[:_TOP_N]
    top_png = None
    if top_codes:
        spec = max(1, overall["n_specified"])
        top_png = bar_png(
            [country_name(c) for c in top_codes],
            [("overall", [100.0 * counts[c] / spec for c in top_codes])],
            title=f"The {len(top_codes)} most frequent countries (all entities)",
            ylabel="% of country-specified rows",
        )

    present_conts = [
        c for c in CONTINENT_ORDER if any((g["continents"]["shares"].get(c) or 0) > 0 for _, g in groups)
    ]
    continent_rows = [
        {
            "name": name,
            "overall": g is overall,
            "cells": [pct(g["continents"]["shares"].get(c)) for c in present_conts],
        }
        for name, g in groups
    ]

    pl_rows = []
    for name, g in groups:
        pl = g["power_law"]
        row: dict[str, Any] = {"name": name, "overall": g is overall, "status": pl["status"]}
        if pl["status"] == "ok":
            gof = pl.get("gof") or {}
            p = gof.get("p") if gof.get("status", "ok") == "ok" else None
            follows, plausible = gof_readings(gof, plausible_p)
            row["cells"] = [
                str(pl["n_countries"]),
                f"{num(pl['alpha'])} ± {num(pl['sigma'])}",
                f"{format_number(pl['xmin'])} ({pl['n_tail']})",
                num(pl["ks_d"]),
                p_value(p),
                {True: "yes", False: "no"}.get(follows, "–"),
                {True: "yes", False: "no"}.get(plausible, "–"),
            ]
            row["cmp"] = [
                f"{_ALT_NAMES.get(alt, alt)} {c['R']:+.2f} ({p_value(c['p'])})"
                + (" ✱" if c.get("favours") not in ("neither", None) else "")
                for alt, c in pl["comparisons"].items()
                if c.get("R") is not None
            ]
        else:
            row["reason"] = pl.get("reason", "")
        pl_rows.append(row)
    overall_pl = overall["power_law"]
    pl_estimator = overall_pl.get("estimator") if overall_pl.get("status") == "ok" else None
    if isinstance(pl_estimator, Mapping):
        pl_estimator = "; ".join(f"{k}: {v}" for k, v in pl_estimator.items())

    corr_rows = []
    sets = {"present": "countries with rows", "reference": "every reference country"}
    head_over = settings.get("correlate_over", "reference")  # older analyses: zeros included
    other_over = "reference" if head_over == "present" else "present"
    for name, g in groups:
        cells = []
        for var in ("gdp", "population"):
            c = g["correlations"].get(var) or {}
            alt = c.get("alternative") or {}
            if c.get("status") == "ok":
                cells += [
                    f"{c['pearson']['r']:.2f} ({p_value(c['pearson']['p'])})",
                    f"{c['spearman']['rho']:.2f} ({p_value(c['spearman']['p'])})",
                    str(c["n"]),
                ]
            else:
                cells += ["–", "–", str(c.get("n", "–"))]
            cells.append(
                f"{alt['spearman']['rho']:.2f} ({p_value(alt['spearman']['p'])}), n={alt['n']}"
                if alt.get("status") == "ok"
                else "–"
            )
        corr_rows.append({"name": name, "overall": g is overall, "cells": cells})
    ref_vals = doc.get("reference_values") or {}
    scatter_pngs = []
    for var, label in (("gdp", "GDP (current US$)"), ("population", "population")):
        vals = ref_vals.get(var)
        corr = dict(overall["correlations"].get(var) or {})
        corr.setdefault("over", head_over)
        if vals and corr.get("status") in ("ok", "insufficient_data"):
            scatter_pngs.append({"label": label, "png": scatter_png(counts, vals, corr, label)})

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
                        pct(rep["under_share"]),
                        pct(rep["over_share"]),
                        str(rep["n_rows_outside_reference"]),
                    ],
                    "over": ", ".join(country_name(c) for c in rep["over"][:_LIST_N]) or "–",
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
            "name": country_name(c["iso3"]),
            "cells": [str(c["count"]), num(c["p"], 4), num(c["p_true"], 4), num(c["gr"], 3), c["status"]],
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
                cells.append(f"{rho['r']:+.2f} (p {p_value(rho['p'])})" if rho.get("status") == "ok" else "–")
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
                "mean": num(s["mean_diversity"]),
                "rho": num(s["mean_rho"]),
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
                        "country": country_name(c["iso3"]),
                        "cells": [str(c["frequency"]), str(c["n"]), num(c["diversity"])],
                    }
                )

    definitions = [(k.replace("_", " ").capitalize(), v) for k, v in (doc.get("definitions") or {}).items()]
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
        ("Correlations over", sets.get(head_over, head_over)),
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
        "continents_png": continents_png(groups),
        "pl_png": rank_frequency_png([("Overall", overall), *entities]),
        "pl_rows": pl_rows,
        "pl_estimator": pl_estimator,
        "plausible_p": plausible_p,
        "compare_p": settings.get("compare_p", 0.1),
        "corr_rows": corr_rows,
        "corr_over": sets.get(head_over, head_over),
        "corr_other": sets.get(other_over, other_over),
        "definitions": definitions,
        "gr_entity_specific": gr_ref.get("entity_specific") or [],
        "scatter_pngs": scatter_pngs,
        "gr_rows": gr_rows,
        "gr_detail": gr_detail,
        "gr_r": f"{settings['r']:g}",
        "div_mods": ["captions" if m == "text" else "images" for m in div_mods],
        "div_rows": div_rows,
        "div_summary": div_summary,
        "div_detail": div_detail,
        "div_png": diversity_png(div) if div_mods else None,
        "min_samples": div.get("min_samples"),
        "div_rule": div.get("rule", f"n >= {div.get('min_samples')}"),
    }
