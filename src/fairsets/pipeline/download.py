"""The download phase of a build: URL candidates → WebDataset shards (img2dataset), per-sample status.

Runs on the driver before the per-sample tasks of a source whose candidates are URLs
(``Source.downloads``). Candidates whose licence the recipe's ``license`` step would refuse are
not downloaded at all (the licence step rejects them first and their bytes are never needed);
candidates awaiting manual review are downloaded, since the reviewer decides their licence.

Each candidate row gets internal fields (``_dl_*``, never published) that the source's ``read``
uses: ``_dl_status`` (``ok`` / ``failed`` / ``rejected`` / ``skipped``), ``_dl_error``,
``_dl_dir`` (relative to the work folder), ``_dl_shard`` and ``_dl_member``. A failed download
fails its sample (``--retry-failed`` downloads only those again) — a timeout, a 5xx, or a
download that passed the ``[download]`` ``deadline`` or fell below ``min_rate`` (a server that
drips bytes); a refused one (opt-out, private address, too large, HTTP 404) rejects it with the
reason.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from fairsets.core.progress import Progress

__all__ = ["download_phase", "fetch_policy"]

log = logging.getLogger(__name__)


#: A download's pixel cap when neither ``[download] max_pixels`` nor the decode step sets one.
DEFAULT_MAX_PIXELS = 40_000_000


def download_max_pixels(recipe: Any) -> int:
    """``[download] max_pixels``, else the decode step's ``max_pixels``, else 40 MP."""
    if recipe.download.max_pixels is not None:
        return int(recipe.download.max_pixels)
    for step in recipe.steps:
        if step.name == "decode" and step.params().get("max_pixels") is not None:
            return int(step.params()["max_pixels"])
    return DEFAULT_MAX_PIXELS


def fetch_policy(recipe: Any) -> Any:
    from ..fetch.guard import FetchPolicy

    cfg = recipe.download
    return FetchPolicy(
        allow_loopback=cfg.allow_loopback,
        allow_private=cfg.allow_private,
        max_bytes=cfg.max_bytes,
        max_pixels=download_max_pixels(recipe),
        timeout=cfg.timeout,
        deadline=cfg.deadline,
        min_rate=cfg.min_rate,
        rate_grace=cfg.rate_grace,
        pace_loopback=cfg.per_host_rate is not None or cfg.per_host_connections is not None,
        **({"per_host_rate": cfg.per_host_rate} if cfg.per_host_rate is not None else {}),
        **(
            {"per_host_connections": cfg.per_host_connections} if cfg.per_host_connections is not None else {}
        ),
        retry_after_max=cfg.retry_after_max,
    )


def download_phase(
    rows: list[dict[str, Any]],
    source: Any,
    recipe: Any,
    steps: list[Any],
    workdir: Path,
    stage: int,
    *,
    retry_failed: bool = False,
    progress: Progress | None = None,
) -> dict[str, int]:
    """Download the URLs of ``rows`` (in place: adds the ``_dl_*`` fields). Returns status counts."""
    from ..fetch.download import download_urls

    progress = progress or Progress(enabled=False)
    license_step = next((s for s in steps if s.name == "license"), None)
    rel = f"downloads/{stage}-{source.registered_name}"
    todo: list[dict[str, Any]] = []
    for r in rows:
        if r.get("_rejected"):  # refused by the source itself (e.g. a file Commons does not have)
            r.update(_dl_status="skipped", _dl_error=None)
            continue
        if not r.get("url"):
            r.update(_dl_status="rejected", _dl_error="no image URL")
            continue
        if license_step is not None and r.get("review") != "pending":
            _, allowed, reason = license_step.decide(r.get("license"))
            if not allowed:
                r.update(_dl_status="skipped", _dl_error=f"not downloaded: {reason}")
                continue
        todo.append(r)
    counts: dict[str, int] = {}
    if todo:
        cfg = recipe.download
        with progress.stage(f"download ({source.registered_name})", len(todo)) as advance:
            seen = [0]

            def on_progress(done: int, total: int) -> None:
                if done > seen[0]:
                    advance(done - seen[0])
                    seen[0] = done

            status = download_urls(
                [{"key": r["key"], "url": r["url"]} for r in todo],
                workdir / rel,
                fetch_policy(recipe),
                processes=cfg.processes,
                threads=cfg.threads,
                shard_size=cfg.shard_size,
                retry_failed=retry_failed,
                progress=on_progress,
            )
        by_key = {s["key"]: s for s in status}
        for r in todo:
            s = by_key[r["key"]]
            r.update(
                _dl_status=s["status"],
                _dl_error=s.get("error") or None,
                _dl_dir=rel,
                _dl_shard=s.get("shard"),
                _dl_member=s.get("member"),
            )
    for r in rows:
        counts[r["_dl_status"]] = counts.get(r["_dl_status"], 0) + 1
    log.info(
        "downloads (%s): %s", source.registered_name, ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    )
    return counts
