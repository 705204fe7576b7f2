"""Geo analyses against independent computations on a fixed synthetic profile (GeoProfiler §4.1–4.2).

Power-law α against the discrete MLE solved here with scipy; the goodness-of-fit p-value on a true
power-law sample and on an exponential one; correlations against scipy on a join made by hand; GR
and the under/over sets against a hand computation; shares against hand counts; the CLI end to end.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import re
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats
from typer.testing import CliRunner

from fairsets.cli import app
from fairsets.geo.analyze import (
    ALTERNATIVES,
    ANALYSIS_SCHEMA,
    continent_shares,
    country_counts,
    fit_power_law,
    frequency_correlation,
    load_profile,
    representativeness,
    run_analysis,
    sample_discrete_power_law,
    share_table,
)
from fairsets.geo.countries import countries
from powerlaw_reference import discrete_mle

ENTITIES = ("house", "flag", "car")
N_PER_ENTITY = {"house": 1400, "flag": 1000, "car": 700}


def _pool() -> list[str]:
    """60 independent countries, fixed."""
    return sorted(c.iso3 for c in countries().values() if c.independent)[::3][:60]


def make_profile(seed: int = 7) -> pd.DataFrame:
    """A seeded profile: Zipf-like country counts over 60 countries per entity, ~35% underspecified,
    2% of rows with entity_present False."""
    rng = np.random.default_rng(seed)
    pool = _pool()
    rows = []
    for ent in ENTITIES:
        n = N_PER_ENTITY[ent]
        weights = np.arange(1, len(pool) + 1, dtype=float) ** -1.2
        weights = weights[rng.permutation(len(pool))]
        weights /= weights.sum()
        picks = rng.choice(pool, size=n, p=weights)
        under = rng.random(n) < 0.35
        absent = rng.random(n) < 0.02
        for i, c in enumerate(picks):
            rows.append(
                {
                    "caption": f"a {ent} seen in {countries()[c].name}, photo {i}",
                    "country": "" if under[i] else c,
                    "entity": ent,
                    "entity_present": not absent[i],
                }
            )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def profile_df() -> pd.DataFrame:
    return make_profile()


def _kept(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["entity_present"]]


# --------------------------------------------------------------------------- input


def test_load_profile_excludes_absent_rows_and_normalises_countries() -> None:
    df = pd.DataFrame(
        {
            "caption": ["a", "b", "c", "d", "e"],
            "country": ["FRA", "France", "No", None, "deu"],
            "entity": ["house", "house", "flag", "flag", "flag"],
            "entity_present": [True, True, False, True, True],
        }
    )
    p = load_profile(df)
    assert p.n_input == 5 and p.n_entity_absent == 1 and len(p.rows) == 4
    assert p.rows["country"].tolist() == ["FRA", "FRA", None, "DEU"]
    assert p.entities == ["flag", "house"]


def test_load_profile_reads_a_folder_of_shards_and_jsonl(tmp_path: Path) -> None:
    shards = tmp_path / "profiled"
    shards.mkdir()
    pd.DataFrame(
        {"caption": ["a", "b"], "country": ["FRA", ""], "entity_present": [True, None], "image": [b"1", b"2"]}
    ).to_parquet(shards / "00000.parquet")
    pd.DataFrame(
        {"caption": ["c"], "country": ["DEU"], "entity_present": [False], "image": [b"3"], "error": ["x"]}
    ).to_parquet(shards / "00001.parquet")
    (shards / ".00002.parquet.tmp-1").write_bytes(b"partial")  # an interrupted write is ignored
    p = load_profile(shards)
    assert p.n_input == 3 and p.n_entity_absent == 1 and p.n_entity_unknown == 1
    assert p.rows["country"].tolist() == ["FRA", None] and p.image_column == "image"
    assert p.images([2, 0]) == [b"3", b"1"]
    (tmp_path / "p.jsonl").write_text(
        '{"caption": "x", "country": "JPN"}\n{"caption": "y", "country": null}\n'
    )
    assert load_profile(tmp_path / "p.jsonl").rows["country"].tolist() == ["JPN", None]
    (tmp_path / "p.txt").write_text("FRA\n")
    with pytest.raises(ValueError, match=r"must be a \.parquet"):
        load_profile(tmp_path / "p.txt")
    with pytest.raises(FileNotFoundError, match="not found"):
        load_profile(tmp_path / "missing.csv")
    # unquoted commas in every row: pandas would make the first field an index and shift the rest
    (tmp_path / "shifted.csv").write_text("caption,country\nhello, world,FRA\nbye, all,IND\n")
    with pytest.raises(ValueError, match=r"shifted\.csv: its rows have more fields than the header"):
        load_profile(tmp_path / "shifted.csv")
    (tmp_path / "some.csv").write_text("caption,country\nhello,FRA\nbye, all,IND\n")
    with pytest.raises(ValueError, match=r"some\.csv is not a readable CSV file: .*line 3"):
        load_profile(tmp_path / "some.csv")


def test_load_profile_rejects_unknown_countries_and_missing_column() -> None:
    with pytest.raises(ValueError, match="'Atlantis' \\(2 rows\\)"):
        load_profile(pd.DataFrame({"country": ["Atlantis", "FRA", "Atlantis"]}))
    with pytest.raises(ValueError, match="no 'country' column"):
        load_profile(pd.DataFrame({"caption": ["x"]}))
    with pytest.raises(ValueError, match="entity_present"):
        load_profile(pd.DataFrame({"country": ["FRA"], "entity_present": ["maybe"]}))


# --------------------------------------------------------------------------- 1. shares


def test_shares_sum_to_one_and_equal_hand_counts(profile_df: pd.DataFrame) -> None:
    kept = _kept(profile_df)
    for ent in (*ENTITIES, None):
        sub = kept if ent is None else kept[kept["entity"] == ent]
        codes = [c or None for c in sub["country"]]
        s = share_table(codes, top_k=10)
        hand = Counter(c for c in codes if c)
        top = sorted(hand.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
        n = len(codes)
        assert s["n_rows"] == n and s["n_specified"] == sum(hand.values())
        assert s["underspecified"] == pytest.approx(sum(1 for c in codes if c is None) / n, abs=1e-12)
        assert s["top"] == pytest.approx(sum(v for _, v in top) / n, abs=1e-12)
        assert s["top_countries"] == [c for c, _ in top]
        assert s["underspecified"] + s["top"] + s["remaining"] == pytest.approx(1.0, abs=1e-12)
        counts = country_counts(codes)
        assert dict(counts) == dict(hand)
        cont = continent_shares(counts)
        by_hand = Counter()
        for c, v in hand.items():
            by_hand[countries()[c].continent] += v
        for code in ("NA", "SA", "EU", "AS", "AF", "OC"):
            assert cont["counts"][code] == by_hand.get(code, 0)
            assert cont["shares"][code] == pytest.approx(by_hand.get(code, 0) / sum(hand.values()))
        assert sum(cont["shares"].values()) == pytest.approx(1.0)


# --------------------------------------------------------------------------- 2. power law


def test_alpha_equals_independent_discrete_mle(profile_df: pd.DataFrame) -> None:
    kept = _kept(profile_df)
    for ent in (*ENTITIES, None):
        sub = kept if ent is None else kept[kept["entity"] == ent]
        counts = country_counts([c or None for c in sub["country"]])
        pl = fit_power_law(counts, bootstrap=0, alternatives=())
        assert pl["status"] == "ok" and pl["gof"]["status"] == "not_run"
        x = counts.to_numpy()
        xmin = pl["xmin"]
        tail = x[x >= xmin]
        assert pl["n_tail"] == len(tail)
        mle = discrete_mle(x, xmin)
        # The exact discrete MLE: agrees with the independent maximisation to optimiser precision.
        assert pl["estimator"].startswith("exact discrete MLE")
        assert pl["alpha"] == pytest.approx(mle, abs=1e-5)
        # σ from the observed Fisher information n (ln ζ)''(α, x_min), here with a coarser step.
        h = 1e-3
        g = np.log(special.zeta(np.array([mle - h, mle, mle + h]), xmin))
        fisher = len(tail) * (g[0] - 2 * g[1] + g[2]) / h**2
        assert pl["sigma"] == pytest.approx(1 / math.sqrt(fisher), rel=1e-3)


def test_alpha_on_large_counts_matches_mle() -> None:
    counts = stats.zipf(2.0).rvs(size=400, random_state=np.random.default_rng(3)) * 10 + 5
    pl = fit_power_law(counts, bootstrap=0, alternatives=())
    x = np.asarray(counts)
    assert pl["alpha"] == pytest.approx(discrete_mle(x, pl["xmin"]), rel=0.01)


def test_sampler_follows_the_discrete_power_law() -> None:
    rng = np.random.default_rng(0)
    alpha, xmin = 2.5, 3
    draws = sample_discrete_power_law(alpha, xmin, 40000, rng)
    assert draws.min() >= xmin
    for k in (3, 4, 6, 10, 30):
        theory = special.zeta(alpha, k) / special.zeta(alpha, xmin)
        assert np.mean(draws >= k) == pytest.approx(theory, abs=0.01)
    with pytest.raises(ValueError, match="alpha > 1"):
        sample_discrete_power_law(1.0, 1, 5, rng)


def test_gof_p_high_for_power_law_sample_low_for_exponential() -> None:
    # An independent generator: scipy's Zipf (p(k) ∝ k^-a, k >= 1) is a discrete power law. Under
    # the null the p-value is uniform, so a seeded sample is checked, not a guarantee for any sample.
    pl_sample = stats.zipf(2.3).rvs(size=250, random_state=np.random.default_rng(11))
    exp_sample = np.ceil(np.random.default_rng(21).exponential(5.0, size=1000)).astype(int)
    good = fit_power_law(pl_sample, bootstrap=40, seed=1, alternatives=("exponential",))
    bad = fit_power_law(exp_sample, bootstrap=40, seed=1, alternatives=("exponential",))
    assert good["gof"]["p"] >= 0.1 and good["gof"]["plausible"] is True
    assert bad["gof"]["p"] <= 0.05 and bad["gof"]["plausible"] is False
    assert good["gof"]["n_valid"] + good["gof"]["n_failed"] == 40
    assert bad["comparisons"]["exponential"]["R"] < 0  # the likelihood prefers the exponential
    # Vuong test: the power-law sample favours the power law over the exponential.
    cmp_ = good["comparisons"]["exponential"]
    assert cmp_["R"] > 0 and cmp_["p"] < 0.1 and cmp_["favours"] == "power_law"


def test_bootstrap_is_seeded_and_independent_of_the_executor() -> None:
    sample = stats.zipf(2.1).rvs(size=120, random_state=np.random.default_rng(5))
    a = fit_power_law(sample, bootstrap=30, seed=4, alternatives=())
    b = fit_power_law(sample, bootstrap=30, seed=4, alternatives=())
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        c = fit_power_law(sample, bootstrap=30, seed=4, alternatives=(), executor=pool)
    d = fit_power_law(sample, bootstrap=30, seed=5, alternatives=())
    assert a["gof"] == b["gof"] == {**c["gof"]}
    assert d["gof"]["seed_entropy"] != a["gof"]["seed_entropy"]


def test_all_alternatives_are_compared() -> None:
    sample = stats.zipf(2.0).rvs(size=60, random_state=np.random.default_rng(8)) + 2
    pl = fit_power_law(sample, bootstrap=0)
    assert set(pl["comparisons"]) == set(ALTERNATIVES)
    for alt, c in pl["comparisons"].items():
        assert math.isfinite(c["R"]) and 0 <= c["p"] <= 1, alt
        assert c["favours"] in ("power_law", alt, "neither")


def test_too_few_countries_is_insufficient_data() -> None:
    pl = fit_power_law([500, 120, 40, 9, 3], bootstrap=50)
    assert pl == {
        "status": "insufficient_data",
        "reason": "5 countries with a non-zero count (at least 10 needed)",
        "n_countries": 5,
    }
    assert fit_power_law([4] * 30 + [5] * 3)["status"] == "insufficient_data"


# --------------------------------------------------------------------------- 3. correlations


def test_correlations_equal_scipy_on_a_hand_join(profile_df: pd.DataFrame) -> None:
    kept = _kept(profile_df)
    counts = country_counts([c or None for c in kept["country"]])
    rng = np.random.default_rng(2)
    data_countries = list(counts.index)
    extra = [c for c in sorted(countries()) if c not in data_countries][:20]
    ref_countries = data_countries[5:] + extra  # 5 data countries lack a GDP; 20 have no rows
    gdp = pd.Series(rng.lognormal(24, 2, len(ref_countries)), index=ref_countries)
    res = frequency_correlation(counts, gdp)
    # by hand: every reference country, 0 rows where the data has none
    xs = [float(counts.get(c, 0)) for c in ref_countries]
    ys = [float(gdp[c]) for c in ref_countries]
    assert res["n"] == len(ref_countries) and res["n_zero_count"] == 20 and res["n_not_in_reference"] == 5
    assert res["zero_counts_included"] is True
    assert res["pearson"]["r"] == pytest.approx(np.corrcoef(xs, ys)[0, 1], abs=1e-12)
    assert res["pearson"]["p"] == pytest.approx(stats.pearsonr(xs, ys).pvalue, rel=1e-9)
    assert res["spearman"]["rho"] == pytest.approx(stats.spearmanr(xs, ys).statistic, abs=1e-12)
    only = frequency_correlation(counts, gdp, include_zero=False)
    assert only["n"] == len(ref_countries) - 20 and only["n_zero_count"] == 0
    assert frequency_correlation(counts, gdp.iloc[:2])["status"] == "insufficient_data"


# --------------------------------------------------------------------------- 4. representativeness


def test_gr_and_under_over_sets_equal_hand_computation() -> None:
    counts = pd.Series({"FRA": 60, "DEU": 25, "ITA": 10, "ESP": 5, "USA": 20})
    weights = pd.Series({"FRA": 0.15, "DEU": 0.30, "ITA": 0.35, "ESP": 0.12, "PRT": 0.08})
    inside = {c: counts.get(c, 0) for c in weights.index}
    total = sum(inside.values())  # USA is outside the reference
    gr = {c: (inside[c] / total) / weights[c] for c in weights.index}
    for r in (2.0, 3.0, 5.0):
        res = representativeness(counts, weights, r=r)
        over = sorted((c for c in gr if gr[c] > r), key=lambda c: -gr[c])
        under = sorted((c for c in gr if gr[c] < 1 / r), key=lambda c: gr[c])
        assert res["over"] == over and res["under"] == under
        assert res["under_share"] == pytest.approx(len(under) / 5) and res["over_share"] == len(over) / 5
        got = {row["iso3"]: row["gr"] for row in res["countries"]}
        assert got == pytest.approx(gr, rel=1e-12)
        assert res["n_rows_outside_reference"] == 20 and res["outside_reference"] == {"USA": 20}
    r3 = representativeness(counts, weights, r=3.0)
    assert r3["over"] == ["FRA"] and r3["under"] == ["PRT", "ITA"]
    r2 = representativeness(counts, weights, r=2.0)
    assert r2["under"] == ["PRT", "ITA", "ESP"]  # a lower r flags more (Table 14)
    with pytest.raises(ValueError, match="r must be >= 1"):
        representativeness(counts, weights, r=0.5)


# --------------------------------------------------------------------------- run_analysis and the CLI


def test_run_analysis_writes_consistent_deterministic_outputs(
    tmp_path: Path, profile_df: pd.DataFrame
) -> None:
    src = tmp_path / "profile.parquet"
    profile_df.to_parquet(src)
    kw = {"bootstrap": 15, "seed": 3, "alternatives": ("exponential",), "report": False}
    doc = run_analysis(src, tmp_path / "a", **kw)
    run_analysis(src, tmp_path / "b", **kw)
    a = (tmp_path / "a" / "analysis.json").read_bytes()
    assert a == (tmp_path / "b" / "analysis.json").read_bytes()
    assert json.loads(a) == doc and doc["schema"] == ANALYSIS_SCHEMA
    kept = _kept(profile_df)
    assert doc["input"]["n_excluded_entity_absent"] == int((~profile_df["entity_present"]).sum())
    assert doc["input"]["entities"] == sorted(ENTITIES)
    assert doc["overall"]["n_rows"] == len(kept)
    assert doc["overall"]["counts"] == dict(Counter(c for c in kept["country"] if c))
    assert doc["overall"]["correlations"]["gdp"]["status"] == "unavailable"
    assert doc["overall"]["correlations"]["population"]["status"] == "ok"
    assert doc["overall"]["representation"]["n_countries"] == sum(c.independent for c in countries().values())
    shares = pd.read_csv(tmp_path / "a" / "shares.csv").set_index("group")
    for ent in ENTITIES:
        assert shares.loc[ent, "underspecified"] == pytest.approx(
            doc["entities"][ent]["shares"]["underspecified"]
        )
    reps = pd.read_csv(tmp_path / "a" / "representation.csv")
    assert set(reps["group"]) == {*ENTITIES, "overall"}
    assert {p.name for p in (tmp_path / "a").iterdir()} >= {
        "countries.csv",
        "power_law.csv",
        "continents.csv",
    }


def test_run_analysis_rejects_bad_settings(tmp_path: Path, profile_df: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="unknown alternative"):
        run_analysis(profile_df, tmp_path, alternatives=("gamma",))
    with pytest.raises(ValueError, match="unknown GR reference"):
        run_analysis(profile_df, tmp_path, gr_reference="bogus")
    with pytest.raises(ValueError, match="image diversity needs"):
        run_analysis(profile_df, tmp_path, image_encoder=object())  # type: ignore[arg-type]


runner = CliRunner()


def _err(res) -> str:
    return (res.stderr if hasattr(res, "stderr") else res.output).strip()


def test_cli_end_to_end(tmp_path: Path) -> None:
    df = make_profile(seed=1)
    df = df[df["entity"].isin(["house", "car"])]
    src = tmp_path / "small.parquet"
    df.to_parquet(src)
    gdp = tmp_path / "gdp.csv"
    pool = _pool()
    names = [countries()[c].name for c in pool[:30]]
    pd.DataFrame({"country": names, "gdp": np.geomspace(1e9, 1e13, 30)}).to_csv(gdp, index=False)
    out = tmp_path / "out"
    res = runner.invoke(
        app,
        [
            "geo",
            "analyze",
            str(src),
            "--out",
            str(out),
            "--reference",
            str(gdp),
            "--gr-reference",
            "population",
            "--r",
            "2",
            "--bootstrap",
            "10",
            "--alternatives",
            "lognormal",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "analysis.json").read_text())
    assert doc["settings"]["r"] == 2 and doc["settings"]["bootstrap"] == 10
    assert doc["overall"]["correlations"]["gdp"]["status"] == "ok"
    assert doc["overall"]["correlations"]["gdp"]["n"] == 30
    assert doc["gr_reference"]["name"] == "population"
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 4
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", html)  # base64 may spell "http"
    assert "http" not in text.lower() and "://" not in text
    assert "overall" in res.output and "wrote" in res.output


def test_cli_bad_input_exits_with_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("caption,place\na house,France\n")
    res = runner.invoke(app, ["geo", "analyze", str(bad), "--out", str(tmp_path / "o")])
    assert res.exit_code != 0
    err = _err(res)
    assert "no 'country' column" in err and len(err.splitlines()) == 1

    good = tmp_path / "good.csv"
    good.write_text("caption,country\na house,FRA\n")
    ref = tmp_path / "ref.csv"
    ref.write_text("country,gdp\nFrance,1\nAtlantis,2\nNarnia,3\n")
    res = runner.invoke(
        app, ["geo", "analyze", str(good), "--out", str(tmp_path / "o"), "--reference", str(ref)]
    )
    assert res.exit_code != 0
    err = _err(res)
    assert "'Atlantis'" in err and "'Narnia'" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o" / "analysis.json").exists()


# --------------------------------------------------------------------------- definitions made explicit


def _present_hand_join(counts: dict[str, int], values: dict[str, float]) -> tuple[list[float], list[float]]:
    codes = sorted(c for c in values if counts.get(c, 0) > 0)
    return [float(counts[c]) for c in codes], [float(values[c]) for c in codes]


def test_headline_correlation_is_over_present_countries_and_the_flag_swaps_it(
    tmp_path: Path, profile_df: pd.DataFrame
) -> None:
    kw = {"bootstrap": 0, "alternatives": (), "report": False}
    doc = run_analysis(profile_df, tmp_path / "a", **kw)
    counts = doc["overall"]["counts"]
    pop = doc["reference_values"]["population"]
    head = doc["overall"]["correlations"]["population"]
    xs, ys = _present_hand_join(counts, pop)
    assert head["over"] == "present" and head["n_zero_count"] == 0 and head["n"] == len(xs) <= 60
    assert head["spearman"]["rho"] == pytest.approx(stats.spearmanr(xs, ys).statistic, abs=1e-12)
    assert head["pearson"]["r"] == pytest.approx(stats.pearsonr(xs, ys).statistic, abs=1e-12)
    alt = head["alternative"]  # the other set is reported, not lost
    assert alt["over"] == "reference" and alt["n"] == len(pop) and alt["n_zero_count"] == len(pop) - len(xs)
    assert doc["settings"]["correlate_over"] == "present"
    assert doc["definitions"]["correlation_set"].startswith("present:")

    ref = run_analysis(profile_df, tmp_path / "b", correlate_over="reference", **kw)
    head_r = ref["overall"]["correlations"]["population"]
    all_x = [float(counts.get(c, 0)) for c in sorted(pop)]
    all_y = [float(pop[c]) for c in sorted(pop)]
    assert head_r["over"] == "reference" and head_r["n"] == len(pop) > 150
    assert head_r["spearman"]["rho"] == pytest.approx(stats.spearmanr(all_x, all_y).statistic, abs=1e-12)
    assert head_r["alternative"]["spearman"] == head["spearman"]
    assert ref["definitions"]["correlation_set"].startswith("reference:")
    rows = pd.read_csv(tmp_path / "a" / "correlations.csv")
    pop_rows = rows[(rows["group"] == "overall") & (rows["variable"] == "population")].set_index("over")
    assert bool(pop_rows.loc["present", "headline"]) and not bool(pop_rows.loc["reference", "headline"])
    with pytest.raises(ValueError, match="unknown correlation set"):
        run_analysis(profile_df, tmp_path / "c", correlate_over="everything", **kw)


class _SeededEncoder:
    """A caption encoder without a model: a seeded random vector per caption."""

    name = "seeded"

    def encode(self, items, progress=None):
        import zlib

        from fairsets.geo.diversity import Encoded

        vecs = [np.random.default_rng(zlib.crc32(str(t).encode())).normal(size=6) for t in items]
        return Encoded(np.asarray(vecs, dtype=np.float32), np.arange(len(items)), {})


def test_diversity_needs_more_than_100_by_default_and_100_with_the_inclusive_rule(tmp_path: Path) -> None:
    sizes = {"FRA": 100, "DEU": 101, "ITA": 150, "ESP": 99}
    df = pd.DataFrame(
        [{"caption": f"a house {c} {i}", "country": c} for c, n in sizes.items() for i in range(n)]
    )
    kw = {"text_encoder": _SeededEncoder(), "bootstrap": 0, "alternatives": (), "report": False}
    paper = run_analysis(df, tmp_path / "a", **kw)["diversity"]
    scored = {c["iso3"] for c in paper["text"]["groups"]["overall"]["countries"]}
    assert scored == {"DEU", "ITA"}  # exactly 100 is not "more than 100"
    assert paper["threshold"] == 100 and paper["threshold_rule"] == "paper" and paper["min_samples"] == 101
    assert "n > 100" in paper["rule"]
    doc = run_analysis(df, tmp_path / "b", diversity_rule="inclusive", **kw)
    assert {c["iso3"] for c in doc["diversity"]["text"]["groups"]["overall"]["countries"]} == {
        "FRA",
        "DEU",
        "ITA",
    }
    assert "n >= 100" in doc["definitions"]["diversity_threshold"]
    alias = run_analysis(df, tmp_path / "c", min_samples=100, **kw)["diversity"]  # n >= min_samples
    assert alias["threshold_rule"] == "inclusive" and alias["min_samples"] == 100
    with pytest.raises(ValueError, match="unknown diversity rule"):
        run_analysis(df, tmp_path / "d", diversity_rule="strict", **kw)


def test_analysis_json_names_the_definition_of_every_headline_number(
    tmp_path: Path, profile_df: pd.DataFrame
) -> None:
    doc = run_analysis(profile_df, tmp_path, bootstrap=0, alternatives=(), report=False)
    defs = json.loads((tmp_path / "analysis.json").read_text())["definitions"]
    assert defs == doc["definitions"]
    assert set(defs) == {
        "shares_denominator",
        "underspecified",
        "empty_caption_rule",
        "correlation_set",
        "diversity_threshold",
        "power_law_estimator",
        "power_law_readings",
        "gr_reference",
        "gr_renormalisation",
    }
    assert all(isinstance(v, str) and len(v) > 20 for v in defs.values())
    assert "all analysed rows" in defs["shares_denominator"]
    assert "n > 100" in defs["diversity_threshold"]
    assert "0.05" in defs["power_law_readings"] and "0.1" in defs["power_law_readings"]
    assert "197 independent countries" in defs["gr_reference"] and "entity" in defs["gr_reference"]
    assert "renormalised" in defs["gr_renormalisation"] and "GR > 3" in defs["gr_renormalisation"]


def test_cli_summary_at_80_columns_shows_every_header_in_full(tmp_path: Path) -> None:
    df = make_profile(seed=2)
    df.loc[df["entity"] == "flag", "entity"] = "a-rather-long-entity-name-for-a-narrow-terminal"
    src = tmp_path / "p.parquet"
    df.to_parquet(src)
    res = runner.invoke(
        app,
        [
            "geo",
            "analyze",
            str(src),
            "--out",
            str(tmp_path / "o"),
            "--bootstrap",
            "5",
            "--alternatives",
            "none",
            "--correlate-over",
            "reference",
            "--diversity-rule",
            "inclusive",
        ],
        env={"COLUMNS": "80"},
    )
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    table_lines = [ln for ln in lines if "│" in ln or "┃" in ln]
    assert table_lines and all(len(ln) <= 80 for ln in table_lines)
    headers = ["group", "rows", "undersp %", "top-10 %", "countries", "α", "GOF p", "PL"]
    headers += ["under %", "over %", "ρ GDP", "ρ pop"]
    header_text = "\n".join(ln for ln in lines if "┃" in ln)
    for h in headers:
        assert re.search(rf"┃ *{re.escape(h)} *┃", header_text), h
    assert "every reference country" in res.output  # the correlation set named
    doc = json.loads((tmp_path / "o" / "analysis.json").read_text())
    assert (
        doc["settings"]["correlate_over"] == "reference" and doc["settings"]["diversity_rule"] == "inclusive"
    )
    bad = runner.invoke(
        app, ["geo", "analyze", str(src), "--out", str(tmp_path / "x"), "--correlate-over", "all"]
    )
    assert bad.exit_code == 2 and "--correlate-over" in _err(bad) and len(_err(bad).splitlines()) == 1


def test_per_entity_gr_reference_from_a_weights_csv_is_used_and_named(
    tmp_path: Path, profile_df: pd.DataFrame
) -> None:
    pool = _pool()
    csv = tmp_path / "entity-weights.csv"
    rows = [f"{c},house,{i + 1}" for i, c in enumerate(pool[:20])] + [f"{c},,1" for c in pool[:40]]
    csv.write_text("iso3,entity,weight\n" + "\n".join(rows) + "\n")
    doc = run_analysis(
        profile_df, tmp_path / "o", gr_reference=csv, bootstrap=0, alternatives=(), report=False
    )
    assert doc["gr_reference"]["entity_specific"] == ["house"]
    house = doc["entities"]["house"]["representation"]
    assert house["n_countries"] == 20
    p_true = {r["iso3"]: r["p_true"] for r in house["countries"]}
    assert p_true[pool[19]] == pytest.approx(20 / sum(range(1, 21)))
    assert doc["entities"]["car"]["representation"]["n_countries"] == 40  # the default rows
    assert "entity-specific distributions for house" in doc["definitions"]["gr_reference"]
