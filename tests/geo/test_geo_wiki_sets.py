"""The Wikipedia sets (``benchmarks/data/geo-wiki-*.csv``: two evaluation sets and a development
set): they load as labelled sets, their labels are ISO 3166-1 alpha-3 codes, no caption repeats,
every row names its article, the counts in ``benchmarks/data/README.md`` are those of the files,
and no development row equals a row of the evaluation sets."""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import pycountry
import pytest

from fairsets.geo.evaluate import load_labelled

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
try:
    from dedupe_geo_train import _words  # the equality the data scripts use
finally:
    sys.path.pop(0)

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
EVALUATION = ("geo-wiki-captions.csv", "geo-wiki-sentences.csv")
DEVELOPMENT = "geo-wiki-dev.csv"
FILES = (*EVALUATION, DEVELOPMENT)


def _rows(name: str) -> list[dict[str, str]]:
    with open(DATA / name, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def _key(text: str) -> str:
    return " ".join(_words(text))


def _readme_row(name: str) -> tuple[int, float, int]:
    text = (DATA / "README.md").read_text(encoding="utf-8")
    m = re.search(rf"^\| `{re.escape(name)}` \| ([\d,]+) \| ([\d.]+)% \| (\d+) \|", text, re.MULTILINE)
    assert m, f"{name} has no row in the README's table"
    return int(m.group(1).replace(",", "")), float(m.group(2)), int(m.group(3))


@pytest.mark.parametrize("name", FILES)
def test_loads_with_valid_alpha3_labels(name):
    captions, labels = load_labelled(DATA / name)
    rows = _rows(name)
    assert len(captions) == len(rows) > 0
    assert all(c.strip() for c in captions)
    for row, label in zip(rows, labels, strict=True):
        code = row["country"]
        assert code == "" or (code.isupper() and pycountry.countries.get(alpha_3=code) is not None), code
        assert label == (code or None)


@pytest.mark.parametrize("name", FILES)
def test_columns_articles_and_no_duplicates(name):
    rows = _rows(name)
    assert list(rows[0]) == ["caption", "country", "article"]
    assert all(row["article"].strip() for row in rows)
    keys = [_key(row["caption"]) for row in rows]
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize("name", FILES)
def test_counts_match_the_readme(name):
    rows = _rows(name)
    labels = [row["country"] for row in rows]
    n, none_share, countries = _readme_row(name)
    assert len(rows) == n
    assert round(100 * labels.count("") / len(rows), 1) == none_share
    assert len(set(labels) - {""}) == countries


def test_development_rows_are_not_evaluation_rows():
    evaluation = {_key(row["caption"]) for name in EVALUATION for row in _rows(name)}
    shared = [row["caption"] for row in _rows(DEVELOPMENT) if _key(row["caption"]) in evaluation]
    assert not shared, shared[:5]
