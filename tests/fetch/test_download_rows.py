"""Rows and listings a download must decide on for good: URLs that can never be fetched are
``rejected`` (never ``failed`` and retried forever), a FIFO or folder given as a listing is named
as such, a JSONL line holding a lone surrogate is refused by its line number, keys with bidi
controls are refused, and rows a policy refused are downloaded once the policy allows them."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_helpers import assert_one_line_error, run_cli
from fairsets.fetch.guard import FetchPolicy, url_problem
from fairsets.fetch.guard import addresses as guard_addresses
from helpers import needs_img2dataset  # per test: fairsets.fetch.download and .shards need it

POLICY = FetchPolicy(allow_loopback=True, timeout=2.0)

#: URLs that fail the same way on every try: (url, the reason the guard gives).
NEVER = {
    "no_host": ("http://", "no host in the URL"),
    "no_host_https": ("https://", "no host in the URL"),
    "no_host_path": ("http:///x.jpg", "no host in the URL"),
    "port_only": ("http://:80/x.jpg", "no host in the URL"),
    "bad_ipv6": ("http://[::1/x.jpg", "malformed host or port"),
    "port_too_big": ("http://127.0.0.1:99999/x.jpg", "malformed host or port"),
    "port_zero": ("http://127.0.0.1:0/x.jpg", "port 0"),
    "long_label": ("http://" + "a" * 64 + ".example/x.jpg", "empty label or one longer than 63"),
    "long_host": ("http://" + ".".join(["a" * 60] * 5) + "/x.jpg", "the host is longer than 253"),
    "empty_label": ("http://a..example/x.jpg", "empty label or one longer than 63"),
}


@pytest.fixture
def no_dns(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The guard's resolver, recording every name asked (none may be: these URLs never get that far)."""
    asked: list[str] = []

    def getaddrinfo(host: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "no DNS in tests")

    monkeypatch.setattr(guard_addresses, "_getaddrinfo", getaddrinfo)
    return asked


def test_url_problem_on_good_urls() -> None:
    for url in (
        "http://example.com/x.jpg",
        "https://example.com./x.jpg?q=1#f",
        "http://user:pw@example.com:8080/x",
        "http://[2001:db8::1]:8080/x",
        "http://[fe80::1%25eth0]/x",
        "http://bücher.example/x",
        "http://" + "a" * 63 + ".example/x",
        "ftp://example.com/x",  # the scheme guard's business, not this
    ):
        assert url_problem(url) is None, url
    assert url_problem("http://127.0.0.1:1/" + "a" * 9000) == "longer than 8192 characters"
    assert url_problem("http://a b/x") == "white space or control characters in the URL"


@needs_img2dataset
def test_permanently_bad_urls_are_rejected_and_never_retried(
    images: Any, no_egress: Any, no_dns: list[str], tmp_path: Path
) -> None:
    from fairsets.fetch.download import download_urls

    rows = [{"key": "ok", "url": images.url("/ok.jpg")}]
    rows += [{"key": k, "url": url} for k, (url, _) in NEVER.items()]
    rows += [{"key": "long_path", "url": images.url("/" + "a" * 9000)}]
    got = {r["key"]: r for r in download_urls(rows, tmp_path / "dl", POLICY, processes=0)}
    assert got.pop("ok")["status"] == "ok"
    assert got.pop("long_path")["error"] == "invalid_url: longer than 8192 characters"
    for key, (_, reason) in NEVER.items():
        assert got[key]["status"] == "rejected", got[key]
        assert got[key]["error"].startswith("invalid_url: ") and reason in got[key]["error"], got[key]
    assert no_dns == [] and no_egress.attempts == []
    again = download_urls(rows, tmp_path / "dl", POLICY, processes=0, retry_failed=True)
    assert not (tmp_path / "dl" / "round-001").exists()  # nothing to retry: no new round
    assert all(r["round"] == 0 for r in again)


@needs_img2dataset
def test_fairsets_download_rejects_bad_urls_and_retry_failed_leaves_them(
    images: Any, no_egress: Any, no_dns: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    urls = [images.url("/ok.jpg")] + [url for url, _ in NEVER.values()]
    listing = tmp_path / "l.parquet"
    pq.write_table(pa.table({"url": urls, "caption": [f"c{i}" for i in range(len(urls))]}), listing)
    out = tmp_path / "shards"
    args = ["download", listing, "--out", out, "--processes", "0", "--allow-loopback"]
    code, stdout, err = run_cli(args, capsys)
    assert code == 0, err
    assert f"{len(urls)} rows: 1 ok, {len(NEVER)} rejected, 0 failed" in stdout
    status = pq.read_table(out / "status.parquet").to_pylist()
    for row, (_, reason) in zip(status[1:], NEVER.values(), strict=True):
        assert row["status"] == "rejected" and reason in row["error"], row
    code, stdout, err = run_cli([*args, "--retry-failed"], capsys)
    assert code == 0, err
    assert "nothing new to download" in stdout
    assert not list((out / ".fairsets").glob("retry-*")) and images.hits("/ok.jpg") == 1
    assert no_dns == [] and no_egress.attempts == []


@needs_img2dataset
@pytest.mark.timeout(30)
def test_a_fifo_or_folder_given_as_listing_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fairsets.fetch.shards import ListingError, read_listing

    fifo = tmp_path / "listing.parquet"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    link = tmp_path / "link.jsonl"
    link.symlink_to(fifo)
    out = tmp_path / "shards"
    started = time.monotonic()
    for path, kind in ((fifo, "a FIFO (named pipe)"), (link, "a FIFO (named pipe)"), (folder, "a folder")):
        with pytest.raises(
            ListingError, match=f"is {kind.replace('(', '[(]').replace(')', '[)]')}, not a file"
        ):
            read_listing(path)
        code, _, err = run_cli(["download", path, "--out", out], capsys)
        line = assert_one_line_error(code, err, path.name, f"is {kind}, not a file", "Parquet, CSV or JSONL")
        assert "no such file" not in line
    assert time.monotonic() - started < 10  # never waited on the FIFO
    assert not out.exists()
    code, _, err = run_cli(["download", tmp_path / "nowhere.csv", "--out", out], capsys)
    assert_one_line_error(code, err, "nowhere.csv: no such file")


@needs_img2dataset
def test_a_lone_surrogate_in_jsonl_refuses_its_line_only(
    images: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fairsets.fetch.shards import read_listing

    listing = tmp_path / "l.jsonl"
    lines = [
        json.dumps({"url": images.url("/ok.jpg"), "caption": "fine", "extra": {"a": 1}}),
        # a lone surrogate as JSON writes it: the six characters \ud800 (valid JSON, not text)
        json.dumps(
            {"url": images.url("/ok2.jpg"), "caption": "half a pair @ here", "extra": {"a": 2}}
        ).replace("@", "\\ud800"),
        "",
        json.dumps({"url": images.url("/ok2.jpg"), "caption": "fine", "extra": {"k@": 3}}).replace(
            "@", "\\udc00"
        ),
        json.dumps(
            {"url": images.url("/ok2.jpg"), "caption": "a pair is fine: \U0001f600", "extra": {"a": 4}}
        ),
    ]
    listing.write_text("\n".join(lines) + "\n")
    lst = read_listing(listing)
    assert lst.table.column("fairsets_rejected").to_pylist() == [
        None,
        "invalid_row: line 2 holds a lone surrogate (\\ud800), which is not text",
        "invalid_row: line 4 holds a lone surrogate (\\udc00), which is not text",
        None,
    ]
    code, stdout, err = run_cli(
        ["download", listing, "--out", tmp_path / "shards", "--processes", "0", "--allow-loopback"], capsys
    )
    assert code == 0, err
    assert "4 rows: 2 ok, 2 rejected, 0 failed" in stdout
    status = pq.read_table(tmp_path / "shards" / "status.parquet").to_pylist()
    assert [r["status"] for r in status] == ["ok", "rejected", "rejected", "ok"]
    assert "line 2" in status[1]["error"] and "line 4" in status[2]["error"]


@needs_img2dataset
@pytest.mark.parametrize("char", ["\u202e", "\u202a", "\u2066", "\u2069", "\u200f", "\u061c", "\n", "\x85"])
def test_keys_with_bidi_or_control_characters_are_refused(char: str, tmp_path: Path) -> None:
    from fairsets.fetch.download import download_urls

    rows = [{"key": "good", "url": "http://127.0.0.1:1/x.jpg"}, {"key": f"ab{char}cd", "url": "http://x/y"}]
    with pytest.raises(ValueError, match=r"row 1: the key holds (bidi )?control characters"):
        download_urls(rows, tmp_path / "dl", POLICY, processes=0)
    assert not (tmp_path / "dl").exists()


@needs_img2dataset
def test_rows_a_policy_refused_are_downloaded_when_it_allows_them(
    images: Any, no_egress: Any, tmp_path: Path
) -> None:
    from fairsets.fetch.download import download_urls

    rows = [
        {"key": "ok", "url": images.url("/ok.jpg")},
        {"key": "private", "url": images.url("/redirect-private")},  # 127.0.0.1, then 10.0.0.1
    ]
    out = tmp_path / "dl"
    strict = FetchPolicy(timeout=1.0)
    got = {r["key"]: r for r in download_urls(rows, out, strict, processes=0)}
    assert (
        got["ok"]["error"] == "blocked_address: 127.0.0.1 is loopback (allowed only with allow_loopback=True)"
    )
    assert images.hits("/ok.jpg") == 0
    assert {r["key"]: r["round"] for r in download_urls(rows, out, strict, processes=0)} == {
        "ok": 0,
        "private": 0,
    }
    got = {
        r["key"]: r for r in download_urls(rows, out, POLICY, processes=0)
    }  # the policy allows loopback now
    assert (got["ok"]["status"], got["ok"]["round"]) == ("ok", 1)
    assert got["private"]["error"].startswith("blocked_address: 10.0.0.1 is private")
    assert images.hits("/ok.jpg") == 1 and images.hits("/redirect-private") == 1
    again = {r["key"]: r["round"] for r in download_urls(rows, out, POLICY, processes=0)}
    assert again == {"ok": 1, "private": 1}  # refused for a flag still not given: not tried again
    assert images.hits("/redirect-private") == 1
    assert no_egress.attempts == []
