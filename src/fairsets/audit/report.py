"""Self-contained HTML report of a VLM retrieval audit (the ``audit.json`` of ``fairsets audit vlm``).

The report is one HTML file with inline CSS and every plot embedded as a base64 PNG
(``data:image/png;base64,...``): no script, no font, no stylesheet and no image is fetched from
anywhere, so the file can be archived, mailed or opened offline. Text from the audit (dataset,
group and prompt names, ...) is HTML-escaped by Jinja2's autoescaping. Plots are drawn with
matplotlib's Agg canvas (imported only when a report is rendered; pyplot and the global backend
are not touched), at 100 dpi; figures grow with the number of groups and rotate the group labels,
so 36 groups stay readable.

Layout, top to bottom:

1. Setup: dataset, variant, splits, model, pretrained weights, attribute, ``k``, image and group
   counts, prompt source, the debiasing transform (if any), and notes on the metrics (JSD with
   logarithms base 2 against the uniform distribution over all groups, in ``[0, 1]``; standard
   deviation of the per-group means with ``ddof=0``).
2. Summary of the primary prompts: JSD, std and mean similarity, original and debiased with the
   relative change.
3. One section per primary prompt: a bar chart of the top-``k`` distribution per group (original
   and debiased side by side, with the uniform count as a dashed line), a bar chart of the
   per-group mean similarity (std in the title) and a per-group table.
4. Prompt robustness: per prompt set, the mean and max pairwise JSD between the top-``k``
   distributions of its prompts, with every pair in a collapsible list.
5. Job-application simulation: bar chart and table of the per-group share of images closer to
   the positive than to the negative prompt.
6. Every prompt: JSD, std and mean similarity of each prompt of each set.

API:
    * ``AUDIT_SCHEMA`` — the schema id the audit JSON carries (``"fairsets.audit.vlm/1"``).
    * ``check_audit(audit) -> list[str]`` — structural problems of an audit dict (empty: OK).
    * ``render_report(audit, path) -> Path`` — write the report atomically.
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

__all__ = ["AUDIT_SCHEMA", "check_audit", "render_report"]

AUDIT_SCHEMA = "fairsets.audit.vlm/1"
EMBEDDINGS = ("original", "debiased")
_METRIC_KEYS = ("k", "topk", "jsd_uniform", "group_mean_similarity", "mean_similarity_std", "mean_similarity")
_COLOURS = {"original": "#4c72b0", "debiased": "#dd8452"}
_DPI = 100


# --------------------------------------------------------------------------- input checks and access


def check_audit(audit: Any) -> list[str]:
    """Return the structural problems of an audit dict (empty list: it can be reported).

    Checks the schema id, the presence and types of the keys the report and the card use, and that
    every result record has a prompt, an ``embeddings`` of ``original``/``debiased`` and metrics
    with the per-prompt keys of :func:`fairsets.audit.metrics.prompt_metrics`.
    """
    if not isinstance(audit, Mapping):
        return [f"the audit must be a JSON object, got {type(audit).__name__}"]
    problems: list[str] = []
    if audit.get("schema") != AUDIT_SCHEMA:
        problems.append(f"schema is {audit.get('schema')!r}, expected {AUDIT_SCHEMA!r}")
    for key in ("dataset", "model", "attribute"):
        if not isinstance(audit.get(key), str) or not audit.get(key):
            problems.append(f"{key!r} must be a non-empty string")
    groups = audit.get("groups")
    if not isinstance(groups, list) or not groups or not all(isinstance(g, str) for g in groups):
        problems.append("'groups' must be a non-empty list of strings")
    results = audit.get("results")
    if not isinstance(results, list) or not results:
        problems.append("'results' must be a non-empty list")
        return problems
    for i, r in enumerate(results):
        if not isinstance(r, Mapping):
            problems.append(f"results[{i}] is not an object")
            continue
        if not isinstance(r.get("prompt"), str):
            problems.append(f"results[{i}]: 'prompt' must be a string")
        if r.get("embeddings") not in EMBEDDINGS:
            problems.append(f"results[{i}]: 'embeddings' must be one of {list(EMBEDDINGS)}")
        m = r.get("metrics")
        if not isinstance(m, Mapping):
            problems.append(f"results[{i}]: 'metrics' must be an object")
            continue
        missing = [k for k in _METRIC_KEYS if k not in m]
        if missing:
            problems.append(f"results[{i}]: metrics lack {missing}")
    for key in ("debias", "job", "robustness"):
        if audit.get(key) is not None and not isinstance(audit.get(key), Mapping):
            problems.append(f"{key!r} must be an object or null")
    return problems


def _index(audit: Mapping[str, Any]) -> dict[tuple[Any, str, str], Mapping[str, Any]]:
    """``{(prompt_set, prompt, embeddings): metrics}``."""
    return {(r.get("prompt_set"), r["prompt"], r["embeddings"]): r["metrics"] for r in audit["results"]}


def _prompt_order(audit: Mapping[str, Any]) -> list[tuple[Any, str, bool]]:
    """Distinct ``(prompt_set, prompt, primary)`` in the order of the results."""
    seen: dict[tuple[Any, str], bool] = {}
    for r in audit["results"]:
        key = (r.get("prompt_set"), r["prompt"])
        seen[key] = bool(seen.get(key)) or bool(r.get("primary"))
    return [(s, p, prim) for (s, p), prim in seen.items()]


def format_change(before: Any, after: Any) -> str:
    """Relative change ``(after - before) / |before|`` as a signed percentage ("–" if either is missing)."""
    if not isinstance(before, (int, float)) or not isinstance(after, (int, float)):
        return "–"
    if before == 0:
        return "+0.0%" if after == 0 else "n/a"
    return f"{(after - before) / abs(before) * 100.0:+.1f}%"


def format_number(x: Any, digits: int = 4, text: Any = str) -> str:
    """A metric for a table: ``digits`` decimals, scientific when tiny; non-numbers through ``text``."""
    if x is None:
        return "–"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return text(x)
    if isinstance(x, int):
        return str(x)
    if x != 0 and abs(x) < 10 ** (-digits + 1):
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}f}"


_pct = format_change
_num = format_number


# --------------------------------------------------------------------------- plots


def _mpl_label(text: str) -> str:
    """Keep matplotlib from reading ``$...$`` in a label as mathtext."""
    return str(text).replace("$", r"\$")


def _bar_png(
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
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    n = len(groups)
    per_group = 0.18 + 0.12 * max(1, len(series))
    width = min(max(6.0, 1.6 + per_group * n), 30.0)
    longest = max((len(str(g)) for g in groups), default=1)
    height = 3.2 + min(longest, 40) * 0.055
    fig = Figure(figsize=(width, height), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    x = np.arange(n)
    bar_w = 0.8 / max(1, len(series))
    all_values: list[float] = []
    for i, (label, values) in enumerate(series):
        vals = [float(v) for v in values]
        all_values += [v for v in vals if math.isfinite(v)]
        offset = (i - (len(series) - 1) / 2) * bar_w
        ax.bar(x + offset, vals, bar_w, label=_mpl_label(label), color=_COLOURS.get(label))
    if reference is not None:
        ax.axhline(reference, color="#333333", linestyle="--", linewidth=1, label=_mpl_label(reference_label))
    ax.set_xticks(x)
    rotate = n > 6 or longest > 10
    ax.set_xticklabels(
        [_mpl_label(g) for g in groups],
        rotation=60 if rotate else 0,
        ha="right" if rotate else "center",
        rotation_mode="anchor",
        fontsize=8 if n > 20 else 9,
    )
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylabel(_mpl_label(ylabel))
    ax.set_title(textwrap.fill(_mpl_label(title), width=max(40, int(width * 11))), fontsize=10)
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
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


# --------------------------------------------------------------------------- context


def _context(audit: Mapping[str, Any]) -> dict[str, Any]:
    index = _index(audit)
    groups: list[str] = list(audit["groups"])
    sizes: Mapping[str, Any] = audit.get("group_sizes") or {}
    has_debiased = any(r["embeddings"] == "debiased" for r in audit["results"])
    series_names = [e for e in EMBEDDINGS if e == "original" or has_debiased]
    order = _prompt_order(audit)
    primaries = [(s, p) for s, p, prim in order if prim]

    def metrics(pset: Any, prompt: str, emb: str) -> Mapping[str, Any] | None:
        return index.get((pset, prompt, emb))

    def triple(pset: Any, prompt: str, key: str) -> dict[str, Any]:
        o, d = metrics(pset, prompt, "original"), metrics(pset, prompt, "debiased")
        before = o.get(key) if o else None
        after = d.get(key) if d else None
        return {"original": _num(before), "debiased": _num(after), "change": _pct(before, after)}

    summary_rows = []
    primary_sections = []
    for pset, prompt in primaries:
        summary_rows.append(
            {
                "set": pset if pset is not None else "",
                "prompt": prompt,
                "jsd": triple(pset, prompt, "jsd_uniform"),
                "std": triple(pset, prompt, "mean_similarity_std"),
                "mean": triple(pset, prompt, "mean_similarity"),
            }
        )
        ms = {e: metrics(pset, prompt, e) for e in series_names}
        ms = {e: m for e, m in ms.items() if m is not None}
        k_eff = next((int(m["k"]) for m in ms.values()), None)
        topk_series = [(e, [m["topk"].get(g, 0) for g in groups]) for e, m in ms.items()]
        mean_series = [
            (e, [m["group_mean_similarity"].get(g, float("nan")) for g in groups]) for e, m in ms.items()
        ]
        std_text = ", ".join(f"{e} {_num(m['mean_similarity_std'])}" for e, m in ms.items())
        jsd_text = ", ".join(f"{e} {_num(m['jsd_uniform'])}" for e, m in ms.items())
        topk_png = _bar_png(
            groups,
            topk_series,
            title=f"Top-{k_eff} per {audit['attribute']} — “{prompt}” (JSD vs uniform: {jsd_text})",
            ylabel=f"images in top-{k_eff}",
            reference=(k_eff / len(groups)) if k_eff else None,
            reference_label="uniform",
            integer=True,
        )
        mean_png = _bar_png(
            groups,
            mean_series,
            title=f"Mean cosine similarity per {audit['attribute']} — “{prompt}” (std: {std_text})",
            ylabel="mean cosine similarity",
            zoom=True,
        )
        rows = []
        for g in groups:
            row: dict[str, Any] = {"group": g, "size": sizes.get(g, "–"), "cells": []}
            for m in ms.values():
                share = (m.get("topk_share") or {}).get(g)
                if share is None and m.get("k"):
                    share = m["topk"].get(g, 0) / m["k"]
                row["cells"] += [
                    str(m["topk"].get(g, 0)),
                    _num(share, 3),
                    _num(m["group_mean_similarity"].get(g)),
                ]
            rows.append(row)
        primary_sections.append(
            {
                "set": pset if pset is not None else "",
                "prompt": prompt,
                "k": k_eff,
                "topk_png": topk_png,
                "mean_png": mean_png,
                "series": list(ms),
                "rows": rows,
            }
        )

    robustness_rows = []
    for pset, by_emb in (audit.get("robustness") or {}).items():
        if not isinstance(by_emb, Mapping):
            continue
        row = {"set": pset, "n_prompts": "–", "cells": [], "pairs": []}
        for e in series_names:
            r = by_emb.get(e)
            if isinstance(r, Mapping):
                row["n_prompts"] = r.get("n_prompts", row["n_prompts"])
                row["cells"] += [_num(r.get("mean")), _num(r.get("max"))]
            else:
                row["cells"] += ["–", "–"]
        orig_pairs = (by_emb.get("original") or {}).get("pairs") or []
        deb_pairs = {(p["a"], p["b"]): p["jsd"] for p in (by_emb.get("debiased") or {}).get("pairs") or []}
        for p in orig_pairs:
            cells = [_num(p.get("jsd"))]
            if has_debiased:
                cells.append(_num(deb_pairs.get((p["a"], p["b"]))))
            row["pairs"].append({"a": p["a"], "b": p["b"], "cells": cells})
        robustness_rows.append(row)

    job = audit.get("job")
    job_ctx = None
    if isinstance(job, Mapping) and isinstance(job.get("original"), Mapping):
        job_series = [
            (e, [float(job[e].get(g, float("nan"))) for g in groups])
            for e in EMBEDDINGS
            if isinstance(job.get(e), Mapping)
        ]
        job_rows = []
        for g in groups:
            before = job["original"].get(g)
            after = job["debiased"].get(g) if isinstance(job.get("debiased"), Mapping) else None
            cells = [_num(before, 3)]
            if len(job_series) > 1:
                cells += [
                    _num(after, 3),
                    _num(None if after is None or before is None else after - before, 3),
                ]
            job_rows.append({"group": g, "size": sizes.get(g, "–"), "cells": cells})
        job_ctx = {
            "positive": job.get("positive", ""),
            "negative": job.get("negative", ""),
            "series": [e for e, _ in job_series],
            "rows": job_rows,
            "png": _bar_png(
                groups,
                job_series,
                title=f"Job simulation — share closer to “{job.get('positive', '')}” "
                f"than to “{job.get('negative', '')}”",
                ylabel="share judged positive",
                ylim=(0.0, 1.05),
            ),
        }

    prompt_rows = []
    for pset, prompt, prim in order:
        prompt_rows.append(
            {
                "set": pset if pset is not None else "",
                "prompt": prompt,
                "primary": prim,
                "jsd": triple(pset, prompt, "jsd_uniform"),
                "std": triple(pset, prompt, "mean_similarity_std"),
                "mean": triple(pset, prompt, "mean_similarity"),
            }
        )

    debias = audit.get("debias")
    debias_rows: list[tuple[str, str]] = []
    if isinstance(debias, Mapping):
        for key in ("transform", "method", "alpha", "beta", "fit_splits"):
            if key in debias:
                value = debias[key]
                debias_rows.append(
                    (key, ", ".join(map(str, value)) if isinstance(value, list) else str(value))
                )
        meta = debias.get("meta")
        if isinstance(meta, Mapping):
            # The fit's essentials; the full record stays in audit.json.
            for key, label in _DEBIAS_META:
                value = meta.get(key)
                if value is None or value == []:
                    continue
                if isinstance(value, float):
                    value = f"{value:.4g}"
                elif isinstance(value, list):
                    value = ", ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in value)
                debias_rows.append((label, str(value)))

    k_effective = sorted({int(r["metrics"]["k"]) for r in audit["results"]})
    k_text = str(audit.get("k", "?"))
    if k_effective and [str(k) for k in k_effective] != [k_text]:
        k_text += " (effective: " + ", ".join(map(str, k_effective)) + ")"
    splits = audit.get("splits")
    setup = [
        ("Dataset", audit.get("dataset", "")),
        ("Dataset path", audit.get("dataset_path", "–")),
        ("Variant", audit.get("variant", "–")),
        ("Split(s) evaluated", ", ".join(splits) if isinstance(splits, list) else str(splits or "–")),
        ("Model", audit.get("model", "")),
        ("Model id", audit.get("model_id", "–")),
        ("Pretrained", audit.get("pretrained") or "none"),
        ("Group attribute", audit.get("attribute", "")),
        ("Top-k", k_text),
        ("Images", str(audit.get("n_images", "–"))),
        ("Groups", f"{len(groups)}: " + ", ".join(groups)),
        ("Prompt source", audit.get("prompt_source", "–")),
        ("Created", audit.get("created", "–")),
        ("fairsets version", audit.get("fairsets_version", "–")),
    ]
    return {
        "a": audit,
        "setup": [(k, str(v)) for k, v in setup],
        "debias_rows": debias_rows,
        "has_debiased": has_debiased,
        "series": series_names,
        "summary_rows": summary_rows,
        "primary_sections": primary_sections,
        "robustness_rows": robustness_rows,
        "job": job_ctx,
        "prompt_rows": prompt_rows,
        "k_text": k_text,
        "jsd_base": audit.get("jsd_log_base", 2),
        "std_ddof": audit.get("std_ddof", 0),
    }


# --------------------------------------------------------------------------- template

_TEMPLATE = """\
{%- macro metric_head(has_debiased) -%}
<tr><th rowspan="2">Set</th><th rowspan="2">Prompt</th>
{%- for label in ["JSD vs uniform", "Std of group means", "Mean sim."] %}
<th colspan="{{ 3 if has_debiased else 1 }}">{{ label }}</th>
{%- endfor %}</tr>
<tr>{% for _ in range(3) %}<th>original</th>
{%- if has_debiased %}<th>debiased</th><th>change</th>{% endif %}{% endfor %}</tr>
{%- endmacro -%}
{%- macro metric_cells(r, has_debiased) -%}
{%- for m in [r.jsd, r.std, r.mean] %}<td class="n">{{ m.original }}</td>
{%- if has_debiased %}<td class="n">{{ m.debiased }}</td><td class="n">{{ m.change }}</td>{% endif %}
{%- endfor %}
{%- endmacro -%}
{%- macro cells(values) -%}
{%- for c in values %}<td class="n">{{ c }}</td>{% endfor %}
{%- endmacro -%}
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>VLM bias audit: {{ a.dataset }} / {{ a.model }}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 1.5rem auto;
       max-width: 1200px; padding: 0 1rem; color: #1a1a1a; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: .2rem; margin-top: 2rem; }
h3 { margin-top: 1.6rem; }
table { border-collapse: collapse; margin: .6rem 0; font-size: .88rem; }
th, td { border: 1px solid #d0d0d0; padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
table.kv th { width: 12rem; }
.fig { overflow-x: auto; margin: .6rem 0; }
.fig img { display: block; max-width: none; }
.note { color: #555; font-size: .88rem; }
details { margin: .5rem 0; }
summary { cursor: pointer; }
.sub { color: #555; font-size: .95rem; margin-top: 0; }
</style>
</head>
<body>
<h1>VLM bias audit: {{ a.dataset }}</h1>
<p class="sub">{{ a.model }} ({{ a.pretrained or 'none' if a.pretrained is defined else '–' }}),
group attribute <b>{{ a.attribute }}</b>, top-{{ k_text }},
{{ a.n_images if a.n_images is defined else '?' }} images in {{ a.groups | length }} groups
{%- if has_debiased %}, original and debiased embeddings{% endif %}.</p>

<h2 id="setup">Setup</h2>
<table class="kv">
{% for k, v in setup %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>
{% endfor %}
{% for k, v in debias_rows %}<tr><th>Debias {{ k }}</th><td>{{ v }}</td></tr>
{% else %}<tr><th>Debias</th><td>none</td></tr>
{% endfor %}
</table>
<p class="note">Top-k: the images are ranked by cosine similarity to the prompt and the groups of the
k best are counted (ties go to the earlier image). JSD is the Jensen–Shannon divergence (not distance)
between the top-k group distribution and the uniform distribution over all {{ a.groups | length }}
groups, with logarithms base {{ jsd_base }}, so it lies in [0, 1]; 0 means perfectly uniform. Std is
the standard deviation (ddof={{ std_ddof }}, population) across groups of each group's mean cosine
similarity to the prompt; lower is fairer. Mean sim. is the mean cosine similarity over all images.
Change is (debiased − original) / original.</p>

<h2 id="summary">Summary of the primary prompts</h2>
{% if summary_rows %}
<table>
{{ metric_head(has_debiased) }}
{% for r in summary_rows %}<tr><td>{{ r.set }}</td><td>{{ r.prompt }}</td>
{{- metric_cells(r, has_debiased) }}</tr>
{% endfor %}
</table>
{% else %}<p>No primary prompt in the audit.</p>{% endif %}

{% for s in primary_sections %}
<h2 id="prompt-{{ loop.index }}">“{{ s.prompt }}”
{%- if s.set %} <span class="note">({{ s.set }})</span>{% endif %}</h2>
<h3>Top-{{ s.k }} distribution per {{ a.attribute }}</h3>
<div class="fig"><img alt="Top-{{ s.k }} distribution per {{ a.attribute }} for {{ s.prompt }}"
 src="{{ s.topk_png }}"></div>
<h3>Mean similarity per {{ a.attribute }}</h3>
<div class="fig"><img alt="Mean similarity per {{ a.attribute }} for {{ s.prompt }}"
 src="{{ s.mean_png }}"></div>
<p class="note">The y axis is zoomed to the range of the values; it need not start at 0.</p>
<details><summary>Per-{{ a.attribute }} values</summary>
<table>
<tr><th rowspan="2">{{ a.attribute }}</th><th rowspan="2">Images</th>
{%- for e in s.series %}<th colspan="3">{{ e }}</th>{% endfor %}</tr>
<tr>{% for e in s.series %}<th>top-{{ s.k }}</th><th>share</th><th>mean sim.</th>{% endfor %}</tr>
{% for r in s.rows %}<tr><td>{{ r.group }}</td><td class="n">{{ r.size }}</td>{{ cells(r.cells) }}</tr>
{% endfor %}
</table>
</details>
{% endfor %}

<h2 id="robustness">Prompt robustness</h2>
{% if robustness_rows %}
<p class="note">Pairwise JSD (base {{ jsd_base }}) between the top-k distributions of the prompts of
each set; small values mean the synonymous prompts retrieve the same mix of groups.</p>
<table>
<tr><th rowspan="2">Set</th><th rowspan="2">Prompts</th>
{%- for e in series %}<th colspan="2">{{ e }}</th>{% endfor %}</tr>
<tr>{% for e in series %}<th>mean JSD</th><th>max JSD</th>{% endfor %}</tr>
{% for r in robustness_rows %}<tr><td>{{ r.set }}</td><td class="n">{{ r.n_prompts }}</td>
{{- cells(r.cells) }}</tr>
{% endfor %}
</table>
{% for r in robustness_rows if r.pairs %}
<details><summary>{{ r.set }}: {{ r.pairs | length }} prompt pairs</summary>
<table><tr><th>Prompt A</th><th>Prompt B</th>{% for e in series %}<th>JSD {{ e }}</th>{% endfor %}</tr>
{% for p in r.pairs %}<tr><td>{{ p.a }}</td><td>{{ p.b }}</td>{{ cells(p.cells) }}</tr>
{% endfor %}</table>
</details>
{% endfor %}
{% else %}<p>No prompt-robustness results in the audit.</p>{% endif %}

<h2 id="job">Job-application simulation</h2>
{% if job %}
<p class="note">Per {{ a.attribute }}: the share of images whose cosine similarity to
“{{ job.positive }}” is strictly higher than to “{{ job.negative }}”.</p>
<div class="fig"><img alt="Job simulation per {{ a.attribute }}" src="{{ job.png }}"></div>
<table>
<tr><th>{{ a.attribute }}</th><th>Images</th>{% for e in job.series %}<th>{{ e }}</th>{% endfor %}
{%- if job.series | length > 1 %}<th>difference</th>{% endif %}</tr>
{% for r in job.rows %}<tr><td>{{ r.group }}</td><td class="n">{{ r.size }}</td>{{ cells(r.cells) }}</tr>
{% endfor %}
</table>
{% else %}<p>The job simulation was not run.</p>{% endif %}

<h2 id="prompts">Every prompt</h2>
<table>
{{ metric_head(has_debiased) }}
{% for r in prompt_rows %}<tr><td>{{ r.set }}</td>
{%- if r.primary %}<td><b>{{ r.prompt }}</b> (primary)</td>{% else %}<td>{{ r.prompt }}</td>{% endif %}
{{- metric_cells(r, has_debiased) }}</tr>
{% endfor %}
</table>

<p class="note">Generated by fairsets {{ a.fairsets_version if a.fairsets_version is defined else '' }}
({{ a.schema }}){% if a.created is defined %} on {{ a.created }}{% endif %}.</p>
</body>
</html>
"""


_DEBIAS_META: tuple[tuple[str, str], ...] = (
    ("model_id", "fitted on model"),
    ("dataset", "fitted on dataset"),
    ("variant", "fitted on variant"),
    ("attribute", "erased attribute"),
    ("n", "fit embeddings"),
    ("target_prompt", "compensation target"),
    ("iterations", "INLP iterations"),
    ("accuracies", "INLP held-out accuracies"),
    ("final_accuracy", "probe accuracy after"),
    ("chance", "chance accuracy"),
    ("removed_rank", "directions removed"),
    ("erased_rank", "LEACE erased rank"),
)


def render_report(audit: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Render the audit as one self-contained HTML file and write it atomically.

    Args:
        audit: the audit JSON (schema ``fairsets.audit.vlm/1``, see :func:`check_audit`).
        path: the HTML file to write (parent directories are created).

    Returns:
        The path written.

    Raises:
        ValueError: if :func:`check_audit` finds problems.
    """
    problems = check_audit(audit)
    if problems:
        raise ValueError("cannot report this audit:\n- " + "\n- ".join(problems))
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    html = env.from_string(_TEMPLATE).render(**_context(audit))
    return atomic_write_text(path, html)
