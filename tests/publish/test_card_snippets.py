"""The card's loading snippets are written from the files that exist, and every one of them runs.

The snippets of the built example's README.md are extracted and executed, each in a fresh Python
process in the dataset's folder, as the card says; the Hub snippet gets the documented substitution
(``repo`` set to the local folder). Then summaries with missing splits check that no snippet names a
split or shard that was not written (the old card always named ``test-*.tar``: IndexError).
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fairsets.publish.card import load_snippets, render_card

PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
QUOTED_PATH = re.compile(r"""["']((?:shards|metadata)/[^"']+)["']""")


def python_blocks(card: str) -> list[str]:
    """The ```python blocks of a card, in order."""
    return PYTHON_BLOCK.findall(card)


def _expand_braces(pattern: str) -> list[str]:
    m = re.search(r"\{(\d+)\.\.(\d+)\}", pattern)
    if not m:
        return [pattern]
    width = len(m.group(1))
    return [
        pattern[: m.start()] + f"{i:0{width}d}" + pattern[m.end() :]
        for i in range(int(m.group(1)), int(m.group(2)) + 1)
    ]


def _run(code: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(cache / "hf"),
        "HF_DATASETS_CACHE": str(cache / "hf" / "datasets"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "CROISSANT_CACHE": str(cache / "croissant"),
    }
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=240
    )


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_snippet_of_the_example_card_runs(example_out: Path, tmp_path: Path) -> None:
    card = (example_out / "README.md").read_text(encoding="utf-8")
    blocks = python_blocks(card)
    assert len(blocks) == 5, blocks
    outputs = []
    for code in blocks:
        for path in QUOTED_PATH.findall(code):  # every path a snippet names exists
            for pattern in _expand_braces(path):
                assert glob.glob(str(example_out / pattern)), (pattern, code)
        # the documented substitution: the Hub snippet reads a local copy once `repo` is its folder
        local = re.sub(r"^repo = .*$", f"repo = {json.dumps(str(example_out))}", code, flags=re.M)
        proc = _run(local, example_out, tmp_path)
        assert proc.returncode == 0, f"{code}\n---\n{proc.stderr[-4000:]}"
        outputs.append(proc.stdout)
    hub, local_copy, webds, duck, croissant = outputs
    assert "num_rows: 2" in hub and "(512, 512)" in hub and "'state': 'Kerala'" in hub
    assert "train: Dataset" in local_copy and "test: Dataset" in local_copy
    assert "(512, 512)" in webds and "Kerala" in webds
    assert "Kerala" in duck and "train" in duck and "test" in duck
    assert "balanced_train_images" in croissant and "balanced_train_images/image" in croissant


def _summary(splits: dict[str, list[str]]) -> dict[str, Any]:
    return {
        "name": "tiny",
        "license": ["CC0-1.0"],
        "groups": ["state", "gender name"],
        "variants": {
            "balanced": {
                split: {"num_samples": 3, "shards": shards, "metadata": f"metadata/balanced/{split}.parquet"}
                for split, shards in splits.items()
            }
        },
    }


def test_snippets_name_only_the_splits_that_exist() -> None:
    summary = _summary({"train": ["shards/balanced/train-00000.tar"]})
    code = "\n".join(c for _, c in load_snippets(summary))
    assert "test" not in code  # no split that was not written
    assert '{"train": "shards/balanced/train-*.tar"}' in code
    assert 'urls = "shards/balanced/train-00000.tar"' in code
    assert '\\"gender name\\"' in code  # a group name that is not an identifier is quoted in SQL
    compile(code, "<card>", "exec")  # the snippets are valid Python


def test_snippets_follow_the_shards_written() -> None:
    shards = [f"shards/balanced/test-{i:05d}.tar" for i in range(3)]
    summary = _summary({"test": shards})
    code = "\n".join(c for _, c in load_snippets(summary))
    assert 'urls = "shards/balanced/test-{00000..00002}.tar"' in code
    assert 'split="test"' in code and "train" not in code
    # shards that are not numbered from 00000 are listed, never guessed with a brace range
    summary = _summary({"train": ["shards/balanced/train-00001.tar", "shards/balanced/train-00002.tar"]})
    code = "\n".join(c for _, c in load_snippets(summary))
    assert 'urls = ["shards/balanced/train-00001.tar", "shards/balanced/train-00002.tar"]' in code


def test_rendered_card_has_only_existing_splits() -> None:
    text = render_card(_summary({"train": ["shards/balanced/train-00000.tar"]}))
    for code in python_blocks(text):
        assert "test-" not in code and '"test"' not in code
