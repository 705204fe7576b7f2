"""CLIP model bias of social categories for the bias-transfer audit: ``d(c)``.

With probe images of perceived women ``F`` and men ``M`` (:mod:`.probe`) and the text embedding of
a prompt about ``c`` ("a photo of a nurse"; :func:`check_template`, :data:`DEFAULT_TEMPLATE`), the
standardised difference of cosine similarities

    d(c) = (mean_{x∈F} cos(x, c) − mean_{y∈M} cos(y, c)) / std_{w∈F∪M} cos(w, c)

in the manner of an effect size (positive: the model puts ``c`` nearer the women). For a race
group ``g`` (:mod:`.race`), ``F`` is the probe images of ``g`` and ``M`` those of every other race
group. The standard deviation is the **population** one (``ddof = 0``): the probe set is the whole
population the number describes, not a sample of a larger one, and this is what ``numpy.std`` and
common WEAT implementations compute; with probe sets of hundreds of images the sample standard
deviation would differ by a factor √(n/(n−1)) < 1.01. ``ddof=1`` is a parameter.
:func:`category_embeddings` embeds the prompts with a model from :func:`fairsets.models.load_vlm`;
:func:`model_bias_report` is the ``model_bias`` block of ``transfer.json``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .categories import check_categories

if TYPE_CHECKING:
    from fairsets.models.base import VLM

__all__ = [
    "DEFAULT_TEMPLATE",
    "category_embeddings",
    "check_template",
    "model_bias",
    "model_bias_many",
    "model_bias_report",
]

_check_categories = check_categories  # the name older callers use

#: The default probe prompt; ``{category}`` is the category, ``{a}`` the article "a" or "an".
DEFAULT_TEMPLATE = "a photo of {a} {category}"


def _unit(a: Any, what: str, ndim: int) -> np.ndarray:
    x = np.asarray(a, dtype=np.float64)
    if x.ndim != ndim:
        raise ValueError(f"{what}: expected a {ndim}-d array, got shape {x.shape}")
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    if not np.all(np.isfinite(x)) or np.any(norms == 0):
        raise ValueError(f"{what}: embeddings must be finite and non-zero")
    return x / norms


def model_bias_many(
    image_emb_female: Any, image_emb_male: Any, text_emb: Any, *, ddof: int = 0
) -> np.ndarray:
    """``d(c)`` (module docstring) for each row of ``text_emb`` (``(k, dim)``); NaN where every
    probe image is equally similar to the text (the standard deviation is 0).

    Args:
        image_emb_female: ``(n_f, dim)`` probe image embeddings of perceived women (any scale).
        image_emb_male: ``(n_m, dim)`` of perceived men.
        text_emb: ``(k, dim)`` category text embeddings.
        ddof: 0 (population standard deviation, the default; see the module docstring) or 1.
    """
    f = _unit(image_emb_female, "female image embeddings", 2)
    m = _unit(image_emb_male, "male image embeddings", 2)
    t = _unit(text_emb, "text embeddings", 2)
    if len(f) == 0 or len(m) == 0:
        raise ValueError("model bias needs at least one female and one male probe image")
    if not f.shape[1] == m.shape[1] == t.shape[1]:
        raise ValueError(f"embedding sizes differ: female {f.shape[1]}, male {m.shape[1]}, text {t.shape[1]}")
    if ddof not in (0, 1) or (ddof == 1 and len(f) + len(m) < 2):
        raise ValueError("ddof is 0 or 1 (1 needs at least two probe images)")
    cf, cm = f @ t.T, m @ t.T
    sd = np.concatenate([cf, cm]).std(axis=0, ddof=ddof)
    diff = cf.mean(axis=0) - cm.mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sd > 1e-12, diff / np.where(sd > 1e-12, sd, 1.0), np.nan)


def model_bias(image_emb_female: Any, image_emb_male: Any, text_emb: Any, *, ddof: int = 0) -> float:
    """``d(c)`` for one category text embedding ``(dim,)``; NaN when undefined (see
    :func:`model_bias_many`)."""
    t = np.asarray(text_emb, dtype=np.float64)
    if t.ndim != 1:
        raise ValueError(f"text embedding: expected a 1-d vector, got shape {t.shape}")
    return float(model_bias_many(image_emb_female, image_emb_male, t[None, :], ddof=ddof)[0])


def check_template(template: str) -> str:
    """``template`` if it fills for a category, else a ValueError saying how to write one."""
    if "{category}" not in template:
        raise ValueError(
            f"--template {template!r} has no {{category}}; write e.g. {DEFAULT_TEMPLATE!r} "
            "({a} is the article a/an)"
        )
    try:
        template.format(category="nurse", a="a")
    except (KeyError, IndexError, ValueError) as e:
        raise ValueError(
            f"--template {template!r}: only {{category}} and {{a}} may appear in braces ({e}); "
            f"e.g. {DEFAULT_TEMPLATE!r}, double a literal brace as {{{{ }}}}"
        ) from None
    return template


def _prompt(template: str, category: str) -> str:
    article = "an" if category[:1].lower() in "aeiou" else "a"
    try:
        return template.format(category=category, a=article)
    except (KeyError, IndexError, ValueError) as e:
        raise ValueError(
            f"prompt template {template!r}: only {{category}} and {{a}} (a/an) may be used ({e})"
        ) from None


def category_embeddings(
    vlm: VLM, categories: Sequence[str], *, template: str = DEFAULT_TEMPLATE, batch_size: int = 64
) -> tuple[list[str], np.ndarray]:
    """The probe prompts (``template`` filled per category) and their ``(k, dim)`` embeddings by
    ``vlm`` (a model from :func:`fairsets.models.load_vlm`).

    Raises:
        ValueError: a template without ``{category}`` or with other fields, or bad categories.
    """
    from fairsets.audit.embeddings import embed_texts

    cats = _check_categories(categories)
    if "{category}" not in template:
        raise ValueError(f"prompt template {template!r} has no {{category}}; e.g. {DEFAULT_TEMPLATE!r}")
    prompts = [_prompt(template, c) for c in cats]
    return prompts, embed_texts(vlm, prompts, batch_size=batch_size)


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def model_bias_report(
    vlm: VLM,
    image_emb_female: Any,
    image_emb_male: Any,
    categories: Sequence[str],
    *,
    template: str = DEFAULT_TEMPLATE,
    ddof: int = 0,
    embedded: tuple[list[str], Any] | None = None,
) -> dict:
    """``d(c)`` of ``vlm`` for each category, with the prompts, probe counts and definitions.

    ``embedded``: the prompts and text embeddings of ``categories`` (in order) when already made
    by :func:`category_embeddings`; otherwise they are made here.

    Returns:
        ``{"categories": [{"category", "prompt", "d"}, ...], "n_female_probes", "n_male_probes",
        "model", "template", "definitions"}``; ``d`` is None where undefined.
    """
    cats = _check_categories(categories)
    prompts, text = embedded if embedded is not None else category_embeddings(vlm, cats, template=template)
    if len(prompts) != len(cats) or len(text) != len(cats):
        raise ValueError("model_bias_report: embedded needs one prompt and one embedding per category")
    d = model_bias_many(image_emb_female, image_emb_male, text, ddof=ddof)
    return {
        "categories": [
            {"category": c, "prompt": p, "d": _num(v)} for c, p, v in zip(cats, prompts, d, strict=True)
        ],
        "n_female_probes": len(image_emb_female),
        "n_male_probes": len(image_emb_male),
        "model": vlm.provenance(),
        "template": template,
        "definitions": {
            "d": "(mean cos(female probe, prompt) − mean cos(male probe, prompt)) / std of cos over "
            f"all probes ({'population' if ddof == 0 else 'sample'} std); positive: nearer the women",
        },
    }
