"""``croissant.json`` of published person annotations: Croissant 1.0 with the RAI properties.

Two ``cr:FileSet`` s, the box tables (``data/boxes/*.parquet``) and the image tables
(``data/images/*.parquet``), read where they lie (no ``containedIn``: relative to the Croissant
file, as ``mlcroissant`` reads a local folder); a ``cr:RecordSet`` for each, ``boxes`` and
``images``, whose fields are the Parquet columns (types from the first table's schema, nested
columns left out); the files' sha256 stay in ``manifest.json``. The RAI properties come from
:func:`fairsets.annotate.publish.rai.annotation_rai` and are checked against the vocabulary
(:func:`fairsets.publish.croissant.add_rai`). Written atomically with sorted keys: the bytes depend
only on the manifest and the tables.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fairsets.core.atomic import atomic_write_text
from fairsets.publish.croissant import CONFORMS_TO, CONTEXT, add_rai, table_fields

from .rai import annotation_rai

__all__ = ["CROISSANT", "build_annotation_croissant", "write_annotation_croissant"]

CROISSANT = "croissant.json"
_TABLES = {
    "boxes": "One row per detected person box, kept or dropped, with the perceived attributes of kept boxes.",
    "images": "One row per image of the input shards, whatever its status; join on (shard, key).",
}


def _record_set(root: Path, name: str, files: list[str], description: str) -> dict[str, Any]:
    import pyarrow.parquet as pq

    schema = pq.read_schema(root / files[0])
    fields = table_fields(schema, name, {"fileSet": {"@id": f"{name}-files"}})
    return {"@type": "cr:RecordSet", "@id": name, "name": name, "description": description, "field": fields}


def build_annotation_croissant(root: str | Path, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The Croissant document of the prepared folder ``root`` whose manifest is ``manifest``."""
    root = Path(root)
    files = manifest.get("files") or {}
    distribution, record_sets = [], []
    for name, description in _TABLES.items():
        tables = sorted(r for r in files if r.startswith(f"data/{name}/") and r.endswith(".parquet"))
        if not tables:
            continue
        distribution.append(
            {
                "@type": "cr:FileSet",
                "@id": f"{name}-files",
                "name": f"{name}-files",
                "description": f"The {name} tables, one Parquet file per input shard.",
                "encodingFormat": "application/x-parquet",
                "includes": f"data/{name}/*.parquet",
            }
        )
        record_sets.append(_record_set(root, name, tables, description))
    repo = str(manifest.get("repo_id") or "annotations")
    doc: dict[str, Any] = {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "name": f"person-annotations-{repo.split('/')[-1]}",
        "description": (
            "Person boxes detected in image-text shards with perceived attributes predicted for every "
            "kept box, made with fairsets; the images are not included (see the images table's url)."
        ),
        "conformsTo": CONFORMS_TO,
        "license": str(manifest.get("license") or ""),
        "url": f"https://huggingface.co/datasets/{repo}",
        "version": str(manifest.get("format_version") or "1"),
        "keywords": ["annotations", "fairness", "perceived-attributes", "person-detection"],
        "citeAs": (
            "@inproceedings{person_centric_laion400m, title = {Person-Centric Annotations of LAION-400M: "
            "Auditing Bias and Its Transfer to Models}, booktitle = {ICLR}, year = {2026}}"
        ),
        "distribution": distribution,
        "recordSet": record_sets,
    }
    return add_rai(doc, annotation_rai(manifest))


def write_annotation_croissant(root: str | Path, manifest: Mapping[str, Any]) -> Path:
    """Build and atomically write ``root/croissant.json``; returns its path."""
    doc = build_annotation_croissant(root, manifest)
    text = json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    return atomic_write_text(Path(root) / CROISSANT, text)
