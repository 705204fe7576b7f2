"""``benchmarks/bench_audit_persons.py`` at a small size: it finishes, prints the step ratios and peak
RSS of both sides, and fairsets and the pandas baseline agree on every number; the generated folder
has the rows and files asked for and real matches; a disagreement is reported and fails the run.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_audit_persons.py"
ROWS, FILES = 20_000, 4
#: fairsets' short category list (the shipped one adds 6,000 WordNet nouns): each side's data-bias
#: step costs milliseconds per category, whatever the number of rows
CATEGORIES = Path(__file__).resolve().parents[2] / "src/fairsets/audit/persons/data/social_categories.toml"


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_audit_persons", BENCH)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _run(work: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        str(BENCH),
        "--rows",
        str(ROWS),
        "--files",
        str(FILES),
        "--work",
        str(work),
        "--categories",
        str(CATEGORIES),
        *extra,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    work = tmp_path_factory.mktemp("bench")
    return work, _run(work)


def test_the_benchmark_finishes_with_ratios_and_the_same_numbers(smoke: tuple[Path, Any]) -> None:
    _, proc = smoke
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for step in ("read + join", "composition", "crime words", "data bias", "total"):
        assert re.search(rf"^{re.escape(step)}\s+[\d.]+\s+[\d.]+\s+[\d.]+x$", out, re.M), out
    assert re.search(r"^peak RSS: fairsets \d+ MB, pandas \d+ MB$", out, re.M), out
    assert re.search(r"^>= 10x faster: (yes|no) \([\d.]+x\)$", out, re.M), out
    assert re.search(r"^fairsets <= 2 GB: yes \(\d+ MB\)$", out, re.M), out
    same = re.search(r"^same numbers: yes \((\d+) counts, 3 means\)$", out, re.M)
    assert same and int(same.group(1)) > 200, out  # every group, bin and category is compared


def test_the_folder_has_the_rows_files_and_real_matches(smoke: tuple[Path, Any]) -> None:
    work, proc = smoke
    assert proc.returncode == 0, proc.stderr
    ann = work / f"ann-{ROWS}-{FILES}-0"
    boxes = sorted((ann / "boxes").glob("*.parquet"))
    assert len(boxes) == FILES and len(list((ann / "images").glob("*.parquet"))) == FILES
    table = pq.read_table(ann / "boxes")
    assert table.num_rows == ROWS
    kept = table.filter(table["kept"]).num_rows
    assert 0.8 * ROWS < kept < 0.95 * ROWS
    gender = pq.read_table(ann / "attributes" / "gender")
    assert gender.num_rows == kept  # one label row per kept box, some of them NULL
    assert 0 < gender["perceived_gender"].null_count < 0.05 * kept

    from fairsets.audit.persons import tables, transfer
    from fairsets.audit.persons.crime import crime_association

    con = tables.connect(ann)
    alt = crime_association(con, texts=("alt",))["alt"]
    assert 0 < alt["overall"]["matches"] < 0.1 * alt["overall"]["n"] and alt["no_text"] > 0
    bias = transfer.data_bias(con, transfer.load_categories(CATEGORIES), min_count=20)
    assert bias["categories"] and any(c["female"] and c["male"] for c in bias["categories"])


@pytest.fixture(scope="module")
def second(smoke: tuple[Path, Any]) -> subprocess.CompletedProcess:
    """A second run on the first one's folder, its pandas side with Python ``re`` (one run serves
    both tests below: each side costs a few tens of seconds)."""
    work, first = smoke
    assert first.returncode == 0, first.stderr
    return _run(work, "--pandas-regex", "re")


def test_a_second_run_reuses_the_folder(second: subprocess.CompletedProcess) -> None:
    proc = second
    assert proc.returncode == 0 and "re-using" in proc.stdout, proc.stdout + proc.stderr
    assert "same numbers: yes" in proc.stdout


def test_pandas_with_python_re_gives_the_same_numbers(second: subprocess.CompletedProcess) -> None:
    proc = second
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pandas re regular expressions" in proc.stdout and "same numbers: yes" in proc.stdout


def test_a_disagreement_is_listed_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench()
    side = {
        "times": {"composition": 1.0},
        "counts": {"n_boxes": 10, "bias.nurse.female": 3},
        "peak_rss_mb": 100.0,
    }
    fs = side | {"floats": {"box_area.mean": 0.25}}
    pd_ = side | {"counts": {"n_boxes": 10, "bias.nurse.female": 4}, "floats": {"box_area.mean": 0.25}}
    assert bench.compare(fs, fs) == []
    assert bench.compare(fs, pd_) == ["bias.nurse.female: fairsets 3, pandas 4"]
    assert bench.compare(fs, side | {"floats": {"box_area.mean": 0.26}}) == [
        "box_area.mean: fairsets 0.25, pandas 0.26"
    ]
    with pytest.raises(SystemExit) as exc:
        bench.report(fs, pd_)
    assert exc.value.code == 1
    assert "same numbers: no" in capsys.readouterr().out


def test_the_python_patterns_match_as_duckdb_does() -> None:
    import duckdb

    from fairsets.audit.persons.crime import load_crime_words, word_pattern
    from fairsets.audit.persons.transfer import category_pattern

    bench = _bench()
    texts = [
        "a nurse",
        "Nurses at work",
        "nursery school",
        "café nurse",
        "thieves",
        "thiefdom",
        "two-thieves",
    ]
    for pattern in (category_pattern("nurse"), word_pattern(load_crime_words())):
        python = re.compile(bench.python_pattern(pattern))
        duck = duckdb.execute(
            "SELECT regexp_matches(t, ?) FROM unnest(?) AS u(t)", [pattern, texts]
        ).fetchall()
        assert [bool(python.search(t)) for t in texts] == [r[0] for r in duck]
