"""The train / validation / test split of ``fairsets annotate train``.

The unit of the split is an image, not a box — all boxes of one image go to the same part, so no
person seen in training is tested on — and identical images are one unit: two keys whose stored
bytes have the same sha256 (the same photo downloaded from two URLs, or listed twice) always fall
in the same part, so a copy of a test image is never trained on. Units are stratified by their
majority label and cut at the fractions after a seeded shuffle (see :func:`split_parts`).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..layout import images_path
from ..shards import read_images

if TYPE_CHECKING:
    from .embed import CropSource
    from .labels import LabelRow

__all__ = ["DEFAULT_SPLIT", "PARTS", "image_digests", "parse_split", "split_parts"]

#: Train, validation and test fractions.
DEFAULT_SPLIT = (0.7, 0.15, 0.15)
PARTS = ("train", "val", "test")

Image = tuple[str, str]  # (shard, key)


def parse_split(text: str | Sequence[float]) -> tuple[float, float, float]:
    """``"0.7,0.15,0.15"`` → fractions summing to 1 (a test part is required).

    Raises:
        ValueError: Not three non-negative numbers summing to 1 with train and test > 0.
    """
    parts = text.split(",") if isinstance(text, str) else list(text)
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        raise ValueError(f"split {text!r}: give three fractions, e.g. 0.7,0.15,0.15") from None
    if len(values) != 3 or any(not math.isfinite(v) or v < 0 for v in values):
        raise ValueError(f"split {text!r}: give three non-negative fractions, e.g. 0.7,0.15,0.15")
    if abs(sum(values) - 1.0) > 1e-6:
        raise ValueError(f"split {text!r}: the fractions sum to {sum(values):g}, not 1")
    if values[0] == 0 or values[2] == 0:
        raise ValueError(f"split {text!r}: the train and test fractions must be > 0")
    return values  # type: ignore[return-value]


def image_digests(rows: Sequence[LabelRow], source: CropSource) -> dict[Image, str]:
    """sha256 of the stored bytes of every image ``rows`` name.

    With an annotation folder, the digests ``annotate persons`` recorded in ``images/{shard}.parquet``
    (of the same bytes) are read, so no image is read again; a shard without that table (or without
    a digest for a wanted key) is read once and its images hashed. An image that cannot be read (any
    more) has no entry: it is then a unit of its own.
    """
    wanted: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        wanted[row.shard].add(row.key)
    digests: dict[Image, str] = {}
    for shard in sorted(wanted):
        recorded = _recorded_digests(source, shard, wanted[shard])
        digests.update(((shard, key), d) for key, d in recorded.items())
        wanted[shard] -= set(recorded)
        if not wanted[shard]:
            continue
        ref = source.shards.get(shard)
        if ref is None:
            continue
        try:
            data = read_images(ref, wanted[shard], max_bytes=source.max_bytes)
        except OSError:
            continue
        for key in sorted(data):
            digests[(shard, key)] = hashlib.sha256(data.pop(key)).hexdigest()
    return digests


def _recorded_digests(source: CropSource, shard: str, keys: set[str]) -> dict[str, str]:
    """``{key: sha256}`` that ``annotate persons`` recorded for ``keys`` of ``shard`` (none without
    an annotation folder or its images table)."""
    if source.ann is None:
        return {}
    path = images_path(source.ann, shard)
    if not path.is_file():
        return {}
    import pyarrow.parquet as pq

    if not {"key", "sha256"} <= set(pq.read_schema(path).names):
        return {}
    table = pq.read_table(path, columns=["key", "sha256"]).to_pydict()
    return {k: d for k, d in zip(table["key"], table["sha256"], strict=True) if k in keys and d}


def split_parts(
    rows: Sequence[LabelRow],
    fractions: Sequence[float],
    seed: int,
    digests: Mapping[Image, str] | None = None,
) -> list[str]:
    """The part (``train``, ``val``, ``test``) of each row; by image, stratified, seeded.

    Images with the same ``digests`` entry (sha256 of their bytes) form one unit, named by its
    first (shard, key) in sorted order; any other image is a unit of its own. Each unit gets the
    majority label of its rows (ties: the first in sorted order); within each label, its units are
    sorted, shuffled with ``seed`` and cut: round(n · test) to test, round(n · val) to validation,
    the rest (at least one unit) to train. Without duplicates the parts are those of the images
    alone.
    """
    digests = digests or {}
    images = sorted({(row.shard, row.key) for row in rows})
    first_of: dict[str, Image] = {}
    unit_of: dict[Image, Image] = {}
    for image in images:  # sorted: a unit is named by its first image
        digest = digests.get(image)
        unit_of[image] = image if digest is None else first_of.setdefault(digest, image)
    units: dict[Image, Counter[str]] = defaultdict(Counter)
    for row in rows:
        units[unit_of[(row.shard, row.key)]][row.label] += 1
    by_label: dict[str, list[Image]] = defaultdict(list)
    for unit, counts in units.items():
        top = max(counts.values())
        by_label[min(label for label, c in counts.items() if c == top)].append(unit)
    rng = np.random.default_rng(seed)
    part_of: dict[Image, str] = {}
    _, f_val, f_test = fractions
    for label in sorted(by_label):
        group = sorted(by_label[label])
        order = [group[i] for i in rng.permutation(len(group))]
        n = len(order)
        n_test = min(round(n * f_test), n - 1)
        n_val = min(round(n * f_val), n - 1 - n_test)
        for i, unit in enumerate(order):
            part_of[unit] = "test" if i < n_test else "val" if i < n_test + n_val else "train"
    return [part_of[unit_of[(r.shard, r.key)]] for r in rows]
