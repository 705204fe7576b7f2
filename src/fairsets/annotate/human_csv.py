"""CSV files written by people (human labels, human boxes): read once, with the sha256 of their bytes.

:func:`open_human_csv` is shared by ``annotate verify`` (:mod:`fairsets.annotate.heads.verify`, human
labels) and its detection audit (:mod:`fairsets.annotate.boxes.detection_audit`, human boxes): the
same decoding, header clean-up and error messages for both.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Sequence
from pathlib import Path

from fairsets.core.textfile import TextFileError, decode_text

from .layout import AnnotationError

__all__ = ["open_human_csv"]


def open_human_csv(p: Path, required: Sequence[str], what: str, fix: str) -> tuple[csv.DictReader, str]:
    """A CSV written by people (``what``: "human labels", "human boxes"), read once: a reader over
    its rows with the header names stripped, and the sha256 of its bytes.

    Raises:
        AnnotationError: an unreadable or non-UTF-8 file, or a ``required`` column missing (the
            message ends with ``fix``).
    """
    try:
        raw = p.read_bytes()
        text = decode_text(raw, p)
    except (OSError, TextFileError) as exc:
        raise AnnotationError(f"{p}: cannot read the {what} ({exc})") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    fields = [f.strip() for f in (reader.fieldnames or [])]
    reader.fieldnames = fields
    missing = [c for c in required if c not in fields]
    if missing:
        raise AnnotationError(f"{p}: no column {', '.join(missing)}; {fix}")
    return reader, hashlib.sha256(raw).hexdigest()
