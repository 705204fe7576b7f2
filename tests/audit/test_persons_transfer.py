"""Data → model bias transfer: every number against an independent computation over planted data."""

from __future__ import annotations

import math
import re
import shutil
import statistics

import numpy as np
import pytest
from person_tables import ImageSpec, write_person_tables

from fairsets.audit.persons import tables, transfer

# --- categories -------------------------------------------------------------------------------------


def test_default_categories_ship_with_provenance_and_no_gendered_words():
    # the default is the WordNet-derived list, nearer the study's 2,617 categories than the short one
    cats = transfer.load_categories()
    assert len(cats) >= 2617
    assert transfer.default_categories_path().name == "social_categories_wordnet.toml"
    assert {"nurse", "engineer", "CEO", "secretary", "police officer", "librarian", "surgeon"} <= set(cats)
    assert len({c.lower() for c in cats}) == len(cats)
    # words that name a gender themselves would make the relation trivially strong
    gendered = {
        "actress",
        "waitress",
        "businessman",
        "businesswoman",
        "chairman",
        "chairwoman",
        "policeman",
        "policewoman",
        "mother",
        "father",
        "girl",
        "boy",
        "husband",
        "wife",
        "king",
        "queen",
        "nun",
        "monk",
        "bride",
        "groom",
        "sister",
        "brother",
        "daughter",
        "son",
        "widow",
        "widower",
        "lady",
        "gentleman",
        "heroine",
        "stewardess",
        "housewife",
        "fireman",
        "salesman",
        "saleswoman",
    }
    assert not gendered & {c.lower() for c in cats}
    assert not [
        c for c in cats if re.search(r"(woman|women|ess|ette)$", c) and not c.endswith(("witness", "less"))
    ]
    header = transfer.default_categories_path().read_text(encoding="utf-8").split("\n[")[0]
    assert "WordNet 3.0 Copyright 2006 by Princeton University" in header and "Derivation" in header
    assert "scripts/derive_social_categories.py" in header
    short = transfer.load_categories(transfer.default_categories_path().with_name("social_categories.toml"))
    assert len(short) >= 100 and set(short) <= set(cats)


def test_a_user_file_replaces_the_default(tmp_path):
    p = tmp_path / "mine.toml"
    p.write_text('[jobs]\ncategories = ["baker", "  night   nurse "]\n[other]\ncategories = ["x"]\n')
    assert transfer.load_categories(p) == ["baker", "night nurse", "x"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (None, "no such category file"),
        ("[jobs\ncategories = [", "not a readable TOML"),
        ('[jobs]\nwords = ["a"]\n', "[jobs] needs categories"),
        ("[jobs]\ncategories = []\n", "[jobs] needs categories"),
        ('[jobs]\ncategories = ["a", ""]\n', "[jobs] needs categories"),
        ('[jobs]\ncategories = ["Nurse"]\n[roles]\ncategories = ["nurse"]\n', "listed twice"),
        ("", "no categories"),
    ],
)
def test_bad_category_files_are_one_line_errors(tmp_path, text, needle):
    p = tmp_path / "c.toml"
    if text is not None:
        p.write_text(text)
    with pytest.raises(ValueError) as e:
        transfer.load_categories(p)
    assert needle in str(e.value) and "\n" not in str(e.value)


# --- data bias --------------------------------------------------------------------------------------

F, M = ("female", "white", 0.1), ("male", "black", 0.1)
U = ("unclear", None, 0.1)


def _planted() -> list[ImageSpec]:
    specs: list[ImageSpec] = []

    def add(n, boxes, alt, **kw):
        specs.extend(ImageSpec(boxes=list(boxes), alt=alt, **kw) for _ in range(n))

    add(70, [F], "Nurses at the hospital")
    add(5, [F, U], "a nurse with a patient")  # an unclear box beside a woman: still a female image
    add(40, [M], "The NURSE on duty")
    add(30, [M, M], "two male nurses")  # 'male nurses' names nurse
    add(50, [F], "a nursery school")  # not 'nurse'
    add(8, [F, M], "nurse and doctor")  # mixed: not single-gender
    add(6, [(None, None, 0.1)], "a nurse")  # no label: unclear
    add(4, [F], "a nurse", status="failed")  # not an ok image
    add(3, [F], None)  # no alt-text
    add(12, [F], "software engineer at her desk")
    add(88, [M], "Engineers-in-training")
    add(5, [F], "CEO of the year")
    add(20, [M], "the ceos")
    add(60, [F], "two secretaries")
    add(50, [M], "secretary; office")
    add(9, [M], "an engineering class")  # not 'engineer'
    return specs


def _gender(spec: ImageSpec) -> str:
    g = {b[0] for b in spec.boxes}
    if "mixed" in g or {"female", "male"} <= g:
        return "mixed"
    return "female" if "female" in g else "male" if "male" in g else "unclear"


def _names(alt: str, category: str) -> bool:
    """Independent matcher: lower-case word tokens; the category's words in a row, the last one
    singular or with a plural ending."""
    toks = re.findall(r"[a-z0-9_]+", alt.lower())
    words = category.lower().split()
    last = words[-1]
    forms = {last, last + "s", last + "es"} | ({last[:-1] + "ies"} if last.endswith("y") else set())
    n = len(words)
    return any(
        toks[i : i + n - 1] == words[:-1] and toks[i + n - 1] in forms for i in range(len(toks) - n + 1)
    )


def test_data_bias_counts_exactly_as_planted(tmp_path):
    specs = _planted()
    ann = write_person_tables(tmp_path / "ann", specs, shard_size=97)
    cats = ["nurse", "engineer", "CEO", "secretary", "astronaut"]
    out = transfer.data_bias(tables.connect(ann), cats, min_count=100)

    # independent computation over the specs
    expect = {}
    single = [s for s in specs if s.status == "ok" and s.alt is not None and _gender(s) in ("female", "male")]
    for c in cats:
        f = sum(1 for s in single if _gender(s) == "female" and _names(s.alt, c))
        m = sum(1 for s in single if _gender(s) == "male" and _names(s.alt, c))
        expect[c] = (f, m)
    # and the numbers as planted, by hand
    assert expect == {"nurse": (75, 70), "engineer": (12, 88), "CEO": (5, 20), "secretary": (60, 50),
                      "astronaut": (0, 0)}  # fmt: skip

    kept = {r["category"]: r for r in out["categories"]}
    assert list(kept) == ["nurse", "engineer", "secretary"]
    for c, r in kept.items():
        f, m = expect[c]
        assert (r["female"], r["male"], r["n"]) == (f, m, f + m)
        assert r["bias"] == pytest.approx((f - m) / (f + m))
        assert r["share_female"] == pytest.approx(f / (f + m))
    assert out["dropped"] == [
        {"category": "CEO", "female": 5, "male": 20, "n": 25},
        {"category": "astronaut", "female": 0, "male": 0, "n": 0},
    ]
    n_f = sum(1 for s in single if _gender(s) == "female")
    n_m = sum(1 for s in single if _gender(s) == "male")
    assert (out["n_female"], out["n_male"], out["n_single_gender"]) == (n_f, n_m, n_f + n_m)
    assert out["min_count"] == 100 and set(out["definitions"]) >= {"bias", "match", "images"}

    low = transfer.data_bias(tables.connect(ann), cats, min_count=25)
    assert [r["category"] for r in low["categories"]] == ["nurse", "engineer", "CEO", "secretary"]
    assert [r["category"] for r in low["dropped"]] == ["astronaut"]


@pytest.mark.parametrize(
    ("category", "alt", "hit"),
    [
        ("nurse", "nurses", True),
        ("nurse", "Nurse!", True),
        ("nurse", "nurse-led care", True),
        ("nurse", "nursery", False),
        ("nurse", "anurse", False),
        ("nurse", "nurse_station", False),
        ("nurse", "ÉNurse", False),
        ("police officer", "Police-Officers", True),
        ("police officer", "police  officer", True),
        ("police officer", "officer", False),
        ("secretary", "Secretaries", True),
        ("coach", "coaches", True),
        ("fisherman", "fishermen", True),
        ("person", "people", True),
        ("CEO", "c.e.o", False),
        ("make-up artist", "make up artists", True),
    ],
)
def test_category_pattern_words_and_plurals(category, alt, hit):
    import duckdb

    got = duckdb.connect().execute("SELECT regexp_matches(?, ?)", [alt, transfer.category_pattern(category)])
    assert got.fetchone()[0] is hit


def test_data_bias_finds_every_plural_form(tmp_path):
    """The fast substring pre-test must never hide a match the regular expression would find."""
    plan = {
        "person": "Two PEOPLE", "child": "children playing", "wife": "the wives", "thief": "thieves",
        "fisherman": "Fishermen at dawn", "secretary": "SECRETARIES", "police officer": "police-officers",
        "coach": "coaches", "make-up artist": "Make Up Artists", "CEO": "our ceos",
    }  # fmt: skip
    specs = [ImageSpec(boxes=[F if i % 2 else M], alt=alt) for i, alt in enumerate(plan.values())]
    out = transfer.data_bias(
        tables.connect(write_person_tables(tmp_path / "a", specs)), list(plan), min_count=1
    )
    assert out["dropped"] == []
    assert [(r["category"], r["n"]) for r in out["categories"]] == [(c, 1) for c in plan]


def test_data_bias_bad_input(tmp_path):
    ann = write_person_tables(tmp_path / "ann", [ImageSpec(boxes=[F], alt="a nurse")])
    con = tables.connect(ann)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="min_count"):
            transfer.data_bias(con, ["nurse"], min_count=bad)
    with pytest.raises(ValueError, match="more than once"):
        transfer.data_bias(con, ["nurse", "Nurse"])
    with pytest.raises(ValueError, match="at least one"):
        transfer.data_bias(con, [])
    with pytest.raises(TypeError):
        transfer.data_bias(con, "nurse")
    # a quote in a category is data, not SQL
    assert transfer.data_bias(con, ["nurse's aide"], min_count=1)["dropped"][0]["n"] == 0
    shutil.rmtree(ann / "attributes" / "gender")
    with pytest.raises(ValueError, match="no gender labels"):
        transfer.data_bias(tables.connect(ann), ["nurse"])


# --- model bias -------------------------------------------------------------------------------------


def _d_reference(fem, mal, text, sd=statistics.pstdev):
    """d(c) in plain Python, one category at a time."""

    def cos(a, b):
        return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
            sum(x * x for x in a) * sum(y * y for y in b)
        )

    out = []
    for t in text:
        cf = [cos(x, t) for x in fem]
        cm = [cos(y, t) for y in mal]
        out.append((statistics.fmean(cf) - statistics.fmean(cm)) / sd(cf + cm))
    return out


def test_model_bias_matches_an_independent_computation():
    rng = np.random.default_rng(3)
    fem = rng.normal(size=(23, 16)) * rng.uniform(0.5, 3, size=(23, 1))  # any scale
    mal = rng.normal(size=(31, 16))
    text = rng.normal(size=(7, 16))
    got = transfer.model_bias_many(fem, mal, text)
    assert got.shape == (7,)
    np.testing.assert_allclose(got, _d_reference(fem.tolist(), mal.tolist(), text.tolist()), rtol=1e-9)
    got1 = transfer.model_bias_many(fem, mal, text, ddof=1)
    ref1 = _d_reference(fem.tolist(), mal.tolist(), text.tolist(), sd=statistics.stdev)
    np.testing.assert_allclose(got1, ref1, rtol=1e-9)
    assert transfer.model_bias(fem, mal, text[2]) == pytest.approx(got[2], rel=1e-12)


def test_model_bias_recovers_a_planted_direction():
    rng = np.random.default_rng(0)
    a, b = np.eye(8)[0], np.eye(8)[1]
    fem = a + 0.3 * rng.normal(size=(50, 8))
    mal = b + 0.3 * rng.normal(size=(50, 8))
    d = transfer.model_bias_many(fem, mal, np.stack([a, b, np.eye(8)[5]]))
    assert d[0] > 1.5 and d[1] < -1.5 and abs(d[2]) < 0.6


def test_model_bias_undefined_and_bad_input():
    one = np.ones((3, 4))
    assert math.isnan(transfer.model_bias(one, one, np.arange(4.0) + 1))  # every cosine equal: std 0
    with pytest.raises(ValueError, match="at least one female and one male"):
        transfer.model_bias_many(np.zeros((0, 4)), one, one)
    with pytest.raises(ValueError, match="non-zero"):
        transfer.model_bias_many(np.zeros((2, 4)), one, one)
    with pytest.raises(ValueError, match="sizes differ"):
        transfer.model_bias_many(one, np.ones((2, 5)), one)
    with pytest.raises(ValueError, match="1-d"):
        transfer.model_bias(one, one, one)


def test_model_bias_with_a_clip_model_end_to_end(clip_vlm):
    from PIL import Image

    rng = np.random.default_rng(1)
    ims = [Image.fromarray(rng.integers(0, 255, size=(40, 40, 3), dtype=np.uint8)) for _ in range(6)]
    emb = clip_vlm.embed_images(ims)
    out = transfer.model_bias_report(clip_vlm, emb[:3], emb[3:], ["nurse", "engineer", "CEO"])
    assert [r["prompt"] for r in out["categories"]] == [
        "a photo of a nurse", "a photo of an engineer", "a photo of a CEO"
    ]  # fmt: skip
    assert all(isinstance(r["d"], float) and math.isfinite(r["d"]) for r in out["categories"])
    assert (out["n_female_probes"], out["n_male_probes"]) == (3, 3)
    assert out["model"]["weights"] == "random"
    prompts, vecs = transfer.category_embeddings(clip_vlm, ["nurse"], template="portrait of the {category}")
    assert prompts == ["portrait of the nurse"] and vecs.shape == (1, clip_vlm.embed_dim)
    with pytest.raises(ValueError, match="no \\{category\\}"):
        transfer.category_embeddings(clip_vlm, ["nurse"], template="a photo")
    with pytest.raises(ValueError, match="only \\{category\\} and \\{a\\}"):
        transfer.category_embeddings(clip_vlm, ["nurse"], template="{category} by {artist}")


# --- generated images -------------------------------------------------------------------------------


def test_generated_bias_counts():
    out = transfer.generated_bias(
        {"nurse": ["female"] * 7 + ["male"] * 2 + [None], "ceo": [], "x": ["unclear"]}
    )
    rows = {r["prompt"]: r for r in out["prompts"]}
    assert rows["nurse"] == {"prompt": "nurse", "n": 10, "female": 7, "male": 2, "other": 1,
                             "share_female": 0.7, "bias": pytest.approx(5 / 9)}  # fmt: skip
    assert rows["ceo"]["share_female"] is None and rows["ceo"]["bias"] is None
    assert rows["x"]["share_female"] == 0.0 and rows["x"]["bias"] is None


def test_read_generated_classifies_each_prompt_folder(tmp_path):
    from PIL import Image

    plan = {"nurse": ("red",) * 5 + ("blue",) * 2, "engineer": ("red",) + ("blue",) * 4}
    for prompt, colours in plan.items():
        (tmp_path / prompt).mkdir()
        for i, col in enumerate(colours):
            Image.new("RGB", (8, 8), col).save(tmp_path / prompt / f"{i}.png")
    (tmp_path / "nurse" / "broken.png").write_bytes(b"not an image")
    (tmp_path / "nurse" / "notes.txt").write_text("ignored")
    calls = []

    def classify(images):
        calls.append(len(images))
        return ["female" if im.getpixel((0, 0))[0] > 128 else "male" for im in images]

    labels, rejected = transfer.read_generated(tmp_path, classify, batch_size=3)
    assert sorted(labels) == ["engineer", "nurse"]
    assert sorted(labels["nurse"]) == ["female"] * 5 + ["male"] * 2
    assert labels["engineer"].count("female") == 1 and len(labels["engineer"]) == 5
    assert len(rejected) == 1 and rejected[0]["path"].endswith("broken.png") and rejected[0]["reason"]
    assert max(calls) <= 3
    rows = {r["prompt"]: r for r in transfer.generated_bias(labels)["prompts"]}
    assert rows["nurse"]["share_female"] == pytest.approx(5 / 7)
    with pytest.raises(ValueError, match="returned 0 labels"):
        transfer.read_generated(tmp_path, lambda ims: [])
    with pytest.raises(ValueError, match="no prompt folders"):
        transfer.read_generated(tmp_path / "nurse", classify)
    with pytest.raises(ValueError, match="not a folder"):
        transfer.read_generated(tmp_path / "missing", classify)


# --- relation ---------------------------------------------------------------------------------------


def _r2_lstsq(x, y, degree):
    """R² of a least-squares polynomial in raw x (a design matrix, not Chebyshev)."""
    a = np.vander(x, degree + 1)
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    res = y - a @ coef
    return 1 - res @ res / ((y - y.mean()) @ (y - y.mean()))


def test_relation_on_planted_linear_data():
    from scipy import stats

    rng = np.random.default_rng(7)
    x = rng.uniform(-0.8, 0.6, size=300)
    y = 1.7 * x + 0.2 + rng.normal(scale=0.25, size=300)
    out = transfer.relation(x.tolist(), y.tolist())
    r = np.corrcoef(x, y)[0, 1]
    assert out["n"] == 300 and out["n_skipped"] == 0
    assert out["pearson_r"] == pytest.approx(r, rel=1e-12)
    assert out["r2"] == pytest.approx(r**2, rel=1e-9)
    assert out["r2"] == pytest.approx(_r2_lstsq(x, y, 1), rel=1e-9)
    # planted: R² = var(1.7x) / (var(1.7x) + 0.25²), x uniform on a width 1.4
    planted = 1.7**2 * 1.4**2 / 12 / (1.7**2 * 1.4**2 / 12 + 0.25**2)
    assert out["r2"] == pytest.approx(planted, abs=0.05)
    assert out["slope"] == pytest.approx(1.7, abs=0.1) and out["intercept"] == pytest.approx(0.2, abs=0.05)
    t = r * math.sqrt(298 / (1 - r**2))
    assert out["p_value"] == pytest.approx(2 * stats.t.sf(abs(t), 298), rel=1e-6)
    assert [c["degree"] for c in out["chebyshev"]["in_sample"]] == [2, 3, 4, 5]
    for c in out["chebyshev"]["in_sample"]:
        assert 0 <= c["r2_gain"] < 0.01
        assert c["r2"] == pytest.approx(_r2_lstsq(x, y, c["degree"]), abs=1e-9)


def test_relation_chebyshev_gain_on_planted_cubic_data():
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, size=200)
    y = 4 * x**3 - 3 * x + rng.normal(scale=0.1, size=200)  # T3: nearly orthogonal to a line
    out = transfer.relation(x, y)
    assert out["r2"] == pytest.approx(_r2_lstsq(x, y, 1), rel=1e-9)
    gains = {c["degree"]: c["r2_gain"] for c in out["chebyshev"]["in_sample"]}
    assert gains[2] < 0.05 and gains[3] > 0.3 and gains[5] >= gains[3] - 1e-12
    assert out["r2"] + gains[3] > 0.95
    # a real cubic survives cross-validation (5-fold at 200 categories)
    cv = {c["degree"]: c["r2_gain"] for c in out["chebyshev"]["cross_validated"]}
    assert out["chebyshev"]["cv"]["scheme"] == "5-fold" and cv[3] > 0.3


def test_relation_skips_missing_pairs_and_rejects_bad_input():
    out = transfer.relation([0.0, 1.0, None, 2.0, 3.0, float("nan")], [1.0, 3.0, 4.0, 5.0, 7.5, 2.0])
    assert (out["n"], out["n_skipped"]) == (4, 2)
    assert out["pearson_r"] == pytest.approx(np.corrcoef([0, 1, 2, 3], [1, 3, 5, 7.5])[0, 1])
    assert [c["degree"] for c in out["chebyshev"]["in_sample"]] == [2]  # degree k needs k + 2 points
    # leave-one-out trains on 3: the line only, no degree 2 (it needs 4)
    assert out["chebyshev"]["cv"]["scheme"] == "leave-one-out" and out["chebyshev"]["cross_validated"] == []
    assert out["chebyshev"]["cv"]["r2_line"] is not None
    with pytest.raises(ValueError, match="x has 2 values and y 1"):
        transfer.relation([1, 2], [1])
    with pytest.raises(ValueError, match="at least 3"):
        transfer.relation([1, 2, None], [1, 2, 3])
    with pytest.raises(ValueError, match="constant"):
        transfer.relation([1, 1, 1], [1, 2, 3])


def test_scatter_plot_writes_a_png(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, size=150)
    y = x + rng.normal(scale=0.3, size=150)
    fit = transfer.relation(x, y)
    labels = [f"category {i}" for i in range(150)]
    path = transfer.scatter_plot([*x, None], [*y, 0.0], [*labels, "none"], fit, tmp_path / "f" / "t.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in path.parent.iterdir()] == ["t.png"]  # no temporary file left
    transfer.scatter_plot([0.1], [0.2], ["one"], None, tmp_path / "one.png")
    assert (tmp_path / "one.png").stat().st_size > 0
    with pytest.raises(ValueError, match="one entry per category"):
        transfer.scatter_plot([1.0], [1.0, 2.0], ["a"], None, tmp_path / "x.png")
