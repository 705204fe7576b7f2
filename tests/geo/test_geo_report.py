"""The HTML report: self-contained (no URL), every section present, text escaped, reproducible."""

from __future__ import annotations

import base64
import json
import re
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fairsets.geo.analyze import run_analysis
from fairsets.geo.countries import countries
from fairsets.geo.diversity import Encoded
from fairsets.geo.report import check_analysis, render_report


class HashEncoder:
    """A pluggable caption encoder: a seeded random vector per caption (no model)."""

    name = "hash-encoder"

    def encode(self, items: Sequence[Any], progress: Any = None) -> Encoded:
        vecs = [np.random.default_rng(zlib.crc32(str(t).encode())).normal(size=8) for t in items]
        return Encoded(np.asarray(vecs, dtype=np.float32), np.arange(len(items)), {})


ODD = "<b>kitchen & co</b>"


def _profile() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    pool = sorted(c.iso3 for c in countries().values() if c.independent)[::4][:40]
    rows = []
    for ent, n in (("house", 900), (ODD, 700)):
        w = np.arange(1, 41, dtype=float) ** -1.1
        w = w[rng.permutation(40)] / w.sum()
        for i, c in enumerate(rng.choice(pool, size=n, p=w)):
            rows.append(
                {"caption": f"{ent} {c} {i % 13}", "country": None if i % 3 == 0 else c, "entity": ent}
            )
    rows += [
        {"caption": f"tiny {i}", "country": c, "entity": "tiny"} for i, c in enumerate(["FRA", "DEU", "FRA"])
    ]
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    gdp = pd.DataFrame({"iso3": sorted(countries())[:150], "gdp": np.geomspace(1e8, 1e13, 150)})
    gdp.to_csv(out / "gdp.csv", index=False)
    run_analysis(
        _profile(),
        out,
        reference=out / "gdp.csv",
        text_encoder=HashEncoder(),
        min_samples=20,
        bootstrap=10,
        alternatives=("exponential",),
    )
    return out


def test_report_is_self_contained_and_complete(analysed: Path) -> None:
    html = (analysed / "report.html").read_text()
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", html)  # base64 may spell "http"
    assert "http" not in text.lower() and "://" not in text and "<script" not in text.lower()
    srcs = re.findall(r'src="([^"]*)"', html)
    assert len(srcs) >= 6 and all(s.startswith("data:image/png;base64,") for s in srcs)
    for s in srcs:
        assert base64.b64decode(s.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    for heading in (
        "(Table 1)",
        "Continents (Table 11)",
        "Power law",
        "Frequency vs GDP and population",
        "Geographic representativeness (Table 2)",
        "Diversity (Tables 3, 15, 16)",
    ):
        assert heading in html
    assert ODD not in html and "&lt;b&gt;kitchen &amp; co&lt;/b&gt;" in html  # escaped
    assert "2 countries with a non-zero count (at least 10 needed)" in html  # the tiny entity
    assert "hash-encoder" in html


def test_report_diversity_from_a_pluggable_encoder(analysed: Path) -> None:
    doc = json.loads((analysed / "analysis.json").read_text())
    text = doc["diversity"]["text"]
    assert text["encoder"] == "hash-encoder" and set(text["groups"]) == {"house", ODD, "tiny"}
    house = text["groups"]["house"]
    assert house["n_countries"] >= 3 and all(c["n"] >= 20 for c in house["countries"])
    assert text["groups"]["tiny"]["countries"] == [] and text["groups"]["tiny"]["mean"] is None
    rows = pd.read_csv(analysed / "diversity.csv")
    assert set(rows["group"]) == {"house", ODD} and (rows["modality"] == "text").all()


def test_rerender_from_json_is_identical(analysed: Path, tmp_path: Path) -> None:
    doc = json.loads((analysed / "analysis.json").read_text())
    again = render_report(doc, tmp_path / "again.html")
    assert again.read_bytes() == (analysed / "report.html").read_bytes()


def test_bad_documents_are_refused(tmp_path: Path) -> None:
    assert check_analysis([]) == ["the analysis must be a JSON object, got list"]
    problems = check_analysis({"schema": "other"})
    assert "schema is 'other', expected 'fairsets.geo.analysis/1'" in problems
    with pytest.raises(ValueError, match="cannot report this analysis"):
        render_report({"schema": "other"}, tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()
