"""Data → model bias transfer: how much of a model's gender (or race) bias about a social
category the co-occurrence of that category with perceived groups in the alt-texts predicts.

After design 4 of the LAION-400M person-centric annotation study. The pieces, by module (the
measures are importable from here, as from the one module this package once was):

* **categories** (:mod:`.categories`) — the list (``data/social_categories_wordnet.toml``, or
  yours: :func:`load_categories`) and which alt-texts name each one (:func:`category_pattern`:
  whole words, case-insensitive, plural forms by the inflect library, innocent-sense phrases masked).
* **data bias** (:mod:`.data`) — :func:`data_bias`: among the single-gender images whose
  alt-text names ``c``, ``bias = (female − male) / (female + male)`` and ``share_female``;
  :func:`race_data_bias`: among the single-race images, each race's share.
* **CLIP model bias** (:mod:`.model`) — with probe images of perceived women ``F`` and men ``M``
  (:mod:`.probe`) and the text embedding of a prompt about ``c`` ("a photo of a nurse"), the
  standardised difference of cosine similarities

      d(c) = (mean_{x∈F} cos(x, c) − mean_{y∈M} cos(y, c)) / std_{w∈F∪M} cos(w, c)

  (:func:`model_bias`, population std); for a race group ``g`` (:mod:`.race`), ``F`` is the probe
  images of ``g`` and ``M`` those of every other race group. :func:`category_embeddings` embeds the
  prompts with a model from :func:`fairsets.models.load_vlm`.
* **generated bias** (:mod:`.generated`: :func:`generated_bias`, :func:`read_generated`) — for a
  text-to-image model, the share of the images generated for the prompt about ``c`` that a gender
  classifier labels ``female`` (and the same ``bias`` as above over female + male).
* **relation** (:mod:`.fit`, :func:`relation`) — Pearson ρ, R² of the least-squares line
  and the Chebyshev gains of degree 2–5, in-sample and cross-validated; :func:`scatter_plot`
  (:mod:`.plot`) draws it.

The audit end to end (``fairsets audit transfer``) is :mod:`.run`; its ``definitions`` block is
:mod:`.definitions`, its HTML report :mod:`.report` and its CLI summary :mod:`.summary`.

Every function returns a JSON-ready dict (plain numbers, lists and strings; None where a number is
undefined) with the counts behind each number and a ``definitions`` entry.
"""

from __future__ import annotations

from .categories import (  # re-exported: the old import paths keep working
    _token_forms,  # noqa: F401  (the word-rule tests read it)
    category_pattern,
    check_categories,  # noqa: F401
    default_categories_path,
    load_categories,
)
from .data import data_bias, race_data_bias
from .fit import MAX_DEGREE, relation
from .generated import IMAGE_SUFFIXES, generated_bias, read_generated  # noqa: F401
from .model import (
    DEFAULT_TEMPLATE,
    _check_categories,  # noqa: F401  (the name older callers use)
    category_embeddings,
    check_template,
    model_bias,
    model_bias_many,
    model_bias_report,
)
from .plot import scatter_plot

__all__ = [
    "DEFAULT_TEMPLATE",
    "MAX_DEGREE",
    "category_embeddings",
    "category_pattern",
    "check_template",
    "data_bias",
    "default_categories_path",
    "generated_bias",
    "load_categories",
    "model_bias",
    "model_bias_many",
    "model_bias_report",
    "race_data_bias",
    "read_generated",
    "relation",
    "scatter_plot",
]
