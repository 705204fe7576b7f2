"""Reading the text files users hand to fairsets (caption lists, CSVs, JSONL) with errors that name
the file, the line and the byte offset — never a bare ``'utf-8' codec can't decode byte …``."""

from __future__ import annotations

from pathlib import Path

__all__ = ["TextFileError", "decode_text", "read_text"]


class TextFileError(ValueError):
    """A text file that is not what it should be (not UTF-8, bad JSON on a line, not a file)."""


def decode_text(data: bytes, path: str | Path, *, bom: bool = True) -> str:
    """``data`` decoded as UTF-8 (a leading BOM dropped when ``bom``), or :class:`TextFileError`
    naming ``path``, the line and the byte offset of the first undecodable byte."""
    try:
        return data.decode("utf-8-sig" if bom else "utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TextFileError(
            f"{path}: not UTF-8 text (line {line}, byte offset {exc.start}: {exc.reason}); "
            "save it as UTF-8 (a binary file given by mistake?)"
        ) from None


def read_text(path: str | Path, *, bom: bool = True) -> str:
    """The whole file as text; :class:`TextFileError` for a folder or a file that is not UTF-8
    (``OSError`` such as a missing file is left to the caller)."""
    p = Path(path)
    if p.is_dir():
        raise TextFileError(f"{p}: is a folder, not a file")
    return decode_text(p.read_bytes(), p, bom=bom)
