"""Diversity of a set of images or captions (GeoProfiler §4.3, Appendix A.10) and its encoders.

``div(S) = sqrt(mean_i ‖f(x_i) − f̄‖²)`` where ``f(x_i)`` is the L2-normalised feature of sample
``x_i`` and ``f̄`` their mean. Since every ``f(x_i)`` has norm 1, ``mean_i ‖f(x_i) − f̄‖² =
1 − ‖f̄‖²``, so ``div(S)`` lies in ``[0, 1]`` (0: identical features; 1: features that cancel
out); it does not depend on the scale of the raw features.

Per entity the paper computes ``div`` for every country with more than 100 samples, averages over
countries (the entity's diversity, Table 16) and correlates country frequency with diversity
(Pearson ρ: ``ρ_fi`` for images, Table 3; ``ρ_fc`` for captions, Table 15).
:func:`country_diversity` does that for one entity with an explicit ``n >= min_samples`` rule
(the paper's "more than 100" is ``min_samples=101``).

Encoders (:class:`Encoder`): :class:`TextEncoder` (sentence-transformers; ``"minilm"`` is
all-MiniLM-L6-v2, as in the paper) and :class:`ImageEncoder` (any :mod:`fairsets.models` VLM;
the paper used DINOv2). Anything with a ``name`` and an ``encode(items, progress)`` returning
:class:`Encoded` plugs in.
"""

from __future__ import annotations

from .encoders import MINILM_ENV, MINILM_HUB_ID, Encoded, Encoder, ImageEncoder, TextEncoder, resolve_minilm
from .metric import country_diversity, diversity, l2_normalize

__all__ = [
    "MINILM_ENV",
    "MINILM_HUB_ID",
    "Encoded",
    "Encoder",
    "ImageEncoder",
    "TextEncoder",
    "country_diversity",
    "diversity",
    "l2_normalize",
    "resolve_minilm",
]
