"""The rounds of a download: running a round's shards in a worker pool and classifying its rows."""

from __future__ import annotations

import contextlib
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
from ..guard import FetchPolicy
from ..retry import user_agent as default_user_agent
from .guarded import GuardedDownloader, PixelCappedResizer, classify_img2dataset
from .layout import _ROUND_STATUS, ENCODE_FORMAT, KEY_COL, STATUS_COLUMNS, STATUS_SCHEMA, _RoundInput
from .stored import _read_member, _tar_index

log = logging.getLogger("fairsets.fetch.download")  # one logger for the whole package


class _LogWriter(io.TextIOBase):
    """A text stream that sends img2dataset's prints to DEBUG logs."""

    def write(self, s: str) -> int:
        if s.strip():
            log.debug("img2dataset: %s", s.rstrip())
        return len(s)


def _round_downloader(
    round_dir: Path, inp: _RoundInput, policy: FetchPolicy, *, threads: int, column_list: list[str]
) -> GuardedDownloader:
    """The img2dataset downloader of a round: guarded, pixel-capped, images stored as downloaded."""
    Resizer = _img2dataset.load("resizer").Resizer
    WebDatasetSampleWriter = _img2dataset.load("writer").WebDatasetSampleWriter

    resizer = PixelCappedResizer(
        Resizer(
            image_size=256,  # unused with resize_mode="no"
            resize_mode="no",
            resize_only_if_bigger=False,
            encode_format=ENCODE_FORMAT,
            skip_reencode=True,
        ),
        policy.max_pixels,
    )
    return GuardedDownloader(
        policy=policy,
        user_agent=default_user_agent(),
        sample_writer_class=WebDatasetSampleWriter,
        resizer=resizer,
        thread_count=threads,
        save_caption=False,
        extract_exif=False,
        output_folder=str(round_dir),
        column_list=column_list,
        timeout=policy.timeout,
        number_sample_per_shard=inp.shard_size,
        oom_shard_count=inp.oom,
        compute_hash=None,
        verify_hash_type=None,
        encode_format=ENCODE_FORMAT,
        retries=0,
        user_agent_token=policy.user_agent_token,
        disallowed_header_directives=None,  # the guard decides, with the user-agent token
    )


def _run_round(
    round_dir: Path,
    inp: _RoundInput,
    policy: FetchPolicy,
    *,
    processes: int,
    threads: int,
    progress: Callable[[int, int], None] | None,
) -> None:
    """Download the shards of a round that have no stats yet (img2dataset incremental mode)."""
    Reader = _img2dataset.load("reader").Reader

    done = inp.done_shards(round_dir)
    total = len(inp.keys)
    finished = sum(min(inp.shard_size, total - i * inp.shard_size) for i in done)
    if len(done) == inp.n_shards:
        return
    log.info(
        "%s: downloading %d samples in %d shards (%d shards already done)",
        round_dir.name,
        total - finished,
        inp.n_shards - len(done),
        len(done),
    )
    tmp_dir = round_dir / "_tmp"
    tmp_dir.mkdir(parents=True, exist_ok=True)
    reader = Reader(
        str(inp.path),
        "parquet",
        "url",
        None,
        None,
        None,
        [KEY_COL],
        inp.shard_size,
        done,
        str(tmp_dir),
        0,
    )
    downloader = _round_downloader(round_dir, inp, policy, threads=threads, column_list=reader.column_list)
    with contextlib.redirect_stdout(_LogWriter()):
        shards = list(reader)

    def shard_len(shard_id: int) -> int:
        return min(inp.shard_size, total - shard_id * inp.shard_size)

    def run(todo: list[tuple[int, str]], pool: Any) -> list[tuple[int, str]]:
        nonlocal finished
        failed = []
        for ok, row in _map_shards(downloader, todo, pool):
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
            log.warning("%s: %d shards failed, retrying them once", round_dir.name, len(failed))
            failed = run(failed, pool)
    if failed:
        log.warning("%s: %d shards failed again; a later call resumes them", round_dir.name, len(failed))
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
) -> Iterator[tuple[bool, tuple[int, str]]]:
    if pool is None or not shards:
        for shard in shards:
            yield downloader(shard)
        return
    yield from pool.imap_unordered(downloader, shards)


def _round_rows(out_dir: Path, idx: int, round_dir: Path, inp: _RoundInput) -> tuple[list[dict], bool]:
    """Classified rows of every key of a round, and whether all its shards are done."""
    rows: list[dict[str, Any]] = []
    complete = True
    for shard_id in range(inp.n_shards):
        lo, hi = shard_id * inp.shard_size, min(len(inp.keys), (shard_id + 1) * inp.shard_size)
        keys, urls = inp.keys[lo:hi], inp.urls[lo:hi]
        name = inp.shard_name(shard_id)

        def base(k: str, u: str) -> dict[str, Any]:
            return dict.fromkeys(STATUS_COLUMNS) | {"key": k, "url": u, "round": idx}

        if not (round_dir / f"{name}_stats.json").exists():
            complete = False
            rows += [
                base(k, u)
                | {"status": "failed", "error": "shard_failed: img2dataset did not finish the shard"}
                for k, u in zip(keys, urls, strict=True)
            ]
            continue
        table = pq.read_table(
            round_dir / f"{name}.parquet", columns=[KEY_COL, "key", "status", "error_message"]
        )
        by_key = {r[KEY_COL]: r for r in table.to_pylist()}
        tar_path = round_dir / f"{name}.tar"
        index = _tar_index(tar_path) if tar_path.exists() else {}
        shard_rel = tar_path.relative_to(out_dir).as_posix()
        for k, u in zip(keys, urls, strict=True):
            row = base(k, u)
            got = by_key.get(k)
            if got is None:
                row |= {"status": "failed", "error": "missing: img2dataset wrote no status for the sample"}
                rows.append(row)
                continue
            status, error = classify_img2dataset(got["status"], got["error_message"])
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
) -> list[dict[str, Any]]:
    """Rows of a round, resuming it first if it is not complete."""
    marker = round_dir / _ROUND_STATUS
    if marker.exists():
        return pq.read_table(marker).to_pylist()
    inp = _RoundInput(round_dir)
    _run_round(round_dir, inp, policy, processes=processes, threads=threads, progress=progress)
    rows, complete = _round_rows(out_dir, idx, round_dir, inp)
    if complete:
        write_table(marker, rows, schema=STATUS_SCHEMA)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    log.info("%s: %s", round_dir.name, ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    return rows
