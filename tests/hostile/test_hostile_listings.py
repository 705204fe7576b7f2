"""Listings that are hostile as a whole: each is built through the CLI.

A listing the build cannot trust is refused before any work with one line that names the problem
(and the line or column), exit code 2 and no traceback; a listing that is only unusual (a BOM,
CRLF line ends, quoted newlines) builds.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import jpeg, portraits

HEADER = ["path", "state", "gender", "identity", "license"]

RECIPE = """
name = "listing"
seed = 3
groups = ["state", "gender"]
quota = 1
variants = ["imbalanced"]

[source]
type = "local"
path = "{listing}"

[[steps]]
name = "license"

[[steps]]
name = "decode"

[executor]
workers = 0
"""


def _rows(n: int = 2) -> list[list[str]]:
    return [[f"img{i}.jpg", "Goa", "female", f"p{i}", "CC0-1.0"] for i in range(n)]


def _csv(header: list[str], rows: list[list[str]], *, bom: bool = False, eol: str = "\n") -> bytes:
    buf = io.StringIO()
    wr = csv.writer(buf, lineterminator=eol)
    wr.writerow(header)
    wr.writerows(rows)
    return (("\ufeff" if bom else "") + buf.getvalue()).encode()


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def _write_fifo(path: Path) -> None:
    os.mkfifo(path)


# name → (file name, content or writer, expected: "ok" or a substring the one-line error contains)
CASES: dict[str, tuple[str, bytes | Callable[[Path], None], str]] = {
    "bom": ("l.csv", _csv(HEADER, _rows(), bom=True), "ok"),
    "crlf": ("l.csv", _csv(HEADER, _rows(), eol="\r\n"), "ok"),
    "quoted-newline": ("l.csv", _csv([*HEADER, "note"], [[*r, "a\nb"] for r in _rows()]), "ok"),
    "extra-columns-kept": ("l.csv", _csv([*HEADER, "camera"], [[*r, "x"] for r in _rows()]), "ok"),
    "ragged-long": ("l.csv", _csv(HEADER, [*_rows(), [*_rows(10)[9], "extra"]]), "line 4"),
    "ragged-short": ("l.csv", _csv(HEADER, [*_rows(), ["img9.jpg", "Goa"]]), "line 4"),
    "column-filename": ("l.csv", _csv([*HEADER, "filename"], [[*r, "x"] for r in _rows()]), "filename"),
    "column-_rejected": ("l.csv", _csv([*HEADER, "_rejected"], [[*r, "1"] for r in _rows()]), "_rejected"),
    "column-status": ("l.csv", _csv([*HEADER, "status"], [[*r, "accepted"] for r in _rows()]), "status"),
    "column-key": ("l.csv", _csv([*HEADER, "key"], [[*r, "k"] for r in _rows()]), "key"),
    "duplicate-columns": ("l.csv", _csv([*HEADER, "state"], [[*r, "Assam"] for r in _rows()]), "state"),
    "header-only": ("l.csv", _csv(HEADER, []), "no rows"),
    "empty-file": ("l.csv", b"", "empty"),
    "blank-lines-only": ("l.csv", b"\n\n\n", "l.csv"),
    "missing-license-column": ("l.csv", _csv(HEADER[:-1], [r[:-1] for r in _rows()]), "license"),
    "binary": ("l.csv", jpeg(portraits()[0][:64, :64]), "l.csv"),
    "latin1": ("l.csv", _csv(HEADER, [["img0.jpg", "Goa", "female", "Jos\xe9", "CC0-1.0"]]).decode().encode(
        "latin-1"), "l.csv"),
    "nul-byte": ("l.csv", _csv(HEADER, _rows()).replace(b"Goa", b"G\x00a", 1), "l.csv"),
    "unbalanced-quote": ("l.csv", _csv(HEADER, _rows()) + b'"img5.jpg,Goa,female,p5,CC0-1.0\n', "l.csv"),
    "listed-twice": ("l.csv", _csv(HEADER, [*_rows(), _rows()[0]]), "img0.jpg"),
    "parquet-corrupt": ("l.parquet", b"PAR1" + b"\x00" * 100 + b"PAR1", "l.parquet"),
    "parquet-int-path": ("l.parquet", _parquet(pa.table({"path": [1, 2], "state": ["Goa"] * 2,
                         "gender": ["female"] * 2, "license": ["CC0-1.0"] * 2})), "ok"),
    "parquet-filename-column": ("l.parquet", _parquet(pa.table({"path": ["img0.jpg"], "state": ["Goa"],
                                "gender": ["female"], "license": ["CC0-1.0"], "filename": ["x"]})),
                                "filename"),
    "fifo": ("l.csv", _write_fifo, "l.csv"),
    "unknown-suffix": ("l.txt", _csv(HEADER, _rows()), "l.txt"),
}  # fmt: skip


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_listing(name: str, tmp_path: Path) -> None:
    fname, content, expected = CASES[name]
    for i in range(10):
        (tmp_path / f"img{i}.jpg").write_bytes(jpeg(portraits()[i % 2]))
    listing = tmp_path / fname
    if callable(content):
        content(listing)
    else:
        listing.write_bytes(content)
    recipe = tmp_path / "r.toml"
    recipe.write_text(RECIPE.format(listing=fname))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "fairsets.cli", "build", str(recipe), "--out", str(out), "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=100, cwd=tmp_path)
    err = proc.stderr.strip()
    assert "Traceback" not in err, err
    if expected == "ok":
        assert proc.returncode == 0, err
        assert (out / "manifest.json").is_file()
        return
    assert proc.returncode == 2, (proc.returncode, err)
    assert len(err.splitlines()) == 1, err
    assert expected.lower() in err.lower(), err
    assert not (out / "manifest.json").exists()
