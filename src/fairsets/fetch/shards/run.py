"""The entry point: :func:`download_listing` (check the folder, download, resume, retry, merge, status)."""

from __future__ import annotations

import json
import logging
import os
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from fairsets.core.atomic import atomic_path, atomic_write_text, layout_lock
from fairsets.core.tables import write_table

from .. import _img2dataset
from ..download.images import ImageSpec, originals_record
from ..download.layout import STATUS_COLUMNS, STATUS_SCHEMA, _list_rounds, _oom_shards, _ShardInput
from ..download.rounds import SHARD_NOT_DONE, _not_done_rows, _run_shards, _shard_rows, unblocked
from ..guard import FetchPolicy
from ..guard.hosts import HostTotals, write_host_totals
from .listing import REJECT_COL, ListingError, check_listing_file, fingerprint, read_listing
from .merge import _oom_sample, merge_retry, read_rounds
from .policy import RowPolicy, apply_policy

log = logging.getLogger("fairsets.fetch.download")

WORK = ".fairsets"
_META = "listing.json"
HOSTS = "hosts.json"  # the requests of the last call per host (write_host_totals)
_INPUT = "input.parquet"
_TARGET_COL = "fairsets_target"
_RETRY_RE = re.compile(r"^retry-(\d{3,})$")
_SIG = b"fairsets.shard_signature"


def download_listing(
    listing: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    policy: FetchPolicy,
    *,
    url_col: str = "url",
    caption_col: str = "caption",
    processes: int = 1,
    threads: int = 32,
    image: ImageSpec | None = None,
    shard_size: int = 10000,
    retry_failed: bool = False,
    progress: Callable[[int, int], None] | None = None,
    row_policy: RowPolicy | None = None,
) -> list[dict[str, Any]]:
    """Download a listing into img2dataset shards directly in ``out_dir``, resumably, behind the guard.

    Args:
        listing: a Parquet, CSV or JSONL file with a URL column, a caption column and any others
            (kept in ``{key}.json`` and the shards' status Parquet).
        out_dir: the shards folder (new or empty, or one this listing was downloaded into).
        policy: the fetch policy enforced on every request and redirect hop.
        url_col: the URL column.
        caption_col: the caption column (saved as ``{key}.txt``).
        processes: worker processes (spawned); 0 runs the shards in this process, one by one.
        threads: download threads per shard.
        image: resize mode and size (default: stored as downloaded).
        shard_size: samples per shard.
        retry_failed: download again the keys whose status is ``failed`` (transient) and merge
            them into their shards. Keys refused for an address that ``policy`` now allows
            (their error names the flag: ``allowed only with allow_loopback=True``) are
            downloaded again and merged the same way, with or without ``retry_failed``.
        progress: ``progress(done, total)`` with sample counts of the shards (or of a retry
            round), when their download starts (the samples already done) and after each shard.
        row_policy: rows to refuse before download (a deny list of URLs, safety rules; see
            :mod:`.policy`); a folder keeps the policy it was made with.

    Returns:
        One status row per listing row, in listing order (``STATUS_COLUMNS``; ``key`` is
        img2dataset's key, ``round`` the retry round that last downloaded it, 0 for the first
        download); also written to ``out_dir/status.parquet``; the requests of this call per host
        (and the limits they were made under) to ``out_dir/.fairsets/hosts.json``.

    Raises:
        ListingError: the listing cannot be used, or ``out_dir`` holds another download.
        LayoutBusy: another call is downloading into ``out_dir``.
        ValueError: bad arguments.
    """
    image = image or ImageSpec()
    if processes < 0 or threads < 1 or shard_size < 1:
        raise ValueError("processes must be >= 0, threads and shard_size >= 1")
    root, listing = Path(out_dir), Path(listing)
    row_policy = row_policy or RowPolicy()
    if not root.is_dir():  # the listing is checked before any folder is made
        _open(root, listing, url_col, caption_col, image, shard_size, row_policy)
    with layout_lock(root):  # one writer at a time (a second call says so and ends)
        meta = _open(root, listing, url_col, caption_col, image, shard_size, row_policy)
        return _download(root, meta, policy, image, processes, threads, shard_size, retry_failed, progress)


def _download(
    root: Path,
    meta: dict[str, Any],
    policy: FetchPolicy,
    image: ImageSpec,
    processes: int,
    threads: int,
    shard_size: int,
    retry_failed: bool,
    progress: Callable[[int, int], None] | None,
) -> list[dict[str, Any]]:
    work = root / WORK
    hosts: dict[str, HostTotals] = {}
    run_args: dict[str, Any] = {
        "processes": processes,
        "threads": threads,
        "progress": progress,
        "hosts": hosts,
    }
    inp = _ShardInput(
        work / _INPUT,
        root,
        n_rows=meta["rows"],
        shard_size=shard_size,
        oom=meta["oom"],
        caption=True,
        columns=tuple(meta["extras"]),
        image=image,
        tmp_dir=work / "tmp",
    )
    _run_shards(inp, policy, **run_args)
    keys = _keys(inp)
    shard_of = {k: inp.shard_name(i // shard_size) for i, k in enumerate(keys)}
    for idx, rdir in _retry_rounds(work):  # an earlier --retry-failed that did not finish
        _finish_retry(root, rdir, idx, inp, shard_of.__getitem__, policy, run_args)
    rows = _status(root, inp, keys)
    # the failed keys when asked, and the keys a policy refused that this call's policy allows
    todo = [
        i for i, r in enumerate(rows) if (retry_failed and r["status"] == "failed") or unblocked(r, policy)
    ]
    if todo:
        pending = _retry_rounds(work)
        if any(rows[i]["error"] == SHARD_NOT_DONE for i in todo) or pending:
            log.warning("some shards are not done yet: run again to finish them, then the keys are retried")
        else:
            idx = max(read_rounds(work).values(), default=0) + 1
            rdir = work / f"retry-{idx:03d}"
            rdir.mkdir(parents=True, exist_ok=True)
            table = pq.read_table(work / _INPUT).take(todo).drop_columns([REJECT_COL])
            table = table.append_column(_TARGET_COL, pa.array([keys[i] for i in todo], pa.string()))
            with atomic_path(rdir / _INPUT) as tmp:
                pq.write_table(table, tmp)
            log.info("retry-%03d: %d samples to download again", idx, len(todo))
            _finish_retry(root, rdir, idx, inp, shard_of.__getitem__, policy, run_args)
            rows = _status(root, inp, keys)
    write_table(root / "status.parquet", rows, schema=STATUS_SCHEMA)
    write_host_totals(work / HOSTS, policy, hosts)
    return rows


def _open(
    root: Path,
    listing: Path,
    url_col: str,
    caption_col: str,
    image: ImageSpec,
    shard_size: int,
    row_policy: RowPolicy,
) -> dict:
    """The download's record (``.fairsets/listing.json``): checked against this call, or created."""
    check_listing_file(listing)
    if root.exists() and not root.is_dir():
        raise ListingError(f"{root}: is a file; give a folder for the shards")
    fp = fingerprint(listing, url_col, caption_col)
    settings = {"shard_size": shard_size, "resize_mode": image.resize_mode, "image_size": image.image_size}
    work = root / WORK
    meta_path = work / _META
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta["fingerprint"] != fp:
            raise ListingError(
                f"{root} holds the shards of another listing ({meta['listing']}, {meta['rows']} rows, "
                f"--url-col {meta['url_col']}, --caption-col {meta['caption_col']}); choose another --out, "
                "or remove that folder to start over"
            )
        for name, value in settings.items():
            if meta[name] != value and not (name == "image_size" and image.resize_mode == "no"):
                flag = "--" + name.replace("_", "-")
                raise ListingError(
                    f"{root} was downloaded with {flag} {meta[name]}, not {value}; give the same, or choose "
                    "another --out"
                )
        had = meta.get("policy") or {}
        now = row_policy.settings
        if (had.get("deny_sha256"), had.get("rules") or []) != (now["deny_sha256"], now["rules"]):
            raise ListingError(
                f"{root} was downloaded under another --deny list or --drop-unsafe rules; give the same, or "
                "download into another --out (rows already downloaded are not taken out of shards)"
            )
        return meta
    if root.exists() and any(p.name != WORK for p in root.iterdir()):
        raise ListingError(f"{root} is not empty and holds no fairsets download; choose a new or empty --out")
    lst, dropped = apply_policy(read_listing(listing, url_col, caption_col), row_policy)
    work.mkdir(parents=True, exist_ok=True)
    n = lst.table.num_rows
    with atomic_path(work / _INPUT) as tmp:
        pq.write_table(lst.table, tmp)
    meta = {
        "listing": listing.name,
        "fingerprint": fp,
        "url_col": url_col,
        "caption_col": caption_col,
        "rows": n,
        "rejected": lst.n_rejected,
        "extras": list(lst.extras),
        "oom": _oom_shards(n, shard_size),
        **settings,
        **originals_record(),
        "policy": {**row_policy.settings, **dropped},
    }
    atomic_write_text(meta_path, json.dumps(meta, indent=2))  # last: the download exists
    log.info(
        "%s: %d rows (%d refused), %d extra columns kept", listing.name, n, lst.n_rejected, len(lst.extras)
    )
    return meta


def _keys(inp: _ShardInput) -> list[str]:
    """img2dataset's key of each input row."""
    compute_key = _img2dataset.load("downloader").compute_key
    oom_sample = _oom_sample(inp.shard_size)
    return [
        compute_key(i % inp.shard_size, i // inp.shard_size, oom_sample, inp.oom) for i in range(inp.n_rows)
    ]


def _retry_rounds(work: Path) -> list[tuple[int, Path]]:
    return _list_rounds(work, _RETRY_RE, _INPUT)


def _finish_retry(
    root: Path,
    rdir: Path,
    idx: int,
    inp: _ShardInput,
    target_shard: Callable[[str], str],
    policy: FetchPolicy,
    run_args: dict[str, Any],
) -> None:
    """Download a retry round's missing shards, then merge it (see :mod:`.merge`)."""
    targets = pq.read_table(rdir / _INPUT, columns=[_TARGET_COL]).column(_TARGET_COL).to_pylist()
    rinp = _ShardInput(
        rdir / _INPUT,
        rdir,
        n_rows=len(targets),
        shard_size=inp.shard_size,
        oom=_oom_shards(len(targets), inp.shard_size),
        caption=True,
        columns=inp.columns,
        image=inp.image,
    )
    if not (rdir / "merge" / "_ready.json").exists():
        _run_shards(rinp, policy, **run_args)
        if len(rinp.done_shards()) < rinp.n_shards:
            log.warning("%s: not every shard finished; a later call resumes and merges it", rdir.name)
            return
    merge_retry(root, root / WORK, rdir, rinp, targets, target_shard, idx)
    log.info("%s: merged %d samples into their shards", rdir.name, len(targets))


def _shard_signature(root: Path, name: str) -> str | None:
    parts = []
    for suffix in (".tar", ".parquet", "_stats.json"):
        try:
            st = (root / f"{name}{suffix}").stat()
        except OSError:
            return None
        parts.append(f"{st.st_size}:{st.st_mtime_ns}")
    return "|".join(parts)


def _status(root: Path, inp: _ShardInput, keys: list[str]) -> list[dict[str, Any]]:
    """Our classified rows of every listing row, from the shards (cached per shard by its files' stat)."""
    work = root / WORK
    table = pq.read_table(work / _INPUT, columns=["url", REJECT_COL])
    urls, why = table.column("url").to_pylist(), table.column(REJECT_COL).to_pylist()
    rounds = read_rounds(work)
    cache = work / "status"
    cache.mkdir(exist_ok=True)
    rows: list[dict[str, Any]] = []
    for shard_id in range(inp.n_shards):
        lo, hi = inp.shard_span(shard_id)
        name = inp.shard_name(shard_id)
        sig = _shard_signature(root, name)
        cached = cache / f"{name}.parquet"
        got = None
        if sig is not None and cached.exists():
            t = pq.read_table(cached)
            if (t.schema.metadata or {}).get(_SIG) == sig.encode():
                got = t.to_pylist()
        if got is None:
            got = _shard_rows(root, root, name, keys[lo:hi], urls[lo:hi], "key")
            if got is not None and sig is not None:
                t = pa.Table.from_pylist(got, schema=STATUS_SCHEMA).replace_schema_metadata({_SIG: sig})
                with atomic_path(cached) as tmp:
                    pq.write_table(t, tmp)
        if got is None:
            got = _not_done_rows(keys[lo:hi], urls[lo:hi])
        for i, r in enumerate(got, lo):
            if why[i] is not None:
                r = dict.fromkeys(STATUS_COLUMNS) | {"key": r["key"], "status": "rejected", "error": why[i]}
            rows.append(r | {"round": rounds.get(r["key"], 0)})
    return rows


def summary_line(rows: list[dict[str, Any]], top: int = 3) -> str:
    """``N rows: a ok, b rejected, c failed (top reasons: http_404 12, timeout 3)``."""
    counts = Counter(r["status"] for r in rows)
    reasons = Counter(str(r["error"]).split(":", 1)[0] for r in rows if r["status"] != "ok")
    line = f"{len(rows)} rows: " + ", ".join(f"{counts[s]} {s}" for s in ("ok", "rejected", "failed"))
    if reasons:
        line += " (top reasons: " + ", ".join(f"{k} {v}" for k, v in reasons.most_common(top)) + ")"
    return line
