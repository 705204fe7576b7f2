"""2. Power law: a discrete power-law fit of per-country counts with CSN's bootstrap GOF p-value
and likelihood-ratio comparisons (Clauset, Shalizi & Newman 2009; see :mod:`fairsets.geo.analyze`)."""

from __future__ import annotations

import contextlib
import io
import math
import warnings
import zlib
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from fairsets.core.progress import Progress

__all__ = [
    "ALTERNATIVES",
    "COMPARE_P",
    "DEFAULT_BOOTSTRAP",
    "MIN_POWER_LAW_COUNTRIES",
    "PLAUSIBLE_P",
    "fit_power_law",
    "sample_discrete_power_law",
]

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
_MAX_PL_VALUE = 1e15  # the synthetic sampler's cap (exact integers in float64)


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
