"""The annotate commands print hostile labels and paths as written (never as Rich markup).

A label ``[/]`` made ``annotate train`` and ``annotate classify`` exit 2 after writing their outputs
(Rich's ``MarkupError`` in the summary), a path with ``[/b]`` did the same to ``annotate persons``,
and ``[bold red]x`` printed ``x``. The sweep of every print is ``tests/test_cli_markup.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_classify import ENCODER, make_ann, make_head
from test_train_rows import _good_rows, _shard
from train_data import write_labels

from cli_helpers import run_cli

LABELS = {"red": "[/]", "blue": "[bold red]x"}


def test_train_prints_hostile_labels(
    tmp_path: Path, shard_writer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _shard(tmp_path, shard_writer)
    rows = [{**r, "label": LABELS[r["label"]]} for r in _good_rows()]
    labels = write_labels(tmp_path / "labels.csv", rows)
    out = tmp_path / "[/b]" / "head.npz"
    args = ["annotate", "train", labels, "--encoder", ENCODER, "--pretrained", "none"]
    code, _, err = run_cli([*args, "--shards", tmp_path / "s.tar", "--out", out], capsys)
    assert code == 0, err
    assert out.is_file()
    lines = err.splitlines()
    for label in LABELS.values():
        assert any(f"│ {label} " in line for line in lines), err  # its row of the per-class table
        assert repr(label) in next(line for line in lines if "labelled crop(s) in" in line), err
    assert any(line.startswith(f"wrote {out} ") for line in lines), err


def test_classify_prints_hostile_labels(
    tmp_path: Path, shard_writer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import re

    built = make_ann(tmp_path / "[/b]", shard_writer, shards=1, images=2)
    classes = ["[/]", "[bold red]x", "pip install 'fairsets[geo]'"]
    make_head(tmp_path / "head.npz", classes=classes)
    args = ["annotate", "classify", built["ann"], "--head", tmp_path / "head.npz", "--workers", "0"]
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    line = next(line for line in err.splitlines() if line.startswith("gender: "))
    shown = re.search(r"boxes labelled \((.*?)\)(,|;)", line)
    assert shown and [part.split(" ", 1)[1] for part in shown.group(1).split(", ")] == classes, line
    assert line.endswith(f"→ {built['ann']}/attributes/gender/"), line


def test_persons_prints_a_hostile_path(
    tmp_path: Path,
    shard_writer: Any,
    yolo_assets: Path,
    fall_weights: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shard = shard_writer(
        tmp_path / "in[/b]" / "00000.tar",
        [("bus", {"jpg": (yolo_assets / "bus.jpg").read_bytes(), "txt": "people by a bus", "json": {}})],
    )
    ann = tmp_path / "[bold red]x" / "[/]ann"
    args = ["annotate", "persons", shard, "--out", ann, "--model", fall_weights]
    code, _, err = run_cli([*args, "--person-classes", "Normal,Fall", "--workers", "0"], capsys)
    assert code == 0, err
    assert any(line.startswith("1 shard(s)") and f"-> {ann}" in line for line in err.splitlines()), err
