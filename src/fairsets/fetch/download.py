"""URL lists at scale: img2dataset into WebDataset shards, behind the fetch guard, with per-sample status.

img2dataset does the heavy lifting (sharding the list, a thread pool per shard, WebDataset tars
and a per-shard Parquet of sample statuses); this module adds what it lacks:

* **the guard** — :class:`GuardedDownloader` (a subclass of img2dataset's ``Downloader``)
  installs :func:`fairsets.fetch.guard.guarded_opener` as urllib's global opener around every
  shard it downloads. img2dataset fetches with ``urllib.request.urlopen``, which uses the
  installed opener, so every request *and every redirect hop* connects only to checked
  addresses, bodies are capped at ``policy.max_bytes`` and ``X-Robots-Tag: noai`` (for all
  robots or for ``policy.user_agent_token``) refuses the sample. The subclass is what the worker
  processes unpickle (the pool uses *spawn*), so the install happens in the worker itself;
* **per-sample status rows** under our keys, classified as ``ok`` / ``rejected`` (a decision:
  refused address, opt-out, too large, HTTP 3xx/4xx other than 408/429, undecodable, invalid
  URL) / ``failed`` (transient: timeouts, the guard's wall-clock ``deadline`` or ``min_rate``
  passed, connection errors, 5xx, 408, 429, anything unknown);
* **rounds** — ``out_dir/round-000/``, ``round-001/``, ... each an img2dataset output folder.
  A round whose shards all have img2dataset's ``*_stats.json`` is complete and never redone
  (``_status.parquet`` in it is our record of it, written last); an interrupted round is
  resumed (img2dataset's incremental mode: only shards without stats run again).
  ``retry_failed=True`` starts a new round with only the keys whose latest status is
  ``failed``; keys never downloaded (or whose URL changed) always get a new round.

Layout of one round::

    round-NNN/_input.parquet     fairsets_key, url (+ shard size in the schema metadata)
    round-NNN/00000.tar          WebDataset: <i2d key>.jpg + <i2d key>.json per downloaded sample
    round-NNN/00000.parquet      img2dataset's status per sample (fairsets_key, key, status, ...)
    round-NNN/00000_stats.json   img2dataset's shard stats (the shard is done)
    round-NNN/_status.parquet    our classified rows for the round (the round is done)

and ``out_dir/status.parquet`` holds the merged rows of the last call (latest round wins).

Images are stored as img2dataset's resizer leaves them with ``resize_mode="no"`` and
``skip_reencode=True``: JPEG bytes unchanged, other formats re-encoded to JPEG; ``bytes`` and
``sha256`` in the status rows describe the stored member (what :func:`read_image` returns).

URLs and keys are logged at DEBUG only; hosts, never full URLs, appear in guard messages.

img2dataset's modules are loaded by :mod:`fairsets.fetch._img2dataset`, without its package
``__init__`` and the libraries it never runs for us (wandb, ray, pandas, albumentations, torch);
the worker processes of a round (*spawn*) live until the round ends.

API:
    * ``download_urls(rows, out_dir, policy, *, processes=1, threads=16, shard_size=1000,
      retry_failed=False, progress=None) -> list[dict]``
    * ``read_image(out_dir, status_row) -> bytes``
    * ``classify_img2dataset(status, error_message) -> (status, error)``
    * ``GuardedDownloader`` — img2dataset ``Downloader`` that installs the guard per shard
    * ``PixelCappedResizer`` — refuses images over ``policy.max_pixels`` from their header,
      before img2dataset decodes them
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import logging
import math
import os
import re
import shutil
import tarfile
import threading
import urllib.request
from collections.abc import Callable, Iterator
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from fairsets.core.atomic import atomic_path
from fairsets.core.tables import write_table

from . import _img2dataset
from .guard import FetchPolicy, classify_http_status, guarded_opener, too_slow_reason
from .retry import user_agent as default_user_agent

# albumentations (imported by img2dataset's resizer) checks PyPI for updates on import unless told not to.
os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")

try:  # img2dataset's modules without its package __init__ (wandb, ray, pandas) nor torch: _img2dataset
    Downloader = _img2dataset.load("downloader").Downloader
except ImportError as _err:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"fairsets.fetch.download needs img2dataset and its runtime dependencies ({_err.name or _err} "
        "is missing). img2dataset's pins on albumentations<2, pandas<3, webdataset<0.3 and dataclasses "
        "are too strict, so install it without them, and the rest with the fetch extra: "
        "pip install --no-deps 'img2dataset==1.47.0' && pip install 'fairsets[fetch]' (docs/install.md)"
    ) from _err

__all__ = [
    "STATUS_COLUMNS",
    "STATUS_SCHEMA",
    "GuardedDownloader",
    "PixelCappedResizer",
    "classify_img2dataset",
    "download_urls",
    "read_image",
]

log = logging.getLogger(__name__)

KEY_COL = "fairsets_key"
ENCODE_FORMAT = "jpg"
STATUS_COLUMNS: tuple[str, ...] = (
    "key",
    "url",
    "status",
    "error",
    "round",
    "shard",
    "member",
    "bytes",
    "sha256",
)
STATUS_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string()),
        pa.field("url", pa.string()),
        pa.field("status", pa.string()),
        pa.field("error", pa.string()),
        pa.field("round", pa.int32()),
        pa.field("shard", pa.string()),
        pa.field("member", pa.string()),
        pa.field("bytes", pa.int64()),
        pa.field("sha256", pa.string()),
    ]
)
_ROUND_RE = re.compile(r"^round-(\d{3,})$")
_INPUT = "_input.parquet"
_ROUND_STATUS = "_status.parquet"
_META_SHARD_SIZE = b"fairsets.shard_size"
_META_OOM = b"fairsets.oom_shard_count"
_MAX_ERROR = 500

# One guarded opener at a time per process: install_opener() sets a process-wide global.
_OPENER_LOCK = threading.Lock()


class PixelCappedResizer:
    """img2dataset's resizer behind a header check: at most ``max_pixels`` pixels, known formats only.

    img2dataset decodes every download with ``cv2.imdecode`` before it looks at the size (OpenCV
    allows 2^30 pixels): a 650 kB PNG of 15000 x 15000 pixels takes 1.3 GB and 9 s per thread.
    The width and height are read from the header with Pillow (no pixel is decoded) and an
    image over ``max_pixels`` is refused (``refused (too_large): ...``); a file Pillow cannot
    identify is refused as ``undecodable`` instead of going to OpenCV's other decoders (EXR,
    HDR, JPEG 2000, ...). The ``(img, w, h, ow, oh, error)`` contract of the resizer is kept.
    """

    def __init__(self, resizer: Any, max_pixels: int) -> None:
        self.resizer = resizer
        self.max_pixels = max_pixels

    def __call__(self, img_stream: Any, blurring_bbox_list: Any = None) -> tuple[Any, ...]:
        import warnings

        from PIL import Image

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                img_stream.seek(0)
                with Image.open(img_stream) as im:
                    width, height = im.size
        except Image.DecompressionBombError as exc:
            return None, None, None, None, None, f"refused (too_large): {exc}"
        except Exception as exc:  # per sample: whatever Pillow raises on a broken header
            return None, None, None, None, None, f"not an image Pillow can identify ({type(exc).__name__})"
        finally:
            img_stream.seek(0)
        if width * height > self.max_pixels:
            return (
                None,
                None,
                None,
                None,
                None,
                f"refused (too_large): image of {width}x{height} pixels, more than {self.max_pixels} "
                "(max_pixels)",
            )
        return self.resizer(img_stream, blurring_bbox_list)


class GuardedDownloader(Downloader):
    """img2dataset's ``Downloader`` with :func:`guarded_opener` installed while a shard downloads.

    img2dataset fetches with ``urllib.request.urlopen``, which uses the opener installed by
    ``urllib.request.install_opener``. The opener is installed in the process that runs the shard
    (a spawned worker unpickles this class, importing this module), and the previous opener is
    restored afterwards so an in-process run leaves no global change behind. While an in-process
    shard runs, other threads of the process that call ``urlopen`` get the guarded opener too
    (stricter, never looser), and in-process shards of concurrent calls run one at a time.

    Args:
        policy: the fetch policy enforced on every request and redirect hop.
        user_agent: the User-Agent sent (replaces img2dataset's browser-like one).
        **kwargs: img2dataset ``Downloader`` arguments.
    """

    def __init__(self, *, policy: FetchPolicy, user_agent: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.policy = policy
        self.user_agent = user_agent

    def __call__(self, row: tuple[int, str]) -> tuple[bool, tuple[int, str]]:
        """Download one img2dataset shard ``(shard_id, arrow_file)`` behind the guard."""
        opener = guarded_opener(self.policy, self.user_agent)
        with _OPENER_LOCK:
            previous = urllib.request._opener  # type: ignore[attr-defined]
            urllib.request.install_opener(opener)
            try:
                return super().__call__(row)
            finally:
                urllib.request.install_opener(previous)


# --- classification ---

_HTTP_RE = re.compile(r"^HTTP Error (\d{3}): ?(.*)$", re.S)
_REFUSED_RE = re.compile(r"refused \(([a-z_]+)\): (.*?)>?$", re.S)


def classify_img2dataset(status: str | None, error_message: str | None) -> tuple[str, str | None]:
    """Map img2dataset's ``status``/``error_message`` to ours.

    Args:
        status: ``success``, ``failed_to_download`` or ``failed_to_resize``.
        error_message: img2dataset's text (``str`` of the exception raised while downloading).

    Returns:
        ``(status, error)`` with status ``ok`` / ``rejected`` / ``failed`` and error
        ``"<reason>: <detail>"`` (None when ok). Reasons: ``blocked_address``,
        ``blocked_scheme``, ``too_many_redirects``, ``too_large``, ``opted_out``, ``http_<code>``,
        ``invalid_url``, ``undecodable`` (rejected); ``http_<code>`` for 408/429/5xx,
        ``deadline``, ``min_rate`` (the download was too slow: :class:`~fairsets.fetch.guard.TooSlow`),
        ``timeout``, ``connection``, ``error`` (failed).
    """
    msg = (error_message or "").strip()
    if status == "success":
        return "ok", None
    if status == "failed_to_resize":
        m = _REFUSED_RE.search(msg)  # PixelCappedResizer: too many pixels
        if m:
            return "rejected", _clip(f"{m.group(1)}: {m.group(2)}")
        return "rejected", _clip(f"undecodable: {msg}")
    if status != "failed_to_download":
        return "failed", _clip(f"error: img2dataset status {status!r}: {msg}")
    m = _REFUSED_RE.search(msg)
    if m:
        return "rejected", _clip(f"{m.group(1)}: {m.group(2)}")
    slow = too_slow_reason(msg)
    if slow is not None:
        return "failed", _clip(f"{slow[0]}: {slow[1]}")
    if "disallowed by X-Robots-Tag" in msg:
        return "rejected", _clip(f"opted_out: {msg}")
    m = _HTTP_RE.match(msg)
    if m:
        code = int(m.group(1))
        return classify_http_status(code), _clip(f"http_{code}: {m.group(2)}")
    if msg.startswith("unknown url type") or "can't contain control characters" in msg:
        return "rejected", "invalid_url: not an absolute http(s) URL"
    if "timed out" in msg.lower() or "timeout" in msg.lower():
        return "failed", _clip(f"timeout: {msg}")
    if (
        msg.startswith(("<urlopen error", "IncompleteRead("))
        or "connection" in msg.lower()
        or "Remote end closed" in msg
    ):
        return "failed", _clip(f"connection: {msg}")
    return "failed", _clip(f"error: {msg}")


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_ERROR else text[: _MAX_ERROR - 3] + "..."


# --- tar access ---


@functools.lru_cache(maxsize=64)
def _tar_index_cached(path: str, _mtime_ns: int, _size: int) -> dict[str, tuple[int, int]]:
    with tarfile.open(path, "r:") as tf:
        return {m.name: (m.offset_data, m.size) for m in tf if m.isfile()}


def _tar_index(path: Path) -> dict[str, tuple[int, int]]:
    """``{member name: (data offset, size)}`` of a tar, cached per process by (path, mtime, size)."""
    st = path.stat()
    return _tar_index_cached(str(path), st.st_mtime_ns, st.st_size)


def _read_member(path: Path, offset: int, size: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(size)
    if len(data) != size:
        raise OSError(f"{path}: truncated member at offset {offset}")
    return data


def read_image(out_dir: str | os.PathLike[str], status_row: dict[str, Any]) -> bytes:
    """Return the stored image bytes of one ``ok`` status row.

    Args:
        out_dir: the ``out_dir`` given to :func:`download_urls`.
        status_row: a row returned by :func:`download_urls` (or read from ``status.parquet``).

    Returns:
        The image bytes.

    Raises:
        ValueError: if the row is not ``ok`` or its shard path leaves ``out_dir``.
        KeyError: if the member is not in the shard.
    """
    if status_row.get("status") != "ok" or not status_row.get("shard") or not status_row.get("member"):
        raise ValueError(
            f"sample {status_row.get('key')!r} has no stored image (status {status_row.get('status')})"
        )
    root = Path(out_dir).resolve()
    tar_path = (root / status_row["shard"]).resolve()
    if root not in tar_path.parents:
        raise ValueError(f"shard {status_row['shard']!r} is outside {root}")
    index = _tar_index(tar_path)
    member = status_row["member"]
    if member not in index:
        raise KeyError(f"{member} not in {status_row['shard']}")
    return _read_member(tar_path, *index[member])


# --- rounds ---


def _round_name(idx: int) -> str:
    return f"round-{idx:03d}"


def _list_rounds(out_dir: Path) -> list[tuple[int, Path]]:
    rounds = []
    for p in out_dir.iterdir() if out_dir.exists() else ():
        m = _ROUND_RE.match(p.name)
        if m and p.is_dir() and (p / _INPUT).exists():
            rounds.append((int(m.group(1)), p))
    return sorted(rounds)


def _write_input(round_dir: Path, rows: list[dict[str, str]], shard_size: int) -> None:
    n_shards = max(1, math.ceil(len(rows) / shard_size))
    oom = max(5, len(str(n_shards - 1)))
    table = pa.table(
        {KEY_COL: [r["key"] for r in rows], "url": [r["url"] for r in rows]},
        schema=pa.schema([pa.field(KEY_COL, pa.string()), pa.field("url", pa.string())]),
    ).replace_schema_metadata({_META_SHARD_SIZE: str(shard_size), _META_OOM: str(oom)})
    with atomic_path(round_dir / _INPUT) as tmp:
        pq.write_table(table, tmp)


class _RoundInput:
    """The input of one round: keys, urls, shard size and shard-name width."""

    def __init__(self, round_dir: Path) -> None:
        table = pq.read_table(round_dir / _INPUT)
        meta = table.schema.metadata or {}
        self.path = round_dir / _INPUT
        self.keys: list[str] = table.column(KEY_COL).to_pylist()
        self.urls: list[str] = table.column("url").to_pylist()
        self.shard_size = int(meta[_META_SHARD_SIZE])
        self.oom = int(meta[_META_OOM])
        self.n_shards = math.ceil(len(self.keys) / self.shard_size)

    def shard_name(self, shard_id: int) -> str:
        return f"{shard_id:0{self.oom}d}"

    def done_shards(self, round_dir: Path) -> set[int]:
        return {i for i in range(self.n_shards) if (round_dir / f"{self.shard_name(i)}_stats.json").exists()}


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


def _validate(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    seen: dict[str, int] = {}
    dups: list[int] = []
    out = []
    for i, r in enumerate(rows):
        key, url = r.get("key"), r.get("url")
        if not isinstance(key, str) or not key or "." in key:
            raise ValueError(f"row {i}: key must be a non-empty string without dots")
        if not isinstance(url, str):
            raise ValueError(f"row {i}: url must be a string")
        if key in seen:
            dups.append(i)
        seen.setdefault(key, i)
        out.append({"key": key, "url": url})
    if dups:
        raise ValueError(f"{len(dups)} duplicate keys in the input (first at rows {dups[:5]})")
    return out


def download_urls(
    rows: list[dict[str, Any]],
    out_dir: str | os.PathLike[str],
    policy: FetchPolicy,
    *,
    processes: int = 1,
    threads: int = 16,
    shard_size: int = 1000,
    retry_failed: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Download ``rows`` into WebDataset shards under ``out_dir``, resumably, behind the guard.

    Args:
        rows: dicts with ``key`` (unique, dot-free) and ``url``; other fields are ignored.
        out_dir: output folder (``round-NNN/`` folders and ``status.parquet``).
        policy: the fetch policy (addresses, byte cap, timeout, deadline and minimum rate per
            download, redirects, opt-out directives).
        processes: worker processes (spawned); 0 runs the shards in this process, one by one.
        threads: download threads per shard.
        shard_size: samples per shard of a *new* round (a resumed round keeps its own).
        retry_failed: download again, in a new round, the keys whose latest status is ``failed``.
        progress: ``progress(done, total)`` with sample counts of the round, after each shard.

    Returns:
        One row per input key, in input order: ``key, url, status, error, round, shard, member,
        bytes, sha256`` (latest round wins); also written to ``out_dir/status.parquet``.

    Raises:
        ValueError: on duplicate or malformed keys, non-string URLs, or bad arguments.
    """
    if processes < 0 or threads < 1 or shard_size < 1:
        raise ValueError("processes must be >= 0, threads and shard_size >= 1")
    todo_rows = _validate(rows)
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    run_args: dict[str, Any] = {"processes": processes, "threads": threads, "progress": progress}

    latest: dict[str, dict[str, Any]] = {}
    rounds = _list_rounds(root)
    for idx, round_dir in rounds:
        for r in _load_round(root, idx, round_dir, policy, **run_args):
            latest[r["key"]] = r

    todo = []
    for r in todo_rows:
        prev = latest.get(r["key"])
        if prev is None or prev["url"] != r["url"] or (retry_failed and prev["status"] == "failed"):
            todo.append(r)
    if todo:
        idx = rounds[-1][0] + 1 if rounds else 0
        round_dir = root / _round_name(idx)
        round_dir.mkdir(exist_ok=True)
        _write_input(round_dir, todo, shard_size)
        log.info("%s: %d samples to download", round_dir.name, len(todo))
        for r in _load_round(root, idx, round_dir, policy, **run_args):
            latest[r["key"]] = r

    result = [latest[r["key"]] for r in todo_rows]
    write_table(root / "status.parquet", result, schema=STATUS_SCHEMA)
    return result
