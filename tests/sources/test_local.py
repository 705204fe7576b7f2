"""Local source: listings and folders, required columns, clear errors."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fairsets.data import KEY_RE
from fairsets.sources import SourceError, SourceReadError, build_source


def make(tmp_path: Path, **params) -> object:
    return build_source("local", params, tmp_path, ["state", "gender"])


def test_csv_listing(tmp_path: Path) -> None:
    (tmp_path / "a.jpg").write_bytes(b"x")
    (tmp_path / "l.csv").write_text(
        "path,state,gender,license,identity,author,extra\na.jpg,Goa,female,CC0-1.0,p1,Ann,42\n"
    )
    rows = make(tmp_path, path="l.csv").scan()
    assert len(rows) == 1
    r = rows[0]
    assert KEY_RE.match(r["key"]) and "." not in r["key"]
    assert (r["state"], r["gender"], r["license"], r["identity"], r["author"], r["extra"]) == (
        "Goa",
        "female",
        "CC0-1.0",
        "p1",
        "Ann",
        "42",
    )
    assert r["source_url"] is None
    assert make(tmp_path, path="l.csv").read(r) == b"x"


def test_parquet_listing_with_rename_and_defaults(tmp_path: Path) -> None:
    pq.write_table(pa.table({"file": ["a.jpg"], "region": ["Goa"], "sex": ["male"]}), tmp_path / "l.parquet")
    rows = make(
        tmp_path,
        path="l.parquet",
        image_column="file",
        rename={"state": "region", "gender": "sex"},
        defaults={"license": "CC-BY-4.0"},
    ).scan()
    assert rows[0]["state"] == "Goa" and rows[0]["gender"] == "male" and rows[0]["license"] == "CC-BY-4.0"
    assert rows[0]["identity"] is None


def test_missing_required_column_is_named(tmp_path: Path) -> None:
    (tmp_path / "l.csv").write_text("path,state,license\na.jpg,Goa,CC0-1.0\n")
    with pytest.raises(SourceError, match=r"missing required column\(s\) gender"):
        make(tmp_path, path="l.csv").scan()


def test_folder_with_layout(tmp_path: Path) -> None:
    for s, g in [("Goa", "male"), ("Goa", "female"), ("Assam", "male")]:
        d = tmp_path / "imgs" / s / g
        d.mkdir(parents=True)
        (d / "1.jpg").write_bytes(b"x")
        (d / "notes.txt").write_text("not listed")
    rows = make(tmp_path, path="imgs", layout="{state}/{gender}", defaults={"license": "CC0-1.0"}).scan()
    assert sorted((r["state"], r["gender"]) for r in rows) == [
        ("Assam", "male"),
        ("Goa", "female"),
        ("Goa", "male"),
    ]
    assert len({r["key"] for r in rows}) == 3


def test_unreadable_folder_and_missing_path(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such file or folder"):
        make(tmp_path, path="nope").scan()
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="no images"):
        make(tmp_path, path="empty", defaults={"license": "CC0-1.0"}).scan()


def test_unknown_param_is_named(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="unknown key 'pth'"):
        make(tmp_path, pth="x")


def test_missing_file_is_a_read_error(tmp_path: Path) -> None:
    (tmp_path / "l.csv").write_text("path,state,gender,license\ngone.jpg,Goa,male,CC0-1.0\n")
    src = make(tmp_path, path="l.csv")
    with pytest.raises(SourceReadError, match=r"gone\.jpg"):
        src.read(src.scan()[0])


def test_duplicate_listing_rows_are_an_error(tmp_path: Path) -> None:
    (tmp_path / "l.csv").write_text("path,state,gender,license\na.jpg,Goa,male,CC0\na.jpg,Goa,male,CC0\n")
    with pytest.raises(SourceError, match="listed twice"):
        make(tmp_path, path="l.csv").scan()
