"""A data → model bias transfer audit, end to end: ``fairsets audit transfer`` (design 4 of the
LAION-400M person-centric annotation study; the numbers are computed by the
modules beside this one).

:func:`run_transfer_audit` takes an annotation folder and writes three files into ``out``:

* ``transfer.json`` (schema :data:`SCHEMA`) — the settings; a ``definitions`` block (every rule
  behind the numbers: the group rule, the denominators, the category matching with the exclusions
  file and its SHA-256, the count rule, ``d(c)``, R², the cross-validation); the data bias of every
  social category (:func:`.data.data_bias`: single-gender images whose non-blank alt-text
  names it, kept when female + male ≥ ``min_count``; the dropped ones listed with their counts); the
  CLIP model bias ``d(c)`` of every kept category (:func:`.model.model_bias_report`, probe
  images from :mod:`.probe`); optionally the bias of a text-to-image model's generated
  images (:mod:`.generated`); the relations (:func:`.fit.relation`: Pearson ρ, R²
  of the line, Chebyshev R² gains in-sample and cross-validated) data → CLIP and, with generated
  images, data → generated and CLIP → generated; and, when the folder has race labels, the same per
  race group against the other races (``race``, :mod:`.race`);
* ``scatter.png`` — data bias against ``d(c)`` with the fitted line (and ``scatter-generated.png``,
  data bias against the generated share female, when there are generated images);
* ``report.html`` — one self-contained page with every table (:mod:`.report`).

Nothing here reads a whole table into memory: the data bias is one DuckDB aggregation over the
``person_images`` view, the probe sample one top-N query.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fairsets.core.atomic import atomic_write_text
from fairsets.core.progress import Progress

from .categories import load_categories
from .data import data_bias, exclusions_record, race_data_bias
from .fit import relation_or_reason
from .generated import (
    GENDERS,
    check_generated,
    gender_classifier,
    generate_images,
    generated_bias,
    load_gender_head,
    read_generated,
)
from .model import DEFAULT_TEMPLATE, category_embeddings, check_template, model_bias_report
from .plot import scatter_plot
from .probe import (
    Probe,
    check_probe_dataset,
    embed_probe,
    embed_race_probe,
    probe_kind,
    sample_probe_boxes,
)
from .race import race_model_bias, race_relations
from .report import render_transfer_report

if TYPE_CHECKING:
    from fairsets.models import VLM

__all__ = [
    "GENDERS",
    "JSON_FILE",
    "PLOT_FILE",
    "REPORT_FILE",
    "SCHEMA",
    "Probe",
    "check_generated",
    "check_probe_dataset",
    "check_template",
    "declared_races",
    "embed_probe",
    "gender_classifier",
    "generate_images",
    "load_gender_head",
    "probe_kind",
    "render_transfer_report",
    "run_transfer_audit",
    "sample_probe_boxes",
    "write_transfer",
]

SCHEMA = "fairsets.audit.transfer/2"
JSON_FILE = "transfer.json"
PLOT_FILE = "scatter.png"
GENERATED_PLOT_FILE = "scatter-generated.png"
REPORT_FILE = "report.html"


def _version() -> str:
    from fairsets.core.version import __version__

    return __version__


def declared_races(ann: str | os.PathLike[str]) -> list[str] | None:
    """The classes of the race head recorded in the annotation manifest (``annotate classify``), or
    None when the manifest records none."""
    from fairsets.annotate import layout

    attrs = layout.read_manifest(Path(ann)).get("attributes") or {}
    head = (attrs.get("race") or {}).get("head") if isinstance(attrs, dict) else None
    classes = head.get("classes") if isinstance(head, dict) else None
    return [str(c) for c in classes] if isinstance(classes, list) and classes else None


def _race(
    con: Any,
    folder: Path,
    vlm: VLM,
    cats: list[str],
    *,
    min_count: int,
    phrases: list[str],
    probe_path: Path,
    embed: Callable[[list[str]], tuple[list[str], Any]],
    cv_folds: int | None,
    seed: int,
    probe_options: dict[str, Any],
) -> dict[str, Any]:
    """The ``race`` section of ``transfer.json``."""
    data = race_data_bias(con, cats, min_count=min_count, exclusions=phrases, groups=declared_races(folder))
    kept = [r["category"] for r in data["categories"]]
    model, reason = None, None
    if not data["groups"]:
        reason = "no race group: no box has a race label other than unclear"
    elif probe_kind(probe_path) != "annotations":
        reason = "the probe is a published dataset; a race probe needs an annotation folder (--probe ANN)"
    else:
        from ..tables import connect

        pcon = connect(probe_path)
        try:
            has_race = "perceived_race" in {r[0] for r in pcon.execute("DESCRIBE boxes").fetchall()}
        finally:
            pcon.close()
        if not has_race:
            reason = f"the probe folder {probe_path.name} has no race labels"
        else:
            rp = embed_race_probe(probe_path, vlm, data["groups"], seed=seed, **probe_options)
            prompts, text = embed(kept)
            model = race_model_bias(rp.vectors, kept, prompts, text)
            model["probe"] = {k: v for k, v in rp.info.items()}
            model["probe"]["computed"] = rp.computed
    relations = race_relations(data, model, folds=cv_folds, seed=seed)
    for rel in relations.values():
        if rel["relation"] is None and reason and rel["reason"] == "no race model bias":
            rel["reason"] = reason
    return {"data_bias": data, "model_bias": model, "relations": relations, "reason": reason}


def run_transfer_audit(
    ann: str | os.PathLike[str],
    vlm: VLM,
    out: str | os.PathLike[str],
    *,
    categories: Sequence[str] | None = None,
    categories_source: str = "default",
    template: str = DEFAULT_TEMPLATE,
    min_count: int = 100,
    exclusions: str | os.PathLike[str] | None = None,
    use_exclusions: bool = True,
    race: bool | None = None,
    cv_folds: int | None = None,
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
        categories: the social categories (default :func:`.categories.load_categories`).
        categories_source: how ``transfer.json`` names them (``"default"`` or the file's name).
        template: the probe prompt (``{category}``, ``{a}``).
        min_count: keep a category named in at least this many single-gender (single-race) images.
        exclusions: an exclusions file replacing the shipped one; ``use_exclusions=False``: none.
        race: the race section (None: when ``ann`` has race labels).
        cv_folds: folds of the Chebyshev cross-validation (None: :func:`.fit.cv_folds`).
        probe: probe images (default ``ann``): an annotation folder or a published dataset.
        probe_attribute: a dataset probe's gender column.
        max_probe: at most this many probe images per gender (and per race group).
        seed: the probe sample's seed, and the cross-validation's.
        generated: a folder of generated images (one sub-folder per category), or None.
        classify: PIL images → labels, for ``generated`` (:func:`gender_classifier`).
        gender_head: what the JSON records about the head (:meth:`Head.describe`).
        generation: what :func:`generate_images` returned, when it made ``generated``.
        batch_size, cache_dir, progress: embedding options.

    Returns:
        The ``transfer.json`` document.
    """
    from ..tables import connect

    check_template(template)
    cats = list(categories) if categories is not None else load_categories()
    if generated is not None and classify is None:
        raise ValueError("generated images need a classifier (--gender-head)")
    gen_map = check_generated(generated, cats) if generated is not None else None
    phrases, excl = exclusions_record(exclusions, use=use_exclusions)
    progress = progress or Progress()
    folder = Path(ann)
    probe_path = Path(probe) if probe is not None else folder
    options = {"max_probe": max_probe, "batch_size": batch_size, "cache_dir": cache_dir, "progress": progress}
    con = connect(folder, cache=Path(out) / ".work" / "facts")
    try:
        data = data_bias(con, cats, min_count=min_count, exclusions=phrases)
        has_race = "perceived_race" in {r[0] for r in con.execute("DESCRIBE boxes").fetchall()}
        if race and not has_race:
            raise ValueError(
                f"{folder.name} has no race labels; run fairsets annotate classify with a race head"
            )
        kept = [r["category"] for r in data["categories"]]
        pr = embed_probe(probe_path, vlm, seed=seed, attribute=probe_attribute, **options)
        embedded: dict[str, tuple[str, Any]] = {}

        def embed(names: list[str]) -> tuple[list[str], Any]:
            todo = [c for c in names if c not in embedded]
            if todo:
                prompts, text = category_embeddings(vlm, todo, template=template)
                embedded.update({c: (p, t) for c, p, t in zip(todo, prompts, text, strict=True)})
            import numpy as np

            vecs = np.array([embedded[c][1] for c in names]).reshape(len(names), -1)
            return [embedded[c][0] for c in names], vecs

        race_doc = None
        if race is not False and has_race:
            race_doc = _race(
                con, folder, vlm, cats, min_count=min_count, phrases=phrases, probe_path=probe_path,
                embed=embed, cv_folds=cv_folds, seed=seed, probe_options=options,
            )  # fmt: skip
    finally:
        con.close()
    if kept:
        model = model_bias_report(vlm, pr.female, pr.male, kept, template=template, embedded=embed(kept))
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
    cv = {"folds": cv_folds, "seed": seed}
    relations = {"data_clip": relation_or_reason(x_data, y_clip, "data bias → CLIP d(c)", **cv)}

    gen_doc = None
    if generated is not None and classify is not None and gen_map is not None:
        labels, rejected = read_generated(generated, classify, batch_size=batch_size)
        gb = generated_bias(labels)
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
        share = [by_cat[c]["share_female"] for c in both]
        relations["data_generated"] = relation_or_reason(
            [bias_of[c] for c in both], share, "data bias → generated share female", **cv
        )
        relations["clip_generated"] = relation_or_reason(
            [d_of[c] for c in both], share, "CLIP d(c) → generated share female", **cv
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
            "exclusions": excl["file"] or "none",
            "exclusions_sha256": excl["sha256"],
            "race": race_doc is not None,
            "cv_folds": cv_folds,
            "probe": probe_path.name,
            "probe_kind": pr.info["kind"],
            "max_probe": max_probe,
            "seed": seed,
            "generated": Path(generated).name if generated is not None else None,
        },
        "definitions": {},
        "data_bias": data,
        "model_bias": model,
        "generated": gen_doc,
        "relations": relations,
        "race": race_doc,
    }
    from .definitions import definitions

    doc["definitions"] = definitions(doc, excl)
    write_transfer(doc, out)
    return doc


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
    plots["data_clip"] = scatter_plot(
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
        plots["data_generated"] = scatter_plot(
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
