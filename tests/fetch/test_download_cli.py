"""``fairsets download`` as a new user meets it: what a refused address needs, and option mistakes
that are one line (the problem and the fix), exit code 2, before anything is downloaded.

img2dataset is installed apart (``pip install --no-deps``): the tests that reach the download
machinery skip without it, with the install line; option mistakes are caught before it is needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_helpers import assert_one_line_error, run_cli
from helpers import needs_img2dataset  # per test: option mistakes are caught without img2dataset


def _listing(path: Path, urls: list[str]) -> Path:
    pq.write_table(pa.table({"url": urls, "caption": [f"c{i}" for i in range(len(urls))]}), path)
    return path


@needs_img2dataset
def test_a_mirror_on_this_machine_is_refused_and_the_summary_names_the_flag(
    images: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listing = _listing(tmp_path / "l.parquet", [images.url("/ok.jpg"), images.url("/ok2.jpg")])
    args = ["download", listing, "--out", tmp_path / "shards", "--processes", "0", "--timeout", "2"]
    code, out, err = run_cli(args, capsys)
    assert code == 1, err  # no image downloaded: the exit status says so
    assert "2 rejected" in out and "blocked_address 2" in out and "no image downloaded" in out
    assert "2 URL(s) point to this machine or a private network" in out and "add --allow-loopback" in out
    assert images.hits("/ok.jpg") == 0


@needs_img2dataset
def test_the_flag_the_summary_names_downloads_the_refused_rows_into_the_same_folder(
    images: Any, no_egress: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The newcomer's second try: the same command with the flag the hint named, same --out."""
    urls = [images.url("/ok.jpg"), images.url("/ok2.jpg"), images.url("/redirect-private")]
    listing = _listing(tmp_path / "l.parquet", urls)
    shards = tmp_path / "shards"
    args = ["download", listing, "--out", shards, "--processes", "0", "--timeout", "2"]
    code, out, _ = run_cli(args, capsys)
    assert code == 1 and "3 rejected" in out and "add --allow-loopback" in out
    code, out, err = run_cli([*args, "--allow-loopback"], capsys)
    assert code == 0, err
    assert "3 rows: 2 ok, 1 rejected" in out and "(top reasons: blocked_address 1)" in out
    assert "add --allow-private" in out and "--allow-loopback" not in out
    assert (images.hits("/ok.jpg"), images.hits("/ok2.jpg"), images.hits("/redirect-private")) == (1, 1, 1)
    status = pq.read_table(shards / "status.parquet").to_pylist()
    assert [(r["status"], r["round"]) for r in status] == [("ok", 1), ("ok", 1), ("rejected", 1)]
    assert status[2]["error"].startswith("blocked_address: 10.0.0.1 is private")
    # the same again: the private hop still needs a flag not given, so nothing is tried
    code, out, err = run_cli([*args, "--allow-loopback"], capsys)
    assert code == 0, err
    assert "nothing new to download" in out and "URLs tried" not in out
    assert images.hits("/redirect-private") == 1
    assert no_egress.attempts == []  # 10.0.0.1 was refused, never connected to


def test_download_option_mistakes_are_one_line(
    images: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listing = _listing(tmp_path / "l.parquet", [images.url("/ok.jpg")])
    out = tmp_path / "shards"
    cases = [
        ([listing, "--out", out, "--processes", "-1"], ["--processes", "--help"]),
        ([listing, "--out", out, "--threads", "0"], ["--threads", "--help"]),
        ([listing, "--out", out, "--timeout", "0"], ["--timeout", "--help"]),
        ([listing, "--out", ""], ["--out is empty"]),
    ]
    for args, needles in cases:
        code, _, err = run_cli(["download", *args, "--allow-loopback"], capsys)
        assert_one_line_error(code, err, *needles)
    assert not out.exists() and images.hits("/ok.jpg") == 0


@needs_img2dataset
def test_download_listing_and_folder_mistakes_are_one_line(
    images: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listing = _listing(tmp_path / "l.parquet", [images.url("/ok.jpg")])
    out = tmp_path / "shards"
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "empty.csv").write_text("")
    cases = [
        ([listing, "--out", tmp_path / "a-file"], ["a-file", "give a folder"]),
        ([tmp_path / "empty.csv", "--out", out], ["empty.csv: not a readable CSV listing"]),
        ([tmp_path / "nowhere.parquet", "--out", out], ["no such file", "Parquet, CSV or JSONL"]),
    ]
    for args, needles in cases:
        code, _, err = run_cli(["download", *args, "--allow-loopback"], capsys)
        assert_one_line_error(code, err, *needles)
    assert not out.exists() and images.hits("/ok.jpg") == 0
