"""``fairsets download``: a listing into img2dataset's flat shards, resumable, with merged retries."""

from __future__ import annotations

import datetime
import hashlib
import importlib.util
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_helpers import assert_one_line_error, run_cli
from servers import Response

# find_spec, not importorskip: importing img2dataset here would run its package __init__ (wandb, ray,
# pandas, torch) and the downloads below would not go through the light loading users get.
if importlib.util.find_spec("img2dataset") is None:
    pytest.skip(
        "img2dataset is not installed: pip install --no-deps img2dataset==1.47.0 (docs/install.md)",
        allow_module_level=True,
    )

from fairsets.fetch.guard import FetchPolicy
from fairsets.fetch.shards import ListingError, download_listing, read_listing

POLICY = FetchPolicy(allow_loopback=True, timeout=2.0)
# (width, height) of the served images: larger, smaller and equal to 384 on the short side, odd ratios
SIZES = [(640, 480), (300, 500), (200, 100), (384, 384), (1000, 397), (97, 701), (512, 513)]


def _jpeg(size: tuple[int, int], seed: int) -> bytes:
    from PIL import Image

    im = Image.new("RGB", size, (seed * 37 % 256, 90, 200 - seed * 11 % 200))
    im.putpixel((size[0] // 2, size[1] // 2), (255, 255, 255))
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=90)
    return buf.getvalue()


def _serve(images: Any, n: int) -> list[bytes]:
    bodies = [_jpeg(SIZES[i % len(SIZES)], i) for i in range(n)]
    for i, body in enumerate(bodies):
        images.srv.route(f"/p{i}.jpg", lambda req, b=body: Response(200, {"Content-Type": "image/jpeg"}, b))
    return bodies


def _flaky(images: Any, bodies: list[bytes], indices: set[int]) -> dict[str, int]:
    """Serve ``/p{i}.jpg`` for ``i`` in ``indices`` with 503 until the returned state's ``code`` is 200."""
    state = {"code": 503}
    for i in indices:
        images.srv.route(
            f"/p{i}.jpg",
            lambda req, b=bodies[i]: (
                Response(state["code"], {"Content-Type": "image/jpeg"}, b)
                if state["code"] == 200
                else Response(state["code"], {"Content-Type": "text/plain"}, b"busy")
            ),
        )
    return state


def _listing(images: Any, n: int) -> dict[str, list[Any]]:
    return {
        "url": [images.url(f"/p{i}.jpg") for i in range(n)],
        "caption": [f"a photo, number {i}" for i in range(n)],
        "similarity": [i / 10 for i in range(n)],
        "LICENSE": [f"cc-by-{i}" for i in range(n)],
    }


def _write(path: Path, cols: dict[str, list[Any]]) -> Path:
    fmt = path.suffix
    if fmt == ".parquet":
        pq.write_table(pa.table(cols), path)
    elif fmt == ".jsonl":
        names = list(cols)
        path.write_text(
            "".join(
                json.dumps(dict(zip(names, vals, strict=True))) + "\n"
                for vals in zip(*cols.values(), strict=True)
            )
        )
    else:
        import csv

        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(list(cols))
            w.writerows(zip(*cols.values(), strict=True))
    return path


def _members(tar: Path) -> dict[str, bytes]:
    with tarfile.open(tar) as tf:
        return {m.name: tf.extractfile(m).read() for m in tf if m.isfile()}  # type: ignore[union-attr]


def _all_members(out: Path) -> dict[str, bytes]:
    got: dict[str, bytes] = {}
    for tar in sorted(out.glob("*.tar")):
        for name, data in _members(tar).items():
            assert name not in got, f"{name} twice"
            got[name] = data
    return got


def _hits(images: Any, n: int) -> list[int]:
    return [images.hits(f"/p{i}.jpg") for i in range(n)]


def _cli(args: list[Any], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return run_cli(["download", *args, "--processes", "0", "--allow-loopback", "--timeout", "2"], capsys)


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_listing_formats_give_img2dataset_shards_with_captions_and_kept_columns(
    suffix: str, images: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_egress: Any
) -> None:
    n = 5
    bodies = _serve(images, n)
    listing = _write(tmp_path / f"listing{suffix}", _listing(images, n))
    out = tmp_path / "shards"
    code, stdout, err = _cli([listing, "--out", out, "--shard-size", "3"], capsys)
    assert code == 0, err
    assert stdout.startswith("5 rows: 5 ok, 0 rejected, 0 failed -> ")
    assert sorted(p.name for p in out.iterdir()) == [
        ".fairsets",
        "00000.parquet",
        "00000.tar",
        "00000_stats.json",
        "00001.parquet",
        "00001.tar",
        "00001_stats.json",
        "status.parquet",
    ]
    members = _all_members(out)
    keys = ["000000", "000001", "000002", "000010", "000011"]  # img2dataset's keys for shards of 3
    assert sorted(members) == sorted(f"{k}.{ext}" for k in keys for ext in ("jpg", "json", "txt"))
    for i, key in enumerate(keys):
        assert members[f"{key}.txt"].decode() == f"a photo, number {i}"
        assert members[f"{key}.jpg"] == bodies[i]  # resize mode "no": the JPEG bytes as served
        meta = json.loads(members[f"{key}.json"])
        assert (meta["key"], meta["similarity"], meta["LICENSE"], meta["caption"]) == (
            key,
            i / 10,
            f"cc-by-{i}",
            f"a photo, number {i}",
        )
        assert (meta["width"], meta["height"]) == SIZES[i]
    shard = pq.read_table(out / "00001.parquet")
    assert {"similarity", "LICENSE", "caption", "url", "key", "status"} <= set(shard.column_names)
    assert sorted(shard.column("LICENSE").to_pylist()) == ["cc-by-3", "cc-by-4"]
    status = pq.read_table(out / "status.parquet").to_pylist()
    assert [r["key"] for r in status] == keys
    assert [r["status"] for r in status] == ["ok"] * n
    for i, r in enumerate(status):
        assert r["sha256"] == hashlib.sha256(bodies[i]).hexdigest()
        assert r["shard"] == ("00000.tar" if i < 3 else "00001.tar") and r["member"] == f"{keys[i]}.jpg"
    assert no_egress.attempts == []


def test_rerun_downloads_nothing_and_retry_failed_merges_only_the_failed(
    images: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = 7
    bodies = _serve(images, n)
    state = _flaky(images, bodies, {1, 2})  # both in shard 0
    cols = _listing(images, n)
    cols["url"].append(images.url("/missing.jpg"))  # rejected (404): never retried
    cols["caption"].append("gone")
    cols["similarity"].append(0.0)
    cols["LICENSE"].append("none")
    listing = _write(tmp_path / "listing.parquet", cols)
    out = tmp_path / "shards"
    args = [listing, "--out", out, "--shard-size", "4"]
    code, stdout, err = _cli(args, capsys)
    assert code == 0, err
    assert stdout.startswith("8 rows: 5 ok, 1 rejected, 2 failed (top reasons: http_503 2, http_404 1)")
    first = pq.read_table(out / "status.parquet").to_pylist()
    assert [r["error"] for r in first if r["status"] == "failed"] == ["http_503: Service Unavailable"] * 2
    assert _hits(images, n) == [1] * n

    code, stdout, err = _cli(args, capsys)  # a re-run: nothing to download
    assert code == 0, err
    assert _hits(images, n) == [1] * n and images.hits("/missing.jpg") == 1
    assert pq.read_table(out / "status.parquet").to_pylist() == first

    state["code"] = 200
    before = {p.name: p.read_bytes() for p in out.glob("00001*")}  # shard 1 has no failed key
    code, stdout, err = _cli([*args, "--retry-failed"], capsys)
    assert code == 0, err
    assert stdout.startswith("8 rows: 7 ok, 1 rejected, 0 failed")
    assert _hits(images, n) == [1, 2, 2, 1, 1, 1, 1]  # only the failed ones, once more
    assert images.hits("/missing.jpg") == 1
    assert {p.name: p.read_bytes() for p in out.glob("00001*")} == before  # untouched
    # merged under their own keys into their own shards, each key once, img2dataset's layout
    members = _all_members(out)
    keys = ["000000", "000001", "000002", "000003", "000010", "000011", "000012", "000013"]
    for i in range(n):
        assert members[f"{keys[i]}.jpg"] == bodies[i]
        assert json.loads(members[f"{keys[i]}.json"])["key"] == keys[i]
    assert members["000002.txt"] == b"a photo, number 2"
    with tarfile.open(out / "00000.tar") as tf:
        names = tf.getnames()
    assert names == sorted(names) and len(names) == 12
    shard0 = pq.read_table(out / "00000.parquet").to_pylist()
    assert [r["key"] for r in shard0] == keys[:4]
    assert [r["status"] for r in shard0] == ["success"] * 4
    stats = json.loads((out / "00000_stats.json").read_text())
    assert (stats["count"], stats["successes"], stats["failed_to_download"]) == (4, 4, 0)
    status = pq.read_table(out / "status.parquet").to_pylist()
    assert [(r["key"], r["status"], r["round"]) for r in status if r["round"]] == [
        ("000001", "ok", 1),
        ("000002", "ok", 1),
    ]
    assert [r["sha256"] for r in status[:n]] == [hashlib.sha256(b).hexdigest() for b in bodies]
    assert not list((out / ".fairsets").glob("retry-*"))
    # and again: nothing to do
    code, _, err = _cli([*args, "--retry-failed"], capsys)
    assert code == 0, err
    assert _hits(images, n) == [1, 2, 2, 1, 1, 1, 1]


def test_an_interrupted_merge_is_finished_by_the_next_call(
    images: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill between the moves of a merge: the redo list finishes it, from the prepared files."""
    n = 4
    bodies = _serve(images, n)
    state = _flaky(images, bodies, {1})
    listing = _write(tmp_path / "l.jsonl", _listing(images, n))
    out = tmp_path / "shards"
    download_listing(listing, out, POLICY, processes=0, shard_size=10)
    state["code"] = 200
    from fairsets.fetch.shards import merge

    real_move = merge._move
    calls = []

    def move_then_die(src: Path, dst: Path) -> None:
        calls.append(dst.name)
        if len(calls) == 2:  # the tar moved, the status Parquet not yet
            raise KeyboardInterrupt
        real_move(src, dst)

    monkeypatch.setattr(merge, "_move", move_then_die)
    with pytest.raises(KeyboardInterrupt):
        download_listing(listing, out, POLICY, processes=0, shard_size=10, retry_failed=True)
    monkeypatch.setattr(merge, "_move", real_move)
    assert calls == ["00000.tar", "00000.parquet"]
    rows = download_listing(listing, out, POLICY, processes=0, shard_size=10)
    assert [r["status"] for r in rows] == ["ok"] * n
    assert images.hits("/p1.jpg") == 2
    assert _all_members(out)["000001.jpg"] == bodies[1]
    assert [r["status"] for r in pq.read_table(out / "00000.parquet").to_pylist()] == ["success"] * n


def test_a_merge_prepared_twice_gives_the_same_bytes(
    images: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rewritten shard depends only on the shard and the retry round: member order, headers, bytes."""
    n = 5
    bodies = _serve(images, n)
    state = _flaky(images, bodies, {3})
    listing = _write(tmp_path / "l.parquet", _listing(images, n))
    out = tmp_path / "shards"
    download_listing(listing, out, POLICY, processes=0, shard_size=10)
    state["code"] = 200
    from fairsets.fetch.shards import merge

    prepared: list[dict[str, bytes]] = []

    def keep_and_stop(src: Path, dst: Path) -> None:
        prepared.append({p.name: p.read_bytes() for p in src.parent.iterdir() if p.name != merge.READY})
        raise KeyboardInterrupt

    monkeypatch.setattr(merge, "_move", keep_and_stop)
    with pytest.raises(KeyboardInterrupt):
        download_listing(listing, out, POLICY, processes=0, shard_size=10, retry_failed=True)
    (retry,) = (out / ".fairsets").glob("retry-*")
    (retry / "merge" / merge.READY).unlink()  # prepared again, from the same shard and retry round
    with pytest.raises(KeyboardInterrupt):
        download_listing(listing, out, POLICY, processes=0, shard_size=10)
    assert len(prepared) == 2 and prepared[0] == prepared[1]
    assert images.hits("/p3.jpg") == 2
    tar = prepared[0]["00000.tar"]
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        names = tf.getnames()
    assert names == sorted(f"00000{i}.{ext}" for i in range(n) for ext in ("jpg", "json", "txt"))


_KILL_RUN = """
import sys
from fairsets.cli import main
if __name__ == "__main__":  # the download worker is spawned: it imports this script
    sys.argv = ["fairsets", "download", {listing!r}, "--out", {out!r}, "--shard-size", "2",
                "--processes", "1", "--threads", "2", "--allow-loopback", "--timeout", "5"]
    main()
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_kill_9_mid_download_then_rerun_gives_complete_shards(images: Any, tmp_path: Path) -> None:
    n = 8
    bodies = _serve(images, n)
    for i in range(2, n):  # the first shard is quick, the others slow: the kill lands mid-download
        images.srv.route(
            f"/p{i}.jpg", lambda req, b=bodies[i]: Response(200, {"Content-Type": "image/jpeg"}, b, delay=1.5)
        )
    listing = _write(tmp_path / "l.csv", _listing(images, n))
    out = tmp_path / "shards"
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(_KILL_RUN.format(listing=str(listing), out=str(out))))
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while not (out / "00000_stats.json").exists() or images.hits("/p2.jpg") == 0:
            assert time.monotonic() < deadline and proc.poll() is None, "the download ended before the kill"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (out / "status.parquet").exists()
    assert not (out / "00001_stats.json").exists()
    time.sleep(0.5)  # the killed driver's worker goes with it
    rows = download_listing(
        listing, out, FetchPolicy(allow_loopback=True, timeout=5), processes=0, shard_size=2
    )
    assert [r["status"] for r in rows] == ["ok"] * n
    assert _hits(images, n)[:2] == [1, 1]  # the finished shard was not downloaded again
    members = _all_members(out)
    assert len(members) == 3 * n
    for i, r in enumerate(rows):
        assert members[r["member"]] == bodies[i]
        assert members[r["member"].replace(".jpg", ".txt")].decode() == f"a photo, number {i}"
    for shard in range(n // 2):
        stats = json.loads((out / f"{shard:05d}_stats.json").read_text())
        assert (stats["count"], stats["successes"]) == (2, 2)
        assert len(pq.read_table(out / f"{shard:05d}.parquet")) == 2


_PLAIN = """
import sys, img2dataset
img2dataset.download(url_list=sys.argv[1], input_format="parquet", url_col="url", caption_col="caption",
    save_additional_columns=["similarity", "LICENSE"], output_folder=sys.argv[2], output_format="webdataset",
    processes_count=1, thread_count=4, number_sample_per_shard=4, resize_mode=sys.argv[3], image_size=384,
    extract_exif=False, compute_hash=None, timeout=5, enable_wandb=False)
"""


def _image_sizes(out: Path) -> dict[str, tuple[int, int]]:
    from PIL import Image

    return {
        name: Image.open(io.BytesIO(data)).size
        for name, data in _all_members(out).items()
        if name.endswith(".jpg")
    }


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["keep_ratio", "center_crop"])
def test_resize_gives_the_image_sizes_of_plain_img2dataset(
    mode: str, images: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = len(SIZES)
    _serve(images, n)
    listing = _write(tmp_path / "l.parquet", _listing(images, n))
    plain = tmp_path / "plain"
    env = dict(os.environ, NO_ALBUMENTATIONS_UPDATE="1", WANDB_MODE="disabled")
    res = subprocess.run(
        [sys.executable, "-c", _PLAIN, str(listing), str(plain), mode],
        capture_output=True,
        text=True,
        env=env,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    ours = tmp_path / "ours"
    code, _, err = _cli(
        [listing, "--out", ours, "--shard-size", "4", "--resize-mode", mode, "--image-size", "384"], capsys
    )
    assert code == 0, err
    expected = _image_sizes(plain)
    assert len(expected) == n
    assert _image_sizes(ours) == expected
    if mode == "center_crop":
        assert set(expected.values()) == {(384, 384)}
    else:  # the short side is 384, larger or smaller ones alike (img2dataset's resize_only_if_bigger=False)
        assert all(min(wh) == 384 for wh in expected.values())
    # the status rows say the same as plain img2dataset's
    cols = ["key", "width", "height", "original_width", "original_height", "similarity", "LICENSE"]
    for shard in ("00000", "00001"):
        a = sorted(
            pq.read_table(plain / f"{shard}.parquet", columns=cols).to_pylist(), key=lambda r: r["key"]
        )
        b = sorted(pq.read_table(ours / f"{shard}.parquet", columns=cols).to_pylist(), key=lambda r: r["key"])
        assert a == b


def test_refused_rows_are_recorded_and_the_rest_downloaded(
    images: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = 3
    bodies = _serve(images, n)
    listing = tmp_path / "l.jsonl"
    lines = [
        json.dumps({"url": images.url("/p0.jpg"), "caption": "zero", "n": 0}),
        "[1, 2, 3]",
        "{not json",
        json.dumps({"url": 12345, "caption": "a number for a URL"}),
        json.dumps({"url": images.url("/p1.jpg"), "caption": "x" * 70_000}),
        json.dumps({"url": "http://127.0.0.1/" + "a" * 9000, "caption": "long URL"}),
        json.dumps({"url": images.url("/p2.jpg"), "caption": {"nested": True}, "n": "two"}),
    ]
    listing.write_text("\n".join(lines) + "\n")
    out = tmp_path / "shards"
    code, stdout, err = _cli([listing, "--out", out], capsys)
    assert code == 0, err
    assert stdout.startswith("7 rows: 2 ok, 5 rejected, 0 failed")
    rows = pq.read_table(out / "status.parquet").to_pylist()
    assert [(r["status"], (r["error"] or "").split(":")[0]) for r in rows] == [
        ("ok", ""),
        ("rejected", "invalid_row"),
        ("rejected", "invalid_row"),
        ("rejected", "invalid_url"),
        ("rejected", "invalid_row"),
        ("rejected", "invalid_url"),
        ("ok", ""),
    ]
    assert rows[4]["error"] == "invalid_row: column 'caption' holds 70000 characters (limit 65536)"
    assert images.hits("/p1.jpg") == 0  # a refused row is never fetched
    members = _all_members(out)
    assert members[rows[6]["member"]] == bodies[2]
    assert json.loads(members["000000006.json"])["caption"] == '{"nested": true}'
    assert json.loads(members["000000006.json"])["n"] == "two"  # mixed types: kept as text


def test_hostile_csv_cells_are_kept_as_text(
    images: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _serve(images, 2)
    listing = tmp_path / "l.csv"
    listing.write_bytes(
        b"\xef\xbb\xbfurl,caption,note\n"
        + f'{images.url("/p0.jpg")},"two\nlines, ""quoted""",=HYPERLINK("http://x.invalid")\n'.encode()
        + f"{images.url('/p1.jpg')},café,".encode()
        + b"@SUM(1) \xff\n"  # not UTF-8 in a kept column: decoded, the bad byte replaced
    )
    out = tmp_path / "shards"
    code, stdout, err = _cli([listing, "--out", out], capsys)
    assert code == 0, err
    assert stdout.startswith("2 rows: 2 ok")
    members = _all_members(out)
    assert members["000000000.txt"].decode() == 'two\nlines, "quoted"'
    assert members["000000001.txt"].decode() == "café"
    assert json.loads(members["000000000.json"])["note"] == '=HYPERLINK("http://x.invalid")'
    assert json.loads(members["000000001.json"])["note"] == "@SUM(1) \ufffd"


def test_the_guard_is_on(images: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _serve(images, 1)
    listing = _write(tmp_path / "l.parquet", _listing(images, 1))
    out = tmp_path / "shards"
    code, stdout, err = run_cli(["download", listing, "--out", out, "--processes", "1"], capsys)
    assert code == 1, err  # no image: the exit status says so
    assert "1 rejected" in stdout and "blocked_address" in stdout and "no image downloaded" in stdout
    assert images.hits("/p0.jpg") == 0


def test_cli_errors_are_one_line(images: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _serve(images, 2)
    good = _write(tmp_path / "good.parquet", _listing(images, 2))
    out = tmp_path / "shards"

    code, _, err = _cli([good, "--out", out, "--url-col", "URL"], capsys)
    assert_one_line_error(code, err, "no column 'URL'", "--url-col")
    code, _, err = _cli([good, "--out", out, "--caption-col", "TEXT"], capsys)
    assert_one_line_error(code, err, "no column 'TEXT'", "--caption-col")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 this is not parquet")
    code, _, err = _cli([tmp_path / "bad.parquet", "--out", out], capsys)
    assert_one_line_error(code, err, "bad.parquet: not a readable PARQUET listing")
    (tmp_path / "ragged.csv").write_text("url,caption\nhttp://a.invalid/x.jpg,one,extra,cells\n")
    code, _, err = _cli([tmp_path / "ragged.csv", "--out", out], capsys)
    assert_one_line_error(code, err, "ragged.csv: not a readable CSV listing")
    code, _, err = _cli([tmp_path / "missing.csv", "--out", out], capsys)
    assert_one_line_error(code, err, "missing.csv: no such file")
    (tmp_path / "l.txt").write_text("http://a.invalid/x.jpg\n")
    code, _, err = _cli([tmp_path / "l.txt", "--out", out], capsys)
    assert_one_line_error(code, err, "unknown listing format '.txt'")
    pq.write_table(pa.table({"url": [1, 2], "caption": ["a", "b"]}), tmp_path / "ints.parquet")
    code, _, err = _cli([tmp_path / "ints.parquet", "--out", out], capsys)
    assert_one_line_error(code, err, "holds int64 values, not URL strings")
    pq.write_table(
        pa.table({"url": pa.array([], pa.string()), "caption": pa.array([], pa.string())}),
        tmp_path / "e.parquet",
    )
    code, _, err = _cli([tmp_path / "e.parquet", "--out", out], capsys)
    assert_one_line_error(code, err, "has no rows")
    (tmp_path / "e.jsonl").write_text("\n\n")
    code, _, err = _cli([tmp_path / "e.jsonl", "--out", out], capsys)
    assert_one_line_error(code, err, "e.jsonl: the listing has no rows")
    pq.write_table(
        pa.table({"url": ["http://a.invalid/x.jpg"], "caption": ["a"], "status": ["x"]}),
        tmp_path / "r.parquet",
    )
    code, _, err = _cli([tmp_path / "r.parquet", "--out", out], capsys)
    assert_one_line_error(code, err, "['status']", "rename")
    code, _, err = _cli([good, "--out", out, "--resize-mode", "border"], capsys)
    assert_one_line_error(code, err, "--resize-mode must be one of no, keep_ratio, center_crop")
    assert not out.exists()

    code, _, err = _cli([good, "--out", out], capsys)
    assert code == 0, err
    other = _write(tmp_path / "other.parquet", {**_listing(images, 2), "caption": ["x", "y"]})
    code, _, err = _cli([other, "--out", out], capsys)
    assert_one_line_error(code, err, "holds the shards of another listing (good.parquet, 2 rows", "--out")
    code, _, err = _cli([good, "--out", out, "--resize-mode", "keep_ratio"], capsys)
    assert_one_line_error(code, err, "was downloaded with --resize-mode no, not keep_ratio")
    from fairsets.core.atomic import layout_lock

    with layout_lock(out):  # another download into the same folder
        code, _, err = _cli([good, "--out", out], capsys)
    assert_one_line_error(code, err, "is running there")
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "00000.tar").write_bytes(b"")
    code, _, err = _cli([good, "--out", stray], capsys)
    assert_one_line_error(code, err, "is not empty and holds no fairsets download")


def test_read_listing_keeps_columns_and_order(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "l.parquet",
        {
            "URL": ["http://a.invalid/1.jpg", None],
            "TEXT": ["one", None],
            "n": [1, 2],
            "tags": [["a"], []],
            "when": [datetime.date(2024, 5, 1), None],
            "raw": [b"\x00\x01", b"ok"],
        },
    )
    lst = read_listing(path, "URL", "TEXT")
    assert lst.extras == ("n", "tags", "when", "raw")
    assert lst.table.column_names == ["n", "tags", "when", "raw", "caption", "url", "fairsets_rejected"]
    # kept as img2dataset can write them to {key}.json: JSON values as they are, the rest as text
    assert lst.table.column("tags").to_pylist() == [["a"], []]
    assert lst.table.column("when").to_pylist() == ["2024-05-01", None]
    assert lst.table.column("raw").to_pylist() == ["\x00\x01", "ok"]
    assert lst.table.column("url").to_pylist() == ["http://a.invalid/1.jpg", ""]
    assert lst.table.column("fairsets_rejected").to_pylist() == [
        None,
        "invalid_url: the URL is missing or not a string",
    ]
    assert lst.n_rejected == 1
    with pytest.raises(ListingError, match="both the URL and the caption column"):
        read_listing(path, "URL", "URL")


def test_resizing_loads_no_pytorch() -> None:
    """img2dataset's resizer gets its transforms from albumentations.augmentations alone."""
    code = textwrap.dedent(
        """
        import io, sys
        from PIL import Image
        from fairsets.fetch.download import ImageSpec
        buf = io.BytesIO()
        Image.new("RGB", (800, 600), (10, 20, 30)).save(buf, "JPEG")
        for mode, want in (("keep_ratio", (512, 384)), ("center_crop", (384, 384))):
            img, w, h, ow, oh, err = ImageSpec(mode, 384).resizer(10**8)(io.BytesIO(buf.getvalue()))
            assert err is None and (w, h, ow, oh) == (*want, 800, 600), (mode, w, h, err)
            assert Image.open(io.BytesIO(img)).size == want
        heavy = [m for m in ("torch", "ray", "wandb", "pandas") if m in sys.modules]
        print(heavy)
        """
    )
    env = dict(os.environ, NO_ALBUMENTATIONS_UPDATE="1")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip() == "[]"
