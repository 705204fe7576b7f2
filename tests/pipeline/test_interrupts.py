"""Interruption, resume and concurrency: a killed build resumes byte-identical and leaves nothing behind;
concurrent writers of one folder do not lose each other's work."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fairsets.audit.embeddings import EmbeddingCache
from fairsets.cli import app
from fairsets.core.atomic import _temp_for
from fairsets.pipeline.build import build
from fairsets.pipeline.config import load_recipe
from fairsets.pipeline.executors import workers_busy
from fairsets.publish.manifest import verify_layout
from helpers import tree_digest, write_candidates, write_recipe


def _temps(out: Path) -> list[str]:
    return sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if ".tmp-" in p.name)


@pytest.mark.timeout(180)
def test_a_resume_removes_the_temporary_files_a_killed_build_left(tmp_path: Path) -> None:
    listing = write_candidates(tmp_path / "c", 6)
    recipe = load_recipe(write_recipe(tmp_path / "r.toml", listing, quota=1, workers=0))
    out = tmp_path / "o"
    build(recipe, out)
    reference = tree_digest(out)
    # what a SIGKILL between writing a file and renaming it leaves (seen in the publish stage)
    work = out / ".fairsets"
    shard = next((out / "shards").rglob("*.tar"))
    left = [
        _temp_for(out / "rejects.parquet"),
        _temp_for(out / "README.md"),
        _temp_for(shard),
        _temp_for(next((work / "markers" / "samples").glob("*.json"))),
    ]
    for p in left:
        p.write_bytes(b"half a file")
    mine = out / ".notes.tmp-mine"  # a user's dotfile is not one of ours: kept
    mine.write_text("keep")
    cache = work / "embeddings" / "m" / "images"  # an audit's, maybe writing now: not the build's
    cache.mkdir(parents=True)
    audit_tmp = _temp_for(cache / "part-00000.parquet")
    audit_tmp.write_bytes(b"x")
    build(recipe, out)
    assert [p for p in left if p.exists()] == []
    assert mine.exists() and audit_tmp.exists()
    mine.unlink()
    assert tree_digest(out) == reference
    assert verify_layout(out) == []


def _session_alive(sid: int) -> list[int]:
    alive = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] not in ("Z", "X") and int(fields[3]) == sid:
            alive.append(int(d.name))
    return alive


def _kill_when(cmd: list[str], ready, how: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 150
    while proc.poll() is None and time.monotonic() < deadline and not ready():
        time.sleep(0.005)
    if proc.poll() is not None:
        pytest.fail(f"the build ended before the kill point: {proc.stderr.read().decode()}")  # type: ignore[union-attr]
    if how == "group":
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        os.kill(proc.pid, getattr(signal, how))
    proc.wait(timeout=60)
    return proc


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="scans /proc (Linux)")
@pytest.mark.timeout(400)
def test_kills_at_several_points_resume_byte_identical(tmp_path: Path) -> None:
    listing = write_candidates(tmp_path / "c", 12)
    recipe = write_recipe(tmp_path / "r.toml", listing, quota=2, workers=2, task_size=2, shard_size=2)
    ref = tmp_path / "ref"
    build(load_recipe(recipe), ref)
    reference = tree_digest(ref)

    def markers(out: Path, kind: str) -> int:
        d = out / ".fairsets" / "markers" / kind
        return len(list(d.glob("*.json"))) if d.is_dir() else 0

    points = [
        ("SIGKILL", lambda o: markers(o, "samples") >= 1),  # the driver only
        ("group", lambda o: markers(o, "samples") >= 3),
        ("SIGTERM", lambda o: markers(o, "materialize") >= 1),
        ("SIGINT", lambda o: (o / "rejects.parquet").exists() or markers(o, "materialize") >= 3),
    ]
    for n, (how, ready) in enumerate(points):
        out = tmp_path / f"o{n}"
        cmd = [sys.executable, "-m", "fairsets.cli", "build", str(recipe), "--out", str(out), "--quiet"]
        proc = _kill_when(cmd, lambda out=out, ready=ready: ready(out), how)
        err = proc.stderr.read().decode()  # type: ignore[union-attr]
        if how in ("SIGTERM", "SIGINT"):
            assert proc.returncode == 128 + getattr(signal, how)
            assert err.strip().splitlines()[-1].startswith(f"error: stopped by {how}"), err
        deadline = time.monotonic() + 10
        while _session_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _session_alive(proc.pid) == [], f"{how}: processes outlived the build"
        with open(out / ".fairsets" / "lock", "a") as fh:  # released
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert not workers_busy(out / ".fairsets")
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
        assert tree_digest(out) == reference, how
        assert [t for t in _temps(out) if not t.startswith(".fairsets/")] == []


@pytest.mark.timeout(60)
def test_concurrent_audits_keep_every_part_of_the_embedding_cache(tmp_path: Path) -> None:
    root = tmp_path / "cache"

    def add(who: str) -> None:
        cache = EmbeddingCache(root, "m")
        for i in range(15):
            cache.add_images([(f"{who}{i}", "sha", np.full(8, i, np.float32))])

    threads = [threading.Thread(target=add, args=(w,)) for w in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = EmbeddingCache(root, "m").load_images()
    assert sorted(k for k, _ in got) == sorted(f"{w}{i}" for w in "ab" for i in range(15))
    assert len(list((root / "images").glob("part-*.parquet"))) == 30
    assert _temps(root) == []


@pytest.mark.timeout(60)
def test_geo_profile_refuses_to_write_over_its_input_shards(tmp_path: Path) -> None:
    shards = tmp_path / "shards"
    shards.mkdir()
    table = pa.table({"caption": ["a street in Paris, France", "a cat"]})
    for i in range(2):
        pq.write_table(table, shards / f"s{i}.parquet")
    before = {p.name: p.read_bytes() for p in shards.iterdir()}
    for args in ([str(shards)], [str(shards / "s1.parquet"), str(shards / "s0.parquet")]):
        res = CliRunner().invoke(app, ["geo", "profile", *args, "--out", str(shards), "-m", "string"])
        assert res.exit_code == 2, res.output
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and "would replace" in lines[0] and "another --out" in lines[0], lines
    assert {p.name: p.read_bytes() for p in shards.iterdir()} == before


@pytest.mark.timeout(120)
def test_concurrent_card_updates_keep_every_audit_and_wait_for_a_build(
    example_out: Path, tmp_path: Path
) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "publish"))
    from test_card_audit import audit_for, write_audit

    from fairsets.audit.card import update_card

    models = ["ViT-B-32", "ViT-B-16", "ViT-L-14"]
    for trial in range(3):
        ds = tmp_path / f"d{trial}"
        shutil.copytree(example_out, ds)
        audits = [
            write_audit(tmp_path / f"a{trial}{m}", audit_for(ds, model=m, seed=i))
            for i, m in enumerate(models)
        ]
        threads = [threading.Thread(target=update_card, args=(ds, a)) for a in audits]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        text = (ds / "README.md").read_text(encoding="utf-8")
        assert [m for m in models if f"fairsets:audit:open_clip:{m}:none start" not in text] == []
        assert verify_layout(ds) == []
    # a build holds the layout: the update waits, then refuses in one line, and writes nothing
    before = {p.name: p.read_bytes() for p in (ds / "README.md", ds / "manifest.json")}
    with open(ds / ".fairsets" / "lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        res = CliRunner().invoke(app, ["card", "update", str(ds), "--audit", str(audits[0])])
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "a build (or another update) is running" in lines[0], lines
    assert {p.name: p.read_bytes() for p in (ds / "README.md", ds / "manifest.json")} == before


@pytest.mark.timeout(60)
def test_hub_publish_refuses_while_a_build_holds_the_layout(example_out: Path, tmp_path: Path) -> None:
    from fairsets.publish.hub import PublishError, publish

    ds = tmp_path / "ds"
    shutil.copytree(example_out, ds)

    class NoCalls:  # a stand-in client: any call is a failure of the test
        def __getattr__(self, name: str) -> None:
            raise AssertionError(f"the Hub was called ({name}) while a build held the layout")

    with open(ds / ".fairsets" / "lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        with pytest.raises(PublishError, match=r"a build \(or another update\) is running there"):
            publish(ds, "org/name", api=NoCalls(), token="hf_secret_value")
        with pytest.raises(PublishError, match="is running there"):
            publish(ds, "org/name", dry_run=True)
    assert publish(ds, "org/name", dry_run=True).files  # free again


@pytest.mark.timeout(180)
def test_a_stopped_build_leaves_no_temporary_file_in_the_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fairsets.pipeline import build as build_mod
    from fairsets.pipeline.build import BuildStopped

    listing = write_candidates(tmp_path / "c", 6)
    recipe = load_recipe(write_recipe(tmp_path / "r.toml", listing, quota=1, workers=0))
    out = tmp_path / "o"
    real = build_mod.run_materialize_task
    calls = []

    def stopped_mid_shard(spec: dict) -> dict:
        if calls:  # the second shard: its worker is terminated while it writes (what Ctrl-C does)
            _temp_for(out / spec["shard"]).write_bytes(b"half a shard")
            raise BuildStopped(signal.SIGINT)
        calls.append(spec["shard"])
        return real(spec)

    monkeypatch.setattr(build_mod, "run_materialize_task", stopped_mid_shard)
    with pytest.raises(BuildStopped):
        build(recipe, out)
    assert calls and [t for t in _temps(out) if not t.startswith(".fairsets/")] == []
    monkeypatch.setattr(build_mod, "run_materialize_task", real)
    build(recipe, out)
    assert verify_layout(out) == []
