"""The Jinja2 template of the geographic report (one self-contained HTML file, inline CSS)."""

TEMPLATE = """\
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
table.fit { display: table; width: 100%; font-size: .84rem; }
table.fit th { white-space: normal; }
td.cmp { font-size: .8rem; white-space: nowrap; }
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

<h2 id="definitions">Definitions</h2>
<p class="note">The definition behind each headline number (also in analysis.json,
<code>definitions</code>).</p>
{% if definitions %}<table class="kv">
{% for k, v in definitions %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>
{% endfor %}</table>{% else %}<p>This analysis predates the definitions block.</p>{% endif %}

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
<p class="note">Discrete power law fitted to the rows per country (Clauset, Shalizi &amp; Newman 2009,
"CSN"): x_min minimises the KS distance D; σ is the standard error of α; n_tail countries have at
least x_min rows.{% if pl_estimator %} Estimator: {{ pl_estimator }}.{% endif %} The goodness-of-fit p
is the share of semi-parametric bootstrap sets whose refitted D is at least the data's. It is read two
ways, both shown: the paper calls a distribution a power law when p &lt; 0.05 ("follows"); CSN call
the power law plausible when p ≥ {{ plausible_p }} (a small p rejects it). R is the log-likelihood
ratio against each alternative (R &gt; 0 favours the power law; ✱ marks p &lt; {{ compare_p }}). The
line in each panel is the fitted law in rank–frequency form (rank = n_tail · P(X ≥ x)).</p>
<div class="fig"><img alt="Rank-frequency plots with fitted power laws" src="{{ pl_png }}"></div>
<table class="fit">
<tr><th>Group</th><th>Countries</th><th>α ± σ</th><th>x_min (n_tail)</th><th>D</th><th>GOF p</th>
<th>Follows (paper: p &lt; 0.05)</th><th>Plausible (CSN: p ≥ {{ plausible_p }})</th>
<th>R (p) against</th></tr>
{% for r in pl_rows %}<tr{% if r.overall %} class="overall"{% endif %}><td>{{ r.name }}</td>
{% if r.status == "ok" %}{% for c in r.cells %}<td class="n">{{ c }}</td>{% endfor %}
<td class="cmp">{% for c in r.cmp %}{{ c }}{% if not loop.last %}<br>{% endif %}{% else %}–{% endfor %}</td>
{% else %}<td colspan="8">{{ r.reason }}</td>{% endif %}</tr>
{% endfor %}</table>

<h2 id="correlations">Frequency vs GDP and population</h2>
<p class="note">Correlation of rows per country with the reference value. Headline: over
{{ corr_over }} (countries missing from the reference are left out). The last column of each variable
gives Spearman's ρ over {{ corr_other }} instead (<code>--correlate-over</code> swaps them): counting
the countries without rows as 0 can create a correlation that the countries present do not show.
Cells: coefficient (p-value).</p>
{% for s in scatter_pngs %}
<div class="fig"><img alt="Rows per country vs {{ s.label }}" src="{{ s.png }}"></div>
{% endfor %}
<table class="fit">
<tr><th rowspan="2">Group</th><th colspan="4">GDP</th><th colspan="4">Population</th></tr>
<tr>{% for _ in range(2) %}<th>Pearson r</th><th>Spearman ρ</th><th>n</th><th>ρ over {{ corr_other }}</th>
{% endfor %}</tr>
{% for r in corr_rows %}<tr{% if r.overall %} class="overall"{% endif %}><td>{{ r.name }}</td>
{% for c in r.cells %}<td class="n">{{ c }}</td>{% endfor %}</tr>
{% endfor %}</table>

<h2 id="representation">Geographic representativeness (Table 2)</h2>
<p class="note">GR(c) = p(c) / p_true(c) against {{ doc.gr_reference.description }}; a country is
over-represented if GR &gt; {{ gr_r }} and under-represented if GR &lt; 1/{{ gr_r }}. Percentages are of
the reference's countries; countries without rows are under-represented. Rows naming countries outside
the reference are left out of p, which is renormalised over the reference's countries.
{% if not gr_entity_specific %}Every entity is compared with this one distribution; the paper uses one
real-world distribution per entity (households for house, tourism statistics for hotel, …): pass them as
a weights CSV with an entity column (<code>--gr-reference</code>).{% else %}Entities with their own
distribution: {{ gr_entity_specific | join(", ") }}; the others use the one above.{% endif %}</p>
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
entity and country; {{ div_rule }}; an entity's diversity is the
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
{% elif div_mods %}<p>No entity has a country with at least {{ min_samples }} samples ({{ div_rule }}).</p>
{% else %}<p>Diversity was not computed (no text encoder or image model).</p>{% endif %}

<p class="note">Generated by fairsets {{ doc.fairsets_version }} ({{ doc.schema }}).</p>
</body>
</html>
"""
