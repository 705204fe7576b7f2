"""Race bias transfer (beyond the study, which measured gender): for each race group ``g``, does
the data bias of ``g`` against the other races predict the model's?

* **data bias** — :func:`.data.race_data_bias`: among the single-race person images whose
  alt-text names category ``c``, the share of race ``g``, ``share_g(c)``;
* **model bias** — :func:`race_model_bias`, the gender ``d(c)`` with the probe images of ``g`` in
  the place of the women and those of every other race group in the place of the men:

      d_g(c) = (mean_{x∈P_g} cos(x, c) − mean_{y∈P_rest} cos(y, c)) / std_{w∈P_g∪P_rest} cos(w, c)

  (population std; positive: the model puts ``c`` nearer the images of ``g``);
* **relation** — :func:`race_relations`: per group, :func:`.fit.relation` of
  ``share_g(c)`` and ``d_g(c)`` across the categories kept for race (ρ, R², Chebyshev gains
  in-sample and cross-validated).

The probe of race ``g`` is the kept boxes of the probe folder labelled ``g`` (``unclear`` and
unlabelled boxes are never probes): :func:`.probe.embed_race_probe`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .fit import relation_or_reason
from .model import model_bias_many

__all__ = ["DEFINITIONS", "race_model_bias", "race_relations"]

DEFINITIONS = {
    "d_g": "d_g(c) = (mean cos(probe image of race g, prompt) − mean cos(probe image of any other race "
    "group, prompt)) / population std of cos over both; positive: the model puts c nearer race g",
    "probe": "the kept boxes of the probe folder labelled with a race group (unclear and unlabelled "
    "boxes are never probes), at most --max-probe per group, the smallest MD5 of seed/shard/key/box_id",
    "relation": "per race group g: Pearson ρ and R² of share_g(c) (x) and d_g(c) (y) across the "
    "categories kept for race",
}


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def race_model_bias(
    vectors: Mapping[str, Any],
    categories: Sequence[str],
    prompts: Sequence[str],
    text: Any,
    *,
    ddof: int = 0,
) -> dict[str, Any]:
    """``d_g(c)`` (module docstring) for every race group with probe images and a non-empty rest.

    Args:
        vectors: race group → ``(n_g, dim)`` probe image embeddings (a group may have none).
        categories, prompts: one prompt per category.
        text: ``(k, dim)`` text embeddings of the prompts.
        ddof: 0 (population std) or 1.

    Returns:
        ``{"categories": [{"category", "prompt", "d": {g: d_g or None}}, ...], "n_probes": {g: n},
        "not_computed": {g: reason}, "definitions"}``.
    """
    if not len(categories) == len(prompts) == len(text):
        raise ValueError("race_model_bias: one prompt and one text embedding per category")
    groups = list(vectors)
    n_probes = {g: len(vectors[g]) for g in groups}
    d: dict[str, list[float | None]] = {}
    missing: dict[str, str] = {}
    for g in groups:
        rest = [np.asarray(vectors[h]) for h in groups if h != g and n_probes[h]]
        if not n_probes[g]:
            missing[g] = f"no probe image of race {g}"
        elif not rest:
            missing[g] = f"no probe image of any race but {g}"
        elif len(categories):
            values = model_bias_many(vectors[g], np.concatenate(rest), text, ddof=ddof)
            d[g] = [_num(v) for v in values]
    rows = [
        {"category": c, "prompt": p, "d": {g: (d[g][j] if g in d else None) for g in groups}}
        for j, (c, p) in enumerate(zip(categories, prompts, strict=True))
    ]
    return {
        "categories": rows,
        "n_probes": n_probes,
        "not_computed": missing,
        "definitions": dict(DEFINITIONS),
    }


def race_relations(
    data: Mapping[str, Any], model: Mapping[str, Any] | None, *, folds: int | None = None, seed: int = 0
) -> dict[str, dict[str, Any]]:
    """Per race group of ``data`` (:func:`.data.race_data_bias`): the relation of its share
    to its ``d_g`` (``model``: :func:`race_model_bias`, None: no model bias, a reason instead),
    each with the categories it used."""
    cats = [r["category"] for r in data["categories"]]
    d_of = {r["category"]: r["d"] for r in (model or {}).get("categories", [])}
    out = {}
    for g in data["groups"]:
        what = f"data share {g} → CLIP d_{g}(c)"
        if model is None or g in model.get("not_computed", {}):
            reason = "no race model bias" if model is None else model["not_computed"][g]
            xname, yname = what.split(" → ")
            out[g] = {"x": xname, "y": yname, "relation": None, "reason": reason}
        else:
            x = [r["shares"][g] for r in data["categories"]]
            y = [d_of.get(c, {}).get(g) for c in cats]
            out[g] = relation_or_reason(x, y, what, folds=folds, seed=seed)
        out[g]["categories"] = cats
    return out
