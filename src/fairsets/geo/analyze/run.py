"""Orchestration: every analysis per entity and overall, written as ``analysis.json``, the CSV
tables and the HTML report (:func:`run_analysis`)."""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fairsets.core.atomic import atomic_write_text

from .. import reference as _reference
from ..analysis_schema import ANALYSIS_FILE, ANALYSIS_SCHEMA, OVERALL, REPORT_FILE
from ..diversity import Encoder
from ..reference import CountryWeights, default_reference, load_reference
from ..report import render_report
from .correlations import frequency_correlation
from .group_diversity import _diversity
from .load import EMPTY_CAPTION_RULE, load_profile
from .power_law import (
    ALTERNATIVES,
    COMPARE_P,
    DEFAULT_BOOTSTRAP,
    MIN_POWER_LAW_COUNTRIES,
    MIN_TAIL,
    PAPER_P,
    PLAUSIBLE_P,
    _group_seed,
    fit_power_law,
)
from .representation import representativeness
from .shares import continent_shares, country_counts, share_table
from .tables import write_tables

if TYPE_CHECKING:
    from fairsets.core.progress import Progress

__all__ = ["CORRELATE_OVER", "DIVERSITY_RULES", "diversity_min_n", "run_analysis"]

CORRELATE_OVER = ("present", "reference")
"""Country sets of the correlations: ``present`` (countries with at least one row that the
reference has a value for; the points of the paper's Figure 4, the default) or ``reference`` (every
reference country with a value; countries absent from the data count as 0 rows)."""

DIVERSITY_RULES = ("paper", "inclusive")
"""How the diversity threshold ``T`` is read: ``paper`` scores countries with ``n > T`` (§4.3:
"more than 100"; the default), ``inclusive`` those with ``n >= T``."""

_CORRELATION_SETS = {
    "present": "countries with at least one row that the reference has a value for "
    "(the paper's Figure 4 plots these)",
    "reference": "every country of the reference that has a value; countries absent from the data "
    "count as 0 rows",
}


def diversity_min_n(threshold: int, rule: str) -> int:
    """The smallest sample count a country needs for diversity: ``threshold + 1`` under the paper's
    rule (``n > threshold``), ``threshold`` under the inclusive one (``n >= threshold``)."""
    if rule not in DIVERSITY_RULES:
        raise ValueError(f"unknown diversity rule {rule!r}: use {' or '.join(DIVERSITY_RULES)}")
    if threshold < 1:
        raise ValueError(f"the diversity threshold must be >= 1, got {threshold}")
    return threshold + 1 if rule == "paper" else threshold


def _reference_table(
    reference: str | os.PathLike[str] | pd.DataFrame | None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    geonames = default_reference()
    if reference is None:
        table = geonames
    elif isinstance(reference, pd.DataFrame):
        table = reference.copy()
        table.attrs = dict(reference.attrs)
    else:
        table = load_reference(reference)
    for col in ("gdp", "population"):
        if col not in table:
            table[col] = np.nan
    source = str(table.attrs.get("source", "user table"))
    info = {"source": source, "gdp_source": None, "population_source": None}
    gdp = pd.to_numeric(table["gdp"], errors="coerce")
    pop = pd.to_numeric(table["population"], errors="coerce")
    if np.isfinite(gdp).any():
        info["gdp_source"] = source
    if np.isfinite(pop).any():
        info["population_source"] = source
    else:  # a GDP-only table: population from countries.csv
        pop = geonames["population"]
        info["population_source"] = str(geonames.attrs["source"])
    gdp, pop = gdp[np.isfinite(gdp)], pop[np.isfinite(pop)]
    info.update(n_gdp=len(gdp), n_population=len(pop))
    return pd.DataFrame({"gdp": gdp, "population": pop}), info


def _group_record(
    codes: pd.Series,
    *,
    name: str,
    ref_values: pd.DataFrame,
    has_gdp: bool,
    correlate_over: str,
    weights: pd.Series | None,
    r: float,
    top_k: int,
    bootstrap: int,
    seed: int,
    alternatives: Sequence[str],
    progress: Progress | None,
    executor: Executor | None,
) -> dict[str, Any]:
    counts = country_counts(codes)
    shares = share_table(codes, top_k=top_k)
    record: dict[str, Any] = {
        k: shares.pop(k) for k in ("n_rows", "n_specified", "n_underspecified", "n_countries")
    }
    record["shares"] = shares
    record["counts"] = {str(k): int(v) for k, v in counts.items()}
    record["continents"] = continent_shares(counts)
    record["power_law"] = fit_power_law(
        counts,
        bootstrap=bootstrap,
        seed=_group_seed(seed, name),
        alternatives=alternatives,
        progress=progress,
        label=name,
        executor=executor,
    )
    corr: dict[str, Any] = {}
    for col in ("gdp", "population"):
        if col == "gdp" and not has_gdp:
            corr[col] = {
                "status": "unavailable",
                "reason": "the reference has no GDP (fairsets geo reference --year Y --out gdp.csv, "
                "then --reference gdp.csv)",
            }
        else:
            values = ref_values[col].dropna()
            by_set = {
                over: frequency_correlation(counts, values, include_zero=over == "reference")
                for over in CORRELATE_OVER
            }
            other = next(o for o in CORRELATE_OVER if o != correlate_over)
            corr[col] = {
                **by_set[correlate_over],
                "over": correlate_over,
                "alternative": {**by_set[other], "over": other},
            }
    record["correlations"] = corr
    if weights is None:
        record["representation"] = {
            "status": "unavailable",
            "reason": "no reference distribution for this group",
        }
    else:
        record["representation"] = representativeness(counts, weights, r=r)
    return record


def _definitions(
    *,
    correlate_over: str,
    diversity_rule: str,
    weights: CountryWeights,
    r: float,
    overall_power_law: Mapping[str, Any],
) -> dict[str, str]:
    """The definition behind every headline number of the analysis, one sentence each."""
    gof = overall_power_law.get("gof") or {}
    estimator = overall_power_law.get("estimator") or (
        "the powerlaw package's discrete MLE of alpha (CSN 2009 eq. 3.7's approximation when "
        "x_min >= 10 and alpha is in (1.5, 3], the numerically maximised discrete likelihood "
        "otherwise); x_min minimises the KS distance"
    )
    readings = gof.get("definition") or (
        f"goodness-of-fit p = share of semi-parametric bootstrap sets whose refitted KS distance is at "
        f"least the data's; the paper reads p < 0.05 as 'follows a power law', Clauset, Shalizi & "
        f"Newman read p >= {PLAUSIBLE_P} as 'plausible' (both readings are reported)"
    )
    if isinstance(estimator, Mapping):
        estimator = "; ".join(f"{k}: {v}" for k, v in estimator.items())
    if isinstance(readings, Mapping):
        readings = "; ".join(f"{k}: {v}" for k, v in readings.items())
    entity_specific = sorted(weights.by_entity)
    gr_ref = f"{weights.description} ({weights.name})"
    if entity_specific:
        gr_ref += f"; entity-specific distributions for {', '.join(entity_specific)}"
    else:
        gr_ref += (
            "; the same distribution for every entity (the paper uses one true distribution per "
            "entity: households for house, tourism statistics for hotel, ...; pass them with "
            "--gr-reference CSV and an entity column)"
        )
    return {
        "shares_denominator": "all analysed rows of the group (underspecified + top-k + remaining = 1); "
        "continent shares are of the country-specified rows",
        "underspecified": "a row whose country is empty, null or a 'no country' answer",
        "empty_caption_rule": EMPTY_CAPTION_RULE,
        "correlation_set": f"{correlate_over}: {_CORRELATION_SETS[correlate_over]}; the other set is "
        "reported under each correlation's 'alternative'",
        "diversity_threshold": diversity_rule,
        "power_law_estimator": str(estimator),
        "power_law_readings": str(readings),
        "gr_reference": gr_ref,
        "gr_renormalisation": "p(c) = rows naming c / rows naming any country of the reference (rows "
        "naming countries outside it are left out and counted); p_true is renormalised over the "
        f"reference's countries; over if GR > {r:g}, under if GR < 1/{r:g}; percentages are of the "
        "reference's countries",
    }


def _jsonable(obj: Any) -> Any:
    """Plain JSON types; non-finite floats become ``null``."""
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return f if math.isfinite(f) else None
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    return obj


def run_analysis(
    profiled: str | os.PathLike[str] | pd.DataFrame,
    out: str | os.PathLike[str],
    *,
    entity_column: str | None = None,
    reference: str | os.PathLike[str] | pd.DataFrame | None = None,
    gr_reference: str | os.PathLike[str] | CountryWeights = "uniform",
    r: float = 3.0,
    min_samples: int | None = None,
    diversity_threshold: int = 100,
    diversity_rule: str = "paper",
    correlate_over: str = "present",
    top_k: int = 10,
    text_encoder: Encoder | None = None,
    image_encoder: Encoder | None = None,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    alternatives: Sequence[str] = ALTERNATIVES,
    workers: int = 1,
    progress: Progress | None = None,
    report: bool = True,
) -> dict[str, Any]:
    """Run every analysis and write ``analysis.json``, ``report.html`` and the CSV tables to ``out``.

    Args:
        profiled: the geo-profiled dataset (path or DataFrame; see :func:`load_profile`).
        out: the output folder (created).
        entity_column: see :func:`load_profile`.
        reference: statistics for the correlations: a CSV (:func:`~fairsets.geo.reference.load_reference`)
            or a table; default: population from ``countries.csv`` and no GDP.
        gr_reference: the GR reference distribution (``"uniform"``, ``"uniform-all"``,
            ``"population"``, a weights CSV, or a :class:`~fairsets.geo.reference.CountryWeights`).
        r: GR threshold (``>= 1``).
        min_samples: shorthand for ``diversity_threshold=min_samples, diversity_rule="inclusive"``
            (cells with ``n >= min_samples``); ``None``: use the two settings below.
        diversity_threshold: the diversity threshold ``T`` (default 100, the paper's).
        diversity_rule: ``"paper"`` scores (entity, country) cells with ``n > T`` (the paper's
            "more than 100"), ``"inclusive"`` those with ``n >= T`` (:data:`DIVERSITY_RULES`).
        correlate_over: the headline correlation's country set, ``"present"`` (countries with
            rows, the default) or ``"reference"`` (zeros for reference countries without rows);
            the other set is reported too, under ``alternative`` (:data:`CORRELATE_OVER`).
        top_k: the "top" countries of the shares.
        text_encoder: caption encoder for caption diversity (``None``: skipped).
        image_encoder: image encoder for image diversity (``None``: skipped).
        bootstrap: synthetic sets for the power-law GOF p-value (0: none).
        seed: the seed of every random choice (the bootstrap).
        alternatives: distributions the power law is compared with (a subset of
            :data:`ALTERNATIVES`; the discrete truncated power law takes ~3 s per group).
        workers: processes that refit the bootstrap sets (1: in this process); the results do
            not depend on it.
        progress: progress bars (default: off).
        report: also render ``report.html``.

    Returns:
        The analysis document (what ``analysis.json`` holds).

    Raises:
        FileNotFoundError, ValueError: bad input, reference or settings (see :func:`load_profile`).
    """
    from fairsets.core.progress import Progress
    from fairsets.core.version import __version__

    if not r >= 1:
        raise ValueError(f"r must be >= 1, got {r}")
    if min_samples is not None:
        if min_samples < 1:
            raise ValueError(f"min_samples must be >= 1, got {min_samples}")
        diversity_threshold, diversity_rule = min_samples, "inclusive"
    min_n = diversity_min_n(diversity_threshold, diversity_rule)
    if correlate_over not in CORRELATE_OVER:
        raise ValueError(f"unknown correlation set {correlate_over!r}: use {' or '.join(CORRELATE_OVER)}")
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be >= 0, got {bootstrap}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    alternatives = list(alternatives)
    unknown = [a for a in alternatives if a not in ALTERNATIVES]
    if unknown:
        raise ValueError(
            f"unknown alternative distribution(s) {unknown}; choose from {', '.join(ALTERNATIVES)}"
        )
    progress = progress or Progress(False)
    weights = (
        gr_reference if isinstance(gr_reference, CountryWeights) else _reference.gr_reference(gr_reference)
    )
    ref_values, ref_info = _reference_table(reference)
    profile = load_profile(profiled, entity_column=entity_column)
    if image_encoder is not None and profile.image_column is None:
        raise ValueError("image diversity needs an 'image' or 'image_path' column")
    if text_encoder is not None and "caption" not in profile.rows:
        raise ValueError("caption diversity needs a 'caption' column (or no text encoder)")
    rows = profile.rows
    entities = profile.entities
    has_gdp = ref_info["gdp_source"] is not None
    with contextlib.ExitStack() as stack:
        executor = None
        if workers > 1 and bootstrap > 0:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            from fairsets.core.processes import die_with_parent

            # spawn: a fork of a process holding torch or BLAS threads can deadlock. The workers
            # end with this process (none outlives a killed run).
            executor = stack.enter_context(
                ProcessPoolExecutor(
                    max_workers=workers,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=die_with_parent,
                    initargs=(os.getpid(), False),  # Ctrl-C still interrupts the refits
                )
            )
        common = {
            "ref_values": ref_values,
            "has_gdp": has_gdp,
            "correlate_over": correlate_over,
            "r": r,
            "top_k": top_k,
            "bootstrap": bootstrap,
            "seed": seed,
            "alternatives": alternatives,
            "progress": progress,
            "executor": executor,
        }
        overall = _group_record(rows["country"], name=OVERALL, weights=weights.for_group(None), **common)
        by_entity: dict[str, Any] = {}
        for e in entities:
            sub = rows.loc[rows["entity"] == e, "country"]
            by_entity[e] = _group_record(sub, name=f"entity:{e}", weights=weights.for_group(e), **common)

    groups = {e: rows.index[rows["entity"] == e] for e in entities} if entities else {OVERALL: rows.index}
    op = ">" if diversity_rule == "paper" else ">="
    div_rule = f"a country is scored when it has n {op} {diversity_threshold} samples" + (
        " (the paper's 'more than 100')" if diversity_rule == "paper" else " (inclusive; the paper: n > 100)"
    )
    div: dict[str, Any] = {
        "min_samples": min_n,
        "threshold": diversity_threshold,
        "threshold_rule": diversity_rule,
        "rule": div_rule,
        "std": "population standard deviation (ddof=0) over countries",
        "text": None,
        "image": None,
    }
    if text_encoder is not None:
        div["text"] = _diversity(profile, text_encoder, "text", groups, min_n, progress)
    if image_encoder is not None:
        div["image"] = _diversity(profile, image_encoder, "image", groups, min_n, progress)

    doc: dict[str, Any] = {
        "schema": ANALYSIS_SCHEMA,
        "fairsets_version": __version__,
        "input": {
            "path": str(profile.path) if profile.path is not None else None,
            "n_rows_input": profile.n_input,
            "n_rows": len(rows),
            "n_excluded_entity_absent": profile.n_entity_absent,
            "n_caption_empty": profile.n_caption_empty,
            "n_entity_unknown": profile.n_entity_unknown,
            "entity_column": profile.entity_column,
            "entities": entities,
            "image_column": profile.image_column,
        },
        "settings": {
            "top_k": top_k,
            "r": r,
            "min_samples": min_n,
            "diversity_threshold": diversity_threshold,
            "diversity_rule": diversity_rule,
            "correlate_over": correlate_over,
            "bootstrap": bootstrap,
            "seed": seed,
            "alternatives": alternatives,
            "plausible_p": PLAUSIBLE_P,
            "compare_p": COMPARE_P,
            "min_power_law_countries": MIN_POWER_LAW_COUNTRIES,
            "min_tail": MIN_TAIL,
            "paper_p": PAPER_P,
            "correlations": _CORRELATION_SETS[correlate_over],
            "gr": "p renormalised over rows whose country is in the reference; "
            "over if GR > r, under if GR < 1/r",
        },
        "definitions": _definitions(
            correlate_over=correlate_over,
            diversity_rule=div_rule,
            weights=weights,
            r=r,
            overall_power_law=overall["power_law"],
        ),
        "reference": ref_info,
        "gr_reference": {
            "name": weights.name,
            "description": weights.description,
            "entity_specific": sorted(weights.by_entity),
            "unused_entities": sorted(set(weights.by_entity) - set(entities)),
        },
        "reference_values": {
            col: {str(c): float(v) for c, v in ref_values[col].dropna().items()}
            for col in ("gdp", "population")
            if col != "gdp" or has_gdp
        },
        "overall": overall,
        "entities": by_entity,
        "diversity": div,
    }
    doc = _jsonable(doc)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_tables(doc, out_dir)
    atomic_write_text(out_dir / ANALYSIS_FILE, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    if report:
        render_report(doc, out_dir / REPORT_FILE)
    return doc
