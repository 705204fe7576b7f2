"""Helpers for the publish tests: generated JPEGs and a small published layout.

The layout has two variants (``balanced``, ``augmented``) × two splits (``train``, ``test``) of
generated JPEGs with mixed licences (CC BY-SA, CC BY, CC0, public domain) and one augmented
image, written with the fairsets.publish functions in the order a build uses.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from fairsets.publish import (
    file_entries,
    metadata_name,
    write_attribution,
    write_card,
    write_croissant,
    write_manifest,
    write_metadata,
    write_rejects,
    write_shards,
)

GROUPS = ["state", "gender"]
LICENSES = ["CC-BY-SA-4.0", "CC BY 4.0", "CC0", "Public domain"]


def jpeg(seed: int, size: int = 24) -> bytes:
    """A small deterministic JPEG."""
    rng = np.random.default_rng(seed)
    arr = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG", quality=85)
    return buf.getvalue()


def _real_rows() -> list[dict[str, Any]]:
    from fairsets.publish.attribution import normalise_license

    rows = []
    i = 0
    for state in ["bavaria", "saxony"]:
        for gender in ["female", "male"]:
            for j in range(3):
                key = f"commons_{state}_{gender}_{j}"
                lic = LICENSES[i % len(LICENSES)]
                rows.append(
                    {
                        "key": key,
                        "split": "test" if j == 2 else "train",
                        "state": state,
                        "gender": gender,
                        "identity": f"Q{100 + i}",
                        "source": "wikidata",
                        "source_url": f"https://commons.wikimedia.org/wiki/File:Person_{i}.jpg",
                        "license": normalise_license(lic),
                        "author": f'<a href="https://example.org/u{i}">Author &amp; {i}</a>',
                        "augmented_from": None,
                        "augmentation": None,
                        "width": 24,
                        "height": 24,
                        "_seed": i,
                    }
                )
                i += 1
    return rows


def build_layout(out: Path) -> dict[str, Any]:
    """Write a complete small layout under ``out``; return the summary, rows and results."""
    real = _real_rows()
    images = {r["key"]: jpeg(r.pop("_seed")) for r in real}
    # the augmented variant: every real image plus one augmented copy of a CC BY-SA image
    src = real[0]
    aug = dict(
        src, key=f"{src['key']}_aug0", augmented_from=src["key"], augmentation={"flip": True, "seed": 7}
    )
    aug["license"] = aug["author"] = aug["source_url"] = None  # inherited in ATTRIBUTION.md
    images[aug["key"]] = jpeg(999)
    variants = {"balanced": [r for r in real if not r["key"].endswith("_1")], "augmented": [*real, aug]}
    summary: dict[str, Any] = {
        "name": "tiny-faces",
        "pretty_name": "Tiny Faces",
        "description": "A tiny generated dataset for tests.",
        "license": sorted({r["license"] for r in real}),
        "groups": GROUPS,
        "quota": 2,
        "seed": 0,
        "variants": {},
        "default_variant": "balanced",
        "steps": [
            {"name": "decode", "params": {}, "rejected": 0, "failed": 1},
            {
                "name": "detect",
                "params": {"min_confidence": 0.5, "model": "yunet"},
                "rejected": 3,
                "failed": 0,
            },
        ],
        "candidates": 20,
        "accepted": 12,
        "duplicates": {"exact": 1, "near": 2},
        "cells": [],
        "warnings": ["cell state=saxony, gender=male: only 3 identities"],
        "sources": {"wikidata": 12},
        "licenses": {},
        "versions": {"fairsets": "0.0.0"},
        "recipe": {"name": "tiny-faces", "seed": 0},
    }
    all_rows = []
    for variant, vrows in variants.items():
        for split in ["train", "test"]:
            rows = [
                dict(r, variant=variant, sha256=_sha(images[r["key"]])) for r in vrows if r["split"] == split
            ]
            rows.sort(key=lambda r: r["key"])
            records = [(r["key"], images[r["key"]], {k: v for k, v in r.items()}) for r in rows]
            shards = write_shards(out, variant, split, records, max_count=2)
            write_metadata(out / metadata_name(variant, split), rows, GROUPS)
            summary["variants"].setdefault(variant, {})[split] = {
                "num_samples": len(rows),
                "shards": [s["path"] for s in shards],
                "metadata": metadata_name(variant, split),
            }
            all_rows += rows
    for state in ["bavaria", "saxony", "thuringia"]:
        for gender in ["female", "male"]:
            cell = {"state": state, "gender": gender}
            counts = {}
            for variant in variants:
                vr = [
                    r
                    for r in all_rows
                    if r["variant"] == variant and r["state"] == state and r["gender"] == gender
                ]
                counts[variant] = {
                    "train": sum(r["split"] == "train" for r in vr),
                    "test": sum(r["split"] == "test" for r in vr),
                    "real": sum(r["augmented_from"] is None for r in vr),
                    "augmented": sum(r["augmented_from"] is not None for r in vr),
                }
            n = sum(1 for r in real if r["state"] == state and r["gender"] == gender)
            summary["cells"].append(
                {"cell": cell, "available": n, "identities": n, "variants": counts, "notes": []}
            )
    for r in real:
        summary["licenses"][r["license"]] = summary["licenses"].get(r["license"], 0) + 1
    write_rejects(
        out / "rejects.parquet",
        [
            {"key": "commons_x_0", "status": "rejected", "step": "detect", "reason": "no face"},
            {"key": "commons_x_1", "status": "failed", "step": "decode", "reason": "truncated file"},
        ],
    )
    write_attribution(out / "ATTRIBUTION.md", all_rows)
    write_croissant(out, summary)
    write_card(out / "README.md", summary)
    write_manifest(out / "manifest.json", {"files": file_entries(out), "seed": 0, "name": "tiny-faces"})
    return {"summary": summary, "rows": all_rows, "real": real, "augmented": [aug], "images": images}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
