"""The CLI summary of ``fairsets audit transfer``: counts, then the per-group table (the study's
ρ / R² table: gender, then each race group against the other races) with the Chebyshev gain of the
highest degree fitted, in-sample and cross-validated. Plain text: group names are data, and are
never read as markup."""

from __future__ import annotations

import math
from typing import Any

from .report import group_rows

__all__ = ["summary_lines"]


def _f(v: Any, sign: bool = False) -> str:
    if v is None or not math.isfinite(float(v)):
        return "–"
    return f"{float(v):+.3f}" if sign else f"{float(v):.3f}"


def summary_lines(doc: dict[str, Any]) -> list[str]:
    """The lines ``fairsets audit transfer`` prints for ``doc`` (a ``transfer.json`` document)."""
    data, model, s = doc["data_bias"], doc["model_bias"], doc["settings"]
    lines = [
        f"{len(data['categories'])} categories kept, {len(data['dropped'])} dropped "
        f"(< {data['min_count']} single-gender images); {data['n_single_gender']} single-gender images "
        f"with an alt-text; probe {model['n_female_probes']} female / {model['n_male_probes']} male; "
        f"exclusions: {s['exclusions']}"
    ]
    race = doc.get("race")
    if race:
        rd = race["data_bias"]
        lines.append(
            f"race: {len(rd['categories'])} categories kept of {rd['n_single_race']} single-race images "
            f"with an alt-text; groups: {', '.join(rd['groups']) or 'none'}, from {rd['groups_source']}"
        )
    head = ("group", "against", "x → y", "n", "ρ", "R²", "Chebyshev gain: in-sample / cross-validated")
    table = []
    warnings = []
    for r in group_rows(doc):
        rel = r["rel"]
        if rel is None:
            table.append((r["group"], r["against"], r["name"], "–", "–", "–", f"not computed: {r['reason']}"))
            continue
        top = max(r["ins"], default=None)
        gain = (
            f"degree {top}: {_f(r['ins'][top], True)} / {_f(r['cv'].get(top), True)} "
            f"({rel['chebyshev']['cv']['scheme']})"
            if top is not None
            else "–"
        )
        row = (r["group"], r["against"], r["name"], str(rel["n"]), _f(rel["pearson_r"]), _f(rel["r2"]), gain)
        table.append(row)
        if rel["chebyshev"]["warning"]:
            warnings.append(f"warning ({r['group']}, {r['name']}): {rel['chebyshev']['warning']}")
    widths = [max(len(str(row[i])) for row in [head, *table]) for i in range(len(head) - 1)]
    for row in [head, *table]:
        lines.append("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=False)) + "  " + row[-1])
    return lines + warnings
