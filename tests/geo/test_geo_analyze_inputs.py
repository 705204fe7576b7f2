"""What ``fairsets geo analyze`` reads: country codes before "no" answers, rows named in errors,
and one empty-caption rule for every input format (CSV, Parquet, JSONL, DataFrame)."""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fairsets.geo.analyze import country_counts, load_profile, share_table
from fairsets.geo.analyze.group_diversity import _diversity
from fairsets.geo.analyze.load import EMPTY_CAPTION_RULE
from fairsets.geo.diversity.encoders import Encoded
from fairsets.geo.evaluate import LabelError, load_labelled


class CaptionEncoder:
    """Encodes like the sentence-transformers encoder: a missing (None/NaN) caption is skipped,
    any string, even an empty one, gets a vector (here a seeded one per caption)."""

    name = "test-caption-encoder"

    def encode(self, items: Sequence[Any], progress: Any = None) -> Encoded:
        kept, vectors, skipped = [], [], {}
        for i, t in enumerate(items):
            if t is None or (isinstance(t, float) and math.isnan(t)):
                skipped[i] = "no caption"
                continue
            kept.append(i)
            vectors.append(np.random.default_rng(zlib.crc32(str(t).encode())).normal(size=8))
        return Encoded(np.asarray(vectors, dtype=np.float32).reshape(-1, 8), np.asarray(kept), skipped)


# -- country codes ------------------------------------------------------------------------------


def test_iso2_codes_no_and_na_are_norway_and_namibia(tmp_path: Path) -> None:
    path = tmp_path / "iso2.csv"
    path.write_text("caption,country\na,US\nb,NO\nc,NA\nd,DE\ne,\n")
    p = load_profile(path)
    assert p.rows["country"].tolist() == ["USA", "NOR", "NAM", "DEU", None]
    shares = share_table(p.rows["country"])
    assert shares["underspecified"] == pytest.approx(0.2)
    assert shares["n_underspecified"] == 1 and shares["n_countries"] == 4


def test_none_answers_in_other_cases_stay_underspecified() -> None:
    p = load_profile(pd.DataFrame({"country": ["No", "no", "na", "N/A", "none", "NO", "NA", "DEU"]}))
    assert p.rows["country"].tolist() == [None, None, None, None, None, "NOR", "NAM", "DEU"]


def test_lower_case_no_in_a_column_of_lower_case_codes_is_an_error_naming_the_rows(tmp_path: Path) -> None:
    path = tmp_path / "lower.csv"
    path.write_text("caption,country\na,us\nb,no\nc,de\nd,na\n")
    with pytest.raises(ValueError, match=r"'na', 'no' is ambiguous .* at row 2, row 4: write NO/NA"):
        load_profile(path)
    # The same values in capitals are countries.
    path.write_text("caption,country\na,US\nb,NO\nc,DE\nd,NA\n")
    assert load_profile(path).rows["country"].tolist() == ["USA", "NOR", "DEU", "NAM"]


def test_an_unknown_country_names_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("caption,country\na,FRA\nb,Atlantis\nc,DEU\nd,Atlantis\ne,XX\n")
    with pytest.raises(ValueError) as err:
        load_profile(path)
    msg = str(err.value)
    assert "'Atlantis' (2 rows) at row 2, row 4" in msg
    assert "'XX' (1 row) at row 5" in msg
    assert "2 value(s) are not ISO 3166 countries" in msg


def test_an_unknown_country_in_a_folder_names_the_file_and_row(tmp_path: Path) -> None:
    folder = tmp_path / "shards"
    folder.mkdir()
    pd.DataFrame({"caption": ["a", "b"], "country": ["FRA", "DEU"]}).to_parquet(folder / "00000.parquet")
    pd.DataFrame({"caption": ["c", "d"], "country": ["ITA", "Narnia"]}).to_parquet(folder / "00001.parquet")
    with pytest.raises(ValueError, match=r"'Narnia' \(1 row\) at 00001\.parquet row 2"):
        load_profile(folder)


def test_an_unknown_country_in_a_dataframe_names_its_index() -> None:
    frame = pd.DataFrame({"country": ["FRA", "Atlantis"]}, index=["x", "y"])
    with pytest.raises(ValueError, match=r"'Atlantis' \(1 row\) at index 'y'"):
        load_profile(frame)


def test_load_labelled_reads_no_and_na_as_norway_and_namibia(tmp_path: Path) -> None:
    path = tmp_path / "gold.csv"
    path.write_text("caption,country\na,NO\nb,NA\nc,No\nd,\ne,US\n")
    captions, labels = load_labelled(path)
    assert captions == ["a", "b", "c", "d", "e"]
    assert labels == ["NOR", "NAM", None, None, "USA"]


def test_load_labelled_refuses_ambiguous_and_unknown_labels(tmp_path: Path) -> None:
    path = tmp_path / "lower.csv"
    path.write_text("caption,country\na,us\nb,no\nc,deu\n")
    with pytest.raises(LabelError, match=r"row 3: 'no'.*write NO/NA"):
        load_labelled(path)
    path.write_text("caption,country\na,FRA\nb,Atlantis\n")
    with pytest.raises(LabelError, match=r"row 3: 'Atlantis'"):
        load_labelled(path)


# -- empty captions -----------------------------------------------------------------------------

# FRA: 12 rows, 3 without text ("", "   ", missing); DEU: 8 rows, 1 without text; 2 underspecified.
_CAPTIONS = [f"a house in France {i}" for i in range(9)] + ["", "   ", None]
_CAPTIONS += [f"a house in Germany {i}" for i in range(7)] + [""]
_CAPTIONS += ["a house", ""]
_COUNTRIES = ["FRA"] * 12 + ["DEU"] * 8 + [None, None]


def _formats(tmp_path: Path) -> dict[str, Any]:
    frame = pd.DataFrame({"caption": _CAPTIONS, "country": _COUNTRIES})
    frame.to_csv(tmp_path / "p.csv", index=False)  # None and "" are both an empty cell in a CSV
    frame.to_parquet(tmp_path / "p.parquet")  # None stays null, "" stays ""
    frame.to_json(tmp_path / "p.jsonl", orient="records", lines=True)
    nulls = frame.assign(caption=[c if c and c.strip() else None for c in _CAPTIONS])
    nulls.to_parquet(tmp_path / "nulls.parquet")  # a writer that stores every empty caption as null
    return {
        "csv": tmp_path / "p.csv",
        "parquet": tmp_path / "p.parquet",
        "jsonl": tmp_path / "p.jsonl",
        "nulls.parquet": tmp_path / "nulls.parquet",
        "frame": frame,
    }


def _caption_n(profile: Any) -> dict[str, tuple[int, int]]:
    """(frequency, n embedded) per country from the caption diversity of the whole profile."""
    out = _diversity(profile, CaptionEncoder(), "text", {"all": profile.rows.index}, 5, None)
    return {c["iso3"]: (c["frequency"], c["n"]) for c in out["groups"]["all"]["countries"]}


def test_empty_captions_follow_one_rule_in_every_format(tmp_path: Path) -> None:
    results = {}
    for fmt, source in _formats(tmp_path).items():
        p = load_profile(source)
        results[fmt] = (
            _caption_n(p),
            share_table(p.rows["country"]),
            country_counts(p.rows["country"]).to_dict(),
            p.n_caption_empty,
            [c is None for c in p.rows["caption"]],
        )
    first = results["csv"]
    for fmt, got in results.items():
        assert got == first, fmt
    n_by_country, shares, counts, n_empty, empty_mask = first
    # Rows without text still count for the shares ...
    assert counts == {"FRA": 12, "DEU": 8}
    assert shares["n_rows"] == 22 and shares["underspecified"] == pytest.approx(2 / 22)
    # ... but are not embedded for caption diversity.
    assert n_by_country == {"FRA": (12, 9), "DEU": (8, 7)}
    assert n_empty == 5
    assert empty_mask == [not (c and c.strip()) for c in _CAPTIONS]


def test_empty_caption_count_leaves_out_rows_without_the_entity() -> None:
    frame = pd.DataFrame(
        {
            "caption": ["a", "", "  ", None, "b"],
            "country": ["FRA", "FRA", "DEU", "DEU", "DEU"],
            "entity_present": [True, True, False, True, True],
        }
    )
    p = load_profile(frame)
    assert p.n_caption_empty == 2  # the whitespace caption's row is excluded as entity-absent
    assert p.rows["caption"].tolist() == ["a", None, None, "b"]


def test_non_text_captions_become_text_and_no_caption_column_counts_nothing(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"caption": 42, "country": "FRA"}\n{"caption": " ", "country": "NO"}\n')
    p = load_profile(path)
    assert p.rows["caption"].tolist() == ["42", None] and p.n_caption_empty == 1
    assert p.rows["country"].tolist() == ["FRA", "NOR"]
    assert load_profile(pd.DataFrame({"country": ["FRA"]})).n_caption_empty == 0


def test_the_rule_is_what_the_analysis_states(tmp_path: Path) -> None:
    from fairsets.geo.analyze import run_analysis

    rows = [
        {"caption": "" if i % 5 == 0 else f"stone house {i}", "country": "FRA", "entity": "house"}
        for i in range(20)
    ]
    doc = run_analysis(pd.DataFrame(rows), tmp_path, bootstrap=0, alternatives=(), report=False)
    assert doc["definitions"]["empty_caption_rule"] == EMPTY_CAPTION_RULE
    assert doc["input"]["n_caption_empty"] == 4
    assert "diversity" in EMPTY_CAPTION_RULE and "shares" in EMPTY_CAPTION_RULE
