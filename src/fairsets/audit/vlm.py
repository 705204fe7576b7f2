"""The vision-language model audit of a published dataset (IndicFairFace §4–5, appendix §9–11).

For every prompt: the distribution of a group attribute among the top-k images by cosine
similarity and its Jensen–Shannon divergence from uniform (log base 2, so in [0, 1]), the mean
similarity per group and the (population) standard deviation of those means; per prompt set, how
much the top-k distributions differ between synonymous prompts; and the job-application
simulation (per group, the share of images closer to the positive prompt than to the negative
one). With a debias transform, every metric is computed again on the transformed image
embeddings. Results go to ``OUT/audit.json`` and a self-contained ``OUT/report.html``.

The groups are the declared ones (:mod:`fairsets.audit.reference`: ``--groups``, else the recipe's
cells recorded in ``manifest.json``), empty ones included: a declared group with no image counts as
zero retrievals and is named in ``empty_groups``. ``audit.json`` carries a ``definitions`` block
(the rule of every number) and ``warnings`` (an empty group, a top-k that holds a whole group or
every image, a reference set that was not declared).
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fairsets.audit.dataset import DatasetError, PublishedDataset, open_dataset
from fairsets.audit.embeddings import EmbeddingCache, ImageEmbeddings, embed_dataset, embed_texts
from fairsets.audit.reference import (
    Reference,
    audit_warnings,
    check_labels,
    definitions,
    describe,
    jsonable_sizes,
    resolve_reference,
)
from fairsets.audit.report import AUDIT_SCHEMA, render_report
from fairsets.core.atomic import atomic_write_text
from fairsets.core.progress import Progress

if TYPE_CHECKING:
    from fairsets.audit.prompts import PromptSpec
    from fairsets.debias.transform import DebiasTransform
    from fairsets.models import VLM

__all__ = ["AUDIT_FILE", "REPORT_FILE", "SCHEMA", "group_labels", "run_vlm_audit", "vlm_audit"]

log = logging.getLogger(__name__)

SCHEMA = AUDIT_SCHEMA
AUDIT_FILE = "audit.json"
REPORT_FILE = "report.html"


def group_labels(emb: ImageEmbeddings, attribute: str) -> tuple[ImageEmbeddings, list[str]]:
    """Keep rows with a value for ``attribute`` (the rest join ``skipped``); return them and their labels."""
    if emb.rows and attribute not in emb.rows[0]:
        cols = ", ".join(sorted(k for k in emb.rows[0] if not k.startswith("_")))
        raise DatasetError(f"no column {attribute!r} in the metadata (columns: {cols})")
    keep, labels, dropped = [], [], []
    for i, r in enumerate(emb.rows):
        value = r.get(attribute)
        if value is None or (isinstance(value, str) and not value.strip()):
            dropped.append({"key": r["key"], "reason": f"no value for {attribute!r}"})
            continue
        keep.append(i)
        labels.append(str(value))
    sub = ImageEmbeddings(
        rows=[emb.rows[i] for i in keep],
        vectors=emb.vectors[keep] if keep else emb.vectors[:0],
        skipped=list(emb.skipped) + dropped,
        computed=emb.computed,
    )
    return sub, labels


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def vlm_audit(
    images: np.ndarray,
    labels: Sequence[str],
    texts: dict[str, np.ndarray],
    prompts: PromptSpec,
    *,
    k: int,
    debiased: np.ndarray | None = None,
    header: dict[str, Any] | None = None,
    groups: Reference | Sequence[str] | None = None,
) -> dict[str, Any]:
    """The audit on given embeddings (no model, no files): the ``audit.json`` document.

    Args:
        images: (n, d) image embeddings.
        labels: the group of each image.
        texts: ``{prompt: (d,) embedding}`` for every prompt of ``prompts`` (and its job prompts).
        prompts: the prompt sets.
        k: top-k size (clamped to n; the metrics record the k used).
        debiased: the same images' debiased embeddings (``transform.apply(images)``); adds
            ``debiased`` results.
        header: fields placed first (dataset, model, ...; see ``SCHEMA``).
        groups: the reference set (:mod:`fairsets.audit.reference`): the declared groups, empty
            ones included; a plain list counts as given by ``--groups``. ``None``: the labels
            present, with a warning that nothing was declared.

    Raises:
        ValueError: on mismatched inputs, or a label that is not a declared group.
    """
    from fairsets.audit import metrics as M

    if len(labels) != len(images):
        raise ValueError(f"{len(images)} embeddings but {len(labels)} labels")
    if len(images) == 0:
        raise ValueError("no image to audit")
    head = dict(header or {})
    attribute = str(head.get("attribute") or "group")
    if not isinstance(groups, Reference):
        groups = resolve_reference(None, attribute, groups, labels)
    check_labels(groups, labels, attribute)
    names = list(groups.groups)
    sizes = jsonable_sizes(names, labels)
    k_used = int(min(k, len(images)))
    where = "/".join(str(x) for x in (head.get("variant"), "+".join(head.get("splits") or [])) if x)
    record_base = {key: head.get(key) for key in ("dataset", "model", "pretrained", "attribute")}
    views: list[tuple[str, np.ndarray]] = [("original", np.asarray(images, dtype=np.float32))]
    if debiased is not None:
        if np.shape(debiased) != np.shape(images):
            raise ValueError(f"debiased embeddings {np.shape(debiased)} != embeddings {np.shape(images)}")
        views.append(("debiased", np.asarray(debiased, dtype=np.float32)))

    results: list[dict[str, Any]] = []
    robustness: dict[str, dict[str, Any]] = {}
    for set_name, set_prompts in prompts.sets.items():
        for view, X in views:
            dists = {}
            for prompt in set_prompts:
                m = M.prompt_metrics(X, labels, texts[prompt], k, names)
                dists[prompt] = m["topk"]
                results.append(
                    {
                        **record_base,
                        "prompt": prompt,
                        "prompt_set": set_name,
                        "primary": prompts.primary.get(set_name) == prompt,
                        "embeddings": view,
                        "metrics": m,
                    }
                )
            robustness.setdefault(set_name, {})[view] = M.pairwise_jsd(dists)
    job = None
    if prompts.job is not None:
        pos, neg = prompts.job
        job = {"positive": pos, "negative": neg}
        for view, X in views:
            job[view] = M.job_simulation(X, labels, texts[pos], texts[neg], names, allow_empty=True)
    return {
        "schema": SCHEMA,
        **head,
        "k": k_used,
        "k_requested": int(k),
        "n_images": len(images),
        "groups": names,
        "group_sizes": sizes,
        "reference": describe(groups),
        "empty_groups": [g for g in names if not sizes[g]],
        "warnings": audit_warnings(groups, sizes, k, attribute, where),
        "definitions": definitions(attribute, groups, int(k), k_used, len(images)),
        "jsd_log_base": 2,
        "std_ddof": 0,
        "prompt_source": prompts.source,
        "results": results,
        "robustness": robustness,
        "job": job,
    }


def run_vlm_audit(
    dataset: str | os.PathLike[str] | PublishedDataset,
    model: str | VLM,
    *,
    pretrained: str | None = None,
    attribute: str = "state",
    k: int = 500,
    out: str | os.PathLike[str] | None = None,
    prompts: PromptSpec | None = None,
    variant: str | None = None,
    splits: Sequence[str] | None = None,
    transform: DebiasTransform | str | os.PathLike[str] | None = None,
    groups: Sequence[str] | None = None,
    device: str = "cpu",
    batch_size: int = 32,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Audit ``model`` on a published dataset; write ``audit.json`` and ``report.html`` into ``out``.

    Args:
        dataset: the dataset folder (``fairsets build --out``) or an opened dataset.
        model: a model spec for :func:`fairsets.models.load_vlm` (e.g. ``"ViT-B-32"``) or a loaded VLM.
        pretrained: weights (``"none"`` for random weights; see ``load_vlm``).
        attribute: the metadata column whose groups are compared (e.g. ``state``).
        k: top-k size.
        out: output folder; ``None`` writes nothing.
        prompts: prompt sets (default: the paper's, appendix §9).
        variant: dataset variant (default ``balanced`` if present).
        splits: splits to evaluate (default ``test`` if present, else all).
        transform: a debias transform (or its file) to evaluate as well.
        groups: the reference set (``--groups``); default: the groups the dataset's build declared
            for ``attribute`` (its recipe's cells in ``manifest.json``, empty ones included), else
            the values present, with a warning (:mod:`fairsets.audit.reference`).
        device, batch_size, cache_dir, progress: embedding options.

    Returns:
        The audit document (also written to ``out/audit.json``).
    """
    from fairsets.audit.prompts import default_prompts
    from fairsets.core.step import check_requires
    from fairsets.models import load_vlm

    if k < 1:
        raise ValueError("k must be >= 1")
    if out is not None:
        check_requires("the audit report", (("matplotlib", "vlm"),))
    ds = dataset if isinstance(dataset, PublishedDataset) else open_dataset(dataset)
    variant = variant or ds.default_variant()
    splits = list(splits) if splits else ds.default_splits(variant)
    prompts = prompts or default_prompts()
    if transform is not None and not hasattr(transform, "apply"):
        from fairsets.debias.transform import DebiasTransform

        transform_path = str(transform)
        transform = DebiasTransform.load(transform)
    else:
        transform_path = None
    vlm = model if not isinstance(model, str) else load_vlm(model, pretrained, device=device)
    if transform is not None:
        _check_transform(transform, vlm)

    emb = embed_dataset(
        ds, vlm, variant, splits, batch_size=batch_size, cache_dir=cache_dir, progress=progress
    )
    emb, labels = group_labels(emb, attribute)
    reference = resolve_reference(ds.root, attribute, groups, labels)
    check_labels(reference, labels, attribute)
    cache = EmbeddingCache.for_dataset(ds, vlm, cache_dir)
    wanted = prompts.all_prompts() + (list(prompts.job) if prompts.job else [])
    text_vecs = embed_texts(vlm, wanted, cache=cache)
    texts = dict(zip(wanted, text_vecs, strict=True))

    header = {
        "dataset": ds.name,
        "dataset_path": str(ds.root),
        "variant": variant,
        "splits": splits,
        "model": vlm.name,
        "model_id": vlm.model_id,
        "pretrained": vlm.pretrained,
        "attribute": attribute,
    }
    debiased = transform.apply(emb.vectors) if transform is not None else None
    doc = vlm_audit(
        emb.vectors, labels, texts, prompts, k=k, debiased=debiased, header=header, groups=reference
    )
    doc["debias"] = (
        None
        if transform is None
        else {
            "transform": transform_path,
            "method": transform.method,
            "alpha": transform.alpha,
            "beta": transform.beta,
            "fit_splits": transform.meta.get("splits"),
            "meta": transform.meta,
        }
    )
    doc["skipped"] = emb.skipped
    doc["model_provenance"] = vlm.provenance()
    doc["created"] = _utc_now()
    from fairsets.core.version import __version__

    doc["fairsets_version"] = __version__
    if out is not None:
        write_audit(doc, out)
    return doc


def _check_transform(transform: DebiasTransform, vlm: VLM) -> None:
    if transform.dim != vlm.embed_dim:
        raise ValueError(
            f"the debias transform is for {transform.dim}-d embeddings but {vlm.model_id} makes "
            f"{vlm.embed_dim}-d ones"
        )
    fitted = transform.meta.get("model_id")
    if fitted and fitted != vlm.model_id:
        raise ValueError(f"the debias transform was fitted on {fitted}, not {vlm.model_id}")


def write_audit(doc: dict[str, Any], out: str | os.PathLike[str]) -> dict[str, Path]:
    """Write ``audit.json`` and ``report.html`` into ``out`` (atomically)."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    path = atomic_write_text(
        folder / AUDIT_FILE, json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    )
    report = render_report(doc, folder / REPORT_FILE)
    return {"json": path, "html": Path(report)}
