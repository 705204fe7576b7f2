"""Data → model bias transfer: how much of a model's gender (or race) bias about a social
category the co-occurrence of that category with perceived groups in the alt-texts predicts.

After design 4 of the LAION-400M person-centric annotation study. The pieces, by module (all
importable from here, as before):

* **categories** (:mod:`.transfer_categories`) — the list (``data/social_categories_wordnet.toml``, or
  yours: :func:`load_categories`) and which alt-texts name each one (:func:`category_pattern`:
  whole words, case-insensitive, plural forms by the inflect library, innocent-sense phrases masked).
* **data bias** (:mod:`.transfer_data`) — :func:`data_bias`: among the single-gender images whose
  alt-text names ``c``, ``bias = (female − male) / (female + male)`` and ``share_female``;
  :func:`race_data_bias`: among the single-race images, each race's share.
* **CLIP model bias** (here) — with probe images of perceived women ``F`` and men ``M`` and the
  text embedding of a prompt about ``c`` ("a photo of a nurse"), the standardised difference of
  cosine similarities

      d(c) = (mean_{x∈F} cos(x, c) − mean_{y∈M} cos(y, c)) / std_{w∈F∪M} cos(w, c)

  in the manner of an effect size (positive: the model puts ``c`` nearer the women). For a race
  group ``g`` (:mod:`.transfer_race`), ``F`` is the probe images of ``g`` and ``M`` those of every
  other race group. The standard deviation is the **population** one (``ddof = 0``): the probe set
  is the whole population the number describes, not a sample of a larger one, and this is what
  ``numpy.std`` and common WEAT implementations compute; with probe sets of hundreds of images the
  sample standard deviation would differ by a factor √(n/(n−1)) < 1.01. ``ddof=1`` is a parameter.
  :func:`category_embeddings` embeds the prompts with a model from :func:`fairsets.models.load_vlm`.
* **generated bias** (:func:`generated_bias`, :func:`read_generated`) — for a text-to-image model,
  the share of the images generated for the prompt about ``c`` that a gender classifier labels
  ``female`` (and the same ``bias`` as above over female + male).
* **relation** (:mod:`.transfer_fit`, :func:`relation`) — Pearson ρ, R² of the least-squares line
  and the Chebyshev gains of degree 2–5, in-sample and cross-validated; :func:`scatter_plot`
  (:mod:`.transfer_plot`) draws it.

Every function returns a JSON-ready dict (plain numbers, lists and strings; None where a number is
undefined) with the counts behind each number and a ``definitions`` entry.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .transfer_categories import (  # re-exported: the old import paths keep working
    _token_forms,  # noqa: F401  (the word-rule tests read it)
    category_pattern,
    check_categories,
    default_categories_path,
    load_categories,
)
from .transfer_data import data_bias, race_data_bias
from .transfer_fit import MAX_DEGREE, relation
from .transfer_plot import scatter_plot

if TYPE_CHECKING:
    from fairsets.models.base import VLM

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

_check_categories = check_categories  # the name older callers use

#: The default probe prompt; ``{category}`` is the category, ``{a}`` the article "a" or "an".
DEFAULT_TEMPLATE = "a photo of {a} {category}"

#: Image file suffixes :func:`read_generated` reads.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")

# --- model bias -----------------------------------------------------------------------------------


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


# --- generated images ------------------------------------------------------------------------------


def generated_bias(labels: Mapping[str, Sequence[str | None]]) -> dict:
    """The share of generated images classified ``female``, per prompt.

    Args:
        labels: ``prompt (or category) → the classifier's label per generated image`` (``female``,
            ``male``, anything else or None: neither).

    Returns:
        ``{"prompts": [{"prompt", "n", "female", "male", "other", "share_female", "bias"}, ...],
        "definitions"}`` — ``share_female = female / n`` (the study's measure), ``bias = (female −
        male) / (female + male)`` as for data bias; None where the denominator is 0.
    """
    out = []
    for prompt, labs in labels.items():
        labs = list(labs)
        f = sum(1 for x in labs if x == "female")
        m = sum(1 for x in labs if x == "male")
        n = len(labs)
        out.append(
            {
                "prompt": prompt, "n": n, "female": f, "male": m, "other": n - f - m,
                "share_female": f / n if n else None, "bias": (f - m) / (f + m) if f + m else None,
            }
        )  # fmt: skip
    return {
        "prompts": out,
        "definitions": {
            "share_female": "images classified female / all images generated for the prompt",
            "bias": "(female − male) / (female + male) among the images classified female or male",
        },
    }


def read_generated(
    folder: str | os.PathLike[str],
    classify: Callable[[list[Any]], Sequence[str | None]],
    *,
    batch_size: int = 32,
) -> tuple[dict[str, list[str | None]], list[dict[str, str]]]:
    """Classify the generated images of ``folder``: one sub-folder per prompt (its name is the
    prompt or category), image files inside.

    Args:
        folder: the folder of prompt folders.
        classify: PIL RGB images → one label per image (e.g. a gender classifier head).
        batch_size: images per ``classify`` call.

    Returns:
        ``(labels, rejected)``: ``prompt → labels`` (for :func:`generated_bias`), and each file that
        could not be read as ``{"path", "reason"}`` (it counts nowhere).

    Raises:
        ValueError: ``folder`` is not a folder, holds no prompt folder, or ``classify`` returns a
            wrong number of labels.
    """
    from PIL import Image, UnidentifiedImageError

    root = Path(folder)
    if not root.is_dir():
        raise ValueError(f"{root}: not a folder; give a folder with one sub-folder of images per prompt")
    prompts = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not prompts:
        raise ValueError(
            f"{root}: no prompt folders; put each prompt's images in a sub-folder named after it"
        )
    labels: dict[str, list[str | None]] = {}
    rejected: list[dict[str, str]] = []
    for sub in prompts:
        files = sorted(p for p in sub.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
        out: list[str | None] = []
        for i in range(0, len(files), batch_size):
            batch = []
            for path in files[i : i + batch_size]:
                try:
                    with Image.open(path) as im:
                        batch.append(im.convert("RGB"))
                except (OSError, UnidentifiedImageError, ValueError) as e:
                    rejected.append({"path": str(path), "reason": f"unreadable image ({type(e).__name__})"})
            if batch:
                got = list(classify(batch))
                if len(got) != len(batch):
                    raise ValueError(f"the classifier returned {len(got)} labels for {len(batch)} images")
                out += got
        labels[sub.name] = out
    return labels, rejected
