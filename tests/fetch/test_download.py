"""URL downloads through img2dataset into WebDataset shards, behind the guard, with status rows and rounds."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from servers import Response

# find_spec, not importorskip: importing img2dataset here would run its package __init__ (wandb, ray,
# pandas, torch) and the downloads below would not go through the light loading users get.
if importlib.util.find_spec("img2dataset") is None:
    pytest.skip(
        "img2dataset is not installed: pip install --no-deps img2dataset==1.47.0 (docs/install.md)",
        allow_module_level=True,
    )

from fairsets.fetch.download import (
    STATUS_COLUMNS,
    classify_img2dataset,
    download_urls,
    read_image,
)
from fairsets.fetch.guard import FetchPolicy

MAX_BYTES = 5000
POLICY = FetchPolicy(allow_loopback=True, timeout=1.0, max_bytes=MAX_BYTES)

ROUTES = {
    "ok": "/ok.jpg",
    "optout": "/optout.jpg",
    "optout_other": "/optout-other.jpg",
    "redirect_private": "/redirect-private",
    "redirect_ok": "/redirect-ok",
    "big": "/big.jpg",
    "slow": "/slow.jpg",
    "missing": "/missing.jpg",
    "flaky": "/flaky.jpg",
    "not_an_image": "/not-an-image.jpg",
}

EXPECTED = {
    "ok": ("ok", None),
    "optout": ("rejected", "opted_out: X-Robots-Tag 'noai' from 127.0.0.1"),
    "optout_other": ("ok", None),
    "redirect_private": (
        "rejected",
        "blocked_address: 10.0.0.1 is private (allowed only with allow_private=True)",
    ),
    "redirect_ok": ("ok", None),
    "big": ("rejected", "too_large: 127.0.0.1 announces {big} bytes, more than " + str(MAX_BYTES)),
    "slow": ("failed", "timeout: timed out"),
    "missing": ("rejected", "http_404: Not Found"),
    "flaky": ("failed", "http_500: Internal Server Error"),
    "not_an_image": ("rejected", "undecodable: not an image Pillow can identify (UnidentifiedImageError)"),
}


def _rows(images: Any, keys: list[str] | None = None) -> list[dict[str, str]]:
    return [{"key": k, "url": images.url(ROUTES[k])} for k in (keys or list(ROUTES))]


def _by_key(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in rows}


def test_end_to_end_status_rows_and_shards(images: Any, no_egress: Any, tmp_path: Path) -> None:
    """In-process (processes=0) so that the no-egress patch covers img2dataset's threads."""
    opener_before = urllib.request._opener  # type: ignore[attr-defined]
    seen: list[tuple[int, int]] = []
    rows = _rows(images)
    out = tmp_path / "dl"
    result = download_urls(
        rows, out, POLICY, processes=0, threads=4, shard_size=4, progress=lambda d, t: seen.append((d, t))
    )

    assert [r["key"] for r in result] == list(ROUTES)
    assert all(list(r) == list(STATUS_COLUMNS) for r in result)
    got = _by_key(result)
    for key, (status, error) in EXPECTED.items():
        error = error.format(big=len(images.big)) if error else None
        assert (got[key]["status"], got[key]["error"]) == (status, error), key
        assert got[key]["round"] == 0
        assert got[key]["url"] == images.url(ROUTES[key])
    # nothing ever tried to reach 10.0.0.1, and only the redirect itself was requested
    assert no_egress.attempts == []
    assert images.hits("/redirect-private") == 1
    # every sample was requested exactly once; ok.jpg twice (directly and through /redirect-ok)
    assert images.hits("/ok.jpg") == 2
    assert all(images.hits(p) == 1 for k, p in ROUTES.items() if k != "ok")
    assert seen[-1] == (len(rows), len(rows))
    assert urllib.request._opener is opener_before  # type: ignore[attr-defined]
    assert images.ua_seen and all(ua.startswith("fairsets/") for ua in images.ua_seen)

    for key in ("ok", "optout_other", "redirect_ok"):
        row = got[key]
        assert row["shard"].startswith("round-000/") and row["shard"].endswith(".tar")
        assert row["member"].endswith(".jpg")
        assert read_image(out, row) == images.jpeg
        assert (row["bytes"], row["sha256"]) == (len(images.jpeg), hashlib.sha256(images.jpeg).hexdigest())
        with tarfile.open(out / row["shard"]) as tf:
            meta = json.load(tf.extractfile(row["member"].replace(".jpg", ".json")))
        assert meta["fairsets_key"] == key
        assert meta["status"] == "success"
    for key in ("optout", "slow", "missing", "redirect_private"):
        assert got[key]["shard"] is None and got[key]["member"] is None and got[key]["sha256"] is None
        with pytest.raises(ValueError, match="no stored image"):
            read_image(out, got[key])

    # only downloaded images are in the tars: 3 images + their json
    members = []
    for tar in sorted(out.glob("round-000/*.tar")):
        with tarfile.open(tar) as tf:
            members += tf.getnames()
    assert len([m for m in members if m.endswith(".jpg")]) == 3
    assert len(members) == 6

    on_disk = pq.read_table(out / "status.parquet").to_pylist()
    assert on_disk == result


def test_retry_failed_downloads_only_failed_keys_and_resume_makes_no_requests(
    images: Any, tmp_path: Path
) -> None:
    keys = ["ok", "slow", "missing", "flaky", "optout"]
    rows = _rows(images, keys)
    out = tmp_path / "dl"
    first = _by_key(download_urls(rows, out, POLICY, processes=0, threads=4, shard_size=2))
    assert {k: r["status"] for k, r in first.items()} == {
        "ok": "ok",
        "slow": "failed",
        "missing": "rejected",
        "flaky": "failed",
        "optout": "rejected",
    }

    images.slow_delay = 0.0
    images.flaky_status = 200
    # without retry_failed, a completed round is not redone: no request at all
    again = download_urls(rows, out, POLICY, processes=0, threads=4, shard_size=2)
    assert _by_key(again) == first
    assert [images.hits(ROUTES[k]) for k in keys] == [1, 1, 1, 1, 1]

    second = _by_key(
        download_urls(rows, out, POLICY, processes=0, threads=4, shard_size=2, retry_failed=True)
    )
    assert [images.hits(ROUTES[k]) for k in keys] == [1, 2, 1, 2, 1]
    assert pq.read_table(out / "round-001" / "_input.parquet").column("fairsets_key").to_pylist() == [
        "slow",
        "flaky",
    ]
    assert {k: (r["status"], r["round"]) for k, r in second.items()} == {
        "ok": ("ok", 0),
        "slow": ("ok", 1),
        "missing": ("rejected", 0),
        "flaky": ("ok", 1),
        "optout": ("rejected", 0),
    }
    assert second["slow"]["shard"].startswith("round-001/")
    assert read_image(out, second["slow"]) == images.jpeg
    assert read_image(out, second["ok"]) == images.jpeg

    # nothing failed any more: retry_failed starts no round and makes no request
    third = download_urls(rows, out, POLICY, processes=0, retry_failed=True)
    assert _by_key(third) == second
    assert [images.hits(ROUTES[k]) for k in keys] == [1, 2, 1, 2, 1]
    assert not (out / "round-002").exists()
    assert pq.read_table(out / "status.parquet").to_pylist() == third


def test_interrupted_round_resumes_only_unfinished_shards(images: Any, tmp_path: Path) -> None:
    bodies = {}
    for i in range(4):
        bodies[i] = images.jpeg + bytes([i]) * (i + 1)  # distinct, still a valid JPEG prefix
        images.srv.route(
            f"/img{i}.jpg", lambda req, b=bodies[i]: Response(200, {"Content-Type": "image/jpeg"}, b)
        )
    rows = [{"key": f"k{i}", "url": images.url(f"/img{i}.jpg")} for i in range(4)]
    out = tmp_path / "dl"
    first = download_urls(rows, out, POLICY, processes=0, shard_size=2)
    assert [r["status"] for r in first] == ["ok"] * 4
    # simulate a kill during shard 1: no stats for it, a truncated tar, and no round record
    round_dir = out / "round-000"
    (round_dir / "_status.parquet").unlink()
    (round_dir / "00001_stats.json").unlink()
    tar1 = round_dir / "00001.tar"
    tar1.write_bytes(tar1.read_bytes()[:700])

    resumed = download_urls(rows, out, POLICY, processes=0, shard_size=2)
    assert [images.hits(f"/img{i}.jpg") for i in range(4)] == [1, 1, 2, 2]
    assert [r["status"] for r in resumed] == ["ok"] * 4
    assert [r["round"] for r in resumed] == [0] * 4
    for i, row in enumerate(resumed):
        assert read_image(out, row) == bodies[i]
        assert row["sha256"] == hashlib.sha256(bodies[i]).hexdigest()
    assert (round_dir / "_status.parquet").exists()
    assert not (round_dir / "_tmp").exists()


def test_new_keys_and_changed_urls_get_a_new_round(images: Any, tmp_path: Path) -> None:
    out = tmp_path / "dl"
    download_urls([{"key": "a", "url": images.url("/ok.jpg")}], out, POLICY, processes=0)
    rows = [{"key": "a", "url": images.url("/ok2.jpg")}, {"key": "b", "url": images.url("/missing.jpg")}]
    got = _by_key(download_urls(rows, out, POLICY, processes=0))
    assert (got["a"]["round"], got["a"]["url"], got["a"]["status"]) == (1, images.url("/ok2.jpg"), "ok")
    assert (got["b"]["round"], got["b"]["status"]) == (1, "rejected")
    assert read_image(out, got["a"]) != images.jpeg
    assert images.hits("/ok.jpg") == 1
    # a key that is no longer asked for is not returned
    only_b = download_urls(rows[1:], out, POLICY, processes=0)
    assert [r["key"] for r in only_b] == ["b"]
    assert pq.read_table(out / "status.parquet").column("key").to_pylist() == ["b"]


def test_spawned_worker_is_guarded(images: Any, tmp_path: Path) -> None:
    """processes=1 runs the shard in a spawned worker: the guard must be active there too."""
    rows = [{"key": "loop", "url": images.url("/ok.jpg")}]
    refused = download_urls(rows, tmp_path / "a", FetchPolicy(timeout=1), processes=1)
    assert refused[0]["status"] == "rejected"
    assert (
        refused[0]["error"]
        == "blocked_address: 127.0.0.1 is loopback (allowed only with allow_loopback=True)"
    )
    assert images.hits("/ok.jpg") == 0

    rows = [{"key": "one", "url": images.url("/ok.jpg")}, {"key": "two", "url": images.url("/optout.jpg")}]
    got = download_urls(rows, tmp_path / "b", POLICY, processes=2, shard_size=1)
    assert [(r["status"], r["shard"]) for r in got] == [("ok", "round-000/00000.tar"), ("rejected", None)]
    assert got[1]["error"].startswith("opted_out: ")
    assert read_image(tmp_path / "b", got[0]) == images.jpeg
    assert images.ua_seen and images.ua_seen[0].startswith("fairsets/")


def test_input_validation(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="1 duplicate keys"):
        download_urls(
            [{"key": "a", "url": "http://x/1"}, {"key": "a", "url": "http://x/2"}],
            tmp_path,
            POLICY,
            processes=0,
        )
    with pytest.raises(ValueError, match="without dots"):
        download_urls([{"key": "a.b", "url": "http://x/1"}], tmp_path, POLICY, processes=0)
    with pytest.raises(ValueError, match="url must be a string"):
        download_urls([{"key": "a", "url": None}], tmp_path, POLICY, processes=0)
    with pytest.raises(ValueError, match="processes"):
        download_urls([], tmp_path, POLICY, processes=-1)
    assert not list(tmp_path.iterdir())
    assert download_urls([], tmp_path / "empty", POLICY, processes=0) == []
    table = pq.read_table(tmp_path / "empty" / "status.parquet")
    assert (table.num_rows, table.column_names) == (0, list(STATUS_COLUMNS))


def test_invalid_and_non_http_urls_are_rows_not_errors(images: Any, tmp_path: Path, no_egress: Any) -> None:
    rows = [
        {"key": "empty", "url": ""},
        {"key": "file", "url": (tmp_path / "x.jpg").as_uri()},
        {"key": "ftp", "url": "ftp://127.0.0.1/x.jpg"},
        {"key": "ok", "url": images.url("/ok.jpg")},
    ]
    got = _by_key(download_urls(rows, tmp_path / "dl", POLICY, processes=0))
    assert got["empty"]["status"] == "rejected" and got["empty"]["error"].startswith("invalid_url")
    assert got["file"]["status"] == "rejected" and got["file"]["error"].startswith("blocked_scheme")
    assert got["ftp"]["status"] == "rejected" and got["ftp"]["error"].startswith("blocked_scheme")
    assert got["ok"]["status"] == "ok"


def test_read_image_refuses_paths_outside_out_dir(tmp_path: Path) -> None:
    row = {"key": "a", "status": "ok", "shard": "../elsewhere.tar", "member": "0.jpg"}
    with pytest.raises(ValueError, match="outside"):
        read_image(tmp_path, row)


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        ("success", None, ("ok", None)),
        (
            "failed_to_download",
            "refused (opted_out): X-Robots-Tag 'noai' from h",
            ("rejected", "opted_out: X-Robots-Tag 'noai' from h"),
        ),
        (
            "failed_to_download",
            "refused (blocked_address): 10.0.0.1 is private",
            ("rejected", "blocked_address: 10.0.0.1 is private"),
        ),
        (
            "failed_to_download",
            "refused (too_large): body from h exceeds 5 bytes",
            ("rejected", "too_large: body from h exceeds 5 bytes"),
        ),
        (
            "failed_to_download",
            "Use of image disallowed by X-Robots-Tag directive",
            ("rejected", "opted_out: Use of image disallowed by X-Robots-Tag directive"),
        ),
        ("failed_to_download", "HTTP Error 404: Not Found", ("rejected", "http_404: Not Found")),
        ("failed_to_download", "HTTP Error 403: Forbidden", ("rejected", "http_403: Forbidden")),
        (
            "failed_to_download",
            "HTTP Error 429: Too Many Requests",
            ("failed", "http_429: Too Many Requests"),
        ),
        ("failed_to_download", "HTTP Error 408: Request Timeout", ("failed", "http_408: Request Timeout")),
        (
            "failed_to_download",
            "HTTP Error 503: Service Unavailable",
            ("failed", "http_503: Service Unavailable"),
        ),
        ("failed_to_download", "timed out", ("failed", "timeout: timed out")),
        ("failed_to_download", "<urlopen error timed out>", ("failed", "timeout: <urlopen error timed out>")),
        (
            "failed_to_download",
            "<urlopen error [Errno 111] Connection refused>",
            ("failed", "connection: <urlopen error [Errno 111] Connection refused>"),
        ),
        (
            "failed_to_download",
            "Remote end closed connection without response",
            ("failed", "connection: Remote end closed connection without response"),
        ),
        (
            "failed_to_download",
            "unknown url type: 'x?token=1'",
            ("rejected", "invalid_url: not an absolute http(s) URL"),
        ),
        ("failed_to_download", "something odd", ("failed", "error: something odd")),
        ("failed_to_resize", "Image decoding error", ("rejected", "undecodable: Image decoding error")),
    ],
)
def test_classify_img2dataset(status: str, message: str | None, expected: tuple[str, str | None]) -> None:
    assert classify_img2dataset(status, message) == expected


_POOL_DRIVER = """
import os, time
from fairsets.fetch.download import _worker_pool
HEAVY = ("torch", "albumentations", "wandb", "ray", "pandas")
if __name__ == "__main__":
    with _worker_pool(4, 1) as pool:  # one worker: no more than there are shards
        loaded = f"[m for m in {HEAVY!r} if m in __import__('sys').modules]"
        print(pool.apply(os.getpid), pool.apply(eval, (loaded,)), flush=True)
        pool.apply_async(time.sleep, (120,))  # busy when the driver dies
        time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.timeout(90)
def test_download_workers_are_light_and_die_with_their_driver(tmp_path: Path) -> None:
    """The round's worker pool: its workers load img2dataset light and end with a killed driver."""
    script = tmp_path / "driver.py"
    script.write_text(_POOL_DRIVER)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    worker = 0
    try:
        assert proc.stdout is not None
        pid, heavy = proc.stdout.readline().split(" ", 1)
        worker = int(pid)
        assert heavy.strip() == "[]"
        assert _alive(worker)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _alive(worker):
            time.sleep(0.05)
        assert not _alive(worker)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if worker and _alive(worker):
            os.kill(worker, signal.SIGKILL)
