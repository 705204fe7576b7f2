"""A captioner's captions in an annotation folder: what lets ``annotate caption`` resume and refuse
to mix models or prompts under one name.

* Names: a captioner's marker stage is ``caption-{captioner}`` (:func:`stage`); tables, markers and
  the manifest name the prompt by its SHA-256 (:func:`prompt_sha256`).
* One run per captioner and folder: :func:`captioner_lock` holds
  ``ANN/.fairsets/caption-{captioner}.lock``.
* One model and one prompt per name: :func:`check_same` says what differs from the captions already
  there (manifest and markers); :func:`forget` removes them (``replace``).
* Resuming: a shard (:class:`Shard`: its kept boxes, in box-table order, :func:`box_items`) is
  finished (:func:`finished`) when its marker names this model, prompt, box table and boxes, has no
  failed row and its table is intact.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairsets.core.atomic import sha256_file

from .. import layout
from ..chat.items import BoxItem
from ..layout import CAPTIONS_DIR, captions_path

__all__ = [
    "Shard",
    "box_items",
    "captioner_lock",
    "check_name",
    "check_same",
    "finished",
    "forget",
    "items_sha256",
    "prompt_sha256",
    "stage",
]

_BOX_COLUMNS = ["shard", "key", "box_id", "x1", "y1", "x2", "y2", "kept"]


def check_name(captioner: str) -> str:
    return layout.check_annotator_name(captioner, "captioner")


def stage(captioner: str) -> str:
    """The marker stage of ``captioner``'s captions: ``caption-{captioner}``."""
    return f"caption-{check_name(captioner)}"


def prompt_sha256(prompt: str) -> str:
    """The SHA-256 (hex) of the prompt's UTF-8 bytes: what tables, markers and the manifest name."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


@contextlib.contextmanager
def captioner_lock(ann: Path, captioner: str) -> Iterator[None]:
    """Hold ``ANN/.fairsets/caption-{captioner}.lock``: one run per captioner and folder at a time."""
    path = ann / layout.WORKDIR / f"{stage(captioner)}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise layout.AnnotationError(
                f"{ann}: another annotate caption run with --captioner {captioner} is running there; "
                "wait for it to end, then run this again"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _markers(ann: Path, captioner: str) -> list[dict[str, Any]]:
    from fairsets.pipeline.tasks import read_marker

    folder = layout.marker_path(ann, stage(captioner), "x").parent
    found = [read_marker(p) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []
    return [m for m in found if isinstance(m, dict)]


def check_same(ann: Path, captioner: str, model: str, prompt_sha: str) -> str | None:
    """What differs when ``ann`` holds ``captioner``'s captions of another model or prompt, else None."""
    old = (layout.read_manifest(ann).get("captions") or {}).get(captioner) or {}
    seen = [old] if old else []
    seen += _markers(ann, captioner)
    for entry in seen:
        if entry.get("model") not in (None, model):
            return f"model {entry.get('model')!r} (this run: {model!r})"
        if entry.get("prompt_sha256") not in (None, prompt_sha):
            old_sha = str(entry.get("prompt_sha256"))[:12]
            return f"another prompt (sha256 {old_sha}…, this one {prompt_sha[:12]}…)"
    return None


def forget(ann: Path, captioner: str) -> None:
    """Remove every marker, then every table, of ``captioner``'s captions (``replace``)."""
    for folder in (layout.marker_path(ann, stage(captioner), "x").parent, ann / CAPTIONS_DIR / captioner):
        if folder.is_dir():
            for p in sorted(folder.iterdir()):
                if p.is_file() and not p.is_symlink():
                    p.unlink()


def box_items(ann: Path, shard: str) -> list[BoxItem]:
    """The kept boxes of one shard, in the order of its box table."""
    import pyarrow.parquet as pq

    t = pq.read_table(layout.boxes_path(ann, shard), columns=_BOX_COLUMNS).to_pydict()
    return [
        BoxItem(
            shard, str(t["key"][i]), int(t["box_id"][i]), (t["x1"][i], t["y1"][i], t["x2"][i], t["y2"][i])
        )
        for i in range(len(t["key"]))
        if t["kept"][i]
    ]


@dataclass
class Shard:
    name: str
    items: list[BoxItem]
    boxes_sha256: str
    items_sha256: str
    marker: dict[str, Any] | None = None  # the finished marker when the shard is skipped


def items_sha256(items: list[BoxItem]) -> str:
    return hashlib.sha256("\n".join(it.item for it in items).encode("utf-8")).hexdigest()


def finished(ann: Path, captioner: str, shard: Shard, model: str, prompt_sha: str) -> dict[str, Any] | None:
    """The shard's marker if it is for this model, prompt, box table and boxes, with no failed row
    and its table intact."""
    from fairsets.pipeline.tasks import read_marker

    marker = read_marker(layout.marker_path(ann, stage(captioner), shard.name))
    if not isinstance(marker, dict):
        return None
    wanted = {
        "model": model,
        "prompt_sha256": prompt_sha,
        "boxes_sha256": shard.boxes_sha256,
        "items_sha256": shard.items_sha256,
    }
    if any(marker.get(k) != v for k, v in wanted.items()) or (marker.get("stats") or {}).get("failed", 1):
        return None
    table = captions_path(ann, captioner, shard.name)
    recorded = ((marker.get("files") or {}).get("captions") or {}).get("sha256")
    return marker if table.is_file() and recorded == sha256_file(table) else None
