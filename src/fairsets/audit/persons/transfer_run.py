"""A data → model bias transfer audit, end to end: ``fairsets audit transfer`` (design 4 of the
LAION-400M person-centric annotation study; the numbers are computed by :mod:`.transfer`).

:func:`run_transfer_audit` takes an annotation folder and writes three files into ``out``:

* ``transfer.json`` (schema :data:`SCHEMA`) — the settings, the data bias of every social
  category (:func:`.transfer.data_bias`: single-gender images whose alt-text names it, kept when
  female + male ≥ ``min_count``; the dropped ones listed with their counts), the CLIP model bias
  ``d(c)`` of every kept category (:func:`.transfer.model_bias_report`), optionally the bias of a
  text-to-image model's generated images (:func:`.transfer.generated_bias`), and the relations
  (:func:`.transfer.relation`: Pearson ρ, R² of the line, Chebyshev R² gains) data → CLIP and, with
  generated images, data → generated and CLIP → generated;
* ``scatter.png`` — data bias against ``d(c)`` with the fitted line (and ``scatter-generated.png``,
  data bias against the generated share female, when there are generated images);
* ``report.html`` — one self-contained page (inline CSS, the plots as base64 PNGs, no script, no
  external resource) with every table.

**Probe images** (the women ``F`` and men ``M`` of ``d(c)``) are, by default, the kept person boxes
of the annotation folder itself whose perceived gender is ``female`` or ``male`` (the study's
"LAION-400M probe", the in-distribution one): at most ``max_probe`` per gender, chosen by the MD5
of ``seed/shard/key/box_id`` in one streamed DuckDB query (the same seed gives the same probe on
any machine; a larger cap keeps every box a smaller one chose), cropped from the folder's input
shards as ``annotate classify`` crops them (:func:`fairsets.annotate.embed.embed_labelled`) and
embedded through the crop cache ``ANN/.fairsets/embeddings/{model}/`` that ``annotate train``
uses too, keyed by the box and the SHA-256 of its pixels: a re-run embeds nothing again. A box
whose image is gone from its shard is left out with its reason (``probe.rejected``). The probe can
instead be another annotation folder, or a published fairsets face dataset with a gender column
(``probe_attribute``, values ``female`` / ``male`` in any case), embedded through the dataset's
embedding cache as ``fairsets audit vlm`` does.

**Generated images** are read from a folder with one sub-folder per category (its name is the
category, any case), classified with a trained ``gender`` head (``fairsets annotate train``): the
head's encoder embeds each image and the head labels it. :func:`generate_images` fills such a
folder with ``diffusers`` (a CUDA device is required).

Nothing here reads a whole table into memory: the data bias is one DuckDB aggregation over the
``person_images`` view, the probe sample one top-N query.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fairsets.core.atomic import atomic_path, atomic_write_text
from fairsets.core.progress import Progress

from . import transfer as T

if TYPE_CHECKING:
    from fairsets.annotate.heads import Head
    from fairsets.models import VLM

__all__ = [
    "JSON_FILE",
    "PLOT_FILE",
    "REPORT_FILE",
    "SCHEMA",
    "Probe",
    "check_generated",
    "check_template",
    "embed_probe",
    "gender_classifier",
    "generate_images",
    "load_gender_head",
    "probe_kind",
    "render_transfer_report",
    "run_transfer_audit",
    "sample_probe_boxes",
]

log = logging.getLogger(__name__)

SCHEMA = "fairsets.audit.transfer/1"
JSON_FILE = "transfer.json"
PLOT_FILE = "scatter.png"
GENERATED_PLOT_FILE = "scatter-generated.png"
REPORT_FILE = "report.html"
GENDERS = ("female", "male")


# --- checks that run before any model loads -------------------------------------------------------


def check_template(template: str) -> str:
    """``template`` if it fills for a category, else a ValueError saying how to write one."""
    if "{category}" not in template:
        raise ValueError(
            f"--template {template!r} has no {{category}}; write e.g. {T.DEFAULT_TEMPLATE!r} "
            "({a} is the article a/an)"
        )
    try:
        template.format(category="nurse", a="a")
    except (KeyError, IndexError, ValueError) as e:
        raise ValueError(
            f"--template {template!r}: only {{category}} and {{a}} may appear in braces ({e}); "
            f"e.g. {T.DEFAULT_TEMPLATE!r}, double a literal brace as {{{{ }}}}"
        ) from None
    return template


def probe_kind(path: str | os.PathLike[str]) -> str:
    """``"annotations"`` (an annotation folder) or ``"dataset"`` (a published dataset).

    Raises:
        ValueError: neither (one line saying what to give).
    """
    from fairsets.annotate import layout

    p = Path(path)
    if not p.is_dir():
        raise ValueError(f"--probe {p}: no such folder; give an annotation folder or a published dataset")
    if (p / "metadata").is_dir() and (p / "shards").is_dir():
        return "dataset"
    if (p / layout.MANIFEST).is_file():
        layout.read_manifest(p)  # an annotation folder's, or a one-line error saying what it is
        return "annotations"
    raise ValueError(
        f"--probe {p}: neither an annotation folder (no {layout.MANIFEST}) nor a published dataset "
        "(no metadata/); give one of them"
    )


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
        if not any(p.is_file() and p.suffix.lower() in T.IMAGE_SUFFIXES for p in sub.iterdir()):
            raise ValueError(
                f"--generated {root}: {sub.name!r} holds no image ({', '.join(T.IMAGE_SUFFIXES)})"
            )
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


# --- probe ----------------------------------------------------------------------------------------


def sample_probe_boxes(con: Any, max_per_gender: int | None, seed: int) -> tuple[list[Any], dict[str, int]]:
    """The probe boxes of an annotation folder: ``(LabelRow list, available count per gender)``.

    At most ``max_per_gender`` kept boxes per perceived gender (``female``, ``male``), the ones with
    the smallest MD5 of ``"{seed}/{shard}/{key}/{box_id}"``; sorted by ``(shard, key, box_id)``.
    ``con`` is a :func:`fairsets.audit.persons.tables.connect` connection.
    """
    from fairsets.annotate.labels import LabelRow

    columns = {row[0] for row in con.execute("DESCRIBE boxes").fetchall()}
    if "perceived_gender" not in columns:
        raise ValueError(
            "the probe folder has no gender labels; run fairsets annotate classify --attribute gender"
        )
    avail = dict(
        con.execute(
            "SELECT perceived_gender, count(*) FROM boxes WHERE perceived_gender IN ('female', 'male') "
            "GROUP BY perceived_gender"
        ).fetchall()
    )
    limit = "" if max_per_gender is None else f"QUALIFY rn <= {int(max_per_gender)}"
    rows = con.execute(
        "SELECT shard, key, box_id, perceived_gender, row_number() OVER (PARTITION BY perceived_gender "
        "ORDER BY md5(? || '/' || shard || '/' || key || '/' || CAST(box_id AS VARCHAR)), "
        "shard, key, box_id) "
        f"AS rn FROM boxes WHERE perceived_gender IN ('female', 'male') {limit} "
        "ORDER BY shard, key, box_id",
        [str(int(seed))],
    ).fetchall()
    out = [LabelRow(str(s), str(k), int(b), str(g), None, i + 1) for i, (s, k, b, g, _) in enumerate(rows)]
    return out, {g: int(avail.get(g, 0)) for g in GENDERS}


@dataclass
class Probe:
    """Probe image embeddings by perceived gender and where they came from."""

    female: np.ndarray
    male: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)
    computed: int = 0  # images embedded in this call (the others came from a cache)


def _probe_from_annotations(
    path: Path,
    vlm: VLM,
    *,
    max_probe: int | None,
    seed: int,
    batch_size: int,
    cache_dir: Path | None,
    progress: Progress,
) -> Probe:
    from fairsets.annotate import layout
    from fairsets.annotate.embed import CropSource, crop_cache, embed_labelled
    from fairsets.annotate.images import DEFAULT_MAX_BYTES
    from fairsets.annotate.items import shard_refs

    from .tables import connect

    con = connect(path)
    try:
        rows, available = sample_probe_boxes(con, max_probe, seed)
    finally:
        con.close()
    params = layout.read_manifest(path).get("params") or {}
    source = CropSource(
        shards=shard_refs(path),
        ann=path,
        max_bytes=int(params.get("max_bytes") or DEFAULT_MAX_BYTES)
        if isinstance(params, dict)
        else DEFAULT_MAX_BYTES,
    )
    base = cache_dir if cache_dir is not None else path / layout.WORKDIR / "embeddings"
    cache = crop_cache(base, vlm)
    emb = embed_labelled(vlm, rows, source, cache, batch_size=batch_size, progress=progress)
    by = {g: [i for i, r in enumerate(emb.rows) if r.label == g] for g in GENDERS}
    return Probe(
        female=emb.vectors[by["female"]],
        male=emb.vectors[by["male"]],
        info={
            "kind": "annotations",
            "name": path.name,
            "available": available,
            "sampled": {g: sum(1 for r in rows if r.label == g) for g in GENDERS},
            "used": {g: len(by[g]) for g in GENDERS},
            "items": {g: [emb.rows[i].item for i in by[g]] for g in GENDERS},
            "rejected": [{"item": r["item"], "reason": r["reason"]} for r in emb.rejected],
            "cache": "crop embeddings (ANN/.fairsets/embeddings)" if cache_dir is None else "--cache-dir",
        },
        computed=emb.computed,
    )


def check_probe_dataset(path: Path, attribute: str) -> None:
    """Fail before any model loads when ``path`` is not a published dataset with ``attribute`` holding
    female and male values."""
    import pyarrow.parquet as pq

    from fairsets.audit.dataset import DatasetError, open_dataset

    try:
        ds = open_dataset(path)
        variant = ds.default_variant()
        values: set[str] = set()
        for split in ds.splits(variant):
            meta = ds.root / "metadata" / variant / f"{split}.parquet"
            if attribute not in pq.read_schema(meta).names:
                raise ValueError(
                    f"--probe {path}: no column {attribute!r} in {variant}/{split}; "
                    "choose it with --probe-attribute"
                )
            col = pq.read_table(meta, columns=[attribute]).column(0).drop_null().unique().to_pylist()
            values |= {str(v).strip().lower() for v in col}
    except DatasetError as e:
        raise ValueError(str(e)) from None
    missing = [g for g in GENDERS if g not in values]
    if missing:
        raise ValueError(
            f"--probe {path}: column {attribute!r} has no {' or '.join(missing)} value; the probe needs both"
        )


def _probe_from_dataset(
    path: Path,
    vlm: VLM,
    *,
    attribute: str,
    max_probe: int | None,
    seed: int,
    batch_size: int,
    cache_dir: Path | None,
    progress: Progress,
) -> Probe:
    import hashlib

    from fairsets.audit.dataset import open_dataset
    from fairsets.audit.embeddings import embed_dataset

    ds = open_dataset(path)
    variant = ds.default_variant()
    splits = ds.splits(variant)
    rows = ds.rows(variant, splits)
    groups: dict[str, list[dict[str, Any]]] = {g: [] for g in GENDERS}
    for r in rows:
        value = r.get(attribute)
        g = str(value).strip().lower() if value is not None else ""
        if g in groups:
            groups[g].append(r)
    available = {g: len(v) for g, v in groups.items()}

    def order(r: dict[str, Any]) -> tuple[str, str]:
        return hashlib.md5(f"{int(seed)}/{r['key']}".encode()).hexdigest(), str(r["key"])

    chosen = {
        g: sorted(v, key=order)[: max_probe if max_probe is not None else len(v)] for g, v in groups.items()
    }
    wanted = sorted((r for v in chosen.values() for r in v), key=lambda r: str(r["key"]))
    emb = embed_dataset(
        ds, vlm, variant, splits, rows=wanted, batch_size=batch_size, cache_dir=cache_dir, progress=progress
    )
    label = {str(r["key"]): g for g, v in chosen.items() for r in v}
    by = {g: [i for i, r in enumerate(emb.rows) if label[str(r["key"])] == g] for g in GENDERS}
    return Probe(
        female=emb.vectors[by["female"]],
        male=emb.vectors[by["male"]],
        info={
            "kind": "dataset",
            "name": ds.name,
            "variant": variant,
            "splits": list(splits),
            "attribute": attribute,
            "available": available,
            "sampled": {g: len(v) for g, v in chosen.items()},
            "used": {g: len(by[g]) for g in GENDERS},
            "items": {g: [str(emb.rows[i]["key"]) for i in by[g]] for g in GENDERS},
            "rejected": [{"item": s["key"], "reason": s["reason"]} for s in emb.skipped],
            "cache": "dataset embeddings (DATASET/.fairsets/embeddings)"
            if cache_dir is None
            else "--cache-dir",
        },
        computed=emb.computed,
    )


def embed_probe(
    path: str | os.PathLike[str],
    vlm: VLM,
    *,
    max_probe: int | None = 1000,
    seed: int = 0,
    attribute: str = "gender",
    batch_size: int = 32,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
) -> Probe:
    """The probe embeddings (see the module docstring) of an annotation folder or a published dataset.

    Raises:
        ValueError: not a probe source, no gender labels, or no female or no male probe image left.
    """
    if max_probe is not None and (isinstance(max_probe, bool) or int(max_probe) < 1):
        raise ValueError(f"max_probe must be ≥ 1, not {max_probe!r}")
    p = Path(path)
    cache = Path(cache_dir) if cache_dir is not None else None
    progress = progress or Progress()
    if probe_kind(p) == "annotations":
        probe = _probe_from_annotations(
            p, vlm, max_probe=max_probe, seed=seed, batch_size=batch_size, cache_dir=cache, progress=progress
        )
    else:
        probe = _probe_from_dataset(
            p,
            vlm,
            attribute=attribute,
            max_probe=max_probe,
            seed=seed,
            batch_size=batch_size,
            cache_dir=cache,
            progress=progress,
        )
    if len(probe.female) == 0 or len(probe.male) == 0:
        first = probe.info["rejected"][0]["reason"] if probe.info["rejected"] else "none labelled"
        raise ValueError(
            f"{p.name}: {len(probe.female)} female and {len(probe.male)} male probe images could be embedded "
            f"(first problem: {first}); the model bias needs both"
        )
    return probe


# --- generated images -----------------------------------------------------------------------------


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
    template: str = T.DEFAULT_TEMPLATE,
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


# --- the audit ------------------------------------------------------------------------------------


def _relation_or_reason(x: list[Any], y: list[Any], what: str) -> dict[str, Any]:
    try:
        rel = T.relation(x, y)
    except ValueError as e:
        return {"x": what.split(" → ")[0], "y": what.split(" → ")[1], "relation": None, "reason": str(e)}
    return {"x": what.split(" → ")[0], "y": what.split(" → ")[1], "relation": rel, "reason": None}


def _version() -> str:
    from fairsets.core.version import __version__

    return __version__


def run_transfer_audit(
    ann: str | os.PathLike[str],
    vlm: VLM,
    out: str | os.PathLike[str],
    *,
    categories: Sequence[str] | None = None,
    categories_source: str = "default",
    template: str = T.DEFAULT_TEMPLATE,
    min_count: int = 100,
    probe: str | os.PathLike[str] | None = None,
    probe_attribute: str = "gender",
    max_probe: int | None = 1000,
    seed: int = 0,
    generated: str | os.PathLike[str] | None = None,
    classify: Callable[[list[Any]], Sequence[str | None]] | None = None,
    gender_head: dict[str, Any] | None = None,
    generation: dict[str, Any] | None = None,
    batch_size: int = 32,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run the audit (module docstring) and write ``transfer.json``, ``scatter.png`` and ``report.html``.

    Args:
        ann: the annotation folder (alt-texts and gender labels: the data bias).
        vlm: the CLIP-like model (:func:`fairsets.models.load_vlm`).
        out: the output folder.
        categories: the social categories (default :func:`.transfer.load_categories`).
        categories_source: how ``transfer.json`` names them (``"default"`` or the file's name).
        template: the probe prompt (``{category}``, ``{a}``).
        min_count: keep a category named in at least this many single-gender images.
        probe: probe images (default ``ann``): an annotation folder or a published dataset.
        probe_attribute: a dataset probe's gender column.
        max_probe: at most this many probe images per gender (None: all).
        seed: the probe sample's seed.
        generated: a folder of generated images (one sub-folder per category), or None.
        classify: PIL images → labels, for ``generated`` (:func:`gender_classifier`).
        gender_head: what the JSON records about the head (:meth:`Head.describe`).
        generation: what :func:`generate_images` returned, when it made ``generated``.
        batch_size, cache_dir, progress: embedding options.

    Returns:
        The ``transfer.json`` document.
    """
    from .tables import connect

    check_template(template)
    cats = list(categories) if categories is not None else T.load_categories()
    if generated is not None and classify is None:
        raise ValueError("generated images need a classifier (--gender-head)")
    gen_map = check_generated(generated, cats) if generated is not None else None
    progress = progress or Progress()
    folder = Path(ann)
    con = connect(folder, cache=Path(out) / ".work" / "facts")
    try:
        data = T.data_bias(con, cats, min_count=min_count)
    finally:
        con.close()
    kept = [r["category"] for r in data["categories"]]
    probe_path = Path(probe) if probe is not None else folder
    pr = embed_probe(
        probe_path,
        vlm,
        max_probe=max_probe,
        seed=seed,
        attribute=probe_attribute,
        batch_size=batch_size,
        cache_dir=cache_dir,
        progress=progress,
    )
    if kept:
        model = T.model_bias_report(vlm, pr.female, pr.male, kept, template=template)
    else:
        model = {
            "categories": [],
            "n_female_probes": len(pr.female),
            "n_male_probes": len(pr.male),
            "model": vlm.provenance(),
            "template": template,
            "definitions": {},
        }
    model["probe"] = {k: v for k, v in pr.info.items()}
    model["probe"]["computed"] = pr.computed

    x_data = [r["bias"] for r in data["categories"]]
    y_clip = [r["d"] for r in model["categories"]]
    relations = {"data_clip": _relation_or_reason(x_data, y_clip, "data bias → CLIP d(c)")}

    gen_doc = None
    if generated is not None and classify is not None and gen_map is not None:
        labels, rejected = T.read_generated(generated, classify, batch_size=batch_size)
        gb = T.generated_bias(labels)
        for row in gb["prompts"]:
            row["category"] = gen_map[row["prompt"]]
        by_cat = {row["category"]: row for row in gb["prompts"]}
        gen_doc = {
            "folder": Path(generated).name,
            "gender_head": gender_head,
            "generation": generation,
            "prompts": gb["prompts"],
            "rejected": [
                {"path": str(Path(r["path"]).relative_to(generated)), "reason": r["reason"]} for r in rejected
            ],
            "definitions": gb["definitions"],
        }
        both = [c for c in kept if c in by_cat]
        d_of = {r["category"]: r["d"] for r in model["categories"]}
        bias_of = {r["category"]: r["bias"] for r in data["categories"]}
        relations["data_generated"] = _relation_or_reason(
            [bias_of[c] for c in both],
            [by_cat[c]["share_female"] for c in both],
            "data bias → generated share female",
        )
        relations["clip_generated"] = _relation_or_reason(
            [d_of[c] for c in both],
            [by_cat[c]["share_female"] for c in both],
            "CLIP d(c) → generated share female",
        )
        for key in ("data_generated", "clip_generated"):
            relations[key]["categories"] = both

    relations["data_clip"]["categories"] = kept
    doc = {
        "schema": SCHEMA,
        "annotations": folder.name,
        "fairsets_version": _version(),
        "settings": {
            "model": vlm.name,
            "model_id": vlm.model_id,
            "pretrained": vlm.pretrained,
            "template": template,
            "min_count": min_count,
            "categories": categories_source,
            "n_categories": len(cats),
            "probe": probe_path.name,
            "probe_kind": pr.info["kind"],
            "max_probe": max_probe,
            "seed": seed,
            "generated": Path(generated).name if generated is not None else None,
        },
        "data_bias": data,
        "model_bias": model,
        "generated": gen_doc,
        "relations": relations,
    }
    write_transfer(doc, out)
    return doc


def _finite(v: Any) -> bool:
    return v is not None and math.isfinite(float(v))


def write_transfer(doc: dict[str, Any], out: str | os.PathLike[str]) -> dict[str, Path]:
    """Write ``transfer.json``, the scatter plot(s) and ``report.html`` into ``out`` (atomically)."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    json_path = atomic_write_text(
        folder / JSON_FILE, json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    )
    d_of = {r["category"]: r["d"] for r in doc["model_bias"]["categories"]}
    rows = doc["data_bias"]["categories"]
    rel = doc["relations"]["data_clip"]["relation"]
    plots = {}
    plots["data_clip"] = T.scatter_plot(
        [r["bias"] for r in rows],
        [d_of.get(r["category"]) for r in rows],
        [r["category"] for r in rows],
        rel,
        folder / PLOT_FILE,
    )
    if doc["generated"] is not None:
        share = {r["category"]: r["share_female"] for r in doc["generated"]["prompts"]}
        both = doc["relations"]["data_generated"]["categories"]
        bias_of = {r["category"]: r["bias"] for r in rows}
        plots["data_generated"] = T.scatter_plot(
            [bias_of[c] for c in both],
            [share[c] for c in both],
            both,
            doc["relations"]["data_generated"]["relation"],
            folder / GENERATED_PLOT_FILE,
            ylabel="generated images: share classified female",
        )
    html = render_transfer_report(doc, {k: p.read_bytes() for k, p in plots.items()})
    report = atomic_write_text(folder / REPORT_FILE, html)
    return {"json": json_path, "html": report, **plots}


# --- the report -----------------------------------------------------------------------------------

_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Bias transfer audit: {{ doc.annotations }}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 70em;
       color: #222; line-height: 1.45; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f3f3f3; } td.l, th.l { text-align: left; }
.neg { color: #1f5fa8; } .pos { color: #b03a2e; } .muted { color: #777; }
img.plot { max-width: 100%; border: 1px solid #eee; }
dl dt { font-weight: 600; } dl dd { margin: 0 0 0.5em 1.5em; }
</style></head><body>
<h1>Data → model bias transfer: {{ doc.annotations }}</h1>
<p>fairsets {{ doc.fairsets_version }} · schema {{ doc.schema }}</p>

<h2>Settings</h2>
<table>
{% for k, v in settings %}<tr><th class="l">{{ k }}</th><td class="l">{{ v }}</td></tr>
{% endfor %}</table>

<h2>Relations</h2>
<table>
<tr><th class="l">x → y</th><th>categories</th><th>Pearson ρ</th><th>p-value</th><th>R² (line)</th>
<th>slope</th><th>intercept</th>{% for d in degrees %}<th>R² gain, degree {{ d }}</th>{% endfor %}</tr>
{% for r in relations %}<tr><td class="l">{{ r.name }}</td>
{% if r.rel %}<td>{{ r.rel.n }}</td><td>{{ f(r.rel.pearson_r) }}</td><td>{{ p(r.rel.p_value) }}</td>
<td>{{ f(r.rel.r2) }}</td><td>{{ f(r.rel.slope) }}</td><td>{{ f(r.rel.intercept) }}</td>
{% for d in degrees %}<td>{{ f(r.gains.get(d)) }}</td>{% endfor %}
{% else %}<td class="l muted" colspan="{{ 6 + degrees|length }}">not computed: {{ r.reason }}</td>{% endif %}
</tr>{% endfor %}
</table>
<p class="muted">R²: the share of the y variance a straight line in x predicts. R² gain: what a
Chebyshev series of that degree adds (a small gain means the relation is first-order).</p>

<h2>Data bias against CLIP model bias</h2>
<img class="plot" alt="scatter plot of data bias against CLIP model bias" src="{{ plots.data_clip }}">
{% if plots.data_generated %}
<h2>Data bias against generated images</h2>
<img class="plot" alt="scatter plot of data bias against the generated share female"
 src="{{ plots.data_generated }}">{% endif %}

<h2>Categories ({{ rows|length }} kept)</h2>
<p>Single-gender images with an alt-text: {{ data.n_single_gender }} ({{ data.n_female }} female,
{{ data.n_male }} male). Kept: named in at least {{ data.min_count }} of them.</p>
<table>
<tr><th class="l">category</th><th>female</th><th>male</th><th>n</th><th>data bias</th><th>share female</th>
<th class="l">prompt</th><th>CLIP d(c)</th>
{% if gen %}<th>generated n</th><th>generated share female</th>{% endif %}</tr>
{% for r in rows %}<tr><td class="l">{{ r.category }}</td><td>{{ r.female }}</td><td>{{ r.male }}</td>
<td>{{ r.n }}</td><td class="{{ sign(r.bias) }}">{{ f(r.bias) }}</td><td>{{ f(r.share_female) }}</td>
<td class="l">{{ r.prompt }}</td><td class="{{ sign(r.d) }}">{{ f(r.d) }}</td>
{% if gen %}<td>{{ r.gen_n if r.gen_n is not none else "–" }}</td>
<td>{{ f(r.gen_share) }}</td>{% endif %}</tr>
{% endfor %}</table>

<h2>Categories dropped by the count rule ({{ data.dropped|length }})</h2>
{% if data.dropped %}<table>
<tr><th class="l">category</th><th>female</th><th>male</th><th>n</th></tr>
{% for r in data.dropped %}<tr><td class="l">{{ r.category }}</td><td>{{ r.female }}</td><td>{{ r.male }}</td>
<td>{{ r.n }}</td></tr>
{% endfor %}</table>{% else %}<p>None.</p>{% endif %}

<h2>Probe images</h2>
<table>
<tr><th class="l">gender</th><th>available</th><th>sampled</th><th>embedded</th></tr>
{% for g in ["female", "male"] %}<tr><td class="l">{{ g }}</td><td>{{ probe.available[g] }}</td>
<td>{{ probe.sampled[g] }}</td><td>{{ probe.used[g] }}</td></tr>
{% endfor %}</table>
<p>Source: {{ probe.kind }} {{ probe.name }}; {{ probe.computed }} image(s) embedded in this run, the rest
from the {{ probe.cache }} cache.</p>
{% if probe.rejected %}<table><tr><th class="l">left out</th><th class="l">reason</th></tr>
{% for r in probe.rejected[:50] %}<tr><td class="l">{{ r.item }}</td><td class="l">{{ r.reason }}</td></tr>
{% endfor %}</table>{% if probe.rejected|length > 50 %}<p>… {{ probe.rejected|length - 50 }} more in
transfer.json.</p>{% endif %}{% endif %}

{% if gen %}<h2>Generated images</h2>
<table>
<tr><th class="l">folder</th><th class="l">category</th><th>images</th><th>female</th><th>male</th>
<th>other</th>
<th>share female</th><th>bias</th></tr>
{% for r in gen.prompts %}<tr><td class="l">{{ r.prompt }}</td><td class="l">{{ r.category }}</td>
<td>{{ r.n }}</td>
<td>{{ r.female }}</td><td>{{ r.male }}</td><td>{{ r.other }}</td><td>{{ f(r.share_female) }}</td>
<td>{{ f(r.bias) }}</td></tr>
{% endfor %}</table>
{% if gen.gender_head %}<p>Classified with the gender head {{ gen.gender_head.sha256[:12] }}… (encoder
{{ gen.gender_head.encoder }}).</p>{% endif %}
{% if gen.rejected %}<p>{{ gen.rejected|length }} unreadable file(s), counted nowhere:
{% for r in gen.rejected[:20] %}{{ r.path }} ({{ r.reason }}){% if not loop.last %}, {% endif %}
{% endfor %}</p>
{% endif %}{% endif %}

<h2>Definitions</h2>
<dl>
{% for k, v in definitions %}<dt>{{ k }}</dt><dd>{{ v }}</dd>
{% endfor %}</dl>
</body></html>
"""


def _fmt(v: Any) -> str:
    return "–" if v is None or not math.isfinite(float(v)) else f"{float(v):.3f}"


def _fmt_p(v: Any) -> str:
    if v is None:
        return "–"
    return f"{float(v):.2g}"


def _sign(v: Any) -> str:
    if not _finite(v) or float(v) == 0:
        return ""
    return "pos" if float(v) > 0 else "neg"


def render_transfer_report(doc: dict[str, Any], plots: dict[str, bytes]) -> str:
    """The self-contained HTML report of a ``transfer.json`` document; ``plots`` are PNG bytes by
    relation key (``data_clip``, ``data_generated``)."""
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    uris = {k: "data:image/png;base64," + base64.b64encode(v).decode("ascii") for k, v in plots.items()}
    uris.setdefault("data_generated", "")
    d_of = {r["category"]: r for r in doc["model_bias"]["categories"]}
    gen = doc["generated"]
    g_of = {r["category"]: r for r in gen["prompts"]} if gen else {}
    rows = []
    for r in doc["data_bias"]["categories"]:
        m = d_of.get(r["category"], {})
        g = g_of.get(r["category"])
        rows.append(
            {
                **r,
                "prompt": m.get("prompt", ""),
                "d": m.get("d"),
                "gen_n": g["n"] if g else None,
                "gen_share": g["share_female"] if g else None,
            }
        )
    names = {
        "data_clip": "data bias → CLIP d(c)",
        "data_generated": "data bias → generated share female",
        "clip_generated": "CLIP d(c) → generated share female",
    }
    relations = []
    degrees: list[int] = []
    for key, rel in doc["relations"].items():
        r = rel["relation"]
        gains = {c["degree"]: c["r2_gain"] for c in r["chebyshev"]} if r else {}
        degrees += [d for d in gains if d not in degrees]
        relations.append({"name": names.get(key, key), "rel": r, "reason": rel["reason"], "gains": gains})
    settings = [(k, "–" if v is None else v) for k, v in doc["settings"].items()]
    definitions = [(f"data bias: {k}", v) for k, v in doc["data_bias"]["definitions"].items()]
    definitions += [(f"model bias: {k}", v) for k, v in doc["model_bias"]["definitions"].items()]
    first = next((rel["relation"] for rel in doc["relations"].values() if rel["relation"]), None)
    if first:
        definitions += [(f"relation: {k}", v) for k, v in first["definitions"].items()]
    if gen:
        definitions += [(f"generated: {k}", v) for k, v in gen["definitions"].items()]
    return env.from_string(_TEMPLATE).render(
        doc=doc,
        settings=settings,
        relations=relations,
        degrees=sorted(degrees),
        plots=uris,
        rows=rows,
        data=doc["data_bias"],
        probe=doc["model_bias"]["probe"],
        gen=gen,
        definitions=definitions,
        f=_fmt,
        p=_fmt_p,
        sign=_sign,
    )
