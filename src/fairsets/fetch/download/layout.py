"""The on-disk layout of a download: status columns, round folders and the input of a round."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from fairsets.core.atomic import atomic_path

KEY_COL = "fairsets_key"
ENCODE_FORMAT = "jpg"
STATUS_COLUMNS: tuple[str, ...] = (
    "key",
    "url",
    "status",
    "error",
    "round",
    "shard",
    "member",
    "bytes",
    "sha256",
)
STATUS_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string()),
        pa.field("url", pa.string()),
        pa.field("status", pa.string()),
        pa.field("error", pa.string()),
        pa.field("round", pa.int32()),
        pa.field("shard", pa.string()),
        pa.field("member", pa.string()),
        pa.field("bytes", pa.int64()),
        pa.field("sha256", pa.string()),
    ]
)
_ROUND_RE = re.compile(r"^round-(\d{3,})$")
_INPUT = "_input.parquet"
_ROUND_STATUS = "_status.parquet"
_META_SHARD_SIZE = b"fairsets.shard_size"
_META_OOM = b"fairsets.oom_shard_count"


def _round_name(idx: int) -> str:
    return f"round-{idx:03d}"


def _list_rounds(out_dir: Path) -> list[tuple[int, Path]]:
    rounds = []
    for p in out_dir.iterdir() if out_dir.exists() else ():
        m = _ROUND_RE.match(p.name)
        if m and p.is_dir() and (p / _INPUT).exists():
            rounds.append((int(m.group(1)), p))
    return sorted(rounds)


def _write_input(round_dir: Path, rows: list[dict[str, str]], shard_size: int) -> None:
    n_shards = max(1, math.ceil(len(rows) / shard_size))
    oom = max(5, len(str(n_shards - 1)))
    table = pa.table(
        {KEY_COL: [r["key"] for r in rows], "url": [r["url"] for r in rows]},
        schema=pa.schema([pa.field(KEY_COL, pa.string()), pa.field("url", pa.string())]),
    ).replace_schema_metadata({_META_SHARD_SIZE: str(shard_size), _META_OOM: str(oom)})
    with atomic_path(round_dir / _INPUT) as tmp:
        pq.write_table(table, tmp)


class _RoundInput:
    """The input of one round: keys, urls, shard size and shard-name width."""

    def __init__(self, round_dir: Path) -> None:
        table = pq.read_table(round_dir / _INPUT)
        meta = table.schema.metadata or {}
        self.path = round_dir / _INPUT
        self.keys: list[str] = table.column(KEY_COL).to_pylist()
        self.urls: list[str] = table.column("url").to_pylist()
        self.shard_size = int(meta[_META_SHARD_SIZE])
        self.oom = int(meta[_META_OOM])
        self.n_shards = math.ceil(len(self.keys) / self.shard_size)

    def shard_name(self, shard_id: int) -> str:
        return f"{shard_id:0{self.oom}d}"

    def done_shards(self, round_dir: Path) -> set[int]:
        return {i for i in range(self.n_shards) if (round_dir / f"{self.shard_name(i)}_stats.json").exists()}
