"""Generated images for the bias-transfer audit: the folder layout ``--generated`` reads (one
sub-folder per category), the gender head that labels them, :func:`generate_images`, which
fills such a folder with a ``diffusers`` text-to-image pipeline (a CUDA device is required), and
their bias: :func:`read_generated` classifies each prompt folder's images and
:func:`generated_bias` gives, for a text-to-image model, the share of the images generated for the
prompt about ``c`` that a gender classifier labels ``female`` (and the ``bias`` of data bias over
female + male)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fairsets.core.atomic import atomic_path
from fairsets.core.progress import Progress

from .model import DEFAULT_TEMPLATE, check_template

if TYPE_CHECKING:
    from fairsets.annotate.heads import Head
    from fairsets.models import VLM

__all__ = [
    "GENDERS",
    "IMAGE_SUFFIXES",
    "check_generated",
    "gender_classifier",
    "generate_images",
    "generated_bias",
    "load_gender_head",
    "read_generated",
]

GENDERS = ("female", "male")

#: Image file suffixes :func:`read_generated` reads.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")


def check_generated(folder: str | os.PathLike[str], categories: Sequence[str]) -> dict[str, str]:
    """``sub-folder name → category`` of a generated-images folder, checked before any model loads.

    Every sub-folder (hidden ones aside) must be named after a category (any case) and hold at
    least one image file.

    Raises:
        ValueError: not a folder, no sub-folder, a sub-folder named after no category, two
            sub-folders for one category, or an empty one.
    """
    root = Path(folder)
    if not root.is_dir():
        raise ValueError(
            f"--generated {root}: not a folder; give a folder with one sub-folder of images per category"
        )
    subs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not subs:
        raise ValueError(
            f"--generated {root}: no sub-folders; put each category's images in a sub-folder named after it"
        )
    by_low = {" ".join(c.split()).lower(): c for c in categories}
    out: dict[str, str] = {}
    seen: dict[str, str] = {}
    for sub in subs:
        cat = by_low.get(" ".join(sub.name.split()).lower())
        if cat is None:
            raise ValueError(
                f"--generated {root}: sub-folder {sub.name!r} is named after no category of the list; "
                "name each sub-folder after its category"
            )
        if cat in seen:
            raise ValueError(f"--generated {root}: {seen[cat]!r} and {sub.name!r} are both {cat!r}; keep one")
        if not any(p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES for p in sub.iterdir()):
            raise ValueError(f"--generated {root}: {sub.name!r} holds no image ({', '.join(IMAGE_SUFFIXES)})")
        seen[cat] = sub.name
        out[sub.name] = cat
    return out


def load_gender_head(path: str | os.PathLike[str]) -> Head:
    """A trained head (``fairsets annotate train``) that predicts ``female`` and ``male``.

    Raises:
        ValueError: not a head file, or a head of another attribute or without those classes.
    """
    from fairsets.annotate.heads import load_head

    try:
        head = load_head(path)
    except FileNotFoundError as e:
        raise ValueError(str(e)) from None
    if head.attribute != "gender" or not set(GENDERS) <= set(head.classes):
        raise ValueError(
            f"--gender-head {path}: a {head.attribute!r} head with classes {head.classes}; give a gender "
            "head with classes female and male (fairsets annotate train --attribute gender)"
        )
    return head


def gender_classifier(head: Head, encoder: VLM) -> Callable[[list[Any]], list[str]]:
    """PIL images → the head's label per image (its encoder's embeddings, then the head)."""

    def classify(images: list[Any]) -> list[str]:
        if not images:
            return []
        return head.predict(np.asarray(encoder.embed_images(images), dtype=np.float32))

    return classify


def _safe_folder(category: str) -> str:
    if not category or category.startswith(".") or re.search(r"[/\\\x00]", category):
        raise ValueError(f"category {category!r} cannot name a folder; rename it in the category file")
    return category


def generate_images(
    model: str,
    categories: Sequence[str],
    out: str | os.PathLike[str],
    *,
    template: str = DEFAULT_TEMPLATE,
    per_category: int = 100,
    seed: int = 0,
    steps: int = 50,
    device: str = "cuda",
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Generate ``per_category`` images per category with a ``diffusers`` text-to-image pipeline
    (``model``: a local folder or a hub id) into ``out/{category}/NNNN.png`` (the layout
    :func:`check_generated` reads). Image ``i`` of category ``c`` is drawn with the seed
    ``derive_seed("transfer-generate", seed, c, i)``; files already there are kept, so an interrupted
    run resumes. Images the pipeline's safety checker blanks are not written and are counted.

    Raises:
        ValueError: no CUDA device, ``diffusers`` missing, or a category that cannot name a folder.
    """
    import importlib.util

    from fairsets.core.data import derive_seed

    if importlib.util.find_spec("diffusers") is None:
        raise ValueError("--generate needs diffusers, which is not installed: pip install diffusers")
    import torch

    if not torch.cuda.is_available() or not str(device).startswith("cuda"):
        raise ValueError(
            "--generate needs a CUDA device (none found, or --device is not cuda); "
            "generate elsewhere and pass the folder with --generated"
        )
    if per_category < 1:
        raise ValueError(f"images per category must be ≥ 1, not {per_category}")
    check_template(template)
    folders = [_safe_folder(c) for c in categories]
    from diffusers import AutoPipelineForText2Image

    pipe = AutoPipelineForText2Image.from_pretrained(model, torch_dtype=torch.float16).to(device)
    pipe.set_progress_bar_config(disable=True)
    root = Path(out)
    written, kept, blanked = 0, 0, 0
    progress = progress or Progress()
    with progress.stage(f"generating images ({model})", len(folders) * per_category) as advance:
        for cat, name in zip(categories, folders, strict=True):
            article = "an" if cat[:1].lower() in "aeiou" else "a"
            prompt = template.format(category=cat, a=article)
            for i in range(per_category):
                path = root / name / f"{i:04d}.png"
                if path.is_file():
                    kept += 1
                    advance(1)
                    continue
                gen = torch.Generator(device).manual_seed(derive_seed("transfer-generate", seed, cat, i))
                result = pipe(prompt, generator=gen, num_inference_steps=steps)
                flags = getattr(result, "nsfw_content_detected", None)
                if flags and flags[0]:
                    blanked += 1
                    advance(1)
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
                with atomic_path(path) as tmp:
                    result.images[0].save(tmp, format="PNG")
                written += 1
                advance(1)
    return {
        "model": model,
        "per_category": per_category,
        "seed": seed,
        "steps": steps,
        "written": written,
        "kept": kept,
        "blanked_by_safety_checker": blanked,
    }


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
