"""The standard-library tar writer writes exactly the bytes of webdataset's TarWriter."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from fairsets.publish.shards import SHARD_MTIME, write_shard
from fairsets.publish.tarwriter import TarWriter

SAMPLES = [
    {"__key__": "a_0", "jpg": b"\xff\xd8" + bytes(range(256)) * 7, "json": '{"x":"é"}'.encode()},
    {"__key__": "b/long_" + "k" * 120, "jpg": bytearray(b"\x00" * 513), "json": b"{}", "_meta": "left out"},
    {"__key__": "c", "txt": memoryview(b"hello"), "cls": b"3"},
    {"__key__": "empty", "jpg": b""},
]


def _write(cls: type, **kwargs: object) -> bytes:
    buf = io.BytesIO()
    writer = cls(
        buf, user="fairsets", group="fairsets", mode=0o644, mtime=SHARD_MTIME, encoder=False, **kwargs
    )
    totals = [writer.write(dict(s)) for s in SAMPLES]
    writer.close()
    assert not buf.closed
    return buf.getvalue() + repr(totals).encode()


def test_same_bytes_as_webdataset() -> None:
    wds = pytest.importorskip("webdataset")
    assert _write(TarWriter) == _write(wds.TarWriter)


def test_refuses_what_webdataset_refuses() -> None:
    with pytest.raises(ValueError, match="must contain a __key__"):
        TarWriter(io.BytesIO()).write({"jpg": b""})
    with pytest.raises(ValueError, match="doesn't map to a bytes"):
        TarWriter(io.BytesIO()).write({"__key__": "k", "json": "text"})
    with pytest.raises(ValueError, match="encoder=False"):
        TarWriter(io.BytesIO(), encoder=True)


def test_writing_a_shard_imports_neither_webdataset_nor_torch(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from fairsets.publish.shards import write_shard\n"
        f"write_shard({str(tmp_path / 's.tar')!r}, [('k', b'jpeg', {{'key': 'k'}})])\n"
        "print(sorted(m for m in ('webdataset', 'torch', 'albumentations') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert write_shard  # the in-process import works too
