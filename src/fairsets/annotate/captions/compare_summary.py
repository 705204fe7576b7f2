"""What ``annotate compare-captioners`` records in ``compare.json``: the results and the run.

:func:`summary_payload` is everything but ``run``: the three models, the sample, the verdict counts
and the win rate of A over B with its interval (:func:`~.judge.win_rate`), the judge's position
preference, the skipped boxes, and per role the answers and tokens (:class:`Usage`).
:func:`run_block` is ``run``: what this run sent. :func:`unchanged` says whether an output folder
already holds exactly these results, so a re-run leaves its files as they are.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ROLES", "Usage", "run_block", "summary_payload", "unchanged"]

#: The three roles of a comparison: captioners A and B, and the judge.
ROLES = ("a", "b", "judge")


@dataclass
class Usage:
    """What one role's requests cost over the run."""

    requests: int = 0
    retries: int = 0
    cache_hits: int = 0
    answered: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)

    def add(self, batch: Any) -> None:
        self.requests += batch.requests_sent
        self.retries += batch.retries
        self.cache_hits += batch.cache_hits
        self.prompt_tokens += batch.prompt_tokens
        self.completion_tokens += batch.completion_tokens
        self.answered += sum(1 for r in batch.results if r.ok)


def summary_payload(
    *,
    ann: Path,
    info: dict[str, dict[str, str]],
    n: int,
    seed: int,
    prompt: str,
    sampled: int,
    rows: list[dict[str, Any]],
    skipped: list[dict[str, str]],
    usage: dict[str, Usage],
    interval: str,
    level: float,
    warnings: list[str],
) -> dict[str, Any]:
    from .judge import win_rate

    verdicts = [r["verdict"] for r in rows]
    counts = {v: verdicts.count(v) for v in ("A", "B", "tie", "invalid")}
    valid = counts["A"] + counts["B"] + counts["tie"]
    if valid:
        rate = win_rate(verdicts, method=interval, level=level, seed=seed).to_dict()
        headline = {k: rate[k] for k in ("rate", "low", "high")}
    else:
        headline = {"rate": None, "low": None, "high": None}
    a_first = sum(1 for r in rows if r["a_first"])
    decisive = [r for r in rows if r["verdict"] in ("A", "B")]
    first_chosen = sum(1 for r in decisive if (r["verdict"] == "A") == r["a_first"])
    reasons = Counter(s["reason"] for s in skipped)
    return {
        "ann": str(ann),
        "a": info["a"],
        "b": info["b"],
        "judge": info["judge"],
        "seed": int(seed),
        "prompt": prompt,
        "n_asked": int(n),
        "n_sampled": sampled,
        "n_judged": len(rows),
        "n_valid": valid,
        "counts": counts,
        **headline,
        "level": float(level),
        "method": interval,
        "ties": "a tie counts as half a win for each side; invalid verdicts are left out of the rate",
        "position": {
            "judged": len(rows),
            "a_first": a_first,
            "a_first_share": a_first / len(rows) if rows else None,
            "decisive": len(decisive),
            "first_chosen": first_chosen,
            "first_preference": first_chosen / len(decisive) if decisive else None,
        },
        "skipped": {
            "total": len(skipped),
            "by_reason": dict(sorted(reasons.items())),
            "items": skipped,
        },
        "answers": {
            role: {
                "answered": usage[role].answered,
                **dict(sorted(usage[role].outcomes.items())),
                "prompt_tokens": usage[role].prompt_tokens,
                "completion_tokens": usage[role].completion_tokens,
            }
            for role in ROLES
        },
        "tokens": {
            "prompt": sum(usage[r].prompt_tokens for r in ROLES),
            "completion": sum(usage[r].completion_tokens for r in ROLES),
        },
        "warnings": warnings,
    }


def run_block(usage: dict[str, Usage], seconds: float) -> dict[str, Any]:
    return {
        "requests": {
            **{r: usage[r].requests for r in ROLES},
            "total": sum(usage[r].requests for r in ROLES),
        },
        "retries": {r: usage[r].retries for r in ROLES},
        "cache_hits": {
            **{r: usage[r].cache_hits for r in ROLES},
            "total": sum(usage[r].cache_hits for r in ROLES),
        },
        "captions_from_cache": usage["a"].cache_hits + usage["b"].cache_hits,
        "seconds": round(seconds, 3),
    }


def unchanged(out: Path, payload: dict[str, Any], rows: list[dict[str, Any]]) -> bool:
    """Whether ``out`` already holds exactly these results (every file present and readable)."""
    import pyarrow.parquet as pq

    paths = [out / "compare.json", out / "verdicts.parquet", out / "report.html"]
    if not all(p.is_file() for p in paths):
        return False
    try:
        old = json.loads(paths[0].read_text(encoding="utf-8"))
        old_rows = pq.read_table(paths[1]).to_pylist()
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    except Exception:  # an unreadable parquet (pyarrow's own errors): rewrite it
        return False
    if not isinstance(old, dict):
        return False
    old.pop("run", None)
    return old == json.loads(json.dumps(payload)) and old_rows == rows
