"""The rules behind the transfer audit's numbers (issue 25), each against an independent computation
over planted data: blank alt-texts count nowhere, categories match with real plurals and without
their innocent senses, Chebyshev gains are cross-validated, and race bias transfer per group."""

from __future__ import annotations

import hashlib
import statistics

import numpy as np
import pytest
from person_tables import ImageSpec, write_person_tables

from fairsets.audit.persons import tables, transfer
from fairsets.audit.persons.transfer import data as transfer_data
from fairsets.audit.persons.transfer import race as transfer_race
from fairsets.audit.persons.transfer.fit import relation
from fairsets.audit.persons.words import default_exclusions_path

F, M = ("female", "white", 0.1), ("male", "black", 0.1)

# --- finding 5: a blank alt-text is no alt-text -----------------------------------------------------


def _blank(text: str | None) -> bool:
    return text is None or text.strip() == ""  # str.strip knows the no-break space too


def test_blank_alt_texts_count_in_no_number(tmp_path):
    plan = [([F], "a nurse", 10), ([M], "two nurses", 6), ([F], "", 4), ([M], "   ", 3),
            ([F], "\u00a0\t\n", 2), ([M], None, 2), ([F], "an engineer", 5)]  # fmt: skip
    specs = [ImageSpec(boxes=list(b), alt=alt) for b, alt, n in plan for _ in range(n)]
    con = tables.connect(write_person_tables(tmp_path / "ann", specs))
    out = transfer.data_bias(con, ["nurse", "engineer"], min_count=1)
    texts = [s for s in specs if not _blank(s.alt)]
    n_f = sum(1 for s in texts if s.boxes[0][0] == "female")
    n_m = sum(1 for s in texts if s.boxes[0][0] == "male")
    assert (n_f, n_m) == (15, 6)  # as planted: 9 blank or NULL alt-texts left out
    assert (out["n_female"], out["n_male"], out["n_single_gender"]) == (n_f, n_m, n_f + n_m)
    assert [(r["category"], r["female"], r["male"]) for r in out["categories"]] == [
        ("nurse", 10, 6),
        ("engineer", 5, 0),
    ]
    assert "blank" in out["definitions"]["images"]
    race = transfer.race_data_bias(con, ["nurse"], min_count=1)
    assert race["n_single_race"] == len(texts) and race["n_by_race"] == {"black": 6, "white": 15}


# --- finding 2/3 for categories: inflect plurals and innocent senses ------------------------------

#: alt-text → the category it names (None: none), as planted.
PHRASES = {
    "two salespeople at the counter": "salesperson",
    "our heroes": "hero",
    "the cleaners arrived": "cleaner",
    "a tailor at work": "tailor",
    "fashion models on the runway": "model",
    "children playing": "child",
    "policewomen on patrol": "policewoman",
    "a vacuum cleaner on sale": None,
    "a tailor-made suit": None,
    "a scale model of a ship": None,
    "my role model": None,
    "Guitar Hero on the console": None,
}


def test_categories_match_inflected_plurals_and_not_innocent_senses(tmp_path):
    cats = ["salesperson", "hero", "cleaner", "tailor", "model", "child", "policewoman"]
    specs = [ImageSpec(boxes=[F], alt=alt) for alt in PHRASES for _ in range(2)]
    con = tables.connect(write_person_tables(tmp_path / "ann", specs))
    out = transfer.data_bias(con, cats, min_count=1)
    expect = {c: 2 * sum(1 for v in PHRASES.values() if v == c) for c in cats}
    assert {r["category"]: r["n"] for r in out["categories"]} == expect
    assert all(v == 2 for v in expect.values())
    # without exclusions the innocent senses count (2 images each)
    raw = transfer.data_bias(con, cats, min_count=1, exclusions=[])
    got = {r["category"]: r["n"] for r in raw["categories"]}
    assert got == {**expect, "cleaner": 4, "tailor": 4, "model": 6, "hero": 4}


def test_exclusions_record_names_the_file_and_its_sha256(tmp_path):
    phrases, rec = transfer_data.exclusions_record(None)
    path = default_exclusions_path()
    assert rec["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert rec["file"] == f"default ({path.name})" and rec["phrases"] == len(phrases) > 50
    mine = tmp_path / "mine.toml"
    mine.write_text('phrases = ["nurse shark"]\n')
    assert transfer_data.exclusions_record(mine)[0] == ["nurse shark"]
    assert transfer_data.exclusions_record(mine)[1]["file"] == "mine.toml"
    assert transfer_data.exclusions_record(None, use=False) == (
        [],
        {"file": None, "sha256": None, "phrases": 0},
    )
    with pytest.raises(ValueError, match="no such exclusion file"):
        transfer_data.exclusions_record(tmp_path / "none.toml")


# --- finding 7: cross-validated Chebyshev gains -----------------------------------------------------


def _r2(y, pred):
    return 1 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2)


def _cv_r2(x, y, degree, test_sets):
    """Cross-validated R² with numpy.polyfit in raw x (not the code's Chebyshev basis)."""
    pred = np.empty_like(y)
    for test in test_sets:
        train = np.setdiff1d(np.arange(len(y)), test)
        pred[test] = np.polyval(np.polyfit(x[train], y[train], degree), x[test])
    return _r2(y, pred)


def test_twelve_categories_in_sample_gain_is_large_cross_validated_is_not():
    rng = np.random.default_rng(6)  # one planted set; the next test checks a hundred
    x = rng.uniform(-1, 1, 12)
    y = 0.3 * x + rng.normal(0, 0.3, 12)  # a line plus noise: nothing beyond first order
    out = relation(x, y)
    cheb = out["chebyshev"]
    loo = [np.array([i]) for i in range(12)]
    line = _r2(y, np.polyval(np.polyfit(x, y, 1), x))
    assert out["r2"] == pytest.approx(line, abs=1e-12)
    assert cheb["cv"] == {"scheme": "leave-one-out", "folds": 12, "seed": None,
                          "r2_line": pytest.approx(_cv_r2(x, y, 1, loo), abs=1e-9)}  # fmt: skip
    for ins, cv in zip(cheb["in_sample"], cheb["cross_validated"], strict=True):
        k = ins["degree"]
        assert ins["r2"] == pytest.approx(_r2(y, np.polyval(np.polyfit(x, y, k), x)), abs=1e-9)
        assert ins["r2_gain"] == pytest.approx(ins["r2"] - line, abs=1e-9)
        assert cv["degree"] == k and cv["r2"] == pytest.approx(_cv_r2(x, y, k, loo), abs=1e-6)
        assert cv["r2_gain"] == pytest.approx(cv["r2"] - cheb["cv"]["r2_line"], abs=1e-6)
    ins5, cv5 = cheb["in_sample"][-1], cheb["cross_validated"][-1]
    assert ins5["degree"] == cv5["degree"] == 5
    assert ins5["r2_gain"] > 0.25  # what the old code reported as the gain
    assert max(c["r2_gain"] for c in cheb["cross_validated"]) <= 0.01
    assert "12 categories" in cheb["warning"] and "degree 5 needs 60" in cheb["warning"]


def test_cross_validated_gain_is_not_positive_on_linear_data_in_general():
    """Over 100 planted 12-category sets (a random model and a weak line): the in-sample degree-5
    gain is large, the cross-validated one at most zero in nearly all."""
    rng = np.random.default_rng(11)
    ins, cv = [], []
    for rep in range(100):
        x = rng.uniform(-1, 1, 12)
        y = (0.3 if rep % 2 else 0.0) * x + rng.normal(0, 0.3, 12)
        cheb = relation(x, y)["chebyshev"]
        ins.append(cheb["in_sample"][-1]["r2_gain"])
        cv.append(cheb["cross_validated"][-1]["r2_gain"])
    assert np.median(ins) > 0.25
    assert np.median(cv) < 0 and np.mean(np.array(cv) <= 0.02) >= 0.9


def test_k_fold_from_fifty_categories_is_seeded_and_recomputable():
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, 60)
    y = 4 * x**3 - 3 * x + rng.normal(0, 0.2, 60)
    out = relation(x, y, seed=9)
    cheb = out["chebyshev"]
    folds = np.array_split(np.random.default_rng(9).permutation(60), 5)
    assert (cheb["cv"]["scheme"], cheb["cv"]["folds"], cheb["cv"]["seed"]) == ("5-fold", 5, 9)
    assert cheb["cv"]["r2_line"] == pytest.approx(_cv_r2(x, y, 1, folds), abs=1e-9)
    cv = {c["degree"]: c for c in cheb["cross_validated"]}
    for k in (2, 3, 4, 5):
        assert cv[k]["r2"] == pytest.approx(_cv_r2(x, y, k, folds), abs=1e-6)
    assert cv[3]["r2_gain"] > 0.5  # a planted cubic is found out of sample too
    assert cheb["warning"] is None  # 60 categories: 10 per coefficient of degree 5
    assert relation(x, y, seed=9) == out and relation(x, y, seed=10)["chebyshev"]["cv"]["seed"] == 10
    assert relation(x, y, folds=60)["chebyshev"]["cv"]["scheme"] == "leave-one-out"
    assert "degree 4, 5" in relation(x[:45], y[:45])["chebyshev"]["warning"]
    with pytest.raises(ValueError, match="folds"):
        relation(x, y, folds=1)


# --- item 11: race bias transfer --------------------------------------------------------------------


def _race_of(spec: ImageSpec) -> str | None:
    """The one race of a single-race image, else None (written here, not taken from fairsets)."""
    races = {b[1] for b in spec.boxes if b[1] is not None and b[1] != "unclear"}
    return races.pop() if len(races) == 1 else None


def _race_specs() -> list[ImageSpec]:
    W, B, E = ("female", "white", 0.1), ("male", "black", 0.1), ("male", "east_asian", 0.1)
    U = ("male", "unclear", 0.1)
    plan = [
        ([W], "a nurse", 30), ([B], "nurse on duty", 10), ([W, U], "two nurses", 5),  # unclear beside: white
        ([W, B], "a nurse", 7),  # two races: mixed, not single-race
        ([U], "nurse", 4), ([("female", None, 0.1)], "nurse", 3),  # unclear-only, unlabelled
        ([E], "engineer", 20), ([W], "engineers", 5), ([B], "", 2), ([E], "a photo", 6),
    ]  # fmt: skip
    return [ImageSpec(boxes=list(b), alt=alt) for b, alt, n in plan for _ in range(n)]


def test_race_data_bias_shares_as_planted(tmp_path):
    specs = _race_specs()
    con = tables.connect(write_person_tables(tmp_path / "ann", specs))
    out = transfer.race_data_bias(con, ["nurse", "engineer", "astronaut"], min_count=10)
    single = [(s, _race_of(s)) for s in specs if _race_of(s) and not _blank(s.alt)]
    groups = sorted({g for _, g in single})
    assert out["groups"] == groups == ["black", "east_asian", "white"]
    assert "labels present" in out["groups_source"]
    assert out["n_single_race"] == len(single) == 76
    assert out["n_by_race"] == {g: sum(1 for _, r in single if r == g) for g in groups}
    expect = {
        "nurse": {"black": 10, "east_asian": 0, "white": 35},
        "engineer": {"black": 0, "east_asian": 20, "white": 5},
    }
    rows = {r["category"]: r for r in out["categories"]}
    assert list(rows) == ["nurse", "engineer"]
    for c, counts in expect.items():
        n = sum(counts.values())
        assert rows[c]["n"] == n and rows[c]["counts"] == counts
        assert rows[c]["shares"] == pytest.approx({g: v / n for g, v in counts.items()})
    assert out["dropped"] == [{"category": "astronaut", "n": 0, "counts": dict.fromkeys(groups, 0)}]
    # declared groups (the race head's classes): an absent one is a group with zeros, unclear never
    declared = transfer.race_data_bias(
        con, ["nurse"], min_count=10, groups=["white", "black", "east_asian", "middle_eastern", "unclear"]
    )
    assert declared["groups"] == ["white", "black", "east_asian", "middle_eastern"]
    assert declared["categories"][0]["shares"]["middle_eastern"] == 0.0
    assert declared["n_by_race"]["middle_eastern"] == 0 and "head" in declared["groups_source"]


def _d(pos, neg, t):
    """d in plain Python: (mean cos over pos − mean cos over neg) / population std over both."""

    def cos(a, b):
        return float(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b))

    cp, cn = [cos(v, t) for v in pos], [cos(v, t) for v in neg]
    return (statistics.fmean(cp) - statistics.fmean(cn)) / statistics.pstdev(cp + cn)


def test_race_model_bias_is_each_group_against_the_rest():
    rng = np.random.default_rng(4)
    vec = {"white": rng.normal(size=(9, 6)), "black": rng.normal(size=(5, 6)) + 0.5,
           "east_asian": rng.normal(size=(7, 6)), "middle_eastern": np.zeros((0, 6))}  # fmt: skip
    text = rng.normal(size=(3, 6))
    out = transfer_race.race_model_bias(vec, ["a", "b", "c"], ["pa", "pb", "pc"], text)
    assert out["n_probes"] == {"white": 9, "black": 5, "east_asian": 7, "middle_eastern": 0}
    assert out["not_computed"] == {"middle_eastern": "no probe image of race middle_eastern"}
    for j, row in enumerate(out["categories"]):
        assert row["prompt"] == ["pa", "pb", "pc"][j] and row["d"]["middle_eastern"] is None
        for g in ("white", "black", "east_asian"):
            rest = [v for h in ("white", "black", "east_asian") if h != g for v in vec[h]]
            assert row["d"][g] == pytest.approx(_d(list(vec[g]), rest, text[j]), rel=1e-9)


def test_race_relations_per_group(tmp_path):
    rng = np.random.default_rng(8)
    cats = [f"c{i}" for i in range(8)]
    share = {g: rng.uniform(0, 1, 8) for g in ("white", "black")}
    data = {"groups": ["white", "black", "asian"], "categories": [
        {"category": c, "shares": {"white": share["white"][i], "black": share["black"][i], "asian": 0.0}}
        for i, c in enumerate(cats)]}  # fmt: skip
    d = {g: 2 * share[g] + rng.normal(0, 0.1, 8) for g in share}
    model = {"categories": [{"category": c, "d": {"white": d["white"][i], "black": d["black"][i],
                                                  "asian": None}} for i, c in enumerate(cats)],
             "not_computed": {"asian": "no probe image of race asian"}}  # fmt: skip
    rel = transfer_race.race_relations(data, model)
    for g in ("white", "black"):
        r = rel[g]["relation"]
        assert r["pearson_r"] == pytest.approx(np.corrcoef(share[g], d[g])[0, 1], abs=1e-12)
        assert r["r2"] == pytest.approx(np.corrcoef(share[g], d[g])[0, 1] ** 2, abs=1e-9)
        assert rel[g]["categories"] == cats and rel[g]["x"] == f"data share {g}"
    assert rel["asian"]["relation"] is None and rel["asian"]["reason"] == "no probe image of race asian"
    assert transfer_race.race_relations(data, None)["white"]["reason"] == "no race model bias"


def test_kept_categories_list_what_they_matched(tmp_path):
    specs = [ImageSpec(boxes=[F], alt=alt) for alt in PHRASES for _ in range(2)]
    specs += [ImageSpec(boxes=[M], alt="A Tailor at work") for _ in range(3)]
    con = tables.connect(write_person_tables(tmp_path / "ann", specs))
    out = transfer.data_bias(con, ["tailor", "cleaner"], min_count=1, top_phrases=3)
    rows = {r["category"]: r["matched_phrases"] for r in out["categories"]}
    # the tailor-made suit is masked: only the planted phrase, in 2 + 3 texts
    assert rows["tailor"] == [{"phrase": "a tailor at", "count": 5}]
    assert rows["cleaner"] == [{"phrase": "the cleaners arrived", "count": 2}]
    assert (
        "matched_phrases"
        not in transfer.data_bias(con, ["tailor"], min_count=1, top_phrases=0)["categories"][0]
    )


def test_race_groups_are_the_declared_head_classes(tmp_path):
    import json

    from fairsets.audit.persons.transfer.run import declared_races

    ann = write_person_tables(tmp_path / "ann", _race_specs())
    assert declared_races(ann) is None  # no head recorded: the labels present are the groups
    manifest = json.loads((ann / "manifest.json").read_text())
    classes = ["black", "east_asian", "middle_eastern", "unclear", "white"]
    manifest["attributes"] = {"race": {"head": {"classes": classes}}}
    (ann / "manifest.json").write_text(json.dumps(manifest))
    assert declared_races(ann) == classes
    out = transfer.race_data_bias(tables.connect(ann), ["nurse"], min_count=1, groups=declared_races(ann))
    assert out["groups"] == ["black", "east_asian", "middle_eastern", "white"]
