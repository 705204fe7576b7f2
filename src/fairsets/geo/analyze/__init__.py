"""Geographic analyses of a geo-profiled dataset (GeoProfiler §4.1–4.3, Tables 1–3, 11, 14–16).

Input (``PROFILED``): Parquet, CSV or JSONL (or a folder of such files, e.g. the shards of
``fairsets geo profile``) with a ``country`` column (ISO 3166-1 alpha-3; empty, null or
a "no country" answer = *underspecified*), usually ``caption``, optionally an entity column
(default ``entity``), ``entity_present`` (rows with False are excluded and counted) and ``image``
(bytes or a path) / ``image_path`` (relative paths are relative to the profile's folder).

Per entity and overall (the pooled rows):

1. **Shares** (Table 1): the underspecified, top-``k`` (default 10) and remaining shares, as
   fractions of *all* rows (they sum to 1); counts per country; continent shares over the
   country-specified rows (Table 11; GeoNames codes NA SA EU AS AF OC, plus AN when present).
2. **Power law** (Clauset, Shalizi & Newman 2009) on the per-country counts (one observation per
   country with a non-zero count): ``α``, ``x_min`` (KS-minimising), σ (standard error of α), KS
   distance ``D``; the goodness-of-fit p-value by CSN's semi-parametric bootstrap (§4.1: each
   synthetic data set keeps the empirical values below ``x_min`` and draws from the fitted discrete
   power law above, in the empirical proportion; every synthetic set is refitted, ``x_min``
   included; ``p`` = share of synthetic sets with ``D ≥ D_empirical``; CSN call the power law
   *plausible* when ``p ≥ 0.1``, the paper says a distribution *follows* it when ``p < 0.05``: the
   report gives p and both readings); and Vuong / likelihood-ratio comparisons with lognormal,
   exponential, truncated power law and stretched exponential, each fitted by ``powerlaw`` on the
   same tail and compared with the reported law itself (its α and ``x_min``, never ``powerlaw``'s
   own α, which the package clips to 3): ``R > 0`` favours the power law). ``α``
   is the exact discrete MLE (CSN eq. 3.5, Hurwitz zeta, searched in (1.0001, 20), so a steep tail
   is not clipped at 3); ``x_min`` minimises the KS distance over every integer above it among
   tails of at least :data:`~.power_law.MIN_TAIL` countries; σ comes from the observed Fisher
   information. Fewer than :data:`MIN_POWER_LAW_COUNTRIES` countries, or too
   short a tail, give an ``insufficient_data`` record with the reason and no verdict.
3. **Correlations** of country frequency with GDP and population (Pearson and Spearman, with
   p-values and ``n``) over one of two country sets, named in each record (``over``) and in
   ``definitions.correlation_set``: ``present`` (the default: countries with at least one row
   that the reference has a value for, the points of the paper's Figure 4) or ``reference``
   (every reference country with a value, those absent from the data counting as **0** rows).
   Both are computed; the other one is each record's ``alternative`` (``correlate_over`` picks
   the headline). The choice matters: absent countries are mostly small, so the zeros alone
   can make a correlation that the present countries do not show. Data countries missing from
   the reference are left out and counted.
4. **Geographic representativeness** (§4.2, Tables 2, 14): ``GR(c, n) = p(c|n) / p_true(c|n)``
   over the countries of the reference distribution (``p`` is renormalised over the rows whose
   country is in the reference; rows outside it are counted); *over* if ``GR > r``, *under* if
   ``GR < 1/r`` (default ``r = 3``); percentages are of the reference's countries. The default
   reference is uniform over the 197 independent countries for every entity; the paper uses one
   real-world distribution per entity (households for house, tourism for hotel, ...), which a
   weights CSV with an ``entity`` column supplies (:func:`fairsets.geo.reference.load_weights`).
5. **Diversity** (§4.3, Tables 3, 15, 16; :mod:`fairsets.geo.diversity`): ``div`` per (entity,
   country) for countries with **more than** ``T`` samples (``n > T``, ``T = 100``: the paper's
   rule) or, with ``diversity_rule="inclusive"``, ``n >= T``; the entity's mean ± std over
   countries and ρ(frequency, diversity), for captions (``ρ_fc``) and images (``ρ_fi``).

``analysis.json`` has a ``definitions`` block: one sentence per headline number naming the
definition used (shares' denominator, underspecified, the empty-caption rule, the correlation
set, the diversity threshold, the power-law estimator and its two readings, the GR reference and
its renormalisation).

:func:`run_analysis` writes ``OUT/analysis.json`` (schema :data:`ANALYSIS_SCHEMA`),
``OUT/report.html`` and CSV tables (``shares.csv``, ``countries.csv``, ``continents.csv``,
``power_law.csv``, ``correlations.csv``, ``representation.csv``, ``diversity.csv``), atomically.
Given the same input and seed the outputs are byte-identical.

Modules, one step each: ``load`` (reading and validating the input), ``shares`` (1),
``power_law`` (2), ``correlations`` (3), ``representation`` (4), ``group_diversity`` (5),
``run`` (:func:`run_analysis`: every step, ``analysis.json`` and the report) and ``tables``
(the CSV tables). The document's schema id, file names and structural check live in
:mod:`fairsets.geo.analysis_schema`, which the report imports too.
"""

from __future__ import annotations

from ..analysis_schema import ANALYSIS_FILE, ANALYSIS_SCHEMA, REPORT_FILE
from ..analysis_schema import OVERALL as OVERALL
from .correlations import frequency_correlation
from .load import Profile, load_profile
from .load import _input_files as _input_files  # the CLI checks PROFILED before loading encoders
from .power_law import (
    ALTERNATIVES,
    DEFAULT_BOOTSTRAP,
    MIN_POWER_LAW_COUNTRIES,
    fit_power_law,
    sample_discrete_power_law,
)
from .power_law import COMPARE_P as COMPARE_P
from .power_law import PLAUSIBLE_P as PLAUSIBLE_P
from .representation import representativeness
from .run import CORRELATE_OVER, DIVERSITY_RULES, run_analysis
from .shares import CONTINENT_CODES, continent_shares, country_counts, share_table
from .tables import write_tables

__all__ = [
    "ALTERNATIVES",
    "ANALYSIS_FILE",
    "ANALYSIS_SCHEMA",
    "CONTINENT_CODES",
    "CORRELATE_OVER",
    "DEFAULT_BOOTSTRAP",
    "DIVERSITY_RULES",
    "MIN_POWER_LAW_COUNTRIES",
    "REPORT_FILE",
    "Profile",
    "continent_shares",
    "country_counts",
    "fit_power_law",
    "frequency_correlation",
    "load_profile",
    "representativeness",
    "run_analysis",
    "sample_discrete_power_law",
    "share_table",
    "write_tables",
]
