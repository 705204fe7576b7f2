"""2. Power law: a discrete power-law fit of per-country counts, CSN's bootstrap GOF p-value and
likelihood-ratio comparisons (Clauset, Shalizi & Newman 2009, "CSN"; see :mod:`fairsets.geo.analyze`).

**α** is the exact discrete maximum-likelihood estimate (CSN eq. 3.5): over the tail
``x_i ≥ x_min`` it maximises ``L(α) = −n ln ζ(α, x_min) − α Σ ln x_i`` with the Hurwitz zeta
``scipy.special.zeta(α, x_min)``, over :data:`ALPHA_BOUNDS` = (1.0001, 20) — wide enough that real
count data are not clipped (the ``powerlaw`` package bounds α to [0, 3], so a tail with α = 3.5 came
out as 3.00 with a 3-point tail). ``L`` is concave in α (``ln ζ`` is convex), so the optimum is
unique; when it lies within 1e-3 of a bound the record says so (``alpha_at_bound``). **σ** is the
observed Fisher information ``1 / sqrt(−L''(α̂))``, ``L''`` by central differences of ``ln ζ``
(``sigma_method``); it is close to CSN's ``(α − 1)/sqrt(n)`` when ``x_min`` is large.

**x_min** minimises the Kolmogorov–Smirnov distance (CSN §3.3): every distinct count that leaves
at least :data:`MIN_TAIL` countries (and two distinct values) in the tail is a candidate; α is
fitted for all candidates at once (a vectorised golden-section search on the concave likelihood,
then the chosen candidate is polished with ``scipy.optimize.minimize_scalar(method="bounded")``),
and ``D`` is the supremum over *every integer* ``x ≥ x_min`` (as CSN's ``plfit`` evaluates it, not
only at observed values) of ``|F_emp(x) − F(x)|``, with the fitted CDF
``F(x) = 1 − ζ(α, x + 1) / ζ(α, x_min)``. Between two observed values the empirical CDF is flat and
``F`` increases, so the supremum is reached at an observed value or just before the next one: two
zeta evaluation and one power per (candidate, value) pair suffice. Ties in ``D`` keep the smaller ``x_min``.

**Goodness of fit** (CSN §4.1): each synthetic data set keeps the empirical values below ``x_min``
and draws from the fitted discrete power law above it, in the empirical proportion; it is refitted
with the *same* estimator (``x_min`` included) and ``p`` is the share of synthetic sets with
``D ≥ D_empirical``. The sets are drawn in order from one seeded generator, so ``p`` does not depend
on the executor. The record gives ``p`` and both readings of it: the GeoProfiler paper says a
distribution "follows the power law (p-value < 0.05)" (``gof.paper_follows_power_law``,
:data:`PAPER_P`); CSN read ``p ≥ 0.1`` as "the power law is plausible" and ``p < 0.1`` as ruling it
out (``gof.csn_plausible``, also ``gof.plausible``, :data:`PLAUSIBLE_P`). The two readings are
nearly opposite: a small p is evidence *against* a power law in CSN's test.

**Comparisons** (likelihood ratio, CSN §5) test the power law that is reported — the α and
``x_min`` above, its log-likelihoods ``−α ln x − ln ζ(α, x_min)`` computed here — against each
alternative fitted by ``powerlaw`` (maximum likelihood) on the same tail ``x ≥ x_min``, with
``powerlaw``'s ``loglikelihood_ratio``: Vuong's normalised test for the non-nested alternatives,
Wilks' for the truncated power law, which nests it. (``powerlaw``'s own ``distribution_compare``
would compare its own power-law fit, whose α the package clips to [0, 3]: for a steep law, α = 3.5
reported, it would test α = 3.0.) ``comparisons_alpha`` records the α compared: the reported one.

Speed: one fit of ~200 countries takes a few milliseconds (precomputed suffix sums, candidates
restricted to tails of at least ``MIN_TAIL``, the KS distance from zeta differences), so 1,000
bootstrap refits take seconds on one core.
"""

from __future__ import annotations

import contextlib
import io
import math
import warnings
import zlib
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from fairsets.core.progress import Progress

__all__ = [
    "ALPHA_BOUNDS",
    "ALTERNATIVES",
    "COMPARE_P",
    "COMPARISONS_FIT",
    "DEFAULT_BOOTSTRAP",
    "MIN_POWER_LAW_COUNTRIES",
    "MIN_TAIL",
    "PAPER_P",
    "PLAUSIBLE_P",
    "fit_power_law",
    "sample_discrete_power_law",
]

ALTERNATIVES: tuple[str, ...] = ("lognormal", "exponential", "truncated_power_law", "stretched_exponential")
#: Synthetic data sets for the goodness-of-fit p-value (a refit of ~200 countries takes 1–15 ms;
#: ``workers`` spreads the refits over processes). The p-value's standard error is at most
#: 0.5/sqrt(B) ≈ 0.03; CSN suggest 2500 for ±0.01 (``--bootstrap 2500``).
DEFAULT_BOOTSTRAP = 250
MIN_POWER_LAW_COUNTRIES = 10
#: What the comparisons compare (``comparisons_fit`` in the record).
COMPARISONS_FIT = (
    "the reported power law (alpha, x_min) against each alternative fitted by powerlaw (maximum "
    "likelihood) on the same tail; Vuong's normalised test, Wilks' for the nested truncated power law"
)
#: Fewest tail points (countries with a count ≥ x_min) a candidate x_min may leave.
MIN_TAIL = 10
#: CSN: the power law is ruled out when the GOF p-value is below 0.1.
PLAUSIBLE_P = 0.1
#: The GeoProfiler paper: a distribution "follows the power law" when the p-value is below 0.05.
PAPER_P = 0.05
#: Significance for calling a likelihood-ratio comparison.
COMPARE_P = 0.1
#: The search interval of α (a discrete power law needs α > 1).
ALPHA_BOUNDS: tuple[float, float] = (1.0001, 20.0)
_BOUND_TOL = 1e-3  # an optimum this close to a bound is flagged
_SCAN_TOL = 1e-5  # golden-section tolerance of the candidate scan (the chosen one is polished)
_POLISH_TOL = 1e-9
_SIGMA_STEP = 1e-4
_MAX_PL_VALUE = 1e15  # the synthetic sampler's cap (exact integers in float64)
_INVPHI = (math.sqrt(5.0) - 1.0) / 2.0
ESTIMATOR = "exact discrete MLE (CSN 2009 eq. 3.5, Hurwitz zeta), x_min by KS (CSN §3.3)"
SIGMA_METHOD = "observed Fisher information 1/sqrt(-L''(alpha)), L'' by central differences of ln zeta"
GOF_DEFINITION = (
    f"p is the share of synthetic power-law data sets refitted with a KS distance at least the "
    f"empirical one; the GeoProfiler paper reads p < {PAPER_P} as 'follows a power law' "
    f"(paper_follows_power_law), CSN read p >= {PLAUSIBLE_P} as 'a power law is plausible' and "
    f"p < {PLAUSIBLE_P} as ruling it out (csn_plausible, plausible)."
)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the powerlaw package (warnings and numpy floating-point noise)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


class _Fit(NamedTuple):
    alpha: float
    xmin: int
    ks_d: float
    n_tail: int
    at_bound: bool


def _scaled_nll(alpha: np.ndarray, xmin: np.ndarray, mean_log_ratio: np.ndarray) -> np.ndarray:
    """``−L(α)/n`` up to a constant: ``ln(ζ(α, x_min) x_min^α) + α · mean ln(x / x_min)``.

    Scaling by ``x_min^α`` keeps the terms of order 1, so the search is not limited by rounding of
    the large ``α Σ ln x_i``."""
    from scipy.special import zeta

    return np.log(zeta(alpha, xmin)) + alpha * np.log(xmin) + alpha * mean_log_ratio


def _golden_alpha(xmin: np.ndarray, mean_log_ratio: np.ndarray) -> np.ndarray:
    """The maximising α for every candidate at once (golden section; ``L`` is concave in α)."""
    lo, hi = ALPHA_BOUNDS
    a = np.full(len(xmin), lo)
    b = np.full(len(xmin), hi)
    c = b - _INVPHI * (b - a)
    d = a + _INVPHI * (b - a)
    fc = _scaled_nll(c, xmin, mean_log_ratio)
    fd = _scaled_nll(d, xmin, mean_log_ratio)
    for _ in range(math.ceil(math.log(_SCAN_TOL / (hi - lo)) / math.log(_INVPHI))):
        left = fc < fd  # the minimum lies in [a, d]
        b = np.where(left, d, b)
        a = np.where(left, a, c)
        x_new = np.where(left, b - _INVPHI * (b - a), a + _INVPHI * (b - a))
        f_new = _scaled_nll(x_new, xmin, mean_log_ratio)
        c, fc, d, fd = (
            np.where(left, x_new, d),
            np.where(left, f_new, fd),
            np.where(left, c, x_new),
            np.where(left, fc, f_new),
        )
    return (a + b) / 2.0


def _polish_alpha(xmin: float, mean_log_ratio: float) -> float:
    from scipy.optimize import minimize_scalar

    res = minimize_scalar(
        lambda a: float(_scaled_nll(np.asarray(a), np.asarray(xmin), np.asarray(mean_log_ratio))),
        bounds=ALPHA_BOUNDS,
        method="bounded",
        options={"xatol": _POLISH_TOL},
    )
    return float(res.x)


def _ks_distances(
    alpha: np.ndarray, values: np.ndarray, counts: np.ndarray, suffix: np.ndarray, rows: np.ndarray
) -> np.ndarray:
    """KS distance of candidate ``rows`` (indices into the distinct ``values``) with their ``alpha``.

    ``D = sup over integers x ≥ x_min of |F_emp(x) − F(x)|``: evaluated at each observed value
    ``v_j`` and at ``v_{j+1} − 1`` (the empirical CDF is flat in between, ``F`` increasing)."""
    from scipy.special import zeta

    m = len(values)
    lengths = m - rows
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    r = np.repeat(np.arange(len(rows)), lengths)  # position in rows
    col = np.arange(int(lengths.sum())) - starts[r] + rows[r]  # index into values, >= rows[r]
    a = alpha[r]
    v = values[col]
    z = zeta(a, v)  # ζ(α, v_j)
    z0 = z[starts][r]  # ζ(α, x_min): the first entry of each row
    n_tail = suffix[rows][r]
    emp = (n_tail - suffix[col] + counts[col]) / n_tail  # F_emp(v_j)
    fit_at = 1.0 - (z - np.exp(-a * np.log(v))) / z0  # F(v_j) = 1 − ζ(α, v_j + 1)/ζ(α, x_min)
    z_next = np.append(z[1:], 0.0)  # ζ(α, v_{j+1}) (next entry of the same row)
    last = col == m - 1
    fit_before_next = np.where(last, emp, 1.0 - z_next / z0)  # F(v_{j+1} − 1)
    gaps = np.maximum(np.abs(emp - fit_at), np.abs(fit_before_next - emp))
    return np.maximum.reduceat(gaps, starts)


def _fit_discrete(data: np.ndarray) -> _Fit | str:
    """The exact discrete MLE with x_min by KS minimisation, or the reason it cannot be fitted."""
    values, counts = np.unique(data, return_counts=True)
    values = values.astype(np.float64)
    counts = counts.astype(np.float64)
    m = len(values)
    suffix = np.cumsum(counts[::-1])[::-1]  # countries with a count >= values[i]
    # Candidates: a tail of at least MIN_TAIL countries and two distinct values (suffix decreases).
    n_cand = min(int(np.sum(suffix >= MIN_TAIL)), m - 1)
    if n_cand <= 0:
        return (
            f"no x_min leaves at least {MIN_TAIL} countries with two distinct counts in the tail "
            f"({int(suffix[0]) if m else 0} countries, {m} distinct count(s))"
        )
    logs = np.log(values)
    suffix_log = np.cumsum((counts * logs)[::-1])[::-1]
    rows = np.arange(n_cand)
    xmins = values[rows]
    mean_log_ratio = suffix_log[rows] / suffix[rows] - logs[rows]
    with np.errstate(all="ignore"):
        alphas = _golden_alpha(xmins, mean_log_ratio)
        d = _ks_distances(alphas, values, counts, suffix, rows)
    d = np.where(np.isfinite(d), d, np.inf)
    best = int(np.argmin(d))
    if not np.isfinite(d[best]):
        return "the KS distance is not finite for any x_min"
    with np.errstate(all="ignore"):
        alpha = _polish_alpha(float(xmins[best]), float(mean_log_ratio[best]))
        ks_d = float(_ks_distances(np.asarray([alpha]), values, counts, suffix, rows[best : best + 1])[0])
    lo, hi = ALPHA_BOUNDS
    return _Fit(
        alpha=alpha,
        xmin=int(values[best]),
        ks_d=ks_d,
        n_tail=int(suffix[best]),
        at_bound=bool(alpha - lo < _BOUND_TOL or hi - alpha < _BOUND_TOL),
    )


def _sigma(alpha: float, xmin: int, n_tail: int) -> float:
    """``1 / sqrt(−L''(α))`` with ``−L'' = n (ln ζ)''(α, x_min)`` by central differences."""
    from scipy.special import zeta

    h = min(_SIGMA_STEP, (alpha - 1.0) / 2.0)
    g = np.log(zeta(np.asarray([alpha - h, alpha, alpha + h]), float(xmin)))
    second = float((g[0] - 2.0 * g[1] + g[2]) / (h * h))
    return 1.0 / math.sqrt(n_tail * second) if second > 0 and math.isfinite(second) else math.nan


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
    """The KS distance of a refitted synthetic set (x_min included); ``None`` if it cannot be fitted."""
    if len(np.unique(synthetic)) < 3:
        return None
    fit = _fit_discrete(synthetic)
    return fit.ks_d if isinstance(fit, _Fit) else None


def _group_seed(seed: int, group: str) -> np.random.SeedSequence:
    return np.random.SeedSequence([int(seed), zlib.crc32(group.encode("utf-8"))])


def _insufficient(reason: str, n: int) -> dict[str, Any]:
    return {"status": "insufficient_data", "reason": reason, "n_countries": n}


def _compare(data: np.ndarray, alpha: float, xmin: int, alternatives: Sequence[str]) -> dict[str, Any]:
    """Likelihood-ratio comparisons of the reported power law (``alpha``, ``xmin``) against each
    alternative, fitted by ``powerlaw`` (maximum likelihood) on the same tail ``x >= xmin``."""
    import powerlaw
    from powerlaw.statistics import loglikelihood_ratio
    from scipy.special import zeta

    comparisons: dict[str, Any] = {}
    with _quiet():
        fit = powerlaw.Fit(data, discrete=True, xmin=xmin, verbose=0)
    tail = np.asarray(fit.data, dtype=float)
    # the reported law's own log-likelihoods: ln p(x) = −α ln x − ln ζ(α, x_min) (CSN eq. 2.7)
    ll_power = -alpha * np.log(tail) - math.log(float(zeta(alpha, xmin)))
    for alt in alternatives:
        with _quiet():
            try:
                ll_alt = np.asarray(getattr(fit, alt).loglikelihoods(tail), dtype=float)
                # nested (Wilks, one degree of freedom) when the power law is a special case of the
                # alternative (the truncated power law at λ = 0); otherwise Vuong's normalised test
                R, p = loglikelihood_ratio(ll_power, ll_alt, nested="power_law" in alt)
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
        comparisons[alt] = {
            "R": R,
            "p": p,
            "favours": favours,
            "alternative_fit_ok": alt_ok,
            "test": "nested (Wilks)" if "power_law" in alt else "Vuong (normalised)",
        }
    return comparisons


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
        alternatives: distributions the reported law is compared with (``powerlaw`` names).
        min_countries: fewer non-zero countries give an ``insufficient_data`` record (and fewer
            than :data:`MIN_TAIL` always do: no tail could be fitted).
        progress: progress bars for the bootstrap.
        label: a name for the progress bar.
        executor: refit the synthetic sets in this pool (e.g. a ``ProcessPoolExecutor``); the
            result is the same as without one.

    Returns:
        ``{"status": "ok", "n_countries", "alpha", "xmin", "sigma", "ks_d", "n_tail",
        "estimator", "sigma_method", "alpha_bounds", "alpha_at_bound", "min_tail",
        "comparisons_fit", "comparisons_alpha", "gof": {"status", "p", "bootstrap", "n_valid",
        "n_failed", "plausible", "csn_plausible", "threshold", "paper_follows_power_law",
        "paper_threshold", "definition", "seed_entropy"}, "comparisons": {alt: {"R", "p",
        "favours", ...}}}`` (``notes`` when α lies at a bound), or ``{"status":
        "insufficient_data", "reason", "n_countries"}``.
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
        return _insufficient(f"{n} countries with a non-zero count (at least {min_countries} needed)", n)
    if n < MIN_TAIL:
        return _insufficient(
            f"{n} countries with a non-zero count; a power-law tail needs at least {MIN_TAIL}", n
        )
    n_distinct = len(np.unique(data))
    if n_distinct < 3:
        return _insufficient(f"only {n_distinct} distinct count value(s); x_min cannot be fitted", n)
    fit = _fit_discrete(data)
    if not isinstance(fit, _Fit):
        return _insufficient(fit, n)
    alpha, xmin, d_emp = fit.alpha, fit.xmin, fit.ks_d
    below = data[data < xmin]
    record: dict[str, Any] = {
        "status": "ok",
        "n_countries": n,
        "alpha": alpha,
        "xmin": xmin,
        "sigma": _sigma(alpha, xmin, fit.n_tail),
        "ks_d": d_emp,
        "n_tail": fit.n_tail,
        "estimator": ESTIMATOR,
        "sigma_method": SIGMA_METHOD,
        "alpha_bounds": list(ALPHA_BOUNDS),
        "alpha_at_bound": fit.at_bound,
        "min_tail": MIN_TAIL,
    }
    if fit.at_bound:
        record["notes"] = [
            f"alpha = {alpha:.4f} lies within {_BOUND_TOL} of the search bounds {list(ALPHA_BOUNDS)}: "
            "the tail is not a usable power law"
        ]
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(int(seed))
    if bootstrap == 0:
        record["gof"] = {"status": "not_run", "reason": "bootstrap = 0"}
    else:
        # The synthetic sets are drawn here, in order, from one generator: the p-value does not
        # depend on how many processes refit them.
        rng = np.random.default_rng(ss)
        synthetic_sets = []
        for _ in range(bootstrap):
            k = int(rng.binomial(n, fit.n_tail / n))
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
            "csn_plausible": (p >= PLAUSIBLE_P) if p is not None else None,
            "threshold": PLAUSIBLE_P,
            "paper_follows_power_law": (p < PAPER_P) if p is not None else None,
            "paper_threshold": PAPER_P,
            "definition": GOF_DEFINITION,
            "seed_entropy": [int(x) for x in np.atleast_1d(ss.entropy)] + [int(x) for x in ss.spawn_key],
        }
    record["comparisons_fit"] = COMPARISONS_FIT
    record["comparisons_alpha"] = alpha  # the law compared is the one reported
    record["comparisons"] = _compare(data, alpha, xmin, alternatives) if alternatives else {}
    return record
