"""A newcomer without img2dataset (it goes in apart, ``pip install --no-deps``): the README's
``pytest`` skips the download tests, naming the install line, instead of failing them, and
``fairsets download`` says in one line what to install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALL = "pip install --no-deps img2dataset==1.47.0"
#: The tests that download, each skipping (all or in part) without img2dataset.
FILES = (
    "tests/fetch/test_download_cli.py",
    "tests/fetch/test_download.py",
    "tests/fetch/test_listing_download.py",
    "tests/pipeline/test_url_build.py",
    "tests/fetch/test_download_rows.py",
    "tests/e2e/test_annotate_walkthrough.py",
)


def _without_img2dataset(code: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``python -c CODE ARGS`` in a child where img2dataset is not found (:mod:`without`)."""
    path = os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", "import without; without.hide('img2dataset')\n" + code, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": path},
        check=False,
    )


@pytest.mark.timeout(300)
def test_the_download_tests_skip_without_img2dataset_naming_the_install() -> None:
    proc = _without_img2dataset(
        "import sys, pytest\nsys.exit(pytest.main(sys.argv[1:]))",
        *("-q", "-rs", "-p", "no:cacheprovider", "-o", "addopts=", *FILES),
    )
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said
    assert "failed" not in said and "error" not in said.lower(), said
    skips = [line for line in said.splitlines() if line.startswith("SKIPPED")]
    assert len(skips) >= len(FILES), said
    assert all(INSTALL in line for line in skips), "\n".join(skips)
    assert " passed" in said, said  # the option mistakes are still checked


def test_download_without_img2dataset_is_one_line_naming_the_install(tmp_path: Path) -> None:
    pq.write_table(pa.table({"url": ["http://127.0.0.1:9/a.jpg"], "caption": ["a"]}), tmp_path / "l.parquet")
    proc = _without_img2dataset(
        "from fairsets.cli import app\napp(prog_name='fairsets')",
        *("download", "l.parquet", "--out", "shards"),
        cwd=tmp_path,
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "pip install --no-deps 'img2dataset==1.47.0'" in lines[0], lines[0]
    assert not (tmp_path / "shards").exists()
