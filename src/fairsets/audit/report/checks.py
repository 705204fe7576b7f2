"""The audit document's schema id and its structural check (what the report and the card rely on)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["AUDIT_SCHEMA", "EMBEDDINGS", "check_audit"]

AUDIT_SCHEMA = "fairsets.audit.vlm/1"
EMBEDDINGS = ("original", "debiased")
_METRIC_KEYS = ("k", "topk", "jsd_uniform", "group_mean_similarity", "mean_similarity_std", "mean_similarity")


def check_audit(audit: Any) -> list[str]:
    """Return the structural problems of an audit dict (empty list: it can be reported).

    Checks the schema id, the presence and types of the keys the report and the card use, and that
    every result record has a prompt, an ``embeddings`` of ``original``/``debiased`` and metrics
    with the per-prompt keys of :func:`fairsets.audit.metrics.prompt_metrics`.
    """
    if not isinstance(audit, Mapping):
        return [f"the audit must be a JSON object, got {type(audit).__name__}"]
    problems: list[str] = []
    if audit.get("schema") != AUDIT_SCHEMA:
        problems.append(f"schema is {audit.get('schema')!r}, expected {AUDIT_SCHEMA!r}")
    for key in ("dataset", "model", "attribute"):
        if not isinstance(audit.get(key), str) or not audit.get(key):
            problems.append(f"{key!r} must be a non-empty string")
    groups = audit.get("groups")
    if not isinstance(groups, list) or not groups or not all(isinstance(g, str) for g in groups):
        problems.append("'groups' must be a non-empty list of strings")
    results = audit.get("results")
    if not isinstance(results, list) or not results:
        problems.append("'results' must be a non-empty list")
        return problems
    for i, r in enumerate(results):
        if not isinstance(r, Mapping):
            problems.append(f"results[{i}] is not an object")
            continue
        if not isinstance(r.get("prompt"), str):
            problems.append(f"results[{i}]: 'prompt' must be a string")
        if r.get("embeddings") not in EMBEDDINGS:
            problems.append(f"results[{i}]: 'embeddings' must be one of {list(EMBEDDINGS)}")
        m = r.get("metrics")
        if not isinstance(m, Mapping):
            problems.append(f"results[{i}]: 'metrics' must be an object")
            continue
        missing = [k for k in _METRIC_KEYS if k not in m]
        if missing:
            problems.append(f"results[{i}]: metrics lack {missing}")
    for key in ("debias", "job", "robustness"):
        if audit.get(key) is not None and not isinstance(audit.get(key), Mapping):
            problems.append(f"{key!r} must be an object or null")
    return problems
