"""LABELS files: which box (or image) of which shard carries which perceived-attribute label.

``fairsets annotate train`` reads them; a hand-labelled sheet and the consensus output of a
model vote are both written in this one format. A LABELS file is a CSV (header row, UTF-8; ``.tsv``:
tab-separated), a Parquet table or JSON Lines (``.jsonl``, one object per line), with the columns:

* ``shard``: the shard's name (:attr:`fairsets.annotate.shards.ShardRef.name`, e.g. ``00012``);
* ``key``: the sample key within the shard;
* ``box_id``: the box's number in ``ANN/boxes/{shard}.parquet``; empty / null = the whole image;
* ``label``: the class (``female``); surrounding spaces are ignored, case is kept;
* ``x1, y1, x2, y2`` (optional): an explicit box in decoded-image pixels (x2/y2 exclusive), all
  four or none. Needed with ``--shards`` for boxes (there are no stored boxes); with ``--ann``
  they win over the stored box.

Any other column (``votes``, ``agreement``, ``annotator``, …) is ignored. The same
``(shard, key, box_id)`` may appear twice only with the same label (one row is kept); conflicting
labels stop the run (:class:`LabelsError`), since no rule can say which is right. A row that
cannot be used (an empty key or label, a non-integer ``box_id``, a partial box) is not an error:
it is counted with its reason in :attr:`Labels.rejected`, as are labels outside ``classes``.
Labels in ``drop`` (``unclear``, ``invalid``) are left out and counted in :attr:`Labels.dropped`.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..layout import AnnotationError

__all__ = [
    "BOX_COLUMNS",
    "COLUMNS",
    "LabelRow",
    "Labels",
    "LabelsError",
    "item_id",
    "read_labels",
    "summary_lines",
]

#: Required columns.
COLUMNS = ("shard", "key", "box_id", "label")
#: Optional explicit box columns (all four or none).
BOX_COLUMNS = ("x1", "y1", "x2", "y2")
#: Rejections shown per reason in a report (the counts are always complete).
_EXAMPLES = 3
#: A single CSV/JSONL line longer than this is refused (a LABELS row is a few hundred bytes).
_MAX_LINE = 1_000_000


class LabelsError(AnnotationError):
    """The LABELS file as a whole cannot be used; the message says how to fix it."""


def item_id(shard: str, key: str, box_id: int | None) -> str:
    """A labelled crop's id: ``"{shard}/{key}/{box_id}"``, or ``"{shard}/{key}/image"`` for a whole image."""
    return f"{shard}/{key}/{'image' if box_id is None else box_id}"


@dataclass(frozen=True)
class LabelRow:
    """One usable label: a box (or the whole image) of one sample, and its class."""

    shard: str
    key: str
    box_id: int | None
    label: str
    box: tuple[float, float, float, float] | None  # explicit coordinates, if the row had them
    row: int  # 1-based data row number in the file

    @property
    def item(self) -> str:
        return item_id(self.shard, self.key, self.box_id)


@dataclass
class Labels:
    """The usable rows of a LABELS file and what was left out, with reasons."""

    path: str
    rows: list[LabelRow]
    rejected: list[dict[str, Any]] = field(default_factory=list)  # {"row", "item", "reason"}
    dropped: dict[str, int] = field(default_factory=dict)  # label in --drop-labels → rows
    duplicates: int = 0  # repeated rows with the same label (one kept)

    @property
    def counts(self) -> dict[str, int]:
        """Rows per label."""
        return dict(sorted(Counter(r.label for r in self.rows).items()))

    def reasons(self) -> dict[str, int]:
        """Rejected rows per reason (the reason's text up to its first ``:``)."""
        return dict(Counter(r["reason"].split(":")[0] for r in self.rejected).most_common())


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or str(value).strip() == ""


def _text(value: Any) -> str:
    return "" if _blank(value) else str(value).strip()


def _box_id(value: Any) -> int | None:
    if _blank(value):
        return None
    if isinstance(value, bool):
        raise ValueError(value)
    number = float(value)
    if not number.is_integer() or number < 0 or number > 2**31 - 1:
        raise ValueError(value)
    return int(number)


def _box(raw: dict[str, Any]) -> tuple[float, float, float, float] | None:
    values = [raw.get(c) for c in BOX_COLUMNS]
    if all(_blank(v) for v in values):
        return None
    if any(_blank(v) for v in values):
        raise ValueError("give all four of x1, y1, x2, y2 or none")
    x1, y1, x2, y2 = (float(v) for v in values)  # type: ignore[arg-type]
    if not all(math.isfinite(v) for v in (x1, y1, x2, y2)):
        raise ValueError("box coordinates must be finite numbers")
    if x2 <= x1 or y2 <= y1:
        raise ValueError(f"empty box ({x1:g}, {y1:g}, {x2:g}, {y2:g}): x2 must exceed x1 and y2 y1")
    return (x1, y1, x2, y2)


def _check_header(path: Path, names: Iterable[str]) -> None:
    missing = [c for c in COLUMNS if c not in set(names)]
    if missing:
        raise LabelsError(
            f"{path}: LABELS needs the columns {', '.join(COLUMNS)} (optional x1, y1, x2, y2); "
            f"missing {', '.join(missing)}"
        )


def _csv_rows(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh, delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
        _check_header(path, reader.fieldnames or [])
        yield from reader


def _jsonl_rows(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        first = True
        for n, line in enumerate(iter(lambda: fh.readline(_MAX_LINE + 1), ""), 1):
            if len(line) > _MAX_LINE:
                raise LabelsError(
                    f"{path}: line {n} is longer than {_MAX_LINE} characters; is it JSON Lines?"
                )
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise LabelsError(
                    f"{path}: line {n} is not JSON ({e.msg}); write one object per line"
                ) from None
            if not isinstance(obj, dict):
                raise LabelsError(f"{path}: line {n} is a {type(obj).__name__}, not an object")
            if first:
                _check_header(path, obj)
                first = False
            yield obj


def _parquet_rows(path: Path) -> Iterator[dict[str, Any]]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises ArrowInvalid/OSError for a damaged file
        raise LabelsError(f"{path}: not a readable Parquet file ({e})") from None
    _check_header(path, pf.schema_arrow.names)
    wanted = [c for c in (*COLUMNS, *BOX_COLUMNS) if c in pf.schema_arrow.names]
    for batch in pf.iter_batches(columns=wanted, batch_size=65_536):
        yield from batch.to_pylist()


def _raw_rows(path: Path) -> Iterator[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        return _parquet_rows(path)
    if suffix in (".jsonl", ".ndjson"):
        return _jsonl_rows(path)
    if suffix in (".csv", ".tsv", ".txt"):
        return _csv_rows(path)
    raise LabelsError(f"{path}: unknown LABELS format {suffix!r}; use .csv, .parquet or .jsonl")


def read_labels(
    path: str | os.PathLike[str],
    *,
    classes: Sequence[str] | None = None,
    drop: Sequence[str] = (),
) -> Labels:
    """Read a LABELS file (see the module docstring).

    Args:
        path: A ``.csv``, ``.parquet`` or ``.jsonl`` file.
        classes: The label set; rows with another label are rejected (default: every label found).
        drop: Labels left out on purpose (``unclear``, ``invalid``); counted, not rejected.

    Returns:
        The usable rows in file order, and the rejected / dropped / duplicate counts.

    Raises:
        LabelsError: Missing file or columns, an unreadable file, or one box labelled twice differently.
    """
    p = Path(path)
    if not p.is_file():
        raise LabelsError(
            f"{p}: no such LABELS file; give a CSV, Parquet or JSONL file with {', '.join(COLUMNS)}"
        )
    allowed = set(classes) if classes else None
    dropped: Counter[str] = Counter()
    rejected: list[dict[str, Any]] = []
    seen: dict[str, LabelRow] = {}
    duplicates = 0
    try:
        for n, raw in enumerate(_raw_rows(p), 1):
            shard, key, label = _text(raw.get("shard")), _text(raw.get("key")), _text(raw.get("label"))
            where = f"{shard or '?'}/{key or '?'}/{_text(raw.get('box_id')) or 'image'}"

            def reject(reason: str, n: int = n, where: str = where) -> None:
                rejected.append({"row": n, "item": where, "reason": reason})

            if not shard or not key:
                reject("empty shard or key")
                continue
            if not label:
                reject("empty label")
                continue
            try:
                box_id = _box_id(raw.get("box_id"))
            except (TypeError, ValueError):
                reject(
                    f"box_id: {_text(raw.get('box_id'))!r} is not a box number (an integer >= 0, or empty)"
                )
                continue
            try:
                box = _box(raw)
            except (TypeError, ValueError) as e:
                reject(f"box: {e}")
                continue
            if label in drop:
                dropped[label] += 1
                continue
            if allowed is not None and label not in allowed:
                reject(f"label not in classes: {label!r}")
                continue
            row = LabelRow(shard=shard, key=key, box_id=box_id, label=label, box=box, row=n)
            if row.item in seen:
                first = seen[row.item]
                if first.label != label:
                    raise LabelsError(
                        f"{p}: {row.item} is labelled {first.label!r} (row {first.row}) and {label!r} "
                        f"(row {n}); keep one label per box"
                    )
                duplicates += 1
                continue
            seen[row.item] = row
    except (UnicodeDecodeError, csv.Error) as e:
        raise LabelsError(
            f"{p}: not a readable LABELS file ({e}); save it as UTF-8 CSV, Parquet or JSONL"
        ) from None
    return Labels(
        path=str(p), rows=list(seen.values()), rejected=rejected, dropped=dict(dropped), duplicates=duplicates
    )


def summary_lines(labels: Labels) -> list[str]:
    """Readable lines about what a LABELS file held and what was left out (with a few examples)."""
    lines = [f"{len(labels.rows)} labelled crop(s) in {labels.path}: {labels.counts}"]
    if labels.dropped:
        lines.append(f"dropped on purpose: {labels.dropped}")
    if labels.duplicates:
        lines.append(f"{labels.duplicates} repeated row(s) with the same label (one kept)")
    if labels.rejected:
        lines.append(f"{len(labels.rejected)} unusable row(s):")
        shown: Counter[str] = Counter()
        for r in labels.rejected:
            kind = r["reason"].split(":")[0]
            shown[kind] += 1
            if shown[kind] <= _EXAMPLES:
                lines.append(f"  row {r['row']} {r['item']}: {r['reason']}")
    return lines
