"""Bias audits of datasets and of the models that see them.

VLM retrieval audit (IndicFairFace §4–5): rank a dataset's images by cosine similarity to text
prompts and measure how a group attribute (e.g. Indian state) is distributed among the top-k
images, how evenly each group is matched, how robust this is to synonymous prompts, and a
job-application simulation.

Modules:
    * ``metrics`` — the metrics (NumPy only): cosine similarity, top-k distribution, JSD vs uniform,
      per-group mean similarity and its std, pairwise JSD across prompts, job simulation.
    * ``reference`` — the audit's reference set (the declared groups, empty ones included), its
      warnings and definitions.
    * ``prompts`` — the paper's prompt sets (appendix §9) and user prompt files.
    * ``report`` — the self-contained HTML report of an ``audit.json``.
    * ``embeddings``, ``vlm``, ``utility`` — computing embeddings with a model and running the audit.

Imports are lazy: ``import fairsets.audit`` loads neither matplotlib nor torch; the names below are
resolved from their submodule on first access.
"""

from __future__ import annotations

from fairsets.core.lazy import lazy_exports

_LAZY: dict[str, str] = {
    # metrics
    "cosine_similarity": "metrics",
    "group_mean_similarity": "metrics",
    "group_similarity_summary": "metrics",
    "job_simulation": "metrics",
    "jsd": "metrics",
    "jsd_uniform": "metrics",
    "pairwise_jsd": "metrics",
    "prompt_metrics": "metrics",
    "std_of_means": "metrics",
    "topk_distribution": "metrics",
    "topk_indices": "metrics",
    # prompts
    "JOB_PROMPTS": "prompts",
    "PRIMARY": "prompts",
    "PROMPT_SETS": "prompts",
    "PromptSpec": "prompts",
    "default_prompts": "prompts",
    "load_prompts": "prompts",
    # report
    "AUDIT_SCHEMA": "report",
    "check_audit": "report",
    "render_report": "report",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(
    __name__, {name: f"{__name__}.{module}" for name, module in _LAZY.items()}
)
