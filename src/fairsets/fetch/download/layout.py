"""The on-disk layout of a download: status columns, round folders, and the input of a round (or of any
img2dataset run: :class:`_ShardInput`)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from fairsets.core.atomic import atomic_path

if TYPE_CHECKING:
    from .images import ImageSpec

KEY_COL = "fairsets_key"
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


def _list_rounds(
    out_dir: Path, pattern: re.Pattern[str] = _ROUND_RE, input_name: str = _INPUT
) -> list[tuple[int, Path]]:
    """``(number, folder)`` of the round folders (``pattern``) in ``out_dir`` that have their input."""
    rounds = []
    for p in out_dir.iterdir() if out_dir.exists() else ():
        m = pattern.match(p.name)
        if m and p.is_dir() and (p / input_name).exists():
            rounds.append((int(m.group(1)), p))
    return sorted(rounds)


def _oom_shards(n_rows: int, shard_size: int) -> int:
    """Digits of the shard names (img2dataset's ``oom_shard_count``): at least 5."""
    return max(5, len(str(max(1, math.ceil(n_rows / shard_size)) - 1)))


def _write_input(round_dir: Path, rows: list[dict[str, str]], shard_size: int) -> None:
    oom = _oom_shards(len(rows), shard_size)
    table = pa.table(
        {KEY_COL: [r["key"] for r in rows], "url": [r["url"] for r in rows]},
        schema=pa.schema([pa.field(KEY_COL, pa.string()), pa.field("url", pa.string())]),
    ).replace_schema_metadata({_META_SHARD_SIZE: str(shard_size), _META_OOM: str(oom)})
    with atomic_path(round_dir / _INPUT) as tmp:
        pq.write_table(table, tmp)


def _stats_done(path: Path) -> bool:
    """Whether img2dataset's ``*_stats.json`` of a shard is there and whole (the shard is done)."""
    try:
        return isinstance(json.loads(path.read_bytes()), dict)
    except (OSError, ValueError):
        return False


class _ShardInput:
    """An img2dataset input and where its shards go.

    ``path`` is a Parquet file with ``url``, ``caption`` (when ``caption``) and the ``columns``
    img2dataset keeps (``save_additional_columns``); its shards are written to ``out_dir``
    (img2dataset's layout: ``{shard}.tar``, ``{shard}.parquet``, ``{shard}_stats.json``) and the
    reader's temporary files to ``tmp_dir``. ``image`` is the
    :class:`~fairsets.fetch.download.images.ImageSpec` (None: stored as downloaded).
    """

    def __init__(
        self,
        path: Path,
        out_dir: Path,
        *,
        n_rows: int,
        shard_size: int,
        oom: int,
        caption: bool = False,
        columns: tuple[str, ...] = (KEY_COL,),
        image: ImageSpec | None = None,
        tmp_dir: Path | None = None,
    ) -> None:
        self.path = path
        self.out_dir = out_dir
        self.tmp_dir = tmp_dir if tmp_dir is not None else out_dir / "_tmp"
        self.n_rows = n_rows
        self.shard_size = shard_size
        self.oom = oom
        self.n_shards = math.ceil(n_rows / shard_size)
        self.caption = caption
        self.columns = columns
        self.image = image

    def shard_name(self, shard_id: int) -> str:
        return f"{shard_id:0{self.oom}d}"

    def shard_span(self, shard_id: int) -> tuple[int, int]:
        """Input rows ``[lo, hi)`` of a shard."""
        return shard_id * self.shard_size, min(self.n_rows, (shard_id + 1) * self.shard_size)

    def done_shards(self, round_dir: Path | None = None) -> set[int]:
        out = self.out_dir if round_dir is None else round_dir
        return {i for i in range(self.n_shards) if _stats_done(out / f"{self.shard_name(i)}_stats.json")}


class _RoundInput(_ShardInput):
    """The input of one round: keys, urls, shard size and shard-name width."""

    def __init__(self, round_dir: Path) -> None:
        table = pq.read_table(round_dir / _INPUT)
        meta = table.schema.metadata or {}
        self.keys: list[str] = table.column(KEY_COL).to_pylist()
        self.urls: list[str] = table.column("url").to_pylist()
        super().__init__(
            round_dir / _INPUT,
            round_dir,
            n_rows=len(self.keys),
            shard_size=int(meta[_META_SHARD_SIZE]),
            oom=int(meta[_META_OOM]),
        )
