"""Tables printed into a pipe (COLUMNS unset: Rich's 80 columns) fit the width and cut no value."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_train_split import MeanColour
from train_data import png, write_labels

from cli_helpers import run_cli
from fairsets.core.console import DataTable

LONG = "perceived_label_without_any_space_that_no_column_of_an_eighty_column_table_can_hold"


def _squash(text: str) -> str:
    return "".join(text.split())


def _columns(table: str) -> list[str]:
    """Each column's text, its wrapped lines joined (whitespace dropped): a folded cell reads whole."""
    cols: dict[int, str] = {}
    for line in table.splitlines():
        if line.startswith(("│", "┃")):
            for i, cell in enumerate(line.replace("┃", "│").strip("│").split("│")):
                cols[i] = cols.get(i, "") + _squash(cell)
    return [cols[i] for i in sorted(cols)]


def _table(text: str, title: str) -> str:
    """The lines of the table whose title starts with ``title``, through its bottom border."""
    lines = text[text.index(title) :].splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith("└"))
    return "\n".join(lines[: end + 1])


def test_a_data_table_folds_long_cells_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    monkeypatch.delenv("COLUMNS", raising=False)
    table = DataTable("model", "path", "accuracy", title=f"results of {LONG}")
    table.add_row("hf:org/" + LONG, "/data/" + LONG + "/shards/00000.tar", "0.873")
    out = io.StringIO()
    Console(file=out).print(table)  # a file, not a terminal: 80 columns
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert "…" not in text, text
    assert f"resultsof{LONG}" in _squash(text)  # the title
    model, path, accuracy = _columns(text)
    assert (model, path, accuracy) == (
        "modelhf:org/" + LONG,
        f"path/data/{LONG}/shards/00000.tar",
        "accuracy0.873",
    )


def test_annotate_train_prints_its_table_whole_into_a_pipe(
    tmp_path: Path, shard_writer: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr("fairsets.models.load_vlm", lambda *a, **k: MeanColour())
    rng = np.random.default_rng(0)
    samples, labels = [], []
    for i in range(16):
        colour = np.array([200, 30, 30] if i % 2 else [30, 30, 200], np.uint8)
        samples.append(
            (
                f"k{i:02d}",
                {
                    "png": png(np.clip(colour + rng.integers(-20, 20, (16, 16, 3)), 0, 255).astype(np.uint8)),
                    "txt": "x",
                },
            )
        )
        labels.append({"shard": "s", "key": f"k{i:02d}", "label": LONG if i % 2 else "blue"})
    shard = shard_writer(tmp_path / "s.tar", samples)
    code, _, err = run_cli(
        ["annotate", "train", write_labels(tmp_path / "labels.csv", labels), "--encoder",
         "torchvision:mobilenet_v3_small", "--pretrained", "none", "--shards", shard, "--out",
         tmp_path / "head.npz"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    table = _table(err, "gender head on the test part")
    assert max(len(line) for line in table.splitlines()) <= 80, table
    assert "…" not in table and f"blue{LONG}" in _columns(table)[0], table


def test_a_later_columns_value_is_honoured_in_the_same_process(monkeypatch) -> None:
    # Rich reads COLUMNS when a console is made: a console cached under another width must not
    # keep it (one command after another in a test process, or a library caller resizing)
    import io

    from fairsets.core import console as con

    monkeypatch.setenv("COLUMNS", "40")
    buf = io.StringIO()
    monkeypatch.setattr("sys.stdout", buf)
    con.say("x " * 60, wrap=True)
    assert max(len(line) for line in buf.getvalue().splitlines()) <= 40
    monkeypatch.setenv("COLUMNS", "200")
    buf2 = io.StringIO()
    monkeypatch.setattr("sys.stdout", buf2)
    con.say("x " * 60, wrap=True)
    assert len(buf2.getvalue().splitlines()) == 1
