"""An independent discrete power-law MLE for tests: maximise ``-n ln ζ(α, x_min) - α Σ ln x``.

Written apart from ``fairsets.geo.analyze.power_law`` (plain SciPy, no shared code) so the tests
check the fit against the definition, not against itself.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special


def discrete_mle(x: np.ndarray, xmin: int, upper: float = 30.0) -> float:
    """α of the discrete power law fitted to the values of ``x`` at or above ``xmin``."""
    tail = np.asarray(x)[np.asarray(x) >= xmin].astype(float)
    n, s = len(tail), float(np.sum(np.log(tail)))
    res = optimize.minimize_scalar(
        lambda a: n * math.log(special.zeta(a, xmin)) + a * s,
        bounds=(1.0001, upper),
        method="bounded",
        options={"xatol": 1e-10},
    )
    return float(res.x)
