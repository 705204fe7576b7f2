"""The Jinja2 template of the audit report (one self-contained HTML file, inline CSS)."""

from .page import FIGURE_CSS, PAGE_CSS

TEMPLATE = (
    """\
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
"""
    + PAGE_CSS
    + """\
th, td { border: 1px solid #d0d0d0; padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
table.kv th { width: 12rem; }
"""
    + FIGURE_CSS
    + """\
summary { cursor: pointer; }
.sub { color: #555; font-size: .95rem; margin-top: 0; }
.warn { background: #fff4e5; border: 1px solid #f0b26b; padding: .4rem .8rem; margin: 1rem 0; }
</style>
</head>
<body>
<h1>VLM bias audit: {{ a.dataset }}</h1>
<p class="sub">{{ a.model }} ({{ a.pretrained or 'none' if a.pretrained is defined else '–' }}),
group attribute <b>{{ a.attribute }}</b>, top-{{ k_text }},
{{ a.n_images if a.n_images is defined else '?' }} images in {{ a.groups | length }} groups
{%- if has_debiased %}, original and debiased embeddings{% endif %}.</p>

{% if warnings %}
<div class="warn" id="warnings"><b>Warnings</b>
<ul>{% for w in warnings %}<li>{{ w }}</li>{% endfor %}</ul></div>
{% endif %}
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
declared groups (a group with no image counts as zero retrievals), with logarithms base {{ jsd_base }},
so it lies in [0, 1]; 0 means perfectly uniform. Std is the standard deviation (ddof={{ std_ddof }},
population) across all declared groups of each group's mean cosine similarity to the prompt, undefined
when a declared group has no image; lower is fairer. Mean sim. is the mean cosine similarity over all images.
Change is (debiased − original) / original.</p>
{% if definitions %}
<details open><summary>Definitions (the rule of every number, as in audit.json)</summary>
<table class="kv">
{% for k, v in definitions %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>
{% endfor %}</table>
</details>
{% endif %}

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
<p class="note">The y axis is zoomed to the range of the values; it need not start at 0. A group with
no image has no bar (no mean).</p>
{% if s.sim_box_png %}
<h3>Distribution of the similarities per {{ a.attribute }}</h3>
<div class="fig"><img alt="Similarity distribution per {{ a.attribute }} for {{ s.prompt }}"
 src="{{ s.sim_box_png }}"></div>
<p class="note">Box: quartiles; line: median; dot: mean (the bar above); whiskers: min and max of
the group's images.</p>
{% endif %}
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
{% for b in share_boxes %}
<div class="fig"><img alt="Top-k share per {{ a.attribute }} over the prompts of {{ b.set }}"
 src="{{ b.png }}"></div>
{% endfor %}
{% if share_boxes %}<p class="note">Each box: one group's top-k share over the prompts of the set
(quartiles, median, mean as a dot, min and max as whiskers).</p>{% endif %}
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
)
