"""Reference tables: user CSVs, GR reference distributions, and the World Bank client on a loopback fake."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from fairsets.cli import app
from fairsets.fetch.retry import RetryPolicy
from fairsets.geo.countries import countries
from fairsets.geo.reference import (
    WORLD_BANK_LICENSE,
    default_reference,
    fetch_worldbank,
    gr_reference,
    load_reference,
    load_weights,
    write_reference,
)
from servers import LoopbackServer, Response, json_response

GDP = "/v2/country/all/indicator/NY.GDP.MKTP.CD"
POP = "/v2/country/all/indicator/SP.POP.TOTL"
FAST = RetryPolicy(attempts=3, backoff=0.0, jitter=0.0)


def _rec(code: str, value: float | None, indicator: str = "NY.GDP.MKTP.CD") -> dict:
    return {
        "indicator": {"id": indicator, "value": "x"},
        "country": {"id": code[:2], "value": code},
        "countryiso3code": code,
        "date": "2022",
        "value": value,
        "unit": "",
        "obs_status": "",
        "decimal": 0,
    }


def _meta(page: int, pages: int) -> dict:
    return {
        "page": page,
        "pages": pages,
        "per_page": 1000,
        "total": 5,
        "sourceid": "2",
        "lastupdated": "2024",
    }


class FakeWorldBank:
    """GDP on two pages (an aggregate row, a row without a code, a null value; page 2 answers 503
    once), population on one page (an aggregate row)."""

    def __init__(self, fail_once: bool = True) -> None:
        self.failed = not fail_once

    def gdp(self, req) -> Response:
        page = int(req.query["page"][0])
        if page == 1:
            return json_response([_meta(1, 2), [_rec("USA", 2.5e13), _rec("WLD", 1.0e14), _rec("FRA", None)]])
        if not self.failed:
            self.failed = True
            return Response(503, {"Retry-After": "0"}, b"busy")
        return json_response([_meta(2, 2), [_rec("DEU", 4.1e12), _rec("", 3.0e12)]])

    def pop(self, req) -> Response:
        recs = [
            _rec(c, v, "SP.POP.TOTL")
            for c, v in (("USA", 333e6), ("FRA", 68e6), ("DEU", 84e6), ("EUU", 448e6))
        ]
        return json_response([_meta(1, 1), recs])

    def serve(self, srv: LoopbackServer) -> None:
        srv.route(GDP, self.gdp)
        srv.route(POP, self.pop)


def test_fetch_worldbank_pages_skips_aggregates_retries_and_caches(tmp_path: Path) -> None:
    with LoopbackServer() as srv:
        FakeWorldBank().serve(srv)
        kw = {
            "cache_dir": tmp_path / "cache",
            "base_url": srv.url("/v2"),
            "policy": FAST,
            "sleep": lambda s: None,
        }
        table = fetch_worldbank(2022, **kw)
        assert list(table.index) == ["DEU", "FRA", "USA"]
        assert table.loc["USA", "gdp"] == 2.5e13 and table.loc["DEU", "gdp"] == 4.1e12
        assert math.isnan(table.loc["FRA", "gdp"])  # null value
        assert table.loc["FRA", "population"] == 68e6 and table.loc["USA", "year"] == 2022
        assert {"WLD", "EUU"} <= set(table.attrs["skipped"])
        # gdp page 1, page 2 (503), page 2 again, population page 1
        assert table.attrs["requests"] == 4 and len(srv.requests) == 4
        assert srv.hits(GDP) == 3 and srv.hits(POP) == 1
        first = srv.requests[0]
        assert first.query == {"format": ["json"], "date": ["2022"], "per_page": ["1000"], "page": ["1"]}
        assert first.headers["User-Agent"].startswith("fairsets/")

        again = fetch_worldbank(2022, **kw)
        assert len(srv.requests) == 4  # the cache answers everything: no request
        assert again.attrs["requests"] == 0 and again.attrs["cache_hits"] == 3
        pd.testing.assert_frame_equal(again, table)

        fetch_worldbank(2022, **{**kw, "cache_dir": None}, cache=False)
        assert len(srv.requests) == 7


def test_fetch_worldbank_error_answer_is_a_clear_error_and_not_cached(tmp_path: Path) -> None:
    error = [
        {
            "message": [
                {"id": "120", "key": "Invalid value", "value": "The provided parameter value is not valid"}
            ]
        }
    ]
    with LoopbackServer() as srv:
        srv.route(GDP, lambda req: json_response(error))
        kw = {"cache_dir": tmp_path, "base_url": srv.url("/v2"), "policy": FAST, "sleep": lambda s: None}
        for _ in range(2):
            with pytest.raises(
                ValueError, match="120 Invalid value The provided parameter value is not valid"
            ):
                fetch_worldbank(2022, ("NY.GDP.MKTP.CD",), **kw)
        assert srv.hits(GDP) == 2
        srv.route(GDP, lambda req: Response(404, {}, b"no"))
        with pytest.raises(Exception, match="HTTP 404"):
            fetch_worldbank(2021, ("NY.GDP.MKTP.CD",), **kw)
    with pytest.raises(ValueError, match="year"):
        fetch_worldbank(1800)


def test_write_then_load_reference_round_trip(tmp_path: Path) -> None:
    with LoopbackServer() as srv:
        FakeWorldBank(fail_once=False).serve(srv)
        table = fetch_worldbank(2022, cache_dir=tmp_path / "c", base_url=srv.url("/v2"), policy=FAST)
    out = write_reference(table, tmp_path / "ref.csv")
    text = out.read_text()
    assert text.splitlines()[0] == "iso3,name,year,gdp,population,source,license"
    assert "USA,United States,2022,25000000000000,333000000," in text and WORLD_BANK_LICENSE in text
    back = load_reference(out)
    pd.testing.assert_series_equal(back["gdp"], table["gdp"], check_names=False)
    pd.testing.assert_series_equal(back["population"], table["population"], check_names=False)
    assert back.attrs["source"].startswith("World Bank")


def test_cli_reference_writes_csv(tmp_path: Path) -> None:
    with LoopbackServer() as srv:
        FakeWorldBank(fail_once=False).serve(srv)
        out = tmp_path / "gdp.csv"
        args = ["geo", "reference", "--year", "2022", "--out", str(out), "--cache-dir", str(tmp_path / "c")]
        res = CliRunner().invoke(app, [*args, "--base-url", srv.url("/v2")])
        assert res.exit_code == 0, res.output
        assert "3 countries (2 with GDP, 3 with population)" in res.output
        assert load_reference(out).loc["DEU", "population"] == 84e6
        res = CliRunner().invoke(app, [*args, "--base-url", srv.url("/v2")])
        assert "0 request(s), 3 page(s) from the cache" in res.output


# --------------------------------------------------------------------------- user statistics CSVs


def test_load_reference_names_and_codes(tmp_path: Path) -> None:
    p = tmp_path / "r.csv"
    p.write_text('country,gdp,population\nUnited States,"25,000",331\nthe UK,..,67\nTürkiye,900,\n')
    t = load_reference(p)
    assert list(t.index) == ["GBR", "TUR", "USA"]
    assert (
        t.loc["USA", "gdp"] == 25000
        and math.isnan(t.loc["GBR", "gdp"])
        and math.isnan(t.loc["TUR", "population"])
    )
    assert t.loc["TUR", "name"] == countries()["TUR"].name
    p.write_text("iso3,gdp\nusa,1\nFRA,2\n")
    assert list(load_reference(p).index) == ["FRA", "USA"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "country,gdp\nFrance,1\nAtlantis,2\nNarnia,3\n",
            "2 value\\(s\\) are not known country codes or names: 'Atlantis', 'Narnia'",
        ),
        ("iso3,gdp\nFRA,1\nFrance,2\n", "not known ISO 3166-1 alpha-3 codes: 'France'"),
        ("iso3,gdp\nFRA,1\nfra,2\n", "more than once: 'FRA'"),
        ("iso3,gdp\nFRA,lots\n", "non-negative numbers; bad: \"FRA='lots'\""),
        ("iso3,gdp\nFRA,-5\n", "non-negative"),
        ("place,gdp\nFRA,1\n", "needs an iso3, country or name column"),
        ("iso3,area\nFRA,1\n", "needs a gdp or population column"),
    ],
)
def test_load_reference_errors(tmp_path: Path, text: str, message: str) -> None:
    p = tmp_path / "r.csv"
    p.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_reference(p)


def test_default_reference_is_geonames_population() -> None:
    t = default_reference()
    assert len(t) == len(countries()) and t["gdp"].isna().all()
    assert t.loc["IND", "population"] == countries()["IND"].population
    assert "GeoNames" in t.attrs["source"]


# --------------------------------------------------------------------------- GR reference distributions


def test_builtin_gr_references() -> None:
    uni = gr_reference("uniform")
    independent = {c.iso3 for c in countries().values() if c.independent}
    assert set(uni.default.index) == independent
    assert uni.default.sum() == pytest.approx(1.0) and uni.default.nunique() == 1
    assert len(gr_reference("uniform-all").default) == len(countries())
    pop = gr_reference("population")
    total = sum(c.population for c in countries().values())
    assert pop.default["CHN"] == pytest.approx(countries()["CHN"].population / total)
    assert "ATA" not in pop.default.index  # population 0: outside the support
    with pytest.raises(ValueError, match="unknown GR reference 'nope'"):
        gr_reference("nope")


def test_weights_csv_per_entity(tmp_path: Path) -> None:
    p = tmp_path / "w.csv"
    p.write_text(
        "country,weight,entity\nFrance,3,\nGermany,1,\nFrance,1,beach\nItaly,1,beach\nSpain,0,beach\n"
    )
    w = gr_reference(str(p))
    assert w.default.to_dict() == {"DEU": 0.25, "FRA": 0.75}
    assert w.for_group("beach").to_dict() == {"FRA": 0.5, "ITA": 0.5}  # weight 0: outside
    assert w.for_group("house").to_dict() == w.default.to_dict()
    p.write_text("country,weight,entity\nFrance,1,beach\n")
    only = load_weights(p)
    assert only.default is None and only.for_group(None) is None
    p.write_text("country,weight\nAtlantis,1\n")
    with pytest.raises(ValueError, match="'Atlantis'"):
        load_weights(p)
    p.write_text("country,weight\nFrance,\n")
    with pytest.raises(ValueError, match="without a weight"):
        load_weights(p)
