"""The values the audit report's template shows, computed from an audit dict (plots included)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .checks import EMBEDDINGS
from .formatting import format_change, format_number
from .plots import bar_png, box_png, box_stats

__all__ = ["build_context"]

_pct = format_change
_num = format_number

_DEBIAS_META: tuple[tuple[str, str], ...] = (
    ("model_id", "fitted on model"),
    ("dataset", "fitted on dataset"),
    ("variant", "fitted on variant"),
    ("attribute", "erased attribute"),
    ("n", "fit embeddings"),
    ("target_prompt", "compensation target"),
    ("iterations", "INLP iterations"),
    ("accuracies", "INLP held-out accuracies"),
    ("final_accuracy", "probe accuracy after"),
    ("chance", "chance accuracy"),
    ("removed_rank", "directions removed"),
    ("erased_rank", "LEACE erased rank"),
)


def _index(audit: Mapping[str, Any]) -> dict[tuple[Any, str, str], Mapping[str, Any]]:
    """``{(prompt_set, prompt, embeddings): metrics}``."""
    return {(r.get("prompt_set"), r["prompt"], r["embeddings"]): r["metrics"] for r in audit["results"]}


def _prompt_order(audit: Mapping[str, Any]) -> list[tuple[Any, str, bool]]:
    """Distinct ``(prompt_set, prompt, primary)`` in the order of the results."""
    seen: dict[tuple[Any, str], bool] = {}
    for r in audit["results"]:
        key = (r.get("prompt_set"), r["prompt"])
        seen[key] = bool(seen.get(key)) or bool(r.get("primary"))
    return [(s, p, prim) for (s, p), prim in seen.items()]


def _cell(m: Mapping[str, Any] | None, key: str) -> str:
    """A metric for a table: "undefined" where the audit records that the number does not exist
    (the std over the declared groups when one has no image), "–" where there is no record."""
    if m is not None and key in m and m[key] is None:
        return "undefined"
    return _num(m.get(key) if m else None)


def _float(x: Any) -> float:
    """A plotted value: a number, or NaN for a group without one (no image: no mean, no share)."""
    return float(x) if isinstance(x, (int, float)) else float("nan")


def _share_boxes(audit: Mapping[str, Any], groups: list[str], series: list[str]) -> list[dict[str, Any]]:
    """Per prompt set with two or more prompts: box plots of each group's top-k share over the set's
    prompts (how much the synonymous prompts move each group)."""
    shares: dict[Any, dict[str, dict[str, list[float]]]] = {}
    for r in audit["results"]:
        m = r["metrics"]
        k = m.get("k") or 0
        per = shares.setdefault(r.get("prompt_set"), {}).setdefault(r["embeddings"], {})
        for g in groups:
            share = (m.get("topk_share") or {}).get(g)
            if share is None and k:
                share = m["topk"].get(g, 0) / k
            per.setdefault(g, []).append(share)
    out = []
    for pset, by_emb in shares.items():
        n_prompts = max((len(v) for per in by_emb.values() for v in per.values()), default=0)
        if n_prompts < 2:
            continue
        data = [(e, [box_stats(by_emb[e].get(g, [])) for g in groups]) for e in series if e in by_emb]
        out.append(
            {
                "set": pset if pset is not None else "",
                "n_prompts": n_prompts,
                "png": box_png(
                    groups,
                    data,
                    title=f"Top-k share per {audit['attribute']} over the {n_prompts} prompts of “{pset}”",
                    ylabel="share of the top-k",
                ),
            }
        )
    return out


def build_context(audit: Mapping[str, Any]) -> dict[str, Any]:
    index = _index(audit)
    groups: list[str] = list(audit["groups"])
    sizes: Mapping[str, Any] = audit.get("group_sizes") or {}
    has_debiased = any(r["embeddings"] == "debiased" for r in audit["results"])
    series_names = [e for e in EMBEDDINGS if e == "original" or has_debiased]
    order = _prompt_order(audit)
    primaries = [(s, p) for s, p, prim in order if prim]

    def metrics(pset: Any, prompt: str, emb: str) -> Mapping[str, Any] | None:
        return index.get((pset, prompt, emb))

    def triple(pset: Any, prompt: str, key: str) -> dict[str, Any]:
        o, d = metrics(pset, prompt, "original"), metrics(pset, prompt, "debiased")
        before = o.get(key) if o else None
        after = d.get(key) if d else None
        return {"original": _cell(o, key), "debiased": _cell(d, key), "change": _pct(before, after)}

    summary_rows = []
    primary_sections = []
    for pset, prompt in primaries:
        summary_rows.append(
            {
                "set": pset if pset is not None else "",
                "prompt": prompt,
                "jsd": triple(pset, prompt, "jsd_uniform"),
                "std": triple(pset, prompt, "mean_similarity_std"),
                "mean": triple(pset, prompt, "mean_similarity"),
            }
        )
        ms = {e: metrics(pset, prompt, e) for e in series_names}
        ms = {e: m for e, m in ms.items() if m is not None}
        k_eff = next((int(m["k"]) for m in ms.values()), None)
        topk_series = [(e, [m["topk"].get(g, 0) for g in groups]) for e, m in ms.items()]
        mean_series = [
            (e, [_float(m["group_mean_similarity"].get(g)) for g in groups]) for e, m in ms.items()
        ]
        summaries = {e: m.get("group_similarity_summary") for e, m in ms.items()}
        sim_box_png = (
            box_png(
                groups,
                [(e, [sm.get(g) for g in groups]) for e, sm in summaries.items() if isinstance(sm, Mapping)],
                title=f"Cosine similarity of the images per {audit['attribute']} — “{prompt}”",
                ylabel="cosine similarity",
            )
            if any(isinstance(sm, Mapping) for sm in summaries.values())
            else None
        )
        std_text = ", ".join(
            f"{e} {_num(m['mean_similarity_std']) if m['mean_similarity_std'] is not None else 'undefined'}"
            for e, m in ms.items()
        )
        jsd_text = ", ".join(f"{e} {_num(m['jsd_uniform'])}" for e, m in ms.items())
        topk_png = bar_png(
            groups,
            topk_series,
            title=f"Top-{k_eff} per {audit['attribute']} — “{prompt}” (JSD vs uniform: {jsd_text})",
            ylabel=f"images in top-{k_eff}",
            reference=(k_eff / len(groups)) if k_eff else None,
            reference_label="uniform",
            integer=True,
        )
        mean_png = bar_png(
            groups,
            mean_series,
            title=f"Mean cosine similarity per {audit['attribute']} — “{prompt}” (std: {std_text})",
            ylabel="mean cosine similarity",
            zoom=True,
        )
        rows = []
        for g in groups:
            row: dict[str, Any] = {"group": g, "size": sizes.get(g, "–"), "cells": []}
            for m in ms.values():
                share = (m.get("topk_share") or {}).get(g)
                if share is None and m.get("k"):
                    share = m["topk"].get(g, 0) / m["k"]
                row["cells"] += [
                    str(m["topk"].get(g, 0)),
                    _num(share, 3),
                    _num(m["group_mean_similarity"].get(g)),
                ]
            rows.append(row)
        primary_sections.append(
            {
                "set": pset if pset is not None else "",
                "prompt": prompt,
                "k": k_eff,
                "topk_png": topk_png,
                "mean_png": mean_png,
                "sim_box_png": sim_box_png,
                "series": list(ms),
                "rows": rows,
            }
        )

    robustness_rows = []
    for pset, by_emb in (audit.get("robustness") or {}).items():
        if not isinstance(by_emb, Mapping):
            continue
        row = {"set": pset, "n_prompts": "–", "cells": [], "pairs": []}
        for e in series_names:
            r = by_emb.get(e)
            if isinstance(r, Mapping):
                row["n_prompts"] = r.get("n_prompts", row["n_prompts"])
                row["cells"] += [_num(r.get("mean")), _num(r.get("max"))]
            else:
                row["cells"] += ["–", "–"]
        orig_pairs = (by_emb.get("original") or {}).get("pairs") or []
        deb_pairs = {(p["a"], p["b"]): p["jsd"] for p in (by_emb.get("debiased") or {}).get("pairs") or []}
        for p in orig_pairs:
            cells = [_num(p.get("jsd"))]
            if has_debiased:
                cells.append(_num(deb_pairs.get((p["a"], p["b"]))))
            row["pairs"].append({"a": p["a"], "b": p["b"], "cells": cells})
        robustness_rows.append(row)

    job = audit.get("job")
    job_ctx = None
    if isinstance(job, Mapping) and isinstance(job.get("original"), Mapping):
        job_series = [
            (e, [_float(job[e].get(g)) for g in groups])
            for e in EMBEDDINGS
            if isinstance(job.get(e), Mapping)
        ]
        job_rows = []
        for g in groups:
            before = job["original"].get(g)
            after = job["debiased"].get(g) if isinstance(job.get("debiased"), Mapping) else None
            cells = [_num(before, 3)]
            if len(job_series) > 1:
                cells += [
                    _num(after, 3),
                    _num(None if after is None or before is None else after - before, 3),
                ]
            job_rows.append({"group": g, "size": sizes.get(g, "–"), "cells": cells})
        job_ctx = {
            "positive": job.get("positive", ""),
            "negative": job.get("negative", ""),
            "series": [e for e, _ in job_series],
            "rows": job_rows,
            "png": bar_png(
                groups,
                job_series,
                title=f"Job simulation — share closer to “{job.get('positive', '')}” "
                f"than to “{job.get('negative', '')}”",
                ylabel="share judged positive",
                ylim=(0.0, 1.05),
            ),
        }

    prompt_rows = []
    for pset, prompt, prim in order:
        prompt_rows.append(
            {
                "set": pset if pset is not None else "",
                "prompt": prompt,
                "primary": prim,
                "jsd": triple(pset, prompt, "jsd_uniform"),
                "std": triple(pset, prompt, "mean_similarity_std"),
                "mean": triple(pset, prompt, "mean_similarity"),
            }
        )

    debias = audit.get("debias")
    debias_rows: list[tuple[str, str]] = []
    if isinstance(debias, Mapping):
        for key in ("transform", "method", "alpha", "beta", "fit_splits"):
            if key in debias:
                value = debias[key]
                debias_rows.append(
                    (key, ", ".join(map(str, value)) if isinstance(value, list) else str(value))
                )
        meta = debias.get("meta")
        if isinstance(meta, Mapping):
            # The fit's essentials; the full record stays in audit.json.
            for key, label in _DEBIAS_META:
                value = meta.get(key)
                if value is None or value == []:
                    continue
                if isinstance(value, float):
                    value = f"{value:.4g}"
                elif isinstance(value, list):
                    value = ", ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in value)
                debias_rows.append((label, str(value)))

    k_effective = sorted({int(r["metrics"]["k"]) for r in audit["results"]})
    k_text = str(audit.get("k", "?"))
    if k_effective and [str(k) for k in k_effective] != [k_text]:
        k_text += " (effective: " + ", ".join(map(str, k_effective)) + ")"
    splits = audit.get("splits")
    setup = [
        ("Dataset", audit.get("dataset", "")),
        ("Dataset path", audit.get("dataset_path", "–")),
        ("Variant", audit.get("variant", "–")),
        ("Split(s) evaluated", ", ".join(splits) if isinstance(splits, list) else str(splits or "–")),
        ("Model", audit.get("model", "")),
        ("Model id", audit.get("model_id", "–")),
        ("Pretrained", audit.get("pretrained") or "none"),
        ("Group attribute", audit.get("attribute", "")),
        ("Top-k", k_text),
        ("Images", str(audit.get("n_images", "–"))),
        ("Groups", f"{len(groups)}: " + ", ".join(groups)),
        ("Reference set", (audit.get("reference") or {}).get("source", "–")),
        ("Empty groups", ", ".join(audit.get("empty_groups") or []) or "none"),
        ("Prompt source", audit.get("prompt_source", "–")),
        ("Created", audit.get("created", "–")),
        ("fairsets version", audit.get("fairsets_version", "–")),
    ]
    return {
        "a": audit,
        "setup": [(k, str(v)) for k, v in setup],
        "debias_rows": debias_rows,
        "has_debiased": has_debiased,
        "series": series_names,
        "summary_rows": summary_rows,
        "primary_sections": primary_sections,
        "robustness_rows": robustness_rows,
        "job": job_ctx,
        "prompt_rows": prompt_rows,
        "k_text": k_text,
        "warnings": [str(w) for w in audit.get("warnings") or []],
        "definitions": [(str(k), str(v)) for k, v in (audit.get("definitions") or {}).items()],
        "share_boxes": _share_boxes(audit, groups, series_names),
        "jsd_base": audit.get("jsd_log_base", 2),
        "std_ddof": audit.get("std_ddof", 0),
    }
