"""A LAION-style listing into img2dataset's own shards, behind the fetch guard (``fairsets download``).

:func:`download_listing` reads a Parquet, CSV or JSONL listing (a URL column, a caption column,
any other columns, which are kept) and downloads it with img2dataset's Reader, Downloader,
Resizer and WebDataset writer (:mod:`fairsets.fetch.download`: every request and redirect hop
through the guard, images over ``policy.max_pixels`` refused from their header, resize with
img2dataset's own ``Resizer``) into img2dataset's flat layout, directly in the shards folder::

    SHARDS/00000.tar            {key}.jpg, {key}.txt (caption), {key}.json (the row and its status)
    SHARDS/00000.parquet        img2dataset's status rows of the shard (with the kept columns)
    SHARDS/00000_stats.json     img2dataset's shard stats: the shard is done
    SHARDS/status.parquet       fairsets' classified rows (ok / rejected / failed), one per listing row
    SHARDS/.fairsets/           listing.json (what was downloaded, how), input.parquet (the listing
                                as img2dataset reads it), retry-NNN/ (a retry round), status/ (cache)

Keys are img2dataset's (shard number and row within the shard): row ``i`` of the listing is
always the same key. A second call downloads nothing (img2dataset's incremental mode: a shard
with stats is done); an interrupted one (even ``kill -9``) redoes only the shards without stats.
A call with a different listing (or shard size, resize mode or size) into the same folder is
refused. ``retry_failed`` downloads the keys whose status is ``failed`` (transient: timeouts,
5xx, connection errors) in a retry round and merges them into their shards (:mod:`.merge`); keys
refused for an address the call's policy now allows (the refusal names the flag, e.g.
``allowed only with allow_loopback=True``) are retried the same way, asked or not.

Modules: :mod:`.listing` (reading and checking a listing), :mod:`.merge` (retry rounds into their
shards) and :mod:`.run` (:func:`download_listing`). Log lines go to the
``fairsets.fetch.download`` logger.

API:
    * ``download_listing(listing, out_dir, policy, *, url_col, caption_col, processes, threads,
      image, shard_size, retry_failed, progress) -> list[dict]``
    * ``read_listing(path, url_col, caption_col) -> Listing``; ``ListingError``
    * ``summary_line(rows) -> str``
"""

from __future__ import annotations

from .listing import Listing, ListingError, read_listing
from .run import download_listing, summary_line

__all__ = ["Listing", "ListingError", "download_listing", "read_listing", "summary_line"]
