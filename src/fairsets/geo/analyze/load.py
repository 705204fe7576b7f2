"""Reading and validating a geo-profiled dataset (the ``PROFILED`` input of the analyses).

The same rules for every format (Parquet, CSV/TSV, JSONL, a folder of them, a DataFrame):

* **country**: ISO codes in capitals first (``NO`` is Norway, ``NA`` Namibia), then "no country"
  answers (``No``, ``none``, ``N/A``, empty: the row is *underspecified*), then names, aliases
  and codes in any case (:mod:`fairsets.geo.countries`). A value that is none of these, or a
  lower-case ``no``/``na`` in a column that writes its countries as lower-case codes (Norway or
  no country?), is an error that names the value and its rows; no row is dropped silently.
* **caption**: :data:`EMPTY_CAPTION_RULE`. A CSV reads an empty cell as ``""`` and Parquet or
  JSONL as null; both become ``None`` here, so the same data gives the same numbers whatever the
  format. :attr:`Profile.n_caption_empty` counts them.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fairsets.core.textfile import decode_text

from ..countries import ambiguous_none_answers, countries, is_none_answer, iso_code, normalize_country

__all__ = ["EMPTY_CAPTION_RULE", "Profile", "load_profile"]

#: How rows without caption text are treated (the report states it).
EMPTY_CAPTION_RULE = (
    "a caption that is missing, empty or only whitespace carries no text: it is left out of caption "
    "diversity (it is not embedded), but its row still counts for the shares and every other "
    "analysis; the same in every input format"
)

_IMAGE_COLUMNS = ("image", "image_path")
_TRUE = frozenset({"true", "1", "yes", "y", "t"})
_FALSE = frozenset({"false", "0", "no", "n", "f"})


@dataclass
class Profile:
    """A geo-profiled dataset, validated.

    Attributes:
        rows: one row per kept sample: ``country`` (ISO3 or ``None``), ``caption`` (if present),
            ``entity`` (if there is an entity column); the index is the row's position in the
            input (files of a folder are concatenated in name order).
        path: the input file or folder (``None`` for an in-memory frame).
        n_input: rows in the input.
        n_entity_absent: rows excluded because ``entity_present`` is False.
        n_entity_unknown: rows kept although ``entity_present`` is null (the entity filter could
            not read their image).
        entity_column: the input's entity column, or ``None``.
        image_column: ``image``/``image_path`` if the input has one.
        n_caption_empty: kept rows whose caption is missing, empty or whitespace-only (``None``
            in ``rows``; :data:`EMPTY_CAPTION_RULE`); 0 without a caption column.
    """

    rows: pd.DataFrame
    path: Path | None
    n_input: int
    n_entity_absent: int
    n_entity_unknown: int
    entity_column: str | None
    image_column: str | None
    n_caption_empty: int = 0
    _frame_images: pd.Series | None = None

    @property
    def entities(self) -> list[str]:
        """The entities, sorted (empty without an entity column)."""
        return sorted(self.rows["entity"].unique()) if "entity" in self.rows else []

    def images(self, index: Sequence[int]) -> list[Any]:
        """The image cells (bytes, ``{"bytes": …}`` or a path) of the input rows ``index``.

        Relative paths are resolved against the folder of the input file (or the input folder;
        the working directory for a DataFrame).
        """
        if self.image_column is None:
            raise ValueError("the profile has no image or image_path column")
        idx = list(index)
        if self._frame_images is not None:
            cells = self._frame_images.loc[idx].tolist()
        else:
            assert self.path is not None
            files = _input_files(self.path)
            if all(_is_parquet(f) for f in files):
                import pyarrow as pa
                import pyarrow.parquet as pq

                col = pa.concat_arrays(
                    [
                        chunk
                        for f in files
                        for chunk in pq.read_table(f, columns=[self.image_column]).column(0).chunks
                    ]
                )
                cells = col.take(np.asarray(idx, dtype=np.int64)).to_pylist() if idx else []
            else:
                frame = pd.concat([_read_file(f)[0][[self.image_column]] for f in files], ignore_index=True)
                cells = frame[self.image_column].iloc[idx].tolist()
        base = (
            (self.path if self.path.is_dir() else self.path.parent) if self.path is not None else Path.cwd()
        )
        return [
            base / c if isinstance(c, str) and c.strip() and not Path(c).is_absolute() else c for c in cells
        ]


_FORMATS = (".parquet", ".pq", ".csv", ".tsv", ".jsonl")


def _is_parquet(path: Path) -> bool:
    return path.suffix.lower() in (".parquet", ".pq")


def _input_files(path: Path) -> list[Path]:
    """The input file, or the Parquet/CSV/JSONL files of an input folder (name order)."""
    if path.is_dir():
        files = sorted(
            f
            for f in path.iterdir()
            if f.is_file() and f.suffix.lower() in _FORMATS and not f.name.startswith(".")
        )
        if not files:
            raise ValueError(f"{path} holds no .parquet, .csv, .tsv or .jsonl file")
        return files
    if not path.is_file():
        raise FileNotFoundError(f"PROFILED not found: {path}")
    if path.suffix.lower() not in _FORMATS:
        raise ValueError(
            f"PROFILED must be a .parquet, .csv, .tsv or .jsonl file (or a folder), got {path.name}"
        )
    return [path]


def _read_file(path: Path, skip: Sequence[str] = ()) -> tuple[pd.DataFrame, list[str]]:
    """One input file (without the ``skip`` columns) and all its column names."""
    if _is_parquet(path):
        import pyarrow.parquet as pq

        try:
            names = list(pq.read_schema(path).names)
        except Exception as e:  # pyarrow raises several types for a file that is not Parquet
            raise ValueError(f"{path} is not a readable Parquet file: {e}") from None
        return pq.read_table(path, columns=[n for n in names if n not in skip]).to_pandas(), names
    try:
        if path.suffix.lower() == ".jsonl":
            frame = pd.read_json(path, lines=True, dtype=False)
        else:
            sep = "\t" if path.suffix.lower() == ".tsv" else ","
            with warnings.catch_warnings():
                # Rows with more fields than the header (unquoted delimiters) would silently make
                # the first column an index and shift the others: refuse them.
                warnings.simplefilter("error", pd.errors.ParserWarning)
                frame = pd.read_csv(path, dtype=str, keep_default_na=False, sep=sep, index_col=False)
    except pd.errors.ParserWarning:
        raise ValueError(
            f"{path}: its rows have more fields than the header; quote values that contain {sep!r}"
        ) from None
    except UnicodeDecodeError as e:
        decode_text(path.read_bytes(), path)  # TextFileError (a ValueError): the line and byte offset
        raise ValueError(f"{path} is not a readable {path.suffix[1:].upper()} file: {e}") from None
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise ValueError(f"{path} is not a readable {path.suffix[1:].upper()} file: {e}") from None
    names = [str(c) for c in frame.columns]
    return frame.drop(columns=[c for c in names if c in skip]), names


def _read_input(path: Path) -> tuple[pd.DataFrame, list[str], list[tuple[str, int]]]:
    """The input (without its image column, read lazily later), its column names (the union
    over the files of a folder, in order of appearance; a file's missing columns are null) and
    each file's name and row count, in order."""
    frames: list[pd.DataFrame] = []
    names: dict[str, None] = {}
    files: list[tuple[str, int]] = []
    for f in _input_files(path):
        frame, cols = _read_file(f, skip=_IMAGE_COLUMNS)
        names.update(dict.fromkeys(cols))
        frames.append(frame.reset_index(drop=True))
        files.append((f.name, len(frame)))
    return (pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]), list(names), files


def _row_namer(files: list[tuple[str, int]] | None, index: pd.Index | None) -> Callable[[int], str]:
    """Position → how an error names the row: ``row 3`` (data rows counted from 1 in each file,
    a header not counted; prefixed with the file's name for a folder) or, for a DataFrame,
    ``index 'label'``."""
    if files is None:
        labels = index.tolist() if index is not None else []
        return lambda i: f"index {labels[i]!r}" if i < len(labels) else f"index {i}"
    starts = np.cumsum([0] + [n for _, n in files])

    def name(i: int) -> str:
        k = int(np.searchsorted(starts, i, side="right")) - 1
        k = min(max(k, 0), len(files) - 1)
        where = f"{files[k][0]} " if len(files) > 1 else ""
        return f"{where}row {i - int(starts[k]) + 1}"

    return name


def _rows_text(positions: list[int], name: Callable[[int], str], limit: int = 5) -> str:
    shown = ", ".join(name(i) for i in positions[:limit])
    return shown + (f" and {len(positions) - limit} more" if len(positions) > limit else "")


def _caption_column(values: pd.Series) -> tuple[pd.Series, np.ndarray]:
    """Captions with missing, empty and whitespace-only ones as ``None`` (:data:`EMPTY_CAPTION_RULE`),
    and a mask of those."""
    out: list[Any] = []
    empty = np.zeros(len(values), dtype=bool)
    for i, v in enumerate(values.tolist()):
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            text = None
        else:
            text = v if isinstance(v, str) else str(v)
            if not text.strip():
                text = None
        empty[i] = text is None
        out.append(text)
    return pd.Series(out, index=values.index, dtype=object), empty


def _present_flags(values: pd.Series) -> tuple[np.ndarray, int]:
    """``entity_present`` as booleans (null = kept) and the number of nulls; ``ValueError`` on
    anything that is not a boolean."""
    out = np.ones(len(values), dtype=bool)
    bad: list[str] = []
    unknown = 0
    for i, v in enumerate(values.tolist()):
        if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
            unknown += 1
            continue
        if isinstance(v, (bool, np.bool_)):
            out[i] = bool(v)
            continue
        if isinstance(v, (int, np.integer)) and v in (0, 1):
            out[i] = bool(v)
            continue
        t = str(v).strip().lower()
        if t == "":
            unknown += 1
            continue
        if t in _TRUE:
            continue
        if t in _FALSE:
            out[i] = False
            continue
        if repr(v) not in bad:
            bad.append(repr(v))
    if bad:
        raise ValueError(f"column 'entity_present' must be boolean; got {', '.join(bad[:8])}")
    return out, unknown


def _first_row(i: int) -> str:
    return f"row {i + 1}"


def _iso3_column(values: pd.Series, name: Callable[[int], str] = _first_row) -> list[str | None]:
    """ISO3 codes (``None`` = underspecified); ``ValueError`` naming the values that are not
    countries and the ambiguous ``no``/``na``, with their rows (``name``: position → row name)."""
    table = countries()
    mapping: dict[Any, str | None] = {}
    unknown: dict[str, list[int]] = {}
    keys: list[str | None] = []
    out: list[str | None] = []
    for i, v in enumerate(values.tolist()):
        key = None if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA else str(v).strip()
        if key not in mapping:
            if key is None:
                mapping[key] = None
            elif (code := iso_code(key)) is not None:  # capitals first: NO is Norway, NA Namibia
                mapping[key] = code
            elif is_none_answer(key):
                mapping[key] = None
            elif key.upper() in table:
                mapping[key] = key.upper()
            else:
                mapping[key] = normalize_country(key)
                if mapping[key] is None:
                    unknown[key] = []
        if key in unknown:
            unknown[key].append(i)
        keys.append(key)
        out.append(mapping[key])
    distinct = list(mapping)
    clashing = {distinct[j] for j in ambiguous_none_answers(distinct)}
    if clashing:
        rows = [i for i, k in enumerate(keys) if k in clashing]
        raise ValueError(
            f"column 'country': {', '.join(map(repr, sorted(map(str, clashing))))} is ambiguous in a "
            f"column of lower-case country codes (Norway/Namibia or no country?) at "
            f"{_rows_text(rows, name)}: write NO/NA for the country or 'none' for no country"
        )
    if unknown:
        shown = "; ".join(
            f"{k!r} ({len(rows)} row{'s' if len(rows) != 1 else ''}) at {_rows_text(rows, name, 3)}"
            for k, rows in list(unknown.items())[:10]
        )
        more = f"; and {len(unknown) - 10} more" if len(unknown) > 10 else ""
        raise ValueError(
            f"column 'country': {len(unknown)} value(s) are not ISO 3166 countries: {shown}{more} "
            "(use an ISO code, a country name, or empty/'none' for no country)"
        )
    return out


def load_profile(
    source: str | os.PathLike[str] | pd.DataFrame, *, entity_column: str | None = None
) -> Profile:
    """Read and validate a geo-profiled dataset.

    Args:
        source: a Parquet, CSV, TSV or JSONL file, a folder of them (e.g. the shards written by
            ``fairsets geo profile``), or a DataFrame.
        entity_column: the entity column; ``None`` uses ``entity`` when present and otherwise
            treats the data as one entity (the overall analysis only).

    Returns:
        The validated profile (rows with ``entity_present == False`` removed).

    Raises:
        FileNotFoundError: no such file.
        ValueError: unreadable input, no ``country`` column, an explicit entity column that is
            missing, empty entities, non-boolean ``entity_present``, country values that are not
            countries or are ambiguous (the message names their rows), or no row left.
    """
    if isinstance(source, pd.DataFrame):
        frame, names, path = source.reset_index(drop=True), list(source.columns), None
        row_name = _row_namer(None, source.index)
    else:
        path = Path(source)
        frame, names, files = _read_input(path)
        frame = frame.reset_index(drop=True)
        row_name = _row_namer(files, None)
    where = str(path) if path is not None else "PROFILED"
    if "country" not in names:
        raise ValueError(f"{where} has no 'country' column (columns: {', '.join(map(str, names))})")
    if entity_column is not None and entity_column not in names:
        raise ValueError(
            f"{where} has no entity column {entity_column!r} (columns: {', '.join(map(str, names))})"
        )
    if entity_column is None and "entity" in names:
        entity_column = "entity"
    n_input = len(frame)
    keep, n_unknown = (
        _present_flags(frame["entity_present"]) if "entity_present" in frame else (np.ones(n_input, bool), 0)
    )
    rows = pd.DataFrame(index=pd.RangeIndex(n_input))
    rows["country"] = pd.Series(_iso3_column(frame["country"], row_name), dtype=object)
    caption_empty = np.zeros(n_input, dtype=bool)
    if "caption" in frame:
        rows["caption"], caption_empty = _caption_column(frame["caption"])
    if entity_column is not None:
        ent = frame[entity_column].astype(object)
        empty = ent.isna() | (ent.astype(str).str.strip() == "")
        n_empty = int((empty & keep).sum())
        if n_empty:
            raise ValueError(
                f"{where}: {n_empty} row(s) have no value in the entity column {entity_column!r}"
            )
        rows["entity"] = ent.astype(str).str.strip()
    rows = rows[keep]
    if not len(rows):
        raise ValueError(
            f"{where}: no rows to analyse (input rows: {n_input}, entity_present False: {int((~keep).sum())})"
        )
    image_column = next((c for c in _IMAGE_COLUMNS if c in names), None)
    frame_images = (
        source[image_column].reset_index(drop=True)
        if isinstance(source, pd.DataFrame) and image_column
        else None
    )
    return Profile(
        rows,
        path,
        n_input,
        int((~keep).sum()),
        n_unknown,
        entity_column,
        image_column,
        n_caption_empty=int((caption_empty & keep).sum()),
        _frame_images=frame_images,
    )
