"""The on-disk layout of an annotation folder (``ANN``) and the columns of its tables.

One folder holds everything ``fairsets annotate`` writes about a set of image–text shards::

    ANN/manifest.json                   kind, inputs, detector, thresholds, versions, counts, heads,
                                        originals (per shard: resize mode and size, original hash)
    ANN/boxes/{shard}.parquet           one row per detected person box (kept or not, with why)
    ANN/images/{shard}.parquet          one row per image of the shard (ok / rejected / failed)
    ANN/attributes/{attr}/{shard}.parquet
                                        perceived_{attr}, p_{attr}_{class} and {attr}_reason
                                        per kept box
    ANN/captions/{captioner}/{shard}.parquet
                                        one person caption per kept box (annotate caption)
    ANN/.fairsets/                      the working folder (never published)
        markers/{stage}/{shard}.json    a task's completion marker, written last
        embeddings/                     embedding caches of box crops, per encoder
        chat-cache/                     every chat model answer (vote, caption, compare)
        workers.lock                    held by running tasks (pipeline.executors.task_lock)

``{shard}`` is the shard's name (:attr:`fairsets.annotate.shards.ShardRef.name`): a safe file
stem, unique within one ``ANN``. Every file is written atomically; a task writes its marker last,
so a shard is done exactly when its marker exists and names the files it wrote.

Pixel coordinates are those of the image as decoded by :func:`fairsets.annotate.images.decode`
(EXIF orientation applied, as viewers show it), in pixels of the image as stored in the shard,
``x2``/``y2`` exclusive; a shard downloaded with resizing stores a resized image, and
:func:`fairsets.annotate.publish.originals.to_original` maps a box back to its original.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa

from fairsets.core.atomic import atomic_write_text

__all__ = [
    "ATTRIBUTES_DIR",
    "BOXES_DIR",
    "BOX_SCHEMA",
    "IMAGES_DIR",
    "IMAGE_SCHEMA",
    "IMAGE_STATUSES",
    "KIND",
    "MANIFEST",
    "WORKDIR",
    "AnnotationError",
    "attribute_path",
    "attribute_schema",
    "box_shards",
    "boxes_path",
    "check_attribute",
    "check_shard_name",
    "images_path",
    "marker_path",
    "read_manifest",
    "write_manifest",
]

#: ``manifest.json``'s ``kind``: what tells an annotation folder from a built dataset.
KIND = "fairsets.person_annotations"
MANIFEST = "manifest.json"
BOXES_DIR = "boxes"
IMAGES_DIR = "images"
ATTRIBUTES_DIR = "attributes"
WORKDIR = ".fairsets"

#: Image statuses: ``ok`` (decoded and detected), ``rejected`` (the input is refused: undecodable,
#: a decompression bomb, truncated, too large, a non-file tar member; a re-run gives the same),
#: ``failed`` (could not be read this time, e.g. an I/O error; a re-run may succeed).
IMAGE_STATUSES = ("ok", "rejected", "failed")

BOX_SCHEMA = pa.schema(
    [
        pa.field("shard", pa.string()),
        pa.field("key", pa.string()),
        pa.field("box_id", pa.int32()),  # 0, 1, … per image, by descending confidence
        pa.field("x1", pa.float32()),
        pa.field("y1", pa.float32()),
        pa.field("x2", pa.float32()),
        pa.field("y2", pa.float32()),
        pa.field("conf", pa.float32()),
        pa.field("class_name", pa.string()),  # the detector's name of the (person) class
        pa.field("width", pa.float32()),
        pa.field("height", pa.float32()),
        pa.field("area_frac", pa.float32()),  # box area / image area
        pa.field("image_w", pa.int32()),
        pa.field("image_h", pa.int32()),
        pa.field("kept", pa.bool_()),
        pa.field("drop_reason", pa.string()),  # e.g. "min side 22 px < 30"; null when kept
    ]
)

IMAGE_SCHEMA = pa.schema(
    [
        pa.field("shard", pa.string()),
        pa.field("key", pa.string()),
        pa.field("caption", pa.string()),
        pa.field("url", pa.string()),
        pa.field("sha256", pa.string()),  # of the image bytes as stored in the shard
        pa.field("image_w", pa.int32()),
        pa.field("image_h", pa.int32()),
        pa.field("n_boxes", pa.int32()),
        pa.field("n_kept", pa.int32()),
        pa.field("status", pa.string()),  # IMAGE_STATUSES
        pa.field("reason", pa.string()),  # why rejected / failed; null when ok
        # the original the shard's downloader fetched (annotate/shards/origin.py), null where not
        # recorded: its size as img2dataset decoded it (no EXIF orientation) and the sha256 of the
        # bytes the URL served; the resize that made the stored image from it (the shard's
        # download record: no / keep_ratio / center_crop, and the target size; null: unknown)
        pa.field("original_width", pa.int32()),
        pa.field("original_height", pa.int32()),
        pa.field("original_sha256", pa.string()),
        pa.field("resize_mode", pa.string()),
        pa.field("resize_size", pa.int32()),
    ]
)

#: Person captions, one folder per captioner (``annotate caption``).
CAPTIONS_DIR = "captions"

CAPTION_SCHEMA = pa.schema(
    [
        pa.field("shard", pa.string()),
        pa.field("key", pa.string()),
        pa.field("box_id", pa.int32()),
        pa.field("caption", pa.string()),
        pa.field("model", pa.string()),
        pa.field("annotator", pa.string()),
        pa.field("prompt_sha256", pa.string()),
        pa.field("status", pa.string()),  # ok | refused | failed | rejected
        pa.field("reason", pa.string()),
        pa.field("finish_reason", pa.string()),
        pa.field("prompt_tokens", pa.int64()),
        pa.field("completion_tokens", pa.int64()),
    ]
)

#: An annotator's name (a table of annotators.toml; a captioner's folder name).
ANNOTATOR_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_ATTRIBUTE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


class AnnotationError(ValueError):
    """An annotation folder or an argument about it is unusable; the message says how to fix it."""


def check_shard_name(name: str) -> str:
    """``name`` if it is a safe file stem (letters, digits, ``._-``; no leading dot), else raise."""
    if not _SAFE_NAME.match(name) or name.endswith(".") or ".." in name:
        raise AnnotationError(f"shard name {name!r} is not a safe file name")
    return name


def check_attribute(attr: str) -> str:
    """``attr`` (e.g. ``gender``) if it can name columns and folders, else raise."""
    if not _ATTRIBUTE.match(attr):
        raise AnnotationError(
            f"attribute {attr!r}: use lower-case letters, digits and _ (starting with a letter), e.g. gender"
        )
    return attr


def boxes_path(ann: str | os.PathLike[str], shard: str) -> Path:
    return Path(ann) / BOXES_DIR / f"{check_shard_name(shard)}.parquet"


def images_path(ann: str | os.PathLike[str], shard: str) -> Path:
    return Path(ann) / IMAGES_DIR / f"{check_shard_name(shard)}.parquet"


def attribute_path(ann: str | os.PathLike[str], attr: str, shard: str) -> Path:
    return Path(ann) / ATTRIBUTES_DIR / check_attribute(attr) / f"{check_shard_name(shard)}.parquet"


def marker_path(ann: str | os.PathLike[str], stage: str, shard: str) -> Path:
    """The completion marker of ``stage`` (``persons``, ``classify-gender``, …) for one shard."""
    return Path(ann) / WORKDIR / "markers" / stage / f"{check_shard_name(shard)}.json"


def box_shards(
    ann: str | os.PathLike[str], manifest: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[str]]:
    """``(ready, pending)``: the manifest's input references whose ``persons`` stage finished (its
    marker and box table exist), and the names of the others, in the manifest's order."""
    ready, pending = [], []
    for ref in manifest.get("inputs") or []:
        name = check_shard_name(ref["name"])
        if marker_path(ann, "persons", name).exists() and boxes_path(ann, name).is_file():
            ready.append(ref)
        else:
            pending.append(name)
    return ready, pending


def check_annotator_name(name: str, what: str = "annotator") -> str:
    """``name`` if it is a safe annotator name (letters, digits, ``_ - .``, at most 64, no ``..``)."""
    if not isinstance(name, str) or not ANNOTATOR_NAME.match(name) or ".." in name:
        raise AnnotationError(
            f"{what} name {str(name)[:40]!r} must be letters, digits, '_', '-' or '.' (at most 64)"
        )
    return name


def captions_path(ann: str | os.PathLike[str], captioner: str, shard: str) -> Path:
    """``ANN/captions/{captioner}/{shard}.parquet``."""
    folder = Path(ann) / CAPTIONS_DIR / check_annotator_name(captioner, "captioner")
    return folder / f"{check_shard_name(shard)}.parquet"


def attribute_schema(attr: str, classes: list[str]) -> pa.Schema:
    """Columns of ``attributes/{attr}/{shard}.parquet``: the box key, the label, one probability per
    class, and ``{attr}_reason``: why a kept box has no label (its image no longer decodes, e.g.),
    null when labelled."""
    check_attribute(attr)
    return pa.schema(
        [
            pa.field("shard", pa.string()),
            pa.field("key", pa.string()),
            pa.field("box_id", pa.int32()),
            pa.field(f"perceived_{attr}", pa.string()),
            *(pa.field(f"p_{attr}_{c}", pa.float32()) for c in classes),
            pa.field(f"{attr}_reason", pa.string()),
        ]
    )


def read_manifest(ann: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of an annotation folder.

    Raises:
        AnnotationError: no manifest, unreadable JSON, or the folder is not an annotation folder.
    """
    path = Path(ann) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise AnnotationError(
            f"{ann}: not an annotation folder (no {MANIFEST}); "
            f"run fairsets annotate persons SHARDS --out {ann}"
        ) from None
    except (OSError, ValueError) as exc:
        raise AnnotationError(f"{path}: unreadable ({exc}); run fairsets annotate persons again") from None
    if not isinstance(manifest, dict) or manifest.get("kind") != KIND:
        raise AnnotationError(f"{ann}: {MANIFEST} is not a person-annotation manifest (kind {KIND!r})")
    return manifest


def write_manifest(ann: str | os.PathLike[str], manifest: dict[str, Any]) -> Path:
    """Write ``manifest`` (its ``kind`` set to :data:`KIND`) atomically; keys sorted, stable bytes."""
    path = Path(ann) / MANIFEST
    atomic_write_text(path, json.dumps({**manifest, "kind": KIND}, sort_keys=True, indent=1) + "\n")
    return path
