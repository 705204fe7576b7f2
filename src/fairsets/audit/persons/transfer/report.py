"""The report of the bias-transfer audit: one self-contained HTML page (inline CSS, the plots as
base64 PNGs, no script, no external resource) with every table of ``transfer.json`` and its
``definitions`` block, and the per-group table (the study's ρ / R² table) as rows for the CLI."""

from __future__ import annotations

import base64
import math
from typing import Any

__all__ = ["group_rows", "render_transfer_report"]

_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Bias transfer audit: {{ doc.annotations }}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 70em;
       color: #222; line-height: 1.45; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f3f3f3; } td.l, th.l { text-align: left; }
.neg { color: #1f5fa8; } .pos { color: #b03a2e; } .muted { color: #777; } .warn { color: #8a5a00; }
img.plot { max-width: 100%; border: 1px solid #eee; }
dl dt { font-weight: 600; } dl dd { margin: 0 0 0.5em 1.5em; }
</style></head><body>
<h1>Data → model bias transfer: {{ doc.annotations }}</h1>
<p>fairsets {{ doc.fairsets_version }} · schema {{ doc.schema }}</p>

<h2>Settings</h2>
<table>
{% for k, v in settings %}<tr><th class="l">{{ k }}</th><td class="l">{{ v }}</td></tr>
{% endfor %}</table>

<h2>Relations by group</h2>
<table>
<tr><th class="l">group</th><th class="l">against</th><th class="l">x → y</th><th>categories</th>
<th>Pearson ρ</th><th>p-value</th><th>R² (line)</th><th>slope</th><th>intercept</th></tr>
{% for r in groups %}<tr><td class="l">{{ r.group }}</td><td class="l">{{ r.against }}</td>
<td class="l">{{ r.name }}</td>
{% if r.rel %}<td>{{ r.rel.n }}</td><td>{{ f(r.rel.pearson_r) }}</td><td>{{ p(r.rel.p_value) }}</td>
<td>{{ f(r.rel.r2) }}</td><td>{{ f(r.rel.slope) }}</td><td>{{ f(r.rel.intercept) }}</td>
{% else %}<td class="l muted" colspan="6">not computed: {{ r.reason }}</td>{% endif %}
</tr>{% endfor %}
</table>
<p class="muted">R²: the share of the y variance across categories a straight line in x predicts (the
squared Pearson ρ).</p>

<h2>Chebyshev gains: in-sample and cross-validated</h2>
<table>
<tr><th class="l">group</th><th class="l">x → y</th><th class="l">fit</th><th>R² (line)</th>
{% for d in degrees %}<th>R² gain, degree {{ d }}</th>{% endfor %}</tr>
{% for r in groups if r.rel %}
<tr><td class="l">{{ r.group }}</td><td class="l">{{ r.name }}</td><td class="l">in-sample</td>
<td>{{ f(r.rel.r2) }}</td>{% for d in degrees %}<td>{{ f(r.ins.get(d)) }}</td>{% endfor %}</tr>
<tr><td class="l">{{ r.group }}</td><td class="l">{{ r.name }}</td>
<td class="l">cross-validated ({{ r.rel.chebyshev.cv.scheme }})</td>
<td>{{ f(r.rel.chebyshev.cv.r2_line) }}</td>
{% for d in degrees %}<td>{{ f(r.cv.get(d)) }}</td>{% endfor %}</tr>
{% endfor %}</table>
{% for r in groups if r.rel and r.rel.chebyshev.warning %}<p class="warn">{{ r.group }}, {{ r.name }}:
{{ r.rel.chebyshev.warning }}</p>{% endfor %}
<p class="muted">An in-sample gain never falls below zero and grows with the degree whatever the data;
the cross-validated gain predicts each category from a fit that did not see it, so a gain that is only
fitted noise comes out near zero or below. The study reports gains of 1–3 points.</p>

<h2>Data bias against CLIP model bias</h2>
<img class="plot" alt="scatter plot of data bias against CLIP model bias" src="{{ plots.data_clip }}">
{% if plots.data_generated %}
<h2>Data bias against generated images</h2>
<img class="plot" alt="scatter plot of data bias against the generated share female"
 src="{{ plots.data_generated }}">{% endif %}

<h2>Categories ({{ rows|length }} kept)</h2>
<p>Single-gender images with a non-blank alt-text: {{ data.n_single_gender }} ({{ data.n_female }}
female, {{ data.n_male }} male). Kept: named in at least {{ data.min_count }} of them.</p>
<table>
<tr><th class="l">category</th><th>female</th><th>male</th><th>n</th><th>data bias</th><th>share female</th>
<th class="l">prompt</th><th>CLIP d(c)</th>
{% if gen %}<th>generated n</th><th>generated share female</th>{% endif %}
<th class="l">most matched phrases (texts)</th></tr>
{% for r in rows %}<tr><td class="l">{{ r.category }}</td><td>{{ r.female }}</td><td>{{ r.male }}</td>
<td>{{ r.n }}</td><td class="{{ sign(r.bias) }}">{{ f(r.bias) }}</td><td>{{ f(r.share_female) }}</td>
<td class="l">{{ r.prompt }}</td><td class="{{ sign(r.d) }}">{{ f(r.d) }}</td>
{% if gen %}<td>{{ r.gen_n if r.gen_n is not none else "–" }}</td>
<td>{{ f(r.gen_share) }}</td>{% endif %}
<td class="l">{% for m in r.get("matched_phrases", []) %}{{ m.phrase }} ({{ m.count }}){% if not loop.last %};
{% endif %}{% endfor %}</td></tr>
{% endfor %}</table>

<h2>Categories dropped by the count rule ({{ data.dropped|length }})</h2>
{% set seen = data.dropped|selectattr("n")|list %}
{% if data.dropped %}<p>{{ data.dropped|length - seen|length }} of them are named in no single-gender
image (listed in transfer.json); those named at least once:</p>
{% if seen %}<table>
<tr><th class="l">category</th><th>female</th><th>male</th><th>n</th></tr>
{% for r in seen %}<tr><td class="l">{{ r.category }}</td><td>{{ r.female }}</td><td>{{ r.male }}</td>
<td>{{ r.n }}</td></tr>
{% endfor %}</table>{% else %}<p>None.</p>{% endif %}{% else %}<p>None.</p>{% endif %}

<h2>Probe images</h2>
<table>
<tr><th class="l">gender</th><th>available</th><th>sampled</th><th>embedded</th></tr>
{% for g in ["female", "male"] %}<tr><td class="l">{{ g }}</td><td>{{ probe.available[g] }}</td>
<td>{{ probe.sampled[g] }}</td><td>{{ probe.used[g] }}</td></tr>
{% endfor %}</table>
<p>Source: {{ probe.kind }} {{ probe.name }}; {{ probe.computed }} image(s) embedded in this run, the rest
from the {{ probe.cache }} cache.</p>
{% if probe.rejected %}<table><tr><th class="l">left out</th><th class="l">reason</th></tr>
{% for r in probe.rejected[:50] %}<tr><td class="l">{{ r.item }}</td><td class="l">{{ r.reason }}</td></tr>
{% endfor %}</table>{% if probe.rejected|length > 50 %}<p>… {{ probe.rejected|length - 50 }} more in
transfer.json.</p>{% endif %}{% endif %}

{% if gen %}<h2>Generated images</h2>
<table>
<tr><th class="l">folder</th><th class="l">category</th><th>images</th><th>female</th><th>male</th>
<th>other</th>
<th>share female</th><th>bias</th></tr>
{% for r in gen.prompts %}<tr><td class="l">{{ r.prompt }}</td><td class="l">{{ r.category }}</td>
<td>{{ r.n }}</td>
<td>{{ r.female }}</td><td>{{ r.male }}</td><td>{{ r.other }}</td><td>{{ f(r.share_female) }}</td>
<td>{{ f(r.bias) }}</td></tr>
{% endfor %}</table>
{% if gen.gender_head %}<p>Classified with the gender head {{ gen.gender_head.sha256[:12] }}… (encoder
{{ gen.gender_head.encoder }}).</p>{% endif %}
{% if gen.rejected %}<p>{{ gen.rejected|length }} unreadable file(s), counted nowhere:
{% for r in gen.rejected[:20] %}{{ r.path }} ({{ r.reason }}){% if not loop.last %}, {% endif %}
{% endfor %}</p>
{% endif %}{% endif %}

<h2>Race</h2>
{% if race and race.data_bias %}{% set rd = race.data_bias %}
<p>Single-race images with a non-blank alt-text: {{ rd.n_single_race }}
({% for g in rd.groups %}{{ g }} {{ rd.n_by_race[g] }}{% if not loop.last %}, {% endif %}{% endfor %}).
Race groups: {{ rd.groups_source }}. Kept: named in at least {{ rd.min_count }} of them.
{% if race.reason %}Model bias not computed: {{ race.reason }}.{% endif %}</p>
<table>
<tr><th class="l">category</th><th>n</th>{% for g in rd.groups %}<th>share {{ g }}</th>{% endfor %}
{% for g in rd.groups %}<th>d {{ g }}</th>{% endfor %}</tr>
{% for r in race_rows %}<tr><td class="l">{{ r.category }}</td><td>{{ r.n }}</td>
{% for g in rd.groups %}<td>{{ f(r.shares[g]) }}</td>{% endfor %}
{% for g in rd.groups %}<td class="{{ sign(r.d.get(g)) }}">{{ f(r.d.get(g)) }}</td>{% endfor %}</tr>
{% endfor %}</table>
{% if rd.dropped %}<p>Dropped by the count rule: {% for r in rd.dropped %}{{ r.category }} ({{ r.n }}){%
if not loop.last %}, {% endif %}{% endfor %}.</p>{% endif %}
{% if race.model_bias %}<p>Race probe images embedded:
{% for g, n in race.model_bias.n_probes.items() %}{{ g }} {{ n }}{% if not loop.last %}, {% endif %}
{% endfor %}.</p>{% endif %}
{% else %}<p>Not computed{% if race and race.reason %}: {{ race.reason }}{% endif %}.</p>{% endif %}

<h2>Definitions</h2>
<dl>
{% for k, v in definitions %}<dt>{{ k }}</dt><dd>{{ v }}</dd>
{% endfor %}</dl>
</body></html>
"""


def _finite(v: Any) -> bool:
    return v is not None and math.isfinite(float(v))


def _fmt(v: Any) -> str:
    return "–" if not _finite(v) else f"{float(v):.3f}"


def _fmt_p(v: Any) -> str:
    return "–" if v is None else f"{float(v):.2g}"


def _sign(v: Any) -> str:
    if not _finite(v) or float(v) == 0:
        return ""
    return "pos" if float(v) > 0 else "neg"


_NAMES = {
    "data_clip": ("female", "male", "data bias → CLIP d(c)"),
    "data_generated": ("female", "male", "data bias → generated share female"),
    "clip_generated": ("female", "male", "CLIP d(c) → generated share female"),
}


def group_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-group relations (the study's ρ / R² table): gender first, then each race group
    against the rest; each ``{"group", "against", "name", "rel", "reason", "ins", "cv"}`` (the
    Chebyshev gains by degree, in-sample and cross-validated)."""
    out = []
    items = [(*_NAMES.get(k, ("female", "male", k)), rel) for k, rel in doc["relations"].items()]
    race = doc.get("race") or {}
    items += [
        (g, "the other races", "data share → CLIP d_g(c)", rel)
        for g, rel in race.get("relations", {}).items()
    ]
    for group, against, name, rel in items:
        r = rel["relation"]
        cheb = r["chebyshev"] if r else {"in_sample": [], "cross_validated": []}
        out.append(
            {
                "group": group,
                "against": against,
                "name": name,
                "rel": r,
                "reason": rel["reason"],
                "ins": {c["degree"]: c["r2_gain"] for c in cheb["in_sample"]},
                "cv": {c["degree"]: c["r2_gain"] for c in cheb["cross_validated"]},
            }
        )
    return out


def render_transfer_report(doc: dict[str, Any], plots: dict[str, bytes]) -> str:
    """The self-contained HTML report of a ``transfer.json`` document; ``plots`` are PNG bytes by
    relation key (``data_clip``, ``data_generated``)."""
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    uris = {k: "data:image/png;base64," + base64.b64encode(v).decode("ascii") for k, v in plots.items()}
    uris.setdefault("data_generated", "")
    d_of = {r["category"]: r for r in doc["model_bias"]["categories"]}
    gen = doc["generated"]
    g_of = {r["category"]: r for r in gen["prompts"]} if gen else {}
    rows = []
    for r in doc["data_bias"]["categories"]:
        m = d_of.get(r["category"], {})
        g = g_of.get(r["category"])
        rows.append(
            {
                **r,
                "prompt": m.get("prompt", ""),
                "d": m.get("d"),
                "gen_n": g["n"] if g else None,
                "gen_share": g["share_female"] if g else None,
            }
        )
    groups = group_rows(doc)
    degrees = sorted({d for r in groups for d in (*r["ins"], *r["cv"])})
    race = doc.get("race")
    race_rows = []
    if race and race.get("data_bias"):
        rd_of = {r["category"]: r["d"] for r in (race.get("model_bias") or {}).get("categories", [])}
        race_rows = [{**r, "d": rd_of.get(r["category"], {})} for r in race["data_bias"]["categories"]]
    settings = [(k, "–" if v is None else v) for k, v in doc["settings"].items()]
    return env.from_string(_TEMPLATE).render(
        doc=doc,
        settings=settings,
        groups=groups,
        degrees=degrees,
        plots=uris,
        rows=rows,
        data=doc["data_bias"],
        probe=doc["model_bias"]["probe"],
        gen=gen,
        race=race,
        race_rows=race_rows,
        definitions=list(doc["definitions"].items()),
        f=_fmt,
        p=_fmt_p,
        sign=_sign,
    )
