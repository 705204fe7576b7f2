"""Annotation CSVs: which images show the entity, with their countries (:func:`load_annotations`)."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fairsets.core.textfile import read_text
from fairsets.geo.countries import fold, is_none_answer, normalize_country

_TRUE = frozenset({"1", "1.0", "true", "t", "yes", "y"})
_FALSE = frozenset({"0", "0.0", "false", "f", "no", "n"})


@dataclass(frozen=True)
class Annotation:
    """One usable row of an annotation CSV.

    Attributes:
        line: The row's line number in the CSV (the header is line 1).
        image: Absolute path of the image.
        present: Whether annotators saw the entity.
        country: ISO 3166-1 alpha-3 code, or None when the row names no country.
        entity: The row's ``entity`` cell (None without that column or when blank).
    """

    line: int
    image: Path
    present: bool
    country: str | None = None
    entity: str | None = None


@dataclass
class Annotations:
    """A parsed annotation CSV (:func:`load_annotations`).

    Attributes:
        source: The CSV.
        entity: The entity the rows are about (the argument, or the CSV's single ``entity`` value).
        rows: Usable rows, in file order.
        rejected: Rows left out, each ``{"line", "image", "reason"}``.
        has_country: Whether the CSV has a ``country`` column.
        other_entity: Rows about another entity (multi-entity CSVs), not used and not rejected.
    """

    source: Path
    entity: str | None
    rows: list[Annotation]
    rejected: list[dict[str, Any]] = field(default_factory=list)
    has_country: bool = False
    other_entity: int = 0


def parse_present(value: Any) -> bool:
    """Read an annotation label: ``1/0``, ``true/false``, ``yes/no`` (any case; ``t/f``, ``y/n``).

    Raises:
        ValueError: Anything else (an empty cell included).
    """
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if value is not None else ""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"present must be 1/0, true/false or yes/no, got {value!r}")


def _resolve(path: str, base: Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else base / p


def load_annotations(csv_path: str | os.PathLike[str], *, entity: str | None = None) -> Annotations:
    """Read an annotation CSV: ``image``, ``present`` and optional ``country`` and ``entity`` columns.

    ``image`` is a path, relative to the CSV's folder or absolute. ``present`` is 1/0, true/false
    or yes/no. ``country`` is an ISO code or a name (normalised to ISO alpha-3; blank or "none"
    means no country). With an ``entity`` column holding several entities, ``entity`` picks the
    rows (blank cells count as the file's entity). Column names are case-insensitive.

    Args:
        csv_path: The CSV (UTF-8, a BOM is fine).
        entity: The entity; default: the CSV's single ``entity`` value, or None.

    Returns:
        The rows; rows whose image file is missing are rejected with a reason, not an error.

    Raises:
        FileNotFoundError: The CSV does not exist.
        ValueError: A missing column, a bad ``present`` or ``country`` value (the message names the
            line), no rows, or an ambiguous entity.
    """
    path = Path(csv_path)
    if not path.is_file():
        raise FileNotFoundError(f"annotation CSV not found: {path}")
    base = path.resolve().parent
    with io.StringIO(read_text(path), newline="") as f:  # TextFileError names the file and line
        reader = csv.reader(f)
        try:
            header = [h.strip().lower() for h in next(reader)]
        except StopIteration:
            raise ValueError(f"{path}: empty file (expected columns image, present)") from None
        missing = [c for c in ("image", "present") if c not in header]
        if missing:
            raise ValueError(
                f"{path}: missing column(s) {', '.join(missing)} (found: {', '.join(h for h in header if h)})"
            )
        known = ("image", "present", "country", "entity")
        col = {name: header.index(name) for name in known if name in header}
        raw: list[tuple[int, dict[str, str]]] = []
        for cells in reader:
            if not any(c.strip() for c in cells):
                continue
            if any(c.strip() for c in cells[len(header) :]):  # an unquoted comma shifts the columns
                raise ValueError(
                    f"{path}: line {reader.line_num}: {len(cells)} fields where the header has "
                    f"{len(header)}; quote values that contain commas"
                )
            cells = cells + [""] * (len(header) - len(cells))
            raw.append((reader.line_num, {name: cells[i].strip() for name, i in col.items()}))
    if not raw:
        raise ValueError(f"{path}: no data rows")

    chosen = entity.strip() if entity is not None and entity.strip() else None
    if "entity" in col:
        values = {fold(r["entity"]): r["entity"] for _, r in raw if r["entity"]}
        if chosen is None and len(values) > 1:
            raise ValueError(
                f"{path}: the CSV holds several entities ({', '.join(sorted(values.values()))}); choose one"
            )
        if chosen is None and values:
            chosen = next(iter(values.values()))
        elif chosen is not None and values and fold(chosen) not in values:
            raise ValueError(
                f"{path}: no row is about entity {chosen!r} "
                f"(the CSV has: {', '.join(sorted(values.values()))})"
            )

    out = Annotations(source=path, entity=chosen, rows=[], has_country="country" in col)
    errors: list[str] = []
    for line, r in raw:
        if chosen is not None and r.get("entity") and fold(r["entity"]) != fold(chosen):
            out.other_entity += 1
            continue
        where = f"{path}: line {line} (image {r['image']!r})"
        try:
            present = parse_present(r["present"])
        except ValueError as e:
            errors.append(f"{where}: {e}")
            continue
        iso3 = None
        if "country" in col and not is_none_answer(r["country"]):
            iso3 = normalize_country(r["country"])
            if iso3 is None:
                errors.append(f"{where}: unknown country {r['country']!r} (use an ISO code or a name)")
                continue
        if not r["image"]:
            out.rejected.append({"line": line, "image": "", "reason": "no image path"})
            continue
        image = _resolve(r["image"], base)
        if not image.is_file():
            reason = "image is not a file" if image.exists() else "image not found"
            out.rejected.append({"line": line, "image": r["image"], "reason": f"{reason}: {image}"})
            continue
        out.rows.append(Annotation(line, image, present, iso3, r.get("entity") or None))
    if errors:
        more = f" (and {len(errors) - 1} more bad row(s))" if len(errors) > 1 else ""
        raise ValueError(errors[0] + more)
    if not out.rows:
        raise ValueError(
            f"{path}: no usable rows ({len(out.rejected)} rejected, e.g. {_first(out.rejected)})"
        )
    return out


def _first(rejected: Sequence[dict[str, Any]]) -> str:
    if not rejected:
        return "none"
    r = rejected[0]
    where = f"line {r['line']}" if "line" in r else f"row {r.get('row')}"
    return f"{where}: {r['reason']}"
