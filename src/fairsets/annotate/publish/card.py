"""The dataset card (``README.md``) of published person annotations.

The body comes from the Jinja2 template ``cards/person_annotations.md.j2`` (shipped as package
data in ``fairsets/_cards/``, like the face card); the YAML header is built here with PyYAML
(:func:`card_header`) so that it is always valid: licence, task categories, tags, size category,
``configs`` for the ``datasets`` library (``boxes``, the default, and ``images``: Parquet globs
under ``data/``) and the Hub's gating fields (``extra_gated_prompt``, ``extra_gated_fields``):
demographic labels are sensitive, so access asks for a purpose and an agreement not to identify
people nor infer the protected attributes of individuals.

The card is rendered from the prepared folder's manifest (:mod:`fairsets.annotate.publish`).
Every ``{{ value }}`` is data, escaped as one line of Markdown (:func:`fairsets.publish.card.md_text`)
unless it is :class:`~fairsets.publish.card.Md` written here; a value the template needs that is
missing (None, an undefined name) is an error, never the text "None". The result is checked by
:func:`check_annotation_card` (the face card's checks, the gating fields, nothing unrendered).

Audit blocks stored by ``fairsets card update`` (``audits``: Markdown written, escaped, by
:mod:`fairsets.audit.persons.card`) go into a ``## Bias, risks and limitations`` section before
the limitations of perceived labels; without any, the card has no such section.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fairsets.core.datafiles import find_data_file
from fairsets.publish.card import HF_LICENSES, Md, check_card, dump_header, md_code, md_text, size_category
from fairsets.publish.card.markdown import _fenced, _json_inline, _py, _table

from .originals import redownload_lines
from .rai import card_context

__all__ = [
    "GATED_FIELDS",
    "HF_LICENSES",
    "TEMPLATE_NAME",
    "card_header",
    "check_annotation_card",
    "render_card",
]

TEMPLATE_NAME = "person_annotations.md.j2"
TASKS = ("object-detection", "image-classification")
TAGS = ("fairness", "bias-audit", "person-detection", "perceived-attributes", "annotations")

GATED_PROMPT = (
    "These annotations hold perceived demographic labels (model predictions of how a person "
    "appears, not how they identify) for people in web images. They are shared for research on "
    "dataset composition and bias. By requesting access you agree to use them only for aggregate "
    "analysis of datasets and models, not to identify any person, and not to infer or publish "
    "the protected attributes (gender, race, ethnicity, …) of any individual."
)
#: The access form: what the requester tells, and what they agree to.
GATED_FIELDS: dict[str, Any] = {
    "Name": "text",
    "Affiliation": "text",
    "Research purpose (what you will measure with these annotations)": "text",
    "I will use the annotations only for aggregate research on datasets and models": "checkbox",
    "I will not try to identify any person in the images": "checkbox",
    "I will not infer, publish or act on the protected attributes of any individual": "checkbox",
    "I understand the labels are perceived by a model, not self-identified, and can be wrong": "checkbox",
}

#: What each column of the two tables holds (attribute columns are described per attribute).
BOX_COLUMNS = {
    "shard": "the shard's name (see the inputs)",
    "key": "the sample's key in its shard",
    "box_id": "0, 1, … per image, by descending confidence",
    "x1, y1, x2, y2": "the box in pixels of the decoded image (EXIF orientation applied; x2, y2 exclusive)",
    "conf": "the detector's confidence",
    "class_name": "the detector's class of the box",
    "width, height, area_frac": "box size in pixels, box area / image area",
    "image_w, image_h": "size of the decoded image the box refers to",
    "kept": "true if the box passed the size filter (only kept boxes are classified)",
    "drop_reason": "why a box was dropped (null when kept)",
}
IMAGE_COLUMNS = {
    "shard, key": "the sample",
    "caption": "the sample's text, as stored in the shard",
    "url": "where the image was downloaded from (if the shard recorded it)",
    "sha256": "of the image bytes as stored in the shard",
    "image_w, image_h": "decoded size",
    "original_width, original_height, original_sha256": (
        "the original the downloader fetched: its size as img2dataset decoded it (no EXIF orientation) "
        "and the sha256 of the bytes its URL served; null where not recorded"
    ),
    "resize_mode, resize_size": (
        "how the stored image was made from it (no / keep_ratio / center_crop; null: unknown)"
    ),
    "n_boxes, n_kept": "person boxes detected, and kept",
    "status, reason": "ok / rejected / failed, and why",
}


def _require(mapping: Mapping[str, Any], *path: str) -> Any:
    value: Any = mapping
    for i, key in enumerate(path):
        if not isinstance(value, Mapping) or value.get(key) is None:
            raise ValueError(f"card: manifest value {'.'.join(path[: i + 1])} is missing")
        value = value[key]
    return value


def card_header(m: Mapping[str, Any]) -> dict[str, Any]:
    """The YAML header of the card for the prepared manifest ``m``."""
    repo = str(_require(m, "repo_id"))
    header: dict[str, Any] = {
        "pretty_name": f"Person annotations: {repo.split('/')[-1]}",
        "license": _require(m, "license"),
        "task_categories": list(TASKS),
        "tags": list(TAGS),
        "size_categories": [size_category(int(_require(m, "counts", "boxes", "total")))],
        # boxes and labels by models over images and captions that were found on the web
        "source_datasets": ["extended"],
        "annotations_creators": ["machine-generated"],
        "language_creators": ["found"],
        "configs": [
            {
                "config_name": "boxes",
                "data_files": [{"split": "train", "path": "data/boxes/*.parquet"}],
                "default": True,
            },
            {"config_name": "images", "data_files": [{"split": "train", "path": "data/images/*.parquet"}]},
        ],
        "extra_gated_prompt": GATED_PROMPT,
        "extra_gated_fields": dict(GATED_FIELDS),
        "extra_gated_button_content": "Request access",
    }
    return header


def _num(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _flat(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """``[(dotted key, value)]`` of the scalar leaves (a short list of numbers is one value)."""
    if isinstance(value, Mapping):
        return [kv for k in sorted(value) for kv in _flat(value[k], f"{prefix}{k}.")]
    if isinstance(value, list | tuple) and len(value) <= 4 and all(isinstance(v, int | float) for v in value):
        return [(prefix.rstrip("."), "[" + ", ".join(_num(v) for v in value) + "]")]
    if isinstance(value, list | tuple):
        return [(prefix.rstrip("."), f"{len(value)} values")]
    return [] if value is None else [(prefix.rstrip("."), _num(value))]


def _metrics(metrics: Any, classes: list[str]) -> Md | None:
    """A head's test metrics (``annotate train``): the scalars, then per class and the confusion matrix."""
    if not isinstance(metrics, Mapping):
        return None
    rest = {k: v for k, v in metrics.items() if k not in ("per_class", "confusion")}
    parts = [_table(["Metric", "Value"], [[k, v] for k, v in _flat(rest)])] if _flat(rest) else []
    per_class = metrics.get("per_class")
    if isinstance(per_class, Mapping) and per_class:
        cols = ("precision", "recall", "f1", "support")
        rows = [[md_code(c), *(_num((d or {}).get(k, "n/a")) for k in cols)] for c, d in per_class.items()]
        parts.append(_table(["Class", *cols], rows, ["---"] + ["---:"] * len(cols)))
    cm = metrics.get("confusion")
    if (
        isinstance(cm, list)
        and len(cm) == len(classes)
        and all(isinstance(r, list) and len(r) == len(classes) for r in cm)
    ):
        head = [Md("true \\ predicted"), *(md_code(c) for c in classes)]
        parts.append(
            _table(
                head,
                [[md_code(c), *r] for c, r in zip(classes, cm, strict=True)],
                ["---"] + ["---:"] * len(classes),
            )
        )
    return Md("\n\n".join(parts)) if parts else None


def _with_ci(value: Any, ci: Any) -> str:
    text = "n/a" if value is None else _num(value)
    if isinstance(ci, list | tuple) and len(ci) == 2 and all(isinstance(c, int | float) for c in ci):
        text += f" [{_num(ci[0])}, {_num(ci[1])}]"
    return text


def _agreement(v: Mapping[str, Any]) -> Md | None:
    """The human-agreement tables of ``verification`` (``fairsets annotate verify``): one row per
    comparison (boxes, accuracy and Cohen's κ with their 95% CIs), then κ by minimum box side."""
    same = v.get("same_boxes")
    if isinstance(same, Mapping) and isinstance(same.get("human_vs_classifier"), Mapping):
        # Like for like: the human ceiling and each human against the classifier over the same boxes.
        comparisons = {
            f"human ({c}) vs classifier, same boxes": d
            for c, d in sorted(same["human_vs_classifier"].items())
        }
    else:
        comparisons = {
            f"human ({c}) vs classifier": d for c, d in sorted((v.get("human_vs_classifier") or {}).items())
        }
    if isinstance(v.get("human_vs_human"), Mapping):
        comparisons["human vs human"] = v["human_vs_human"]
    if not comparisons and ("kappa" in v or "accuracy" in v):
        comparisons["human vs classifier"] = v
    if not comparisons:
        return None
    rows = [
        [
            name,
            d.get("n", "n/a"),
            _with_ci(d.get("accuracy"), d.get("accuracy_ci")),
            _with_ci(d.get("kappa"), d.get("kappa_ci")),
        ]
        for name, d in comparisons.items()
        if isinstance(d, Mapping)
    ]
    parts = [
        _table(
            ["Comparison", "Boxes", "Accuracy [95% CI]", "Cohen's κ [95% CI]"],
            rows,
            ["---", "---:", "---:", "---:"],
        )
    ]
    curves = {
        c: d for c, d in sorted((v.get("min_side_kappa") or {}).items()) if isinstance(d, Mapping) and d
    }
    if curves:
        sides = sorted({int(k) for d in curves.values() for k in d if str(k).isdigit()})
        head = ["κ by minimum box side (px)", *(f"≥ {x}" for x in sides)]
        body = [
            [f"human ({c}) vs classifier", *(_with_ci(d.get(str(x)), None) for x in sides)]
            for c, d in curves.items()
        ]
        parts.append(_table(head, body, ["---"] + ["---:"] * len(sides)))
    boot = v.get("bootstrap")
    if isinstance(boot, Mapping) and boot.get("resamples"):
        parts.append(
            Md(
                md_text(
                    f"Intervals: {boot['resamples']} bootstrap resamples, seed {boot.get('seed', 'n/a')}."
                )
            )
        )
    return Md("\n\n".join(parts))


def _pct(n: int, total: int) -> str:
    return f"{100 * n / total:.1f} %" if total else "n/a"


def _checked_names(m: Mapping[str, Any]) -> str:
    """The repository id, after checking it and the attribute names: the card writes both inside
    code spans and URLs (and the attribute in column names), where no escape applies."""
    from fairsets.publish.hub import PublishError, validate_repo_id

    from ..layout import check_attribute

    try:
        repo = validate_repo_id(str(_require(m, "repo_id")))
    except PublishError as e:
        raise ValueError(f"card: {e}") from None
    for attr in m.get("attributes") or {}:
        check_attribute(str(attr))  # an AnnotationError (a ValueError) naming the rule
    return repo


def _context(m: Mapping[str, Any]) -> dict[str, Any]:
    counts = _require(m, "counts")
    repo = _checked_names(m)
    params = _require(m, "params")
    heads = []
    for attr, entry in sorted((m.get("attributes") or {}).items()):
        head = _require(m, "attributes", attr, "head")
        labels = _require(m, "counts", "attributes", attr)
        kept = sum(labels["classes"].values()) + labels["unlabelled"]
        rows = [[md_code(c), n, _pct(n, kept)] for c, n in sorted(labels["classes"].items())]
        if labels["unlabelled"]:
            rows.append(
                [
                    Md(f"no label (see {md_code(f'{attr}_reason')})"),
                    labels["unlabelled"],
                    _pct(labels["unlabelled"], kept),
                ]
            )
        verification = entry.get("verification")
        heads.append(
            {
                "attribute": attr,
                "encoder": _require(m, "attributes", attr, "head", "encoder"),
                "pretrained": head.get("pretrained") or "none (random weights)",
                "classes": Md(
                    ", ".join(md_code(c) for c in _require(m, "attributes", attr, "head", "classes"))
                ),
                "sha256": _require(m, "attributes", attr, "head_sha256"),
                "metrics": _metrics(head.get("metrics"), head["classes"]) if head.get("metrics") else None,
                "counts": _table([f"perceived_{attr}", "Kept boxes", "Share"], rows, ["---", "---:", "---:"]),
                "verification": _agreement(verification) if isinstance(verification, Mapping) else None,
                "columns": Md(
                    f"{md_code(f'perceived_{attr}')} (the most probable class) and "
                    + ", ".join(md_code(f"p_{attr}_{c}") for c in head["classes"])
                    + f" (the probabilities, summing to 1), {md_code(f'{attr}_reason')} (why a kept box "
                    "has no label)"
                ),
            }
        )
    images = counts["images"]
    boxes = counts["boxes"]
    inputs = [
        [md_code(i.get("name") or ""), i.get("kind") or "", i.get("file") or ""]
        for i in m.get("inputs") or []
    ]
    shards = m.get("shards") or {}
    problems = [f"{name}: {p}" for name, s in sorted(shards.items()) for p in (s or {}).get("problems") or []]
    col_rows = [[Md(", ".join(f"`{c.strip()}`" for c in k.split(","))), v] for k, v in BOX_COLUMNS.items()]
    sql = (
        "SELECT b.key, b.box_id, "
        + ", ".join(f"b.perceived_{h['attribute']}" for h in heads)
        + (", " if heads else "")
        + "i.caption FROM 'data/boxes/*.parquet' b JOIN 'data/images/*.parquet' i USING (shard, key) "
        "WHERE b.kept LIMIT 5"
    )
    load_hub = "\n".join(
        [
            "from datasets import load_dataset",
            "",
            "# a gated dataset: accept the conditions on its page, then log in (hf auth login)",
            f'boxes = load_dataset({_py(repo)}, "boxes", split="train")',
            f'images = load_dataset({_py(repo)}, "images", split="train")',
            'kept = boxes.filter(lambda row: row["kept"])',
            "print(kept)",
        ]
    )
    load_duck = "\n".join(
        [
            "import duckdb",
            "",
            "# in a local copy of this repository (hf download --repo-type dataset "
            + repo
            + " --local-dir .)",
            f"duckdb.sql({_py(sql)}).show()",
        ]
    )
    return {
        "header": Md(dump_header(card_header(m)).rstrip("\n")),
        "pretty_name": f"Person annotations: {repo.split('/')[-1]}",
        "repo_url": Md(f"`https://huggingface.co/datasets/{repo}`"),
        "license": md_code(_require(m, "license")),
        "fairsets_version": _require(m, "fairsets_version"),
        "detector_id": md_code(_require(m, "detector", "model_id")),
        "detector_sha256": md_code(_require(m, "detector", "weights_sha256")),
        "conf": _require(m, "params", "conf"),
        "min_side": _require(m, "params", "min_side"),
        "imgsz": params.get("imgsz"),
        "person_classes": Md(", ".join(md_code(c) for c in params.get("person_classes") or [])) or None,
        "heads": heads,
        "images_total": images["total"],
        "images_table": _table(
            ["Status", "Images", "Share"],
            [[md_code(s), images[s], _pct(images[s], images["total"])] for s in ("ok", "rejected", "failed")],
            ["---", "---:", "---:"],
        ),
        "boxes": boxes,
        "drop_table": _table(
            ["Why dropped (numbers written N)", "Boxes"],
            [[r, n] for r, n in boxes["drop_reasons"].items()],
            ["---", "---:"],
        )
        if boxes["drop_reasons"]
        else None,
        "inputs_table": _table(["Shard", "Kind", "File"], inputs) if inputs else None,
        "problems": problems,
        "box_columns": _table(["Column", "Meaning"], col_rows),
        "image_columns": _table(
            ["Column", "Meaning"],
            [[Md(", ".join(f"`{c.strip()}`" for c in k.split(","))), v] for k, v in IMAGE_COLUMNS.items()],
        ),
        "load_hub": Md(_fenced(load_hub, "python")),
        "load_duckdb": Md(_fenced(load_duck, "python")),
        "redownload": Md("\n".join(redownload_lines(m))),
        "params_json": Md(f"`{_json_inline(params)}`"),
        **card_context(m),
    }


def _strict_finalize(value: Any) -> Any:
    if value is None:
        raise ValueError("card: a value the template shows is missing (None)")
    return value if isinstance(value, Md) else md_text(value)


def render_card(
    manifest: Mapping[str, Any],
    template: str | os.PathLike[str] | None = None,
    *,
    out_dir: str | os.PathLike[str] | None = None,
    audits: Sequence[str] = (),
) -> str:
    """Render the card of a prepared folder; raise ``ValueError`` naming any problem.

    Args:
        manifest: The prepared folder's manifest (:func:`fairsets.annotate.publish.dataset.prepare`), without
            its ``files``.
        template: Jinja2 template (default ``cards/person_annotations.md.j2``).
        out_dir: If given, each config's ``data_files`` glob must match a file under it.
        audits: Audit blocks to show under ``## Bias, risks and limitations``, in this order
            (Markdown already escaped, as ``fairsets card update`` stores them; see
            :func:`fairsets.annotate.publish.read_card_blocks`); none: the card has no such section.
    """
    import jinja2

    from fairsets.publish.card.render import card_environment

    path = Path(template) if template is not None else find_data_file("cards", TEMPLATE_NAME)
    env = card_environment(path, _strict_finalize)
    try:
        text = (
            env.get_template(path.name)
            .render(**_context(manifest), audits=Md("\n\n".join(b.strip("\n") for b in audits)))
            .rstrip("\n")
            + "\n"
        )
    except jinja2.UndefinedError as e:
        raise ValueError(f"card: {e}") from None
    problems = check_annotation_card(text, out_dir)
    if problems:
        raise ValueError("dataset card problems:\n- " + "\n- ".join(problems))
    return text


def check_annotation_card(text: str, out_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Offline checks of an annotation card: those of :func:`fairsets.publish.card.check_card`, plus
    the gating fields, the two configs, and no ``None`` nor unrendered template syntax."""
    import yaml

    problems = check_card(text, out_dir)
    for bad in ("{{", "}}", "{%", "%}"):
        if bad in text:
            problems.append(f"the card holds unrendered template syntax {bad!r}")
    body = text.split("---", 2)[-1]
    if "None" in body.split():
        problems.append("the card shows 'None' (a value is missing)")
    try:
        data = yaml.safe_load(text.split("---", 2)[1]) or {}
    except (yaml.YAMLError, IndexError) as e:
        return [*problems, f"the card's YAML header does not parse: {e}"]
    if not isinstance(data.get("extra_gated_prompt"), str) or not data["extra_gated_prompt"].strip():
        problems.append("extra_gated_prompt is missing")
    fields = data.get("extra_gated_fields")
    if not isinstance(fields, dict) or not any(v == "checkbox" for v in fields.values()):
        problems.append("extra_gated_fields must ask for at least one agreement (checkbox)")
    names = sorted(c.get("config_name") for c in data.get("configs") or [] if isinstance(c, dict))
    if names != ["boxes", "images"]:
        problems.append(f"configs must be boxes and images, not {json.dumps(names)}")
    return problems
