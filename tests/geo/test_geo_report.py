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


def test_report_shows_both_power_law_readings_definitions_and_the_gr_caveat(analysed: Path) -> None:
    html = (analysed / "report.html").read_text()
    doc = json.loads((analysed / "analysis.json").read_text())
    assert "Follows (paper: p &lt; 0.05)" in html and "Plausible (CSN: p ≥ 0.1)" in html
    pl = doc["entities"]["house"]["power_law"]
    p = pl["gof"]["p"]
    row = re.search(r"<td>house</td>(.*?)</tr>", html.split('id="power-law"')[1], re.S).group(1)
    cells = re.findall(r'<td class="n">([^<]*)</td>', row)
    assert cells[5] == ("yes" if p < 0.05 else "no") and cells[6] == ("yes" if p >= 0.1 else "no")
    assert 'id="definitions"' in html and "Correlation set" in html
    assert "households for house" in html  # the default GR reference is not per entity: said so
    assert "Headline: over\ncountries with rows" in html
    assert "n &gt; 20" not in html and "n &gt;= 20" in html  # min_samples=20 is the inclusive rule


def test_gof_readings_prefer_the_records_fields_and_fall_back_to_p() -> None:
    from fairsets.geo.report.context import gof_readings

    assert gof_readings({"status": "ok", "p": 0.03}) == (True, False)
    assert gof_readings({"status": "ok", "p": 0.5}) == (False, True)
    assert gof_readings({"status": "ok", "p": 0.07}) == (False, False)  # neither reading holds
    fields = {"status": "ok", "p": 0.03, "paper_follows_power_law": False, "csn_plausible": True}
    assert gof_readings(fields) == (False, True)
    assert gof_readings({"status": "skipped"}) == (None, None)


def test_scatter_labels_do_not_overlap() -> None:
    from fairsets.audit.report.plots import figure
    from fairsets.geo.report.plots import place_labels

    fig = figure(4.0, 3.0)
    ax = fig.add_subplot()
    xs = np.linspace(1.0, 1.3, 30)
    ax.scatter(xs, xs)
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 10)
    fig.canvas.draw()
    placed = place_labels(ax, [(f"C{i:02d}", x, x) for i, x in enumerate(xs)])
    assert 4 <= len(placed) < 30  # crowded points: some labels, never on top of each other
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert len(boxes) == len(placed)
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_an_analysis_without_the_new_fields_still_renders(analysed: Path, tmp_path: Path) -> None:
    doc = json.loads((analysed / "analysis.json").read_text())
    doc.pop("definitions")
    doc["settings"].pop("correlate_over")
    for g in [doc["overall"], *doc["entities"].values()]:
        for c in g["correlations"].values():
            c.pop("over", None)
            c.pop("alternative", None)
    html = render_report(doc, tmp_path / "old.html").read_text()
    assert "predates the definitions block" in html and "every reference country" in html
