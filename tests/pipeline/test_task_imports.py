"""A worker imports only what its task runs, and lives for the whole build.

``import albumentations`` (2.x) imports PyTorch whenever it is installed (its package ``__init__``
runs ``from .pytorch import *``; importing any of its submodules runs that ``__init__`` first), and
so does ``import webdataset``: seconds of CPU and hundreds of MiB per worker. A shard without
augmented items therefore must not import albumentations; a shard with augmented items loads
albumentations' transforms without its package ``__init__``, and no shard runs webdataset's
(:mod:`fairsets.core.light_import`): no shard imports PyTorch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from fairsets.pipeline.executors import LocalExecutor

NOT_IMPORTED = ("albumentations", "torch", "webdataset.compat", "webdataset.pipeline", "scipy")

_MATERIALIZE = """
import io, json, sys
from pathlib import Path
from PIL import Image
from fairsets.core.tables import write_table
from fairsets.pipeline.tasks import run_materialize_task

work = Path(sys.argv[1])
buf = io.BytesIO()
Image.new("RGB", (8, 8), (200, 120, 90)).save(buf, format="JPEG")
write_table(work / "w" / "samples" / "t.pool.parquet", [{"key": "k", "image": buf.getvalue()}])
item = {"key": "k", "source_key": "k", "pool": "samples/t.pool.parquet", "augment": AUGMENT,
        "variant": "imbalanced", "split": "train", "meta": {"state": "Kerala"}}
spec = {"task_id": "m1", "workdir": str(work / "w"), "out_dir": str(work), "jpeg_quality": 95,
        "shard": "shards/imbalanced/train-00000.tar", "items": [item]}
marker = run_materialize_task(spec)
assert marker["count"] == 1, marker
print(json.dumps([m for m in NOT_IMPORTED if m in sys.modules]))
"""


def _imported_by_a_shard(tmp_path: Path, not_imported: tuple[str, ...], augment: dict | None) -> list[str]:
    """Write one shard in a fresh interpreter; the modules of ``not_imported`` it imported."""
    code = f"NOT_IMPORTED = {not_imported!r}\nAUGMENT = {augment!r}\n{_MATERIALIZE}"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSTARTUP"}
    res = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env, timeout=120
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


def test_a_shard_without_augmentation_imports_neither_albumentations_nor_torch(tmp_path: Path) -> None:
    assert _imported_by_a_shard(tmp_path, NOT_IMPORTED, None) == []
    assert (tmp_path / "shards" / "imbalanced" / "train-00000.tar").is_file()


def test_an_augmented_shard_imports_no_torch(tmp_path: Path) -> None:
    """albumentations' transforms run without its package __init__ and so without PyTorch."""
    not_imported = ("torch", "albumentations.pytorch", "webdataset.compat")
    assert _imported_by_a_shard(tmp_path, not_imported, {"kind": "mild", "seed": 7}) == []


def _pid(spec: dict) -> dict:
    time.sleep(0.05)  # long enough that every worker gets a task
    return {"pid": os.getpid()}


def test_local_workers_live_for_every_stage_of_a_build(tmp_path: Path) -> None:
    specs = [{"task_id": str(i), "workdir": str(tmp_path)} for i in range(6)]
    with LocalExecutor(workers=2) as ex:
        first = {r["pid"] for r in ex.map(_pid, specs)}  # the per-sample stage
        pool = ex._pool
        second = {r["pid"] for r in ex.map(_pid, specs)}  # the shard stage
        assert ex._pool is pool
    # the same (at most two) processes ran both stages: none was started again for the second
    assert len(first | second) <= 2
