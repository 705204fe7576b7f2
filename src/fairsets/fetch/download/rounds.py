"""The rounds of a download: running a round's shards in a worker pool and classifying its rows."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from fairsets.core.tables import write_table

from .. import _img2dataset
from ..guard import FetchPolicy, allowing_flag, url_problem
from ..guard.hosts import HostTotals, merge_totals, share
from ..retry import user_agent as default_user_agent
from .guarded import GuardedDownloader, _run_shard, classify_img2dataset
from .images import ENCODE_FORMAT, ORIGINAL_HASH, ImageSpec
from .layout import (
    _ROUND_STATUS,
    KEY_COL,
    STATUS_COLUMNS,
    STATUS_SCHEMA,
    _RoundInput,
    _ShardInput,
    _stats_done,
)
from .stored import _read_member, _tar_index

log = logging.getLogger("fairsets.fetch.download")  # one logger for the whole package

#: The error of the keys of a shard img2dataset has not finished (a later call resumes it).
SHARD_NOT_DONE = "shard_failed: img2dataset did not finish the shard"


class _LogWriter(io.TextIOBase):
    """A text stream that sends img2dataset's prints to DEBUG logs."""

    def write(self, s: str) -> int:
        if s.strip():
            log.debug("img2dataset: %s", s.rstrip())
        return len(s)


def _round_downloader(
    round_dir: Path,
    inp: _ShardInput,
    policy: FetchPolicy,
    *,
    threads: int,
    column_list: list[str],
    pause_dir: str | None = None,
) -> GuardedDownloader:
    """The img2dataset downloader of a round (or of any :class:`_ShardInput`): guarded, pixel-capped,
    images stored as ``inp.image`` says, captions saved when the input has them."""
    WebDatasetSampleWriter = _img2dataset.load("writer").WebDatasetSampleWriter

    resizer = (inp.image or ImageSpec()).resizer(policy.max_pixels)
    return GuardedDownloader(
        policy=policy,
        user_agent=default_user_agent(),
        pause_dir=pause_dir,
        sample_writer_class=WebDatasetSampleWriter,
        resizer=resizer,
        thread_count=threads,
        save_caption=inp.caption,
        extract_exif=False,
        output_folder=str(round_dir),
        column_list=column_list,
        timeout=policy.timeout,
        number_sample_per_shard=inp.shard_size,
        oom_shard_count=inp.oom,
        # sha256 of the bytes the URL served, before any resizing or re-encoding: img2dataset hashes
        # its download stream and writes it as ``sha256`` in each sample's json and status Parquet
        compute_hash=ORIGINAL_HASH,
        verify_hash_type=None,
        encode_format=ENCODE_FORMAT,
        retries=0,
        user_agent_token=policy.user_agent_token,
        disallowed_header_directives=None,  # the guard decides, with the user-agent token
    )


def _run_shards(
    inp: _ShardInput,
    policy: FetchPolicy,
    *,
    processes: int,
    threads: int,
    progress: Callable[[int, int], None] | None,
    hosts: dict[str, HostTotals] | None = None,
) -> None:
    """Download the shards of ``inp`` that have no stats yet (img2dataset incremental mode).

    The per-host limits of ``policy`` hold for the whole run: with several worker processes each
    gets its share (:func:`~fairsets.fetch.guard.hosts.share`), and they share 429 pauses through
    files under ``inp.tmp_dir``. ``hosts`` (when given) gets the requests made per host added.
    """
    Reader = _img2dataset.load("reader").Reader

    done = inp.done_shards()
    total = inp.n_rows
    finished = sum(min(inp.shard_size, total - i * inp.shard_size) for i in done)
    if len(done) == inp.n_shards:
        return
    log.info(
        "%s: downloading %d samples in %d shards (%d shards already done)",
        inp.out_dir.name,
        total - finished,
        inp.n_shards - len(done),
        len(done),
    )
    tmp_dir = inp.tmp_dir
    tmp_dir.mkdir(parents=True, exist_ok=True)
    reader = Reader(
        str(inp.path),
        "parquet",
        "url",
        "caption" if inp.caption else None,
        None,
        None,
        list(inp.columns),
        inp.shard_size,
        done,
        str(tmp_dir),
        0,
    )
    with contextlib.redirect_stdout(_LogWriter()):
        shards = list(reader)
    workers = min(processes, len(shards)) if processes else 1
    if workers > 1 and 0 < policy.per_host_connections < workers:
        log.warning(
            "%d download processes share per_host_connections %d: each gets 1, so a host may see %d",
            workers,
            policy.per_host_connections,
            workers,
        )
    downloader = _round_downloader(
        inp.out_dir,
        inp,
        share(policy, workers),
        threads=threads,
        column_list=reader.column_list,
        pause_dir=str(tmp_dir / "hosts") if workers > 1 else None,
    )
    if progress is not None:  # where this run starts: the samples of the shards already done
        progress(finished, total)

    def shard_len(shard_id: int) -> int:
        return min(inp.shard_size, total - shard_id * inp.shard_size)

    def run(todo: list[tuple[int, str]], pool: Any) -> list[tuple[int, str]]:
        nonlocal finished
        failed = []
        for ok, row, per_host in _map_shards(downloader, todo, pool):
            if hosts is not None:
                merge_totals(hosts, per_host)
            if ok:
                finished += shard_len(row[0])
                if progress is not None:
                    progress(finished, total)
            else:
                failed.append(row)
        return failed

    with _worker_pool(processes, len(shards)) as pool:
        failed = run(shards, pool)
        if failed:  # one more try for shards that raised (img2dataset's max_shard_retry=1)
            log.warning("%s: %d shards failed, retrying them once", inp.out_dir.name, len(failed))
            failed = run(failed, pool)
    if failed:
        log.warning("%s: %d shards failed again; a later call resumes them", inp.out_dir.name, len(failed))
    else:
        shutil.rmtree(tmp_dir, ignore_errors=True)


def _worker_init(parent: int) -> None:
    """Initializer of a download worker: end with the driver, and load img2dataset's modules light.

    The tasks a worker receives hold img2dataset's ``Resizer`` and ``WebDatasetSampleWriter``;
    unpickling them would import their modules the usual way (albumentations, webdataset: torch)
    were they not loaded already.
    """
    from fairsets.core.processes import die_with_parent

    die_with_parent(parent)
    for name in ("downloader", "resizer", "writer"):
        _img2dataset.load(name)


@contextlib.contextmanager
def _worker_pool(processes: int, n_shards: int) -> Iterator[Any]:
    """The worker processes of a round (None with ``processes=0``): they live until the round ends."""
    if processes == 0 or not n_shards:
        yield None
        return
    from fairsets.core.processes import sigint_ignored_by_children

    ctx = get_context("spawn")
    n = min(processes, n_shards)
    # the downloaders end with this process (a killed build leaves none writing) and ignore
    # Ctrl-C from their start (this process handles it)
    with sigint_ignored_by_children():
        pool = ctx.Pool(n, initializer=_worker_init, initargs=(os.getpid(),))
    with pool:
        yield pool


def _map_shards(
    downloader: GuardedDownloader, shards: list[tuple[int, str]], pool: Any
) -> Iterator[tuple[bool, tuple[int, str], dict[str, dict]]]:
    if pool is None or not shards:
        for shard in shards:
            yield downloader.run_shard(shard)
        return
    yield from pool.imap_unordered(functools.partial(_run_shard, downloader), shards)


def _shard_rows(
    out_dir: Path, shard_dir: Path, name: str, keys: list[str], urls: list[str], match_col: str
) -> list[dict[str, Any]] | None:
    """Classified status rows (``STATUS_COLUMNS``, ``round`` unset) of the keys of one done shard.

    ``match_col`` is the column of img2dataset's status Parquet that holds ``keys`` (our key
    column, or img2dataset's own ``key``). None when the shard has no stats yet (not done).
    """
    if not _stats_done(shard_dir / f"{name}_stats.json"):
        return None
    columns = ["key", "status", "error_message"] + ([match_col] if match_col != "key" else [])
    table = pq.read_table(shard_dir / f"{name}.parquet", columns=columns)
    by_key = {r[match_col]: r for r in table.to_pylist()}
    tar_path = shard_dir / f"{name}.tar"
    index = _tar_index(tar_path) if tar_path.exists() else {}
    shard_rel = tar_path.relative_to(out_dir).as_posix()
    rows = []
    for k, u in zip(keys, urls, strict=True):
        row = dict.fromkeys(STATUS_COLUMNS) | {"key": k, "url": u}
        got = by_key.get(k)
        if got is None:
            row |= {"status": "failed", "error": "missing: img2dataset wrote no status for the sample"}
            rows.append(row)
            continue
        status, error = classify_img2dataset(got["status"], got["error_message"])
        problem = url_problem(u) if status == "failed" and isinstance(u, str) else None
        if problem is not None:  # it fails the same way every time (img2dataset could not even parse it)
            status, error = "rejected", f"invalid_url: {problem}"
        row |= {"status": status, "error": error}
        if status == "ok":
            member = f"{got['key']}.{ENCODE_FORMAT}"
            if member not in index:
                row |= {"status": "failed", "error": "missing: image not in the shard"}
            else:
                data = _read_member(tar_path, *index[member])
                row |= {
                    "shard": shard_rel,
                    "member": member,
                    "bytes": len(data),
                    "sha256": hashlib.sha256(data).hexdigest(),
                }
        rows.append(row)
    return rows


def unblocked(row: dict[str, Any], policy: FetchPolicy) -> bool:
    """Whether a status row refused by a policy (its error names the flag that would have allowed
    the address) is allowed by ``policy``: such a row is downloaded again."""
    if row.get("status") != "rejected":
        return False
    flag = allowing_flag(row.get("error"))
    return flag is not None and bool(getattr(policy, flag, False))


def _not_done_rows(keys: list[str], urls: list[str]) -> list[dict[str, Any]]:
    """Status rows of the keys of a shard img2dataset has not finished: ``failed``, resumed later."""
    return [
        dict.fromkeys(STATUS_COLUMNS) | {"key": k, "url": u, "status": "failed", "error": SHARD_NOT_DONE}
        for k, u in zip(keys, urls, strict=True)
    ]


def _round_rows(out_dir: Path, idx: int, round_dir: Path, inp: _RoundInput) -> tuple[list[dict], bool]:
    """Classified rows of every key of a round, and whether all its shards are done."""
    rows: list[dict[str, Any]] = []
    complete = True
    for shard_id in range(inp.n_shards):
        lo, hi = inp.shard_span(shard_id)
        keys, urls = inp.keys[lo:hi], inp.urls[lo:hi]
        got = _shard_rows(out_dir, round_dir, inp.shard_name(shard_id), keys, urls, KEY_COL)
        if got is None:
            complete = False
            got = _not_done_rows(keys, urls)
        rows += [r | {"round": idx} for r in got]
    return rows, complete


def _load_round(
    out_dir: Path,
    idx: int,
    round_dir: Path,
    policy: FetchPolicy,
    *,
    processes: int,
    threads: int,
    progress: Callable[[int, int], None] | None,
    hosts: dict[str, HostTotals] | None = None,
) -> list[dict[str, Any]]:
    """Rows of a round, resuming it first if it is not complete."""
    marker = round_dir / _ROUND_STATUS
    if marker.exists():
        return pq.read_table(marker).to_pylist()
    inp = _RoundInput(round_dir)
    _run_shards(inp, policy, processes=processes, threads=threads, progress=progress, hosts=hosts)
    rows, complete = _round_rows(out_dir, idx, round_dir, inp)
    if complete:
        write_table(marker, rows, schema=STATUS_SCHEMA)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    log.info("%s: %s", round_dir.name, ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    return rows
