"""The values of the card's Markdown body (the template context): tables of configs, steps, cells,
sources, licences and versions, written from the summary.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fairsets.publish.attribution import license_info, safe_link_url

from .changes import changes_section
from .header import _default_variant, _split_order
from .markdown import (
    Md,
    _fenced,
    _json_block,
    _params,
    _table,
    md_code,
    md_text,
)
from .sections import person_sections
from .snippets import load_snippets

VARIANT_DOCS = {
    "imbalanced": "every accepted image, split by identity (no person appears in both splits).",
    "balanced": "exactly the quota per cell: a seeded choice where a cell has more real images, and "
    "mild augmentations (flip, small rotation, hue jitter, random crop) of the cell's real images where "
    "it has fewer (`augmented_from` names the source image, `augmentation` the transform and its "
    "parameters). A cell with no real image is reported, never filled.",
    "augmented": "twice the quota per cell: `balanced` plus one controlled colour augmentation (hue and "
    "brightness) of each of its images.",
}


def _cell_label(cell: Mapping[str, Any], groups: list[str]) -> list[str]:
    return [str(cell.get(g, "")) for g in groups]


def _context(summary: Mapping[str, Any]) -> dict[str, Any]:
    variants: dict[str, Any] = summary["variants"]
    default = _default_variant(summary)
    vnames = [default, *sorted(set(variants) - {default})]
    order = {"imbalanced": 0, "balanced": 1, "augmented": 2}
    table_variants = sorted(variants, key=lambda v: (order.get(v, 9), v))
    groups: list[str] = list(summary.get("groups") or [])
    cells = list(summary.get("cells") or [])
    if not groups and cells:
        groups = sorted({k for c in cells for k in c.get("cell", {})})
    cells.sort(key=lambda c: _cell_label(c.get("cell", {}), groups))

    variant_rows = []
    for v in vnames:
        for split in _split_order(variants[v]):
            info = variants[v][split]
            n_shards = len(info.get("shards") or [])
            variant_rows.append([md_code(v), split, info.get("num_samples", ""), n_shards])
    variants_table = _table(
        ["Config", "Split", "Published samples (incl. augmented copies)", "Shards"],
        variant_rows,
        ["---", "---", "---:", "---:"],
    )

    steps = summary.get("steps") or []
    steps_table = (
        _table(
            [Md("#"), "Step", "Parameters", "Rejected", "Failed"],
            [
                [
                    i + 1,
                    md_code(st["name"]),
                    _params(st.get("params")),
                    st.get("rejected", 0),
                    st.get("failed", 0),
                ]
                for i, st in enumerate(steps)
            ],
            ["---:", "---", "---", "---:", "---:"],
        )
        if steps
        else ""
    )

    aug_variants = {
        v for v in variants if any((c.get("variants", {}).get(v) or {}).get("augmented") for c in cells)
    }
    head = [*groups, "Available (real source images)", "Identities"]
    align = ["---"] * len(groups) + ["---:", "---:"]
    for v in table_variants:
        head += [f"{v} train (samples)", f"{v} test (samples)"]
        align += ["---:", "---:"]
        if v in aug_variants:
            head.append(f"{v} (of which augmented)")
            align.append("---:")
    cell_rows = []
    for c in cells:
        row: list[Any] = [
            *_cell_label(c.get("cell", {}), groups),
            c.get("available", ""),
            c.get("identities", ""),
        ]
        for v in table_variants:
            counts = c.get("variants", {}).get(v) or {}
            row += [counts.get("train", 0), counts.get("test", 0)]
            if v in aug_variants:
                row.append(counts.get("augmented", 0))
        cell_rows.append(row)
    cells_table = _table(head, cell_rows, align) if cells else ""

    empty_cells = [
        md_text(", ".join(f"{g}={c['cell'].get(g)}" for g in groups)) for c in cells if not c.get("available")
    ]
    cell_notes = [
        (md_text(", ".join(f"{g}={c['cell'].get(g)}" for g in groups)), md_text(note))
        for c in cells
        for note in c.get("notes") or []
    ]

    def counts_table(
        mapping: Mapping[str, int] | None,
        what: str,
        count: str = "Source images",
        link: bool = False,
        extra: tuple[str, Mapping[str, int]] | None = None,
    ) -> Md:
        if not mapping:
            return Md("")
        rows = []
        for k in sorted(mapping):
            label: Any = k
            if link:
                info = license_info(k)
                url = safe_link_url(info["url"]) if info else None  # never a javascript: link
                label = Md(f"[{md_text(info['name'])}]({url})") if url else (info["name"] if info else k)
            rows.append([label, mapping[k], *([extra[1].get(k, 0)] if extra else [])])
        head = [what, count, *([extra[0]] if extra else [])]
        return _table(head, rows, ["---"] + ["---:"] * (len(head) - 1))

    first_split = _split_order(variants[default])[0]
    from fairsets.publish.rai_facts import face_biases, face_limitations, face_rai

    rai = summary.get("rai") or face_rai(summary)
    return {
        "s": summary,
        "name": summary["name"],
        "pretty_name": summary.get("pretty_name") or summary["name"],
        "description": summary.get("description") or "",
        "groups": groups,
        "default_variant": default,
        "variant_names": vnames,
        "variant_docs": [(v, Md(VARIANT_DOCS.get(v, ""))) for v in table_variants],
        "variants_table": variants_table,
        "steps_table": steps_table,
        # The licence sentence claims the policy only when the recipe ran the licence gate.
        "license_checked": any(st.get("name") == "license" for st in steps),
        "cells_table": cells_table,
        "empty_cells": empty_cells,
        "cell_notes": cell_notes,
        "warnings": list(summary.get("warnings") or []),
        "sources_table": counts_table(summary.get("sources"), "Source"),
        "licenses_table": counts_table(
            summary.get("licenses"),
            "Licence",
            link=True,
            extra=("Published files (all configs, incl. augmented copies)", summary["license_files"])
            if summary.get("license_files")
            else None,
        ),
        "versions_table": counts_table(summary.get("versions"), "Package", "Version"),
        "recipe_json": Md(_json_block(summary["recipe"])) if summary.get("recipe") else "",
        "duplicates": summary.get("duplicates") or {},
        "first_split": first_split,
        "snippets": load_snippets(summary),
        "citation": Md(_fenced(str(summary["citation"]), "bibtex")) if summary.get("citation") else "",
        "notes": [summary["notes"]]
        if isinstance(summary.get("notes"), str) and summary["notes"]
        else list(summary.get("notes") or []),
        "biases": face_biases(summary),
        "limitations": face_limitations(summary),
        "collection": rai.get("dataCollection") or "",
        "annotation_process": rai.get("dataAnnotationProtocol") or "",
        "sections": person_sections(
            summary.get("rai_text") or {},
            "the recipe's [publish.rai]",
            contact=summary.get("contact"),
            producers=(
                "The photographers and other authors credited per image in ATTRIBUTION.md (column "
                "author), as the sources (table Sources) recorded them.",
            ),
        ),
        "changes": Md("\n".join(changes_section(summary))),  # Markdown lines; none without removals
    }
