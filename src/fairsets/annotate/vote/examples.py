"""The example boxes of a vote's report page: chosen by the seed, shown at thumbnail size.

Up to :data:`EXAMPLES` agreed and :data:`EXAMPLES` disputed boxes are chosen by a hash of
``(seed, kind, item)`` (:func:`choose_examples`). Their views are kept at the report's thumbnail size
in the view index by the run that first rendered them, so a re-run renders none
(:func:`example_views`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fairsets.core.data import derive_seed

from ..chat.items import BoxItem, remember_view
from ..chat.requests import chat_cache_dir
from ..heads.labels import item_id
from .consensus import Ballot

__all__ = ["EXAMPLES", "choose_examples", "example_views", "sheet_copy"]

#: Agreed and disputed examples on the report page, each at most.
EXAMPLES = 24


def sheet_copy(jpeg: bytes) -> bytes:
    """``jpeg`` at the report's thumbnail size (JPEG quality 95): all the contact sheet shows."""
    import io

    from PIL import Image

    from .report import THUMB_SIDE

    with Image.open(io.BytesIO(jpeg)) as im:
        im = im.convert("RGB")
        im.thumbnail((THUMB_SIDE, THUMB_SIDE), Image.Resampling.LANCZOS)
        buf = io.BytesIO()
        im.save(buf, format="JPEG", quality=95)
    return buf.getvalue()


def example_views(
    folder: Path, wanted: Sequence[BoxItem], view_kwargs: Mapping[str, Any], sources: Mapping[Any, str | None]
) -> dict[str, bytes]:
    """The report's example views at thumbnail size: kept in the view index by the run that first
    rendered them (so a re-run renders nothing), else rendered and kept; ``b""`` for a box whose
    image is gone."""
    import hashlib

    from ..chat.items import keep_view, kept_view, view_digest, views

    index = chat_cache_dir(folder) / "views"
    shown: dict[str, bytes] = {}
    missing: list[BoxItem] = []
    for it in wanted:
        source = sources.get((it.shard, it.key))
        data = kept_view(index, view_digest(index, it, source, **view_kwargs))
        if data is None:
            missing.append(it)
        else:
            shown[it.item] = data
    for it, jpeg, _ in views(folder, missing, **view_kwargs):
        if jpeg is None:
            shown[it.item] = b""
            continue
        small = sheet_copy(jpeg)
        remember_view(index, it, sources.get((it.shard, it.key)), jpeg, **view_kwargs)
        keep_view(index, hashlib.sha256(jpeg).hexdigest(), small)
        shown[it.item] = small
    return shown


def choose_examples(
    rows: Sequence[Mapping[str, Any]], disputed: Sequence[Ballot], seed: int
) -> tuple[list[str], list[str]]:
    def pick(ids: list[str], kind: str) -> list[str]:
        return sorted(ids, key=lambda i: (derive_seed("vote-examples", int(seed), kind, i), i))[:EXAMPLES]

    agreed = pick([item_id(r["shard"], r["key"], r["box_id"]) for r in rows], "agreed")
    return agreed, pick([b.item for b in disputed], "disputed")
