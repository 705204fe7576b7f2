"""The card's "How to load" snippets, written from the splits and shards that exist."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .header import _default_variant, _split_order
from .markdown import (
    Md,
    _py,
    md_code,
)


def _sql_name(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else '"' + name.replace('"', '""') + '"'


def _shard_urls(variant: str, split: str, shards: list[str]) -> str:
    """A Python expression for the shards of one split: brace notation when they are numbered
    ``00000`` upwards, else the list of their paths."""
    names = sorted(shards)
    numbered = [f"shards/{variant}/{split}-{i:05d}.tar" for i in range(len(names))]
    if names == numbered and len(names) > 1:
        return _py(f"shards/{variant}/{split}-{{00000..{len(names) - 1:05d}}}.tar")
    if len(names) == 1:
        return _py(names[0])
    return "[" + ", ".join(_py(n) for n in names) + "]"


def load_snippets(summary: Mapping[str, Any]) -> list[tuple[Md, Md]]:
    """The card's loading snippets, ``(introduction, python code)``, written from the files that
    exist: the splits and shards listed in ``summary["variants"]`` for the default config.

    Every snippet but the first runs in the dataset's folder; the first loads from the Hub and runs
    on a local copy too once ``repo`` is set to the folder's path (``tests/publish/
    test_card_snippets.py`` runs them all against the built example).
    """
    variants = summary["variants"]
    default = _default_variant(summary)
    splits = [sp for sp in _split_order(variants[default]) if variants[default][sp].get("shards")]
    first = splits[0] if splits else _split_order(variants[default])[0]
    repo = summary.get("repo_id") or f"YOUR-ORG/{summary['name']}"
    groups = [str(g) for g in summary.get("groups") or []] or ["license"]
    config = md_code(default)
    hub = "\n".join(
        [
            "from datasets import load_dataset",
            "",
            f"repo = {_py(repo)}  # or the path of a local copy of this folder",
            f"ds = load_dataset(repo, {_py(default)}, split={_py(first)})",
            'image, meta = ds[0]["jpg"], ds[0]["json"]',
            "print(ds, image.size, meta)",
        ]
    )
    files = ", ".join(f"{_py(sp)}: {_py(f'shards/{default}/{sp}-*.tar')}" for sp in splits)
    local = "\n".join(
        [
            "from datasets import load_dataset",
            "",
            f'ds = load_dataset("webdataset", data_files={{{files}}})',
            "print(ds)",
        ]
    )
    urls = _shard_urls(default, first, list(variants[default][first].get("shards") or []))
    webds = "\n".join(
        [
            "import webdataset as wds",
            "",
            f"urls = {urls}",
            'ds = wds.WebDataset(urls, shardshuffle=False).decode("pil").to_tuple("__key__", "jpg", "json")',
            "key, image, meta = next(iter(ds))",
            "print(key, image.size, meta)",
        ]
    )
    columns = ", ".join(_sql_name(g) for g in groups)
    sql = (
        f"SELECT {columns}, split, count(*) AS samples FROM 'metadata/{default}/*.parquet' "
        "GROUP BY ALL ORDER BY ALL"
    )
    duck = "\n".join(["import duckdb", "", f"duckdb.sql({_py(sql)}).show()"])
    intros = [
        f"With 🤗 Datasets, from the Hub (config {config}; for a local copy set `repo` to its folder):",
        f"From a local copy with 🤗 Datasets, run in its folder (config {config}, every split):",
        f"With WebDataset, in the dataset's folder (config {config}, split {md_code(first)}):",
        "The metadata tables are plain Parquet, e.g. with DuckDB, in the dataset's folder:",
    ]
    return [(Md(i), Md(c)) for i, c in zip(intros, [hub, local, webds, duck], strict=True)]
