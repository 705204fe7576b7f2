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
2. **Power law** (Clauset, Shalizi & Newman 2009, with the ``powerlaw`` package, ``discrete=True``)
   on the per-country counts (one observation per country with a non-zero count): ``α``,
   ``x_min`` (KS-minimising), σ (standard error of α), KS distance ``D``; the goodness-of-fit
   p-value by CSN's semi-parametric bootstrap (§4.1: each synthetic data set keeps the empirical
   values below ``x_min`` and draws from the fitted discrete power law above, in the empirical
   proportion; every synthetic set is refitted, ``x_min`` included; ``p`` = share of synthetic
   sets with ``D ≥ D_empirical``; the power law is *plausible* when ``p ≥ 0.1``); and Vuong /
   likelihood-ratio comparisons with lognormal, exponential, truncated power law and stretched
   exponential (``Fit.distribution_compare``: ``R > 0`` favours the power law). ``α`` is the
   package's discrete MLE (CSN eq. 3.7's approximation when ``x_min ≥ 10`` and the estimate lies
   in (1.5, 3], the numerically maximised discrete likelihood otherwise). Fewer than
   :data:`MIN_POWER_LAW_COUNTRIES` countries give an ``insufficient_data`` record.
3. **Correlations** of country frequency with GDP and population (Pearson and Spearman, with
   p-values and ``n``) over the countries of the reference table that have a value; reference
   countries absent from the data count as **0** (the paper correlates counts over countries);
   data countries missing from the reference are left out and counted.
4. **Geographic representativeness** (§4.2, Tables 2, 14): ``GR(c, n) = p(c|n) / p_true(c|n)``
   over the countries of the reference distribution (``p`` is renormalised over the rows whose
   country is in the reference; rows outside it are counted); *over* if ``GR > r``, *under* if
   ``GR < 1/r`` (default ``r = 3``); percentages are of the reference's countries.
5. **Diversity** (§4.3, Tables 3, 15, 16; :mod:`fairsets.geo.diversity`): ``div`` per (entity,
   country) with ``n >= min_samples`` samples (default 100; the paper's "more than 100" is 101),
   the entity's mean ± std over countries and ρ(frequency, diversity), for captions (``ρ_fc``)
   and images (``ρ_fi``).

:func:`run_analysis` writes ``OUT/analysis.json`` (schema :data:`ANALYSIS_SCHEMA`),
``OUT/report.html`` and CSV tables (``shares.csv``, ``countries.csv``, ``continents.csv``,
``power_law.csv``, ``correlations.csv``, ``representation.csv``, ``diversity.csv``), atomically.
Given the same input and seed the outputs are byte-identical.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import os
import warnings
import zlib
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fairsets.core.atomic import atomic_write_text
from fairsets.core.textfile import decode_text

from . import reference as _reference
from .countries import CONTINENTS, countries, is_none_answer, normalize_country
from .diversity import Encoder, country_diversity
from .reference import CountryWeights, default_reference, load_reference

if TYPE_CHECKING:
    from fairsets.core.progress import Progress

__all__ = [
    "ALTERNATIVES",
    "ANALYSIS_FILE",
    "ANALYSIS_SCHEMA",
    "CONTINENT_CODES",
    "DEFAULT_BOOTSTRAP",
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

log = logging.getLogger(__name__)

ANALYSIS_SCHEMA = "fairsets.geo.analysis/1"
ANALYSIS_FILE = "analysis.json"
REPORT_FILE = "report.html"
#: The paper's continents (Table 11), GeoNames codes.
CONTINENT_CODES: tuple[str, ...] = ("NA", "SA", "EU", "AS", "AF", "OC")
ALTERNATIVES: tuple[str, ...] = ("lognormal", "exponential", "truncated_power_law", "stretched_exponential")
#: Synthetic data sets for the goodness-of-fit p-value: about 5 s per group of ~200 countries with
#: large counts on one core (one refit ≈ 20 ms; ≈ 100 ms when x_min < 10, where α is fitted
#: numerically; ``workers`` spreads the refits over processes). The p-value's standard error is
#: at most 0.5/sqrt(B) ≈ 0.03; CSN suggest 2500 for ±0.01 (``--bootstrap 2500``).
DEFAULT_BOOTSTRAP = 250
MIN_POWER_LAW_COUNTRIES = 10
#: CSN: the power law is ruled out when the GOF p-value is below 0.1.
PLAUSIBLE_P = 0.1
#: Significance for calling a likelihood-ratio comparison.
COMPARE_P = 0.1
OVERALL = "overall"
_IMAGE_COLUMNS = ("image", "image_path")
_TRUE = frozenset({"true", "1", "yes", "y", "t"})
_FALSE = frozenset({"false", "0", "no", "n", "f"})
_MAX_PL_VALUE = 1e15  # the synthetic sampler's cap (exact integers in float64)


# --------------------------------------------------------------------------- input


@dataclass
class Profile:
    """A geo-profiled dataset, validated.

    Attributes:
        rows: one row per kept sample: ``country`` (ISO3 or ``None``), ``caption`` (if present),
            ``entity`` (if there is an entity column); the index is the row's position in the
            input (files of a folder are concatenated in name order).
        path: the input file or folder (``None`` for an in-memory frame).
        n_input: rows in the input.
        n_entity_absent: rows excluded because ``entity_present`` is False.
        n_entity_unknown: rows kept although ``entity_present`` is null (the entity filter could
            not read their image).
        entity_column: the input's entity column, or ``None``.
        image_column: ``image``/``image_path`` if the input has one.
    """

    rows: pd.DataFrame
    path: Path | None
    n_input: int
    n_entity_absent: int
    n_entity_unknown: int
    entity_column: str | None
    image_column: str | None
    _frame_images: pd.Series | None = None

    @property
    def entities(self) -> list[str]:
        """The entities, sorted (empty without an entity column)."""
        return sorted(self.rows["entity"].unique()) if "entity" in self.rows else []

    def images(self, index: Sequence[int]) -> list[Any]:
        """The image cells (bytes, ``{"bytes": …}`` or a path) of the input rows ``index``.

        Relative paths are resolved against the folder of the input file (or the input folder;
        the working directory for a DataFrame).
        """
        if self.image_column is None:
            raise ValueError("the profile has no image or image_path column")
        idx = list(index)
        if self._frame_images is not None:
            cells = self._frame_images.loc[idx].tolist()
        else:
            assert self.path is not None
            files = _input_files(self.path)
            if all(_is_parquet(f) for f in files):
                import pyarrow as pa
                import pyarrow.parquet as pq

                col = pa.concat_arrays(
                    [
                        chunk
                        for f in files
                        for chunk in pq.read_table(f, columns=[self.image_column]).column(0).chunks
                    ]
                )
                cells = col.take(np.asarray(idx, dtype=np.int64)).to_pylist() if idx else []
            else:
                frame = pd.concat([_read_file(f)[0][[self.image_column]] for f in files], ignore_index=True)
                cells = frame[self.image_column].iloc[idx].tolist()
        base = (
            (self.path if self.path.is_dir() else self.path.parent) if self.path is not None else Path.cwd()
        )
        return [
            base / c if isinstance(c, str) and c.strip() and not Path(c).is_absolute() else c for c in cells
        ]


_FORMATS = (".parquet", ".pq", ".csv", ".tsv", ".jsonl")


def _is_parquet(path: Path) -> bool:
    return path.suffix.lower() in (".parquet", ".pq")


def _input_files(path: Path) -> list[Path]:
    """The input file, or the Parquet/CSV/JSONL files of an input folder (name order)."""
    if path.is_dir():
        files = sorted(
            f
            for f in path.iterdir()
            if f.is_file() and f.suffix.lower() in _FORMATS and not f.name.startswith(".")
        )
        if not files:
            raise ValueError(f"{path} holds no .parquet, .csv, .tsv or .jsonl file")
        return files
    if not path.is_file():
        raise FileNotFoundError(f"PROFILED not found: {path}")
    if path.suffix.lower() not in _FORMATS:
        raise ValueError(
            f"PROFILED must be a .parquet, .csv, .tsv or .jsonl file (or a folder), got {path.name}"
        )
    return [path]


def _read_file(path: Path, skip: Sequence[str] = ()) -> tuple[pd.DataFrame, list[str]]:
    """One input file (without the ``skip`` columns) and all its column names."""
    if _is_parquet(path):
        import pyarrow.parquet as pq

        try:
            names = list(pq.read_schema(path).names)
        except Exception as e:  # pyarrow raises several types for a file that is not Parquet
            raise ValueError(f"{path} is not a readable Parquet file: {e}") from None
        return pq.read_table(path, columns=[n for n in names if n not in skip]).to_pandas(), names
    try:
        if path.suffix.lower() == ".jsonl":
            frame = pd.read_json(path, lines=True, dtype=False)
        else:
            sep = "\t" if path.suffix.lower() == ".tsv" else ","
            with warnings.catch_warnings():
                # Rows with more fields than the header (unquoted delimiters) would silently make
                # the first column an index and shift the others: refuse them.
                warnings.simplefilter("error", pd.errors.ParserWarning)
                frame = pd.read_csv(path, dtype=str, keep_default_na=False, sep=sep, index_col=False)
    except pd.errors.ParserWarning:
        raise ValueError(
            f"{path}: its rows have more fields than the header; quote values that contain {sep!r}"
        ) from None
    except UnicodeDecodeError as e:
        decode_text(path.read_bytes(), path)  # TextFileError (a ValueError): the line and byte offset
        raise ValueError(f"{path} is not a readable {path.suffix[1:].upper()} file: {e}") from None
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise ValueError(f"{path} is not a readable {path.suffix[1:].upper()} file: {e}") from None
    names = [str(c) for c in frame.columns]
    return frame.drop(columns=[c for c in names if c in skip]), names


def _read_input(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """The input (without its image column, read lazily later) and its column names (the union
    over the files of a folder, in order of appearance; a file's missing columns are null)."""
    frames: list[pd.DataFrame] = []
    names: dict[str, None] = {}
    for f in _input_files(path):
        frame, cols = _read_file(f, skip=_IMAGE_COLUMNS)
        names.update(dict.fromkeys(cols))
        frames.append(frame.reset_index(drop=True))
    return (pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]), list(names)


def _present_flags(values: pd.Series) -> tuple[np.ndarray, int]:
    """``entity_present`` as booleans (null = kept) and the number of nulls; ``ValueError`` on
    anything that is not a boolean."""
    out = np.ones(len(values), dtype=bool)
    bad: list[str] = []
    unknown = 0
    for i, v in enumerate(values.tolist()):
        if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
            unknown += 1
            continue
        if isinstance(v, (bool, np.bool_)):
            out[i] = bool(v)
            continue
        if isinstance(v, (int, np.integer)) and v in (0, 1):
            out[i] = bool(v)
            continue
        t = str(v).strip().lower()
        if t == "":
            unknown += 1
            continue
        if t in _TRUE:
            continue
        if t in _FALSE:
            out[i] = False
            continue
        if repr(v) not in bad:
            bad.append(repr(v))
    if bad:
        raise ValueError(f"column 'entity_present' must be boolean; got {', '.join(bad[:8])}")
    return out, unknown


def _iso3_column(values: pd.Series) -> list[str | None]:
    """ISO3 codes (``None`` = underspecified); ``ValueError`` listing values that are not countries."""
    table = countries()
    mapping: dict[Any, str | None] = {}
    unknown: dict[str, int] = {}
    out: list[str | None] = []
    for v in values.tolist():
        key = None if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA else str(v).strip()
        if key not in mapping:
            if key is None or is_none_answer(key):
                mapping[key] = None
            elif key.upper() in table:
                mapping[key] = key.upper()
            else:
                code = normalize_country(key)
                mapping[key] = code
                if code is None:
                    unknown[key] = 0
        if key in unknown:
            unknown[key] += 1
        out.append(mapping[key])
    if unknown:
        shown = ", ".join(f"{k!r} ({n} rows)" for k, n in list(unknown.items())[:10])
        more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
        raise ValueError(
            f"column 'country': {len(unknown)} value(s) are not ISO 3166 countries: {shown}{more}"
        )
    return out


def load_profile(
    source: str | os.PathLike[str] | pd.DataFrame, *, entity_column: str | None = None
) -> Profile:
    """Read and validate a geo-profiled dataset.

    Args:
        source: a Parquet, CSV, TSV or JSONL file, a folder of them (e.g. the shards written by
            ``fairsets geo profile``), or a DataFrame.
        entity_column: the entity column; ``None`` uses ``entity`` when present and otherwise
            treats the data as one entity (the overall analysis only).

    Returns:
        The validated profile (rows with ``entity_present == False`` removed).

    Raises:
        FileNotFoundError: no such file.
        ValueError: unreadable input, no ``country`` column, an explicit entity column that is
            missing, empty entities, non-boolean ``entity_present``, country values that are not
            countries, or no row left.
    """
    if isinstance(source, pd.DataFrame):
        frame, names, path = source.reset_index(drop=True), list(source.columns), None
    else:
        path = Path(source)
        frame, names = _read_input(path)
        frame = frame.reset_index(drop=True)
    where = str(path) if path is not None else "PROFILED"
    if "country" not in names:
        raise ValueError(f"{where} has no 'country' column (columns: {', '.join(map(str, names))})")
    if entity_column is not None and entity_column not in names:
        raise ValueError(
            f"{where} has no entity column {entity_column!r} (columns: {', '.join(map(str, names))})"
        )
    if entity_column is None and "entity" in names:
        entity_column = "entity"
    n_input = len(frame)
    keep, n_unknown = (
        _present_flags(frame["entity_present"]) if "entity_present" in frame else (np.ones(n_input, bool), 0)
    )
    rows = pd.DataFrame(index=pd.RangeIndex(n_input))
    rows["country"] = pd.Series(_iso3_column(frame["country"]), dtype=object)
    if "caption" in frame:
        rows["caption"] = frame["caption"].astype(object).where(frame["caption"].notna(), None)
    if entity_column is not None:
        ent = frame[entity_column].astype(object)
        empty = ent.isna() | (ent.astype(str).str.strip() == "")
        n_empty = int((empty & keep).sum())
        if n_empty:
            raise ValueError(
                f"{where}: {n_empty} row(s) have no value in the entity column {entity_column!r}"
            )
        rows["entity"] = ent.astype(str).str.strip()
    rows = rows[keep]
    if not len(rows):
        raise ValueError(
            f"{where}: no rows to analyse (input rows: {n_input}, entity_present False: {int((~keep).sum())})"
        )
    image_column = next((c for c in _IMAGE_COLUMNS if c in names), None)
    frame_images = (
        source[image_column].reset_index(drop=True)
        if isinstance(source, pd.DataFrame) and image_column
        else None
    )
    return Profile(
        rows, path, n_input, int((~keep).sum()), n_unknown, entity_column, image_column, frame_images
    )


# --------------------------------------------------------------------------- 1. shares


def country_counts(codes: Sequence[str | None] | pd.Series) -> pd.Series:
    """Rows per country (``None`` ignored), most frequent first, ties by ISO3 code."""
    s = pd.Series(list(codes), dtype=object).dropna()
    counts = s.value_counts()
    order = sorted(counts.index, key=lambda c: (-int(counts[c]), c))
    out = pd.Series(
        [int(counts[c]) for c in order], index=pd.Index(order, name="iso3"), dtype="int64", name="count"
    )
    return out


def share_table(codes: Sequence[str | None] | pd.Series, *, top_k: int = 10) -> dict[str, Any]:
    """Table 1: underspecified, top-``k`` and remaining shares of all rows (they sum to 1).

    Args:
        codes: the ISO3 code of every row, ``None`` for underspecified rows.
        top_k: how many of the most frequent countries make the "top" share (ties at the cut
            are broken by ISO3 code).

    Returns:
        ``{"n_rows", "n_specified", "n_underspecified", "n_countries", "underspecified", "top",
        "remaining", "top_k", "top_countries"}``.

    Raises:
        ValueError: no rows or ``top_k < 1``.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    codes = list(codes)
    n = len(codes)
    if n == 0:
        raise ValueError("no rows")
    counts = country_counts(codes)
    n_spec = int(counts.sum())
    top = counts.iloc[:top_k]
    n_top = int(top.sum())
    return {
        "n_rows": n,
        "n_specified": n_spec,
        "n_underspecified": n - n_spec,
        "n_countries": len(counts),
        "underspecified": (n - n_spec) / n,
        "top": n_top / n,
        "remaining": (n_spec - n_top) / n,
        "top_k": top_k,
        "top_countries": list(top.index),
    }


def continent_shares(counts: pd.Series) -> dict[str, Any]:
    """Table 11: rows per continent and their shares of the country-specified rows.

    Args:
        counts: rows per ISO3 code (:func:`country_counts`).

    Returns:
        ``{"counts": {code: n}, "shares": {code: fraction or None}}`` for NA SA EU AS AF OC
        (and AN when it has rows); shares are ``None`` when no row names a country.
    """
    table = countries()
    by: dict[str, int] = dict.fromkeys(CONTINENT_CODES, 0)
    for code, n in counts.items():
        cont = table[str(code)].continent or "?"
        by[cont] = by.get(cont, 0) + int(n)
    by = {k: v for k, v in by.items() if k in CONTINENT_CODES or v}
    total = sum(by.values())
    return {"counts": by, "shares": {k: (v / total if total else None) for k, v in by.items()}}


# --------------------------------------------------------------------------- 2. power law


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the powerlaw package (warnings and numpy floating-point noise)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


def _fit(data: np.ndarray) -> Any:
    import powerlaw

    with _quiet():
        fit = powerlaw.Fit(data, discrete=True, verbose=0)
        _ = fit.power_law  # fitted lazily on first access: do it while quiet
        return fit


def _fit_ok(fit: Any) -> bool:
    return all(np.isfinite(float(getattr(fit, a, math.nan))) for a in ("alpha", "xmin", "D"))


def _standard_error(fit: Any) -> float:
    pl = fit.power_law
    value = getattr(pl, "standard_err", None)
    if value is None:  # powerlaw < 2
        with _quiet():
            value = pl.sigma
    return float(value)


def sample_discrete_power_law(alpha: float, xmin: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Exact draws from the discrete power law ``p(x) = x^-α / ζ(α, x_min)``, ``x ≥ x_min``.

    Inverse transform on the complementary CDF ``S(x) = ζ(α, x) / ζ(α, x_min)``: for a uniform
    ``u`` in (0, 1] the draw is the largest ``x`` with ``S(x) ≥ u``, found by doubling and integer
    bisection (CSN Appendix D). Values are capped at 1e15.

    Raises:
        ValueError: ``α <= 1`` (not normalisable), ``x_min < 1`` or a negative size.
    """
    from scipy.special import zeta

    if not alpha > 1:
        raise ValueError(f"a discrete power law needs alpha > 1, got {alpha}")
    if xmin < 1 or size < 0:
        raise ValueError(f"need xmin >= 1 and size >= 0, got xmin={xmin}, size={size}")
    if size == 0:
        return np.zeros(0, dtype=np.int64)
    u = 1.0 - rng.random(size)  # (0, 1]
    z0 = zeta(alpha, xmin)

    def ccdf(x: np.ndarray) -> np.ndarray:
        return zeta(alpha, x) / z0

    lo = np.full(size, float(xmin))
    # Start near the continuous approximation and double until S(hi) < u.
    guess = np.floor((xmin - 0.5) * u ** (-1.0 / (alpha - 1.0)) + 0.5)
    hi = np.minimum(np.maximum(guess * 2.0, float(xmin) + 1.0), _MAX_PL_VALUE)
    for _ in range(64):
        grow = (ccdf(hi) >= u) & (hi < _MAX_PL_VALUE)
        if not grow.any():
            break
        lo = np.where(grow, hi, lo)
        hi = np.where(grow, np.minimum(hi * 2.0, _MAX_PL_VALUE), hi)
    # Invariant: S(lo) >= u (lo = xmin has S = 1) and S(hi) < u, unless hi hit the cap.
    capped = ccdf(hi) >= u
    for _ in range(64):
        gap = hi - lo > 1
        if not gap.any():
            break
        mid = np.floor((lo + hi) / 2.0)
        up = ccdf(mid) >= u
        lo = np.where(gap & up, mid, lo)
        hi = np.where(gap & ~up, mid, hi)
    out = np.where(capped, hi, lo)
    return out.astype(np.int64)


def _bootstrap_distance(synthetic: np.ndarray) -> float | None:
    """The KS distance of a refitted synthetic set (x_min included); ``None`` if the fit fails."""
    if len(np.unique(synthetic)) < 3:
        return None
    fit = _fit(synthetic)
    return float(fit.D) if _fit_ok(fit) else None


def _group_seed(seed: int, group: str) -> np.random.SeedSequence:
    return np.random.SeedSequence([int(seed), zlib.crc32(group.encode("utf-8"))])


def fit_power_law(
    counts: Sequence[int] | pd.Series,
    *,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int | np.random.SeedSequence = 0,
    alternatives: Sequence[str] = ALTERNATIVES,
    min_countries: int = MIN_POWER_LAW_COUNTRIES,
    progress: Progress | None = None,
    label: str = "",
    executor: Executor | None = None,
) -> dict[str, Any]:
    """Fit a discrete power law to per-country counts, with CSN's GOF p-value and comparisons.

    Args:
        counts: rows per country; zeros are dropped (one observation per country).
        bootstrap: synthetic data sets for the GOF p-value (0: no GOF test).
        seed: seed (or seed sequence) of the bootstrap.
        alternatives: distributions for ``Fit.distribution_compare``.
        min_countries: fewer non-zero countries give an ``insufficient_data`` record.
        progress: progress bars for the bootstrap.
        label: a name for the progress bar.
        executor: refit the synthetic sets in this pool (e.g. a ``ProcessPoolExecutor``); the
            result is the same as without one.

    Returns:
        ``{"status": "ok", "n_countries", "alpha", "xmin", "sigma", "ks_d", "n_tail",
        "estimator", "gof": {...}, "comparisons": {alt: {"R", "p", "favours"}}}``, or
        ``{"status": "insufficient_data", "reason", "n_countries"}``.
    """
    from fairsets.core.progress import Progress

    if bootstrap < 0:
        raise ValueError(f"bootstrap must be >= 0, got {bootstrap}")
    data = np.asarray(
        [int(c) for c in (counts.tolist() if isinstance(counts, pd.Series) else counts)], dtype=np.int64
    )
    if np.any(data < 0):
        raise ValueError("counts must be non-negative")
    data = np.sort(data[data > 0])
    n = len(data)
    if n < min_countries:
        return {
            "status": "insufficient_data",
            "reason": f"{n} countries with a non-zero count (at least {min_countries} needed)",
            "n_countries": n,
        }
    if len(np.unique(data)) < 3:
        return {
            "status": "insufficient_data",
            "reason": f"only {len(np.unique(data))} distinct count value(s); x_min cannot be fitted",
            "n_countries": n,
        }
    fit = _fit(data)
    if not _fit_ok(fit):
        return {
            "status": "insufficient_data",
            "reason": "the power-law fit did not converge",
            "n_countries": n,
        }
    alpha, xmin, d_emp = float(fit.alpha), round(float(fit.xmin)), float(fit.D)
    tail = data[data >= xmin]
    below = data[data < xmin]
    estimator = (
        "CSN eq. 3.7 approximation 1 + n / sum(ln(x / (xmin - 1/2)))"
        if getattr(fit.power_law, "estimate_discrete", False)
        else "numerical discrete MLE (Hurwitz zeta normalisation)"
    )
    record: dict[str, Any] = {
        "status": "ok",
        "n_countries": n,
        "alpha": alpha,
        "xmin": xmin,
        "sigma": _standard_error(fit),
        "ks_d": d_emp,
        "n_tail": len(tail),
        "estimator": estimator,
    }
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(int(seed))
    if bootstrap == 0:
        record["gof"] = {"status": "not_run", "reason": "bootstrap = 0"}
    elif not alpha > 1:
        record["gof"] = {
            "status": "not_run",
            "reason": f"alpha = {alpha:.3f} <= 1: no normalisable power law",
        }
    else:
        # The synthetic sets are drawn here, in order, from one generator: the p-value does not
        # depend on how many processes refit them.
        rng = np.random.default_rng(ss)
        synthetic_sets = []
        for _ in range(bootstrap):
            k = int(rng.binomial(n, len(tail) / n))
            synthetic_sets.append(
                np.concatenate(
                    [
                        sample_discrete_power_law(alpha, xmin, k, rng),
                        rng.choice(below, n - k, replace=True) if n - k else np.zeros(0, dtype=np.int64),
                    ]
                )
            )
        if executor is None:
            distances: Iterator[float | None] = map(_bootstrap_distance, synthetic_sets)
        else:
            distances = executor.map(_bootstrap_distance, synthetic_sets, chunksize=max(1, bootstrap // 64))
        d_syn: list[float] = []
        failed = 0
        progress = progress or Progress(False)
        with progress.stage(f"power-law bootstrap {label}".strip(), bootstrap) as advance:
            for d in distances:
                if d is None:
                    failed += 1
                else:
                    d_syn.append(d)
                advance(1)
        valid = len(d_syn)
        p = float(np.mean(np.asarray(d_syn) >= d_emp)) if valid else None
        record["gof"] = {
            "status": "ok" if valid else "failed",
            "p": p,
            "bootstrap": bootstrap,
            "n_valid": valid,
            "n_failed": failed,
            "plausible": (p >= PLAUSIBLE_P) if p is not None else None,
            "threshold": PLAUSIBLE_P,
            "seed_entropy": [int(x) for x in np.atleast_1d(ss.entropy)] + [int(x) for x in ss.spawn_key],
        }
    comparisons: dict[str, Any] = {}
    for alt in alternatives:
        with _quiet():
            try:
                R, p = fit.distribution_compare("power_law", alt)
                alt_ok = not bool(getattr(getattr(fit, alt), "noise_flag", False))
            except Exception as e:  # a failed alternative fit is reported, not fatal
                comparisons[alt] = {
                    "R": None,
                    "p": None,
                    "favours": None,
                    "error": f"{type(e).__name__}: {e}",
                }
                continue
        R, p = float(R), float(p)
        if not (math.isfinite(R) and math.isfinite(p)):
            favours = None
        elif p < COMPARE_P:
            favours = "power_law" if R > 0 else alt
        else:
            favours = "neither"
        comparisons[alt] = {"R": R, "p": p, "favours": favours, "alternative_fit_ok": alt_ok}
    record["comparisons"] = comparisons
    return record


# --------------------------------------------------------------------------- 3. correlations


def frequency_correlation(
    counts: pd.Series, values: pd.Series, *, include_zero: bool = True
) -> dict[str, Any]:
    """Pearson and Spearman correlation of country frequency with a reference value.

    Args:
        counts: rows per ISO3 code.
        values: the reference value per ISO3 code (GDP, population); non-finite values are
            dropped.
        include_zero: count reference countries that are absent from the data as frequency 0
            (the default, as the paper correlates over countries); False restricts to countries
            with at least one row.

    Returns:
        ``{"status": "ok", "n", "n_zero_count", "n_not_in_reference", "zero_counts_included",
        "pearson": {"r", "p"}, "spearman": {"rho", "p"}}`` or an ``insufficient_data`` record
        (fewer than 3 countries, or constant input).
    """
    from scipy import stats

    v = pd.to_numeric(values, errors="coerce").astype("float64")
    v = v[np.isfinite(v)]
    c = counts.reindex(v.index, fill_value=0).astype("float64")
    if not include_zero:
        keep = c > 0
        c, v = c[keep], v[keep]
    base = {
        "n": len(c),
        "n_zero_count": int((c == 0).sum()),
        "n_not_in_reference": int((~counts.index.isin(v.index) & (counts > 0)).sum()),
        "zero_counts_included": include_zero,
    }
    if len(c) < 3:
        return {"status": "insufficient_data", "reason": f"{len(c)} countries (at least 3 needed)", **base}
    if c.nunique() < 2 or v.nunique() < 2:
        return {"status": "insufficient_data", "reason": "constant input", **base}
    pr = stats.pearsonr(c.to_numpy(), v.to_numpy())
    sr = stats.spearmanr(c.to_numpy(), v.to_numpy())
    return {
        "status": "ok",
        **base,
        "pearson": {"r": float(pr.statistic), "p": float(pr.pvalue)},
        "spearman": {"rho": float(sr.statistic), "p": float(sr.pvalue)},
    }


# --------------------------------------------------------------------------- 4. representativeness


def representativeness(counts: pd.Series, p_true: pd.Series, *, r: float = 3.0) -> dict[str, Any]:
    """Geographic representativeness ``GR(c) = p(c) / p_true(c)`` and the under/over sets (§4.2).

    Args:
        counts: rows per ISO3 code.
        p_true: the reference probability per ISO3 code; countries with ``p_true <= 0`` are
            outside the reference. Renormalised to sum to 1.
        r: the threshold (``>= 1``): over if ``GR > r``, under if ``GR < 1/r``.

    Returns:
        ``{"status": "ok", "r", "n_countries", "n_under", "n_over", "under_share", "over_share",
        "under", "over", "n_rows", "n_rows_outside_reference", "outside_reference", "countries"}``
        where ``countries`` lists ``{"iso3", "count", "p", "p_true", "gr", "status"}`` by
        decreasing GR and the shares are fractions of the reference's countries; or an
        ``insufficient_data`` record when no row is in the reference. ``under`` is ordered by
        increasing GR, ``over`` by decreasing GR (ties by ISO3 code).
    """
    if not r >= 1:
        raise ValueError(f"r must be >= 1, got {r}")
    ref = pd.to_numeric(p_true, errors="coerce").astype("float64")
    ref = ref[np.isfinite(ref) & (ref > 0)]
    if not len(ref):
        raise ValueError("the reference distribution is empty")
    ref = ref / ref.sum()
    inside = counts.reindex(ref.index, fill_value=0).astype("int64")
    outside = counts[~counts.index.isin(ref.index)]
    total = int(inside.sum())
    base = {
        "r": r,
        "n_countries": len(ref),
        "n_rows": total,
        "n_rows_outside_reference": int(outside.sum()),
        "outside_reference": {str(k): int(v) for k, v in outside.items()},
    }
    if total == 0:
        return {"status": "insufficient_data", "reason": "no row names a country of the reference", **base}
    p = inside / total
    gr = p / ref
    status = np.where(gr > r, "over", np.where(gr < 1.0 / r, "under", "ok"))
    order = sorted(ref.index, key=lambda c: (-float(gr[c]), c))
    pos = {c: i for i, c in enumerate(ref.index)}
    rows = [
        {
            "iso3": c,
            "count": int(inside[c]),
            "p": float(p[c]),
            "p_true": float(ref[c]),
            "gr": float(gr[c]),
            "status": str(status[pos[c]]),
        }
        for c in order
    ]
    under = [x["iso3"] for x in sorted(rows, key=lambda x: (x["gr"], x["iso3"])) if x["status"] == "under"]
    over = [x["iso3"] for x in rows if x["status"] == "over"]
    return {
        "status": "ok",
        **base,
        "n_under": len(under),
        "n_over": len(over),
        "under_share": len(under) / len(ref),
        "over_share": len(over) / len(ref),
        "under": under,
        "over": over,
        "countries": rows,
    }


# --------------------------------------------------------------------------- 5. diversity


def _diversity(
    profile: Profile,
    encoder: Encoder,
    modality: str,
    groups: Mapping[str, pd.Index],
    min_samples: int,
    progress: Progress | None,
) -> dict[str, Any]:
    rows = profile.rows
    eligible: dict[str, list[str]] = {}
    freqs: dict[str, dict[str, int]] = {}
    needed: list[int] = []
    for name, index in groups.items():
        counts = country_counts(rows.loc[index, "country"])
        freqs[name] = {str(k): int(v) for k, v in counts.items()}
        eligible[name] = [c for c, n in freqs[name].items() if n >= min_samples]
        sub = rows.loc[index]
        needed += sub.index[sub["country"].isin(eligible[name])].tolist()
    needed = sorted(set(needed))
    if modality == "text":
        if "caption" not in rows:
            raise ValueError("caption diversity needs a 'caption' column (or --text-encoder none)")
        items = rows.loc[needed, "caption"].tolist()
    else:
        items = profile.images(needed)
    encoded = encoder.encode(items, progress) if needed else None
    position = np.asarray(needed, dtype=np.int64)
    kept_rows = position[encoded.kept] if encoded is not None else np.zeros(0, dtype=np.int64)
    vectors = encoded.vectors if encoded is not None else np.zeros((0, 1))
    row_of = {int(r): i for i, r in enumerate(kept_rows)}
    out_groups: dict[str, Any] = {}
    for name, index in groups.items():
        members = [int(i) for i in index if int(i) in row_of]
        sel = [row_of[i] for i in members]
        labels = rows.loc[members, "country"].tolist() if members else []
        feats = vectors[sel] if sel else np.zeros((0, vectors.shape[1] if vectors.ndim == 2 else 1))
        mask = [lab in eligible[name] for lab in labels]
        out_groups[name] = country_diversity(
            [lab for lab, m in zip(labels, mask, strict=True) if m],
            feats[np.asarray(mask, dtype=bool)] if len(mask) else feats,
            freqs[name],
            min_samples=min_samples,
            eligible=eligible[name],
        )
    skipped = encoded.skipped if encoded is not None else {}
    means = [g["mean"] for g in out_groups.values() if g["mean"] is not None]
    rhos = [g["rho"]["r"] for g in out_groups.values() if g["rho"].get("status") == "ok"]
    return {
        "encoder": encoder.name,
        "n_encoded": len(kept_rows),
        "n_skipped": len(skipped),
        "skipped": [
            {"row": int(position[i]), "reason": reason} for i, reason in sorted(skipped.items())[:20]
        ],
        "groups": out_groups,
        "summary": {
            "mean_diversity": float(np.mean(means)) if means else None,
            "mean_rho": float(np.mean(rhos)) if rhos else None,
            "n_groups": len(means),
        },
    }


# --------------------------------------------------------------------------- orchestration


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
            corr[col] = frequency_correlation(counts, ref_values[col].dropna())
    record["correlations"] = corr
    if weights is None:
        record["representation"] = {
            "status": "unavailable",
            "reason": "no reference distribution for this group",
        }
    else:
        record["representation"] = representativeness(counts, weights, r=r)
    return record


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
    min_samples: int = 100,
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
        min_samples: diversity is computed for (entity, country) cells with ``n >= min_samples``.
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
    if min_samples < 1:
        raise ValueError(f"min_samples must be >= 1, got {min_samples}")
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
    div: dict[str, Any] = {
        "min_samples": min_samples,
        "rule": f"a country is scored when it has n >= {min_samples} samples (the paper: n > 100)",
        "std": "population standard deviation (ddof=0) over countries",
        "text": None,
        "image": None,
    }
    if text_encoder is not None:
        div["text"] = _diversity(profile, text_encoder, "text", groups, min_samples, progress)
    if image_encoder is not None:
        div["image"] = _diversity(profile, image_encoder, "image", groups, min_samples, progress)

    doc: dict[str, Any] = {
        "schema": ANALYSIS_SCHEMA,
        "fairsets_version": __version__,
        "input": {
            "path": str(profile.path) if profile.path is not None else None,
            "n_rows_input": profile.n_input,
            "n_rows": len(rows),
            "n_excluded_entity_absent": profile.n_entity_absent,
            "n_entity_unknown": profile.n_entity_unknown,
            "entity_column": profile.entity_column,
            "entities": entities,
            "image_column": profile.image_column,
        },
        "settings": {
            "top_k": top_k,
            "r": r,
            "min_samples": min_samples,
            "bootstrap": bootstrap,
            "seed": seed,
            "alternatives": alternatives,
            "plausible_p": PLAUSIBLE_P,
            "compare_p": COMPARE_P,
            "min_power_law_countries": MIN_POWER_LAW_COUNTRIES,
            "correlations": "over the reference's countries with a value; "
            "countries absent from the data count as 0",
            "gr": "p renormalised over rows whose country is in the reference; "
            "over if GR > r, under if GR < 1/r",
        },
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
        from .report import render_report

        render_report(doc, out_dir / REPORT_FILE)
    return doc


# --------------------------------------------------------------------------- CSV tables


def _groups(doc: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    return [*doc["entities"].items(), (OVERALL, doc["overall"])]


def _csv(path: Path, frame: pd.DataFrame) -> Path:
    return atomic_write_text(path, frame.to_csv(index=False, lineterminator="\n", float_format="%.10g"))


def write_tables(doc: Mapping[str, Any], out: str | os.PathLike[str]) -> list[Path]:
    """Write the analysis as CSV tables (atomically) and return their paths.

    ``shares.csv`` (Table 1), ``countries.csv`` (counts), ``continents.csv`` (Table 11),
    ``power_law.csv``, ``correlations.csv``, ``representation.csv`` (Tables 2/14, per country)
    and ``diversity.csv`` (per group, modality and country). The overall rows have group
    ``overall``; the entity rows carry ``kind = entity``.
    """
    out = Path(out)
    table = countries()
    shares, counts, conts, pls, corrs, reps, divs = [], [], [], [], [], [], []
    for name, g in _groups(doc):
        kind = "overall" if g is doc["overall"] else "entity"
        s = g["shares"]
        shares.append(
            {
                "group": name,
                "kind": kind,
                "n_rows": g["n_rows"],
                "n_specified": g["n_specified"],
                "n_countries": g["n_countries"],
                "underspecified": s["underspecified"],
                f"top_{s['top_k']}": s["top"],
                "remaining": s["remaining"],
                "top_countries": " ".join(s["top_countries"]),
            }
        )
        for rank, (code, n) in enumerate(g["counts"].items(), start=1):
            c = table[code]
            counts.append(
                {
                    "group": name,
                    "rank": rank,
                    "iso3": code,
                    "name": c.name,
                    "continent": c.continent,
                    "count": n,
                    "share_of_rows": n / g["n_rows"],
                    "share_of_specified": n / g["n_specified"],
                }
            )
        for code, n in g["continents"]["counts"].items():
            conts.append(
                {
                    "group": name,
                    "continent": code,
                    "name": CONTINENTS.get(code, ""),
                    "count": n,
                    "share": g["continents"]["shares"][code],
                }
            )
        pl = g["power_law"]
        row: dict[str, Any] = {"group": name, "status": pl["status"], "n_countries": pl["n_countries"]}
        if pl["status"] == "ok":
            gof = pl["gof"]
            row.update(
                alpha=pl["alpha"],
                xmin=pl["xmin"],
                sigma=pl["sigma"],
                ks_d=pl["ks_d"],
                n_tail=pl["n_tail"],
                gof_p=gof.get("p"),
                bootstrap=gof.get("bootstrap"),
                plausible=gof.get("plausible"),
            )
            for alt, cmp_ in pl["comparisons"].items():
                row[f"R_{alt}"] = cmp_["R"]
                row[f"p_{alt}"] = cmp_["p"]
        else:
            row["reason"] = pl.get("reason")
        pls.append(row)
        for var, cr in g["correlations"].items():
            corrs.append(
                {
                    "group": name,
                    "variable": var,
                    "status": cr["status"],
                    "n": cr.get("n"),
                    "n_zero_count": cr.get("n_zero_count"),
                    "n_not_in_reference": cr.get("n_not_in_reference"),
                    "pearson_r": (cr.get("pearson") or {}).get("r"),
                    "pearson_p": (cr.get("pearson") or {}).get("p"),
                    "spearman_rho": (cr.get("spearman") or {}).get("rho"),
                    "spearman_p": (cr.get("spearman") or {}).get("p"),
                }
            )
        rep = g["representation"]
        for c in rep.get("countries") or []:
            reps.append({"group": name, **c, "name": table[c["iso3"]].name})
    for modality in ("text", "image"):
        d = doc["diversity"].get(modality)
        if not d:
            continue
        for name, g in d["groups"].items():
            for c in g["countries"]:
                divs.append({"group": name, "modality": modality, **c, "name": table[c["iso3"]].name})
    written = []
    specs = [
        ("shares.csv", shares, None),
        (
            "countries.csv",
            counts,
            ["group", "rank", "iso3", "name", "continent", "count", "share_of_rows", "share_of_specified"],
        ),
        ("continents.csv", conts, ["group", "continent", "name", "count", "share"]),
        ("power_law.csv", pls, None),
        ("correlations.csv", corrs, None),
        ("representation.csv", reps, ["group", "iso3", "name", "count", "p", "p_true", "gr", "status"]),
        ("diversity.csv", divs, ["group", "modality", "iso3", "name", "frequency", "n", "diversity"]),
    ]
    for fname, records, columns in specs:
        frame = (
            pd.DataFrame.from_records(records, columns=columns)
            if columns
            else pd.DataFrame.from_records(records)
        )
        if columns is None and records:
            seen: dict[str, None] = {}
            for rec in records:
                seen.update(dict.fromkeys(rec))
            frame = frame.reindex(columns=list(seen))
        written.append(_csv(out / fname, frame))
    return written
