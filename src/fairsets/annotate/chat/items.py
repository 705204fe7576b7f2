"""The kept person boxes of an annotation folder as items to show a model: list, sample, render.

``annotate vote``, ``annotate caption`` and ``annotate compare-captioners`` all ask chat models
about kept boxes. This module is what they share:

* :func:`kept_boxes` — every kept box (``kept = true`` in ``boxes/``) of the shards whose
  ``annotate persons`` run finished, with its image's alt-text, sorted by ``(shard, key, box_id)``;
* :func:`sample` — ``n`` of them chosen by a hash of ``(seed, salt, item)``: the same seed gives
  the same sample on any machine, and a larger ``n`` keeps every item a smaller one chose;
* :func:`views` — the JPEG each item is shown as (:func:`fairsets.annotate.chat.views.render`: the crop,
  or the whole image with a red box), reading each image once from its shard; an item whose image
  is gone or no longer decodes comes back with a reason instead;
* :func:`remember_view` / :func:`view_digest` — the *view index*: for each box, the SHA-256 of the
  JPEG it was last shown as, keyed by its source image's SHA-256 (the ``sha256`` column of
  ``images/{shard}.parquet``: the bytes as stored in the shard), the item and box, the view
  settings and :data:`RENDER_VERSION`. A chat answer is cached under its JPEG's SHA-256, so with
  the index a re-run finds every answer (:meth:`fairsets.fetch.chat.ChatClient.lookup` with
  :func:`fairsets.fetch.chat.image_digest_part`) without decoding or rendering anything. A changed
  image (another ``sha256``), box or setting is another key: that box is rendered and asked again.
  Folders whose images table has no ``sha256`` (:func:`source_sha256` gives None) are rendered
  every time. Entries are small files written atomically under the folder given (``annotate vote``
  uses ``chat-cache/views``); a lost entry only costs a render. :func:`keep_view` /
  :func:`kept_view` store a few views (or smaller copies) there too, by digest: the vote report's
  examples, so that a re-run renders none of those either.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairsets.core.data import derive_seed

from .. import layout
from ..heads.labels import item_id

__all__ = [
    "RENDER_VERSION",
    "BoxItem",
    "keep_view",
    "kept_boxes",
    "kept_view",
    "remember_view",
    "sample",
    "shard_refs",
    "source_sha256",
    "view_digest",
    "views",
]

_IMAGES_PER_READ = 64
#: Part of every view-index key: bump it when :func:`fairsets.annotate.chat.views.render` draws the same
#: box with the same settings differently, so that the index no longer answers for old renders.
RENDER_VERSION = "views-1"
_VIEW_DEFAULTS: dict[str, Any] = {"view": "crop", "max_side": 768, "width": 3, "pad": 0.0, "quality": 90}
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class BoxItem:
    """One kept box: where it is, its pixels' rectangle, and its image's alt-text (may be None)."""

    shard: str
    key: str
    box_id: int
    box: tuple[float, float, float, float]
    alt_text: str | None = None

    @property
    def item(self) -> str:
        """``"{shard}/{key}/{box_id}"`` (:func:`fairsets.annotate.heads.labels.item_id`)."""
        return item_id(self.shard, self.key, self.box_id)


def shard_refs(ann: str | os.PathLike[str]) -> dict[str, Any]:
    """``name → ShardRef`` of the folder's inputs (the manifest's ``inputs``)."""
    from ..shards import ShardRef

    manifest = layout.read_manifest(ann)
    return {ref["name"]: ShardRef.from_json(ref) for ref in manifest.get("inputs") or []}


def kept_boxes(ann: str | os.PathLike[str]) -> list[BoxItem]:
    """Every kept box of the finished shards of ``ann``, with alt-text, sorted by (shard, key, box_id).

    Raises:
        AnnotationError: not an annotation folder, or no shard has finished ``annotate persons``.
    """
    import duckdb

    folder = Path(ann)
    manifest = layout.read_manifest(folder)
    names = [ref["name"] for ref in layout.box_shards(folder, manifest)[0]]
    if not names:
        raise layout.AnnotationError(
            f"{folder}: no finished box tables; run fairsets annotate persons SHARDS --out {folder} first"
        )
    boxes = [str(layout.boxes_path(folder, n)) for n in names]
    images = [str(layout.images_path(folder, n)) for n in names if layout.images_path(folder, n).is_file()]
    con = duckdb.connect()
    b = f"read_parquet({boxes!r})"
    if images:
        query = (
            f"SELECT b.shard, b.key, b.box_id, b.x1, b.y1, b.x2, b.y2, i.caption FROM {b} b "
            f"LEFT JOIN read_parquet({images!r}) i ON b.shard = i.shard AND b.key = i.key "
            "WHERE b.kept ORDER BY b.shard, b.key, b.box_id"
        )
    else:
        query = (
            f"SELECT shard, key, box_id, x1, y1, x2, y2, NULL AS caption FROM {b} "
            "WHERE kept ORDER BY shard, key, box_id"
        )
    rows = con.execute(query).fetchall()
    return [
        BoxItem(str(s), str(k), int(i), (float(x1), float(y1), float(x2), float(y2)), c)
        for s, k, i, x1, y1, x2, y2, c in rows
    ]


def sample(items: Sequence[BoxItem], n: int | None, seed: int, *, salt: str = "sample") -> list[BoxItem]:
    """``n`` items chosen by ``derive_seed(salt, seed, item)`` (all when ``n`` is None or larger),
    returned sorted by (shard, key, box_id). Stable: a larger ``n`` keeps a smaller one's items."""
    if n is not None and n < 0:
        raise ValueError(f"sample size {n} must be 0 or more")
    chosen = list(items)
    if n is not None and n < len(chosen):
        chosen = sorted(chosen, key=lambda it: (derive_seed(salt, int(seed), it.item), it.item))[:n]
    return sorted(chosen, key=lambda it: (it.shard, it.key, it.box_id))


def views(
    ann: str | os.PathLike[str],
    items: Iterable[BoxItem],
    *,
    view: str = "crop",
    max_side: int | None = 768,
    width: int = 3,
    pad: float = 0.0,
    quality: int = 90,
) -> Iterator[tuple[BoxItem, bytes | None, str | None]]:
    """``(item, jpeg, None)`` or ``(item, None, reason)`` for every item, in the order given.

    Images are read from the shards the manifest names with the folder's own ``max_bytes`` /
    ``max_pixels`` limits, each image once for all its boxes (items of one image should be
    adjacent, as :func:`kept_boxes` and :func:`sample` give them).
    """
    from ..images import DEFAULT_MAX_BYTES, DEFAULT_MAX_PIXELS, ImageRejected, decode
    from ..shards import read_images
    from .views import render

    manifest = layout.read_manifest(ann)
    params = manifest.get("params") if isinstance(manifest.get("params"), dict) else {}
    max_bytes = int(params.get("max_bytes") or DEFAULT_MAX_BYTES)
    max_pixels = int(params.get("max_pixels") or DEFAULT_MAX_PIXELS)
    refs = shard_refs(ann)
    pending = list(items)
    start = 0
    while start < len(pending):
        # one read per run of items from the same shard, at most _IMAGES_PER_READ images
        shard = pending[start].shard
        keys: list[str] = []
        end = start
        while end < len(pending) and pending[end].shard == shard:
            if pending[end].key not in keys:
                if len(keys) == _IMAGES_PER_READ:
                    break
                keys.append(pending[end].key)
            end += 1
        ref = refs.get(shard)
        stored = read_images(ref, keys, max_bytes=max_bytes) if ref is not None else {}
        decoded: dict[str, Any] = {}
        for it in pending[start:end]:
            if ref is None:
                yield it, None, f"shard {shard!r} is not among the folder's inputs"
                continue
            if it.key not in decoded:
                data = stored.get(it.key)
                if data is None:
                    decoded[it.key] = "image not found in the shard (or unreadable there now)"
                else:
                    try:
                        decoded[it.key] = decode(data, max_bytes=max_bytes, max_pixels=max_pixels)
                    except ImageRejected as exc:
                        decoded[it.key] = f"image no longer decodes: {exc}"
            image = decoded[it.key]
            if isinstance(image, str):
                yield it, None, image
                continue
            try:
                yield (
                    it,
                    render(
                        image, it.box, view=view, max_side=max_side, quality=quality, pad=pad, width=width
                    ),
                    None,
                )
            except ValueError as exc:
                yield it, None, str(exc)
        start = end


def _is_sha256(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and set(value) <= _HEX


def source_sha256(ann: str | os.PathLike[str], items: Iterable[BoxItem]) -> dict[tuple[str, str], str | None]:
    """``(shard, key) → SHA-256`` of each item's image as stored in its shard (``images/{shard}.parquet``).

    None for an image the table does not hold, whose ``sha256`` is empty or not a digest, or of a
    shard whose table has no ``sha256`` column (a folder from before it existed) or cannot be read.
    """
    import pyarrow.parquet as pq

    wanted: dict[str, set[str]] = {}
    for it in items:
        wanted.setdefault(it.shard, set()).add(it.key)
    out: dict[tuple[str, str], str | None] = {}
    for shard, keys in wanted.items():
        found: dict[str, Any] = {}
        path = layout.images_path(ann, shard)
        try:
            if "sha256" in pq.read_schema(path).names:
                table = pq.read_table(path, columns=["key", "sha256"])
                found = dict(zip(table["key"].to_pylist(), table["sha256"].to_pylist(), strict=True))
        except (OSError, ValueError):  # no table, or not one: render
            found = {}
        for key in keys:
            value = found.get(key)
            out[(shard, key)] = value.lower() if _is_sha256(str(value).lower()) else None
    return out


def _view_key(item: BoxItem, source: str, settings: dict[str, Any]) -> dict[str, Any]:
    unknown = set(settings) - set(_VIEW_DEFAULTS)
    if unknown:
        raise TypeError(f"unknown view settings: {', '.join(sorted(unknown))}")
    view = {**_VIEW_DEFAULTS, **settings}
    view["pad"] = float(view["pad"])
    return {
        "renderer": RENDER_VERSION,
        "item": item.item,
        "source_sha256": source,
        "box": [float(v) for v in item.box],
        "view": view,
    }


def view_digest(
    index: str | os.PathLike[str], item: BoxItem, source: str | None, **settings: Any
) -> str | None:
    """The SHA-256 of the JPEG :func:`views` made of ``item`` from the image ``source`` (its SHA-256)
    with these view settings, as :func:`remember_view` recorded it in ``index``; None if unknown."""
    from fairsets.fetch.cache import DiskCache

    if not source:
        return None
    raw = DiskCache(index).get(_view_key(item, source, settings))
    if raw is None:
        return None
    digest = raw.decode("ascii", "replace").strip()
    return digest if _is_sha256(digest) else None


def remember_view(
    index: str | os.PathLike[str], item: BoxItem, source: str | None, jpeg: bytes, **settings: Any
) -> str:
    """Record in ``index`` that ``item``, from the image ``source``, is shown as ``jpeg``; its SHA-256.

    Nothing is recorded without a ``source`` (the digest is still returned).
    """
    import hashlib

    from fairsets.fetch.cache import DiskCache

    digest = hashlib.sha256(jpeg).hexdigest()
    if source:
        key = _view_key(item, source, settings)
        cache = DiskCache(index, synced=False)  # a torn entry is no digest: the view is rendered again
        if cache.get(key) != digest.encode("ascii"):
            cache.put(key, digest.encode("ascii"))
    return digest


def keep_view(index: str | os.PathLike[str], digest: str, data: bytes) -> None:
    """Store ``data`` (the view whose SHA-256 is ``digest``, or a smaller copy of it) in ``index``."""
    import hashlib

    from fairsets.fetch.cache import DiskCache

    if _is_sha256(digest):
        # unsynced: a torn entry fails its digest check in kept_view and reads as none
        cache = DiskCache(index, namespace="kept", synced=False)
        cache.put(digest, hashlib.sha256(data).hexdigest().encode() + data)


def kept_view(index: str | os.PathLike[str], digest: str | None) -> bytes | None:
    """What :func:`keep_view` stored for the view ``digest``; None if nothing or damaged."""
    import hashlib

    from fairsets.fetch.cache import DiskCache

    if not digest or not _is_sha256(digest):
        return None
    raw = DiskCache(index, namespace="kept").get(digest)
    if raw is None or len(raw) < 64:
        return None
    data = raw[64:]
    return data if hashlib.sha256(data).hexdigest().encode() == raw[:64] else None
