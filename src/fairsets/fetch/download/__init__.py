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
  refused address, opt-out, too large, HTTP 3xx/4xx other than 408/429, undecodable, a URL
  that can never be fetched) / ``failed`` (transient: timeouts, the guard's wall-clock
  ``deadline`` or ``min_rate`` passed, connection errors, 5xx, 408, 429, anything unknown);
* **rounds** — ``out_dir/round-000/``, ``round-001/``, ... each an img2dataset output folder.
  A round whose shards all have img2dataset's ``*_stats.json`` is complete and never redone
  (``_status.parquet`` in it is our record of it, written last); an interrupted round is
  resumed (img2dataset's incremental mode: only shards without stats run again).
  ``retry_failed=True`` starts a new round with only the keys whose latest status is
  ``failed``; keys never downloaded (or whose URL changed), and keys refused for an address the
  policy now allows (the refusal names the flag), always get a new round.

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
img2dataset also hashes the bytes the URL served, before any resizing (``compute_hash="sha256"``),
into each sample's ``{key}.json`` as ``sha256`` (beside its ``original_width`` and
``original_height``): what a later re-download of the original is checked against.

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
    * ``ImageSpec(resize_mode, image_size)`` — how images are stored (``RESIZE_MODES``: ``no``,
      ``keep_ratio``, ``center_crop``); ``fairsets download`` (:mod:`fairsets.fetch.shards`) uses
      the same rounds machinery with captions, kept columns and img2dataset's flat layout

Modules, one idea each: :mod:`.guarded` (img2dataset behind the guard and the status
classification), :mod:`.images` (how images are stored: the encode format, :class:`ImageSpec` and the
pixel cap), :mod:`.stored` (reading stored images back), :mod:`.layout` (status
columns, round folders and inputs), :mod:`.rounds` (running and reading a round, the worker pool)
and :mod:`.entry` (:func:`download_urls`). Every log line goes to the ``fairsets.fetch.download``
logger.
"""

from __future__ import annotations

from .entry import download_urls
from .guarded import GuardedDownloader, classify_img2dataset
from .images import ENCODE_FORMAT, RESIZE_MODES, ImageSpec, PixelCappedResizer  # noqa: F401  (ENCODE_FORMAT: as before)
from .layout import (  # noqa: F401  (the layout names and a round's inputs stay importable from here)
    KEY_COL,
    STATUS_COLUMNS,
    STATUS_SCHEMA,
    _RoundInput,
    _write_input,
)
from .rounds import _round_downloader, _worker_init, _worker_pool  # noqa: F401  (as before: the workers)
from .stored import read_image

__all__ = [
    "RESIZE_MODES",
    "STATUS_COLUMNS",
    "STATUS_SCHEMA",
    "GuardedDownloader",
    "ImageSpec",
    "PixelCappedResizer",
    "classify_img2dataset",
    "download_urls",
    "read_image",
]
