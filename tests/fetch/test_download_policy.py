"""``fairsets download --deny FILE --drop-unsafe RULE``: rows dropped by policy before download, each
recorded in status.parquet with its reason, counted in the summary line and in listing.json.

Counts are recomputed here from the listing itself (which URLs are on the list, which punsafe
values exceed the threshold), not by the policy module.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_helpers import assert_one_line_error, run_cli

if importlib.util.find_spec("img2dataset") is None:
    pytest.skip(
        "img2dataset is not installed: pip install --no-deps img2dataset==1.47.0 (docs/install.md)",
        allow_module_level=True,
    )

from fetch.conftest import jpeg_bytes
from servers import Response

N = 8
PUNSAFE = [0.01, 0.93, None, 0.51, 0.5, "n/a", 0.2, 0.99]


def _setup(images: Any, tmp_path: Path) -> tuple[Path, list[str]]:
    for i in range(N):
        body = jpeg_bytes((i * 30 % 256, 80, 120), (24 + i, 20))
        images.srv.route(f"/q{i}.jpg", lambda req, b=body: Response(200, {"Content-Type": "image/jpeg"}, b))
    urls = [images.url(f"/q{i}.jpg") for i in range(N)]
    listing = tmp_path / "listing.parquet"
    pq.write_table(
        pa.table(
            {
                "url": urls,
                "caption": [f"photo {i}" for i in range(N)],
                "punsafe": pa.array([str(p) if p is not None else None for p in PUNSAFE], pa.string()),
            }
        ),
        listing,
    )
    return listing, urls


def _cli(args: list[Any], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return run_cli(["download", *args, "--processes", "0", "--allow-loopback", "--timeout", "2"], capsys)


def test_deny_list_and_safety_rule_drop_rows_before_download(
    images: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listing, urls = _setup(images, tmp_path)
    deny = tmp_path / "removed.txt"
    # a published removal list: one URL as is, one as its sha256, a comment, a URL not in the listing
    deny.write_text(
        f"# removals\n{urls[0]}\n{hashlib.sha256(urls[6].encode()).hexdigest().upper()}\n"
        "http://127.0.0.1:9/not-listed.jpg\n\n"
    )
    out = tmp_path / "shards"
    code, stdout, err = _cli([listing, "--out", out, "--deny", deny, "--drop-unsafe", "punsafe>0.5"], capsys)
    assert code == 0, err
    denied = {0, 6}
    unsafe = {
        i
        for i, p in enumerate(PUNSAFE)
        if i not in denied and isinstance(p, float) and p > 0.5  # 0.5 itself is not > 0.5
    }
    assert unsafe == {1, 3, 7}
    ok = N - len(denied) - len(unsafe)
    assert stdout.startswith(f"{N} rows: {ok} ok, {len(denied) + len(unsafe)} rejected, 0 failed")
    assert f"dropped by policy: {len(denied)} denied, {len(unsafe)} unsafe" in stdout
    rows = pq.read_table(out / "status.parquet").to_pylist()
    assert len(rows) == N
    for i, r in enumerate(rows):
        if i in denied:
            assert (r["status"], r["error"]) == (
                "rejected",
                "denied: the URL is on the deny list removed.txt",
            )
        elif i in unsafe:
            assert r["status"] == "rejected" and r["error"].startswith("unsafe: punsafe>0.5 (punsafe = ")
        else:
            assert r["status"] == "ok", r
    for i in range(N):  # a dropped row is never fetched
        assert images.hits(f"/q{i}.jpg") == (0 if i in denied | unsafe else 1)
    meta = json.loads((out / ".fairsets" / "listing.json").read_text())
    assert meta["policy"]["denied"] == 2 and meta["policy"]["unsafe"] == 3
    assert meta["policy"]["unscored"] == 2  # None and "n/a" cannot be compared: kept, counted
    assert meta["policy"]["rules"] == ["punsafe>0.5"] and meta["policy"]["deny_entries"] == 3
    # the same call again: nothing new; another policy on the same folder: refused, one line
    code, stdout, err = _cli([listing, "--out", out, "--deny", deny, "--drop-unsafe", "punsafe>0.5"], capsys)
    assert code == 0 and "nothing new to download" in stdout
    code, _, err = _cli([listing, "--out", out, "--drop-unsafe", "punsafe>0.9"], capsys)
    assert_one_line_error(code, err, "another --deny list or --drop-unsafe rules")


def test_text_rules_and_bad_options_are_one_line_errors(
    images: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listing, _ = _setup(images, tmp_path)
    out = tmp_path / "shards"
    code, _, err = _cli([listing, "--out", out, "--drop-unsafe", "nsfw>0.5"], capsys)
    assert_one_line_error(code, err, "no column 'nsfw'")
    code, _, err = _cli([listing, "--out", out, "--drop-unsafe", "punsafe>high"], capsys)
    assert_one_line_error(code, err, "needs a number")
    code, _, err = _cli([listing, "--out", out, "--drop-unsafe", "punsafe"], capsys)
    assert_one_line_error(code, err, "COLUMN OP VALUE")
    code, _, err = _cli([listing, "--out", out, "--deny", tmp_path / "missing.txt"], capsys)
    assert_one_line_error(code, err, "cannot be read")
    # a text rule: the cell compared as text ("n/a" is the one row dropped)
    code, stdout, err = _cli([listing, "--out", out, "--drop-unsafe", "punsafe==n/a"], capsys)
    assert code == 0, err
    rows = pq.read_table(out / "status.parquet").to_pylist()
    assert [i for i, r in enumerate(rows) if r["status"] == "rejected"] == [PUNSAFE.index("n/a")]
    assert "dropped by policy: 1 unsafe" in stdout
