"""Shards are written by webdataset's own TarWriter, loaded without webdataset's package ``__init__``.

``import webdataset`` imports PyTorch (its ``__init__`` imports every submodule); the shard writer
loads ``webdataset.writer`` alone (:mod:`fairsets.core.light_import`). Each import check runs in a
fresh interpreter: the test process itself has imported whatever the other tests needed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fairsets.publish import shards
from fairsets.publish.shards import write_shard

RECORDS = [
    ("a_0", b"\xff\xd8" + bytes(range(256)) * 7, {"x": "é", "n": None, "aug": {"b": 1, "a": [2, 3]}}),
    ("b-long_" + "k" * 190, bytearray(b"\x00" * 513), {}),
    ("c", memoryview(b"hello"), {"k": 1.5, "t": True}),
    ("empty", b"", {"key": "empty"}),
]
#: The shard of RECORDS as fairsets has always written it (webdataset 1.0.2's TarWriter, USTAR).
SHA256 = "175c432fb3aaabd6a0a29de5f30369aafd2445955a9cc7d219e36dce13a49952"

_WRITE = f"""
import json, sys
from fairsets.publish.shards import write_shard
records = {[(key, bytes(jpeg), meta) for key, jpeg, meta in RECORDS]!r}
info = write_shard(sys.argv[1], records)
wds = sys.modules["webdataset"]
print(json.dumps({{
    "sha256": info["sha256"],
    "imported": sorted(m for m in ("torch", "albumentations", "webdataset.compat", "webdataset.pipeline")
                       if m in sys.modules),
    "init_ran": "__getattr__" not in vars(wds),
}}))
"""


def _run(code: str, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSTARTUP"}
    res = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


def test_shard_bytes_are_unchanged(tmp_path: Path) -> None:
    info = write_shard(tmp_path / "s.tar", RECORDS)
    assert (info["sha256"], info["bytes"], info["count"]) == (SHA256, 20480, 4)


def test_shards_are_written_by_webdatasets_tarwriter() -> None:
    tar_writer = shards._tar_writer()
    assert tar_writer.__module__ == "webdataset.writer"
    assert tar_writer is sys.modules["webdataset.writer"].TarWriter


def test_writing_a_shard_imports_neither_torch_nor_the_webdataset_package_init(tmp_path: Path) -> None:
    got = _run(_WRITE, str(tmp_path / "s.tar"))
    assert got == {"sha256": SHA256, "imported": [], "init_ran": False}


def test_webdataset_imported_as_usual_is_used_as_it_is(tmp_path: Path) -> None:
    """A process that imported webdataset already writes with it (the same bytes)."""
    code = (
        "import webdataset\n"
        + _WRITE
        + "assert webdataset.TarWriter is sys.modules['webdataset.writer'].TarWriter\n"
    )
    got = _run(code, str(tmp_path / "s.tar"))
    assert got["sha256"] == SHA256 and got["init_ran"] is True


def test_webdataset_package_api_still_works_after_a_light_load(tmp_path: Path) -> None:
    """The package ``__init__`` skipped by the light load runs when its names are asked for."""
    code = (
        _WRITE
        + "tar_writer = sys.modules['webdataset.writer'].TarWriter\n"
        + "import webdataset\n"
        + "assert webdataset.TarWriter is tar_writer and webdataset.WebDataset is not None\n"
        + "assert 'webdataset.compat' in sys.modules\n"
    )
    got = _run(code, str(tmp_path / "s.tar"))
    assert got == {"sha256": SHA256, "imported": [], "init_ran": False}
