"""The persons audit's HTML report: built from real audit computations over planted annotation
folders, then parsed — every group row and number is there (formatted as the test formats it),
every plot is an embedded PNG, hostile captions and labels are escaped and cut, null sections say
why, the same audit gives the same bytes, and broken documents are refused."""

from __future__ import annotations

import html
import io
import re
import shutil
from base64 import b64decode
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from markupsafe import escape
from person_tables import ImageSpec, write_person_tables
from PIL import Image

from fairsets.audit.persons import run as audit_run
from fairsets.audit.persons import tables
from fairsets.audit.persons.composition import composition
from fairsets.audit.persons.crime import crime_association
from fairsets.audit.persons.report import (
    CAPTION_CHARS,
    PERSONS_SCHEMA,
    check_persons_audit,
    render_persons_report,
)

HOSTILE_RACE = "<script>alert('race')</script>"
HOSTILE_CAPTION = '<script>alert("cap")</script> a person "quoted" & \'single\' sad'
HUGE_CAPTION = "a happy person " + "z" * 6000 + " END-OF-HUGE"
WORDS = ["thief", "robber"]
MIN_COUNT = 5


# ----------------------------------------------------------------------------------------------------
# The planted folder and its audit


def _specs() -> list[ImageSpec]:
    """Female images mostly "happy", male "sad"; black boxes' alt-texts name a thief; a race group
    (``indian``) too small for Δ; a hostile race label; hostile and huge person captions."""
    specs = []
    for i in range(40):
        specs.append(
            ImageSpec(
                [("female", "white", 0.12)],
                alt=f"a happy woman {i}",
                person_captions=[f"a happy woman smiling {i}"],
            )
        )
    for i in range(30):
        specs.append(
            ImageSpec(
                [("male", "black", 0.3)],
                alt=f"a thief in the street {i}" if i % 2 else f"a man {i}",
                person_captions=[f"a sad man {i}" if i % 3 else HOSTILE_CAPTION],
            )
        )
    for i in range(20):
        specs.append(
            ImageSpec(
                [("female", "asian", 0.05), ("male", "white", 0.5)],
                alt=f"two people {i}",
                person_captions=[f"a happy woman {i}", f"a man robber {i}"],
            )
        )
    for i in range(2):
        specs.append(ImageSpec([("male", "indian", 0.2)], alt=f"a thief {i}", person_captions=[f"a man {i}"]))
    for i in range(6):
        specs.append(
            ImageSpec(
                [("unclear", HOSTILE_RACE, 0.9)],
                alt=f"someone {i}",
                person_captions=[HUGE_CAPTION if i == 0 else f"someone {i}"],
            )
        )
    specs.append(ImageSpec([(None, None, 0.2)] * 12, alt="a crowd", person_captions=[None] * 12))
    specs.append(ImageSpec([], alt="no person"))
    return specs


class PlantedScorer:
    """A sentiment scorer with known scores: "happy" +0.8, "sad" -0.6, else 0."""

    name = "planted"
    kind = "vader"

    @staticmethod
    def value(text: str) -> float:
        return 0.8 if "happy" in text else -0.6 if "sad" in text else 0.0

    def score(self, texts):
        return [(v, "NEG" if v <= -0.05 else "POS" if v >= 0.05 else "NEU") for v in map(self.value, texts)]


def _themes_section(con, attributes: list[str]) -> tuple[dict, dict]:
    """The themes section as run.py builds it: person captions, random embeddings, SAE, PMI."""
    from fairsets.audit.persons.sae import train_sae
    from fairsets.audit.persons.themes import themes

    rows = con.execute(
        "SELECT caption, perceived_gender, perceived_race FROM captions "
        "WHERE trim(coalesce(caption, '')) <> '' ORDER BY shard, key, box_id"
    ).fetchall()
    texts = [r[0] for r in rows]
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(len(texts), 12)).astype(np.float32)
    for i, t in enumerate(texts):  # a planted direction for "happy", a loud huge caption
        emb[i, 0] += 3.0 if "happy" in t else 0.0
        emb[i] *= 5.0 if t == HUGE_CAPTION else 1.0
    settings = {
        "model": "random",
        "text": "person",
        "latents": 16,
        "k": 4,
        "steps": 30,
        "min_support": 3,
        "n_boot": 20,
        "seed": 0,
        "max_texts": 1000,
    }
    sae = train_sae(emb, latents=16, k=4, steps=30, seed=0)
    acts = sae.encode(emb)
    by_attr = {}
    for attr, ids in (("gender", [r[1] for r in rows]), ("race", [r[2] for r in rows])):
        if attr in attributes:
            by_attr[attr] = themes(acts, ids, texts, min_support=3, n_boot=20, seed=0)
    section = {
        "text": "person",
        "source": "cap",
        "n_texts": len(texts),
        "n_available": len(texts),
        "sampled": False,
        "sae": {"latents": sae.latents, "k": sae.k, "steps": sae.steps, "metrics": sae.metrics},
        "by_attribute": by_attr,
    }
    return section, settings


def _sentiment_section(con) -> dict:
    from fairsets.audit.persons.sentiment import sentiment

    return sentiment(con, scorer=PlantedScorer(), min_count=MIN_COUNT)


def build_audit(ann: Path, *, with_sentiment: bool = True, with_themes: bool = True) -> dict:
    con = tables.connect(ann)
    try:
        attributes = [a for a in tables.attributes(ann) if a in ("gender", "race")]
        doc = {
            "schema": PERSONS_SCHEMA,
            "annotations": ann.name,
            "fairsets_version": "0.test",
            "attributes": attributes,
            "n_shards": len(tables.finished_shards(ann)),
            "settings": {
                "min_count": MIN_COUNT,
                "group_rule": "exclusive",
                "delta_reference": "all",
                "crime_words": "words.toml",
                "exclusions": "default",
                "sentiment": None,
                "themes": None,
                "correct_with": [],
            },
            "definitions": audit_run._definitions("exclusive", "all"),
            "composition": composition(con),
            "crime": crime_association(con, WORDS, min_count=MIN_COUNT),
        }
        skipped = {"sentiment": None, "themes": None}
        doc["sentiment"] = _sentiment_section(con) if with_sentiment else None
        if with_sentiment:
            doc["settings"]["sentiment"] = "planted"
        else:
            skipped["sentiment"] = "VADER is not installed (pip install 'fairsets[persons-audit]')"
        if with_themes and tables.has_captions(ann):
            doc["themes"], doc["settings"]["themes"] = _themes_section(con, attributes)
        else:
            doc["themes"] = None
            skipped["themes"] = "cannot load sentence model 'minilm' <offline> & \"no cache\""
        doc["skipped"] = skipped
    finally:
        con.close()
    return doc


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    ann = write_person_tables(tmp_path_factory.mktemp("rep") / 'ann<b>"x"', _specs(), shard_size=40)
    audit = build_audit(ann)
    out = tmp_path_factory.mktemp("out") / "sub" / "report.html"
    path = render_persons_report(audit, out)
    return audit, path, path.read_text("utf-8")


# ----------------------------------------------------------------------------------------------------
# Parsing


class Page(HTMLParser):
    """Tags, table rows (cell texts), image sources, headings and visible text of a report."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.rows: list[list[str]] = []
        self.imgs: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs
        if tag == "img":
            self.imgs.append(dict(attrs)["src"])
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    page.close()
    return page


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def ci(c: list[float]) -> str:
    return f"[{100 * c[0]:.1f}, {100 * c[1]:.1f}]%"


def has_row(page: Page, *cells: str) -> bool:
    """Some table row starts with exactly these cells."""
    return any(r[: len(cells)] == list(cells) for r in page.rows)


# ----------------------------------------------------------------------------------------------------
# Tests


def test_report_is_one_self_contained_file_with_png_plots(planted):
    _, path, text = planted
    page = parse(text)
    assert path.name == "report.html" and text.startswith("<!DOCTYPE html>")
    assert "script" not in page.tags and "link" not in page.tags and "iframe" not in page.tags
    assert not re.search(r"(?i)(src|href)\s*=\s*[\"']?(https?:|//)", text)
    assert "@import" not in text and "url(" not in text
    # composition (gender, race), persons per image, box area, crime Δ (alt + captions),
    # sentiment (2 per kind), themes (per identity): many plots, every one a PNG that opens
    assert len(page.imgs) >= 12
    for src in page.imgs:
        assert src.startswith("data:image/png;base64,")
        img = Image.open(io.BytesIO(b64decode(src.split(",", 1)[1])))
        img.load()
        assert img.format == "PNG" and img.width > 300 and img.height > 200
    for section in ("Setup", "Composition", "Crime words", "Sentiment", "Themes", "Skipped sections"):
        assert section in "".join(page.text)


def test_setup_shows_settings_and_the_gender_rule(planted):
    audit, _, text = planted
    page = parse(text)
    assert has_row(page, "Annotation folder", 'ann<b>"x"')
    assert has_row(page, "Shards", "3") and audit["n_shards"] == 3
    assert has_row(page, "Minimum count", str(MIN_COUNT))
    assert has_row(page, "Crime words", "words.toml")
    assert has_row(page, "Sentiment scorer", "planted")
    assert has_row(page, "Themes latents", "16") and has_row(page, "Themes min_support", "3")
    assert has_row(page, "Group rule", "exclusive") and has_row(page, "Δ reference", "all")
    assert has_row(page, "images", audit["composition"]["definitions"]["images"])
    for key, rule in audit["definitions"].items():  # the rules every section shares, stated
        assert has_row(page, key, rule)
    assert "unlabelled" in audit["definitions"]["unclear_vs_unlabelled"]
    assert "0.test" in text


def test_composition_rows_match_a_plain_count(planted):
    audit, _, text = planted
    page = parse(text)
    specs = _specs()
    boxes = [b for s in specs for b in s.boxes]
    for g in ("female", "male", "unclear", None):  # one denominator: every kept box
        count = sum(1 for b in boxes if b[0] == g)
        name = g or "unlabelled"
        entry = audit["composition"]["boxes"]["gender"]["groups"][name]
        assert entry["count"] == count
        assert has_row(page, name, str(count), str(len(boxes)), pct(count / len(boxes)), ci(entry["ci95"]))
    person_images = [s for s in specs if s.boxes]
    both = sum(1 for s in person_images if {"female", "male"} <= {b[0] for b in s.boxes})
    assert has_row(
        page, "both female and male boxes", str(both), str(len(person_images)), pct(both / len(person_images))
    )
    # every group row of every share table is in the report
    comp = audit["composition"]
    for attr in ("gender", "race"):
        for where in ("boxes", "images"):
            for g, s in comp[where][attr]["groups"].items():
                assert has_row(page, g, str(s["count"]), str(s["n"]), pct(s["share"]), ci(s["ci95"])), (
                    attr,
                    g,
                )
    only_black = sum(1 for s in person_images if {b[1] for b in s.boxes} - {None, "unclear"} == {"black"})
    assert comp["images"]["race"]["groups"]["black"]["count"] == only_black
    assert "the rows sum to 100%" in text
    for g, s in comp["alternative"]["images"]["race"]["groups"].items():  # the other rule, in a block
        assert has_row(page, g, str(s["count"]), str(s["n"]), pct(s["share"]), ci(s["ci95"])), g
    ppi = comp["persons_per_image"]
    assert ppi["max"] == 12 and "Most persons in one image: 12" in text
    for b, c in zip(ppi["bins"], ppi["counts"], strict=True):
        assert has_row(page, b, str(c))
    assert has_row(page, "1", str(sum(1 for s in person_images if len(s.boxes) == 1)))
    area = comp["box_area"]
    assert has_row(page, "0.10–0.15", str(sum(1 for b in boxes if 0.10 <= b[2] < 0.15)))
    assert f"Mean {area['mean']:.3f}" in text
    assert has_row(page, "boxes labelled unclear (gender)", "6")


def test_crime_rows_show_delta_counts_and_reasons(planted):
    audit, _, text = planted
    page = parse(text)
    alt = audit["crime"]["alt"]
    person_images = [s for s in _specs() if s.boxes]
    hits = [bool(re.search(r"\b(thief|robber)s?\b", s.alt or "")) for s in person_images]
    overall = sum(hits) / len(hits)
    black = [h for s, h in zip(person_images, hits, strict=True) if any(b[1] == "black" for b in s.boxes)]
    delta = 100 * ((sum(black) / len(black)) / overall - 1)
    assert alt["race"]["black"]["delta_pct"] == pytest.approx(delta)
    assert has_row(
        page,
        "black",
        str(sum(black)),
        str(len(black)),
        pct(sum(black) / len(black)),
        ci(alt["race"]["black"]["ci95"]),
        f"{delta:+.1f}%",
    )
    # the two "indian" images are too few: no Δ, and the reason is shown
    indian = alt["race"]["indian"]
    assert indian["delta_pct"] is None and indian["reason"]
    assert has_row(page, "indian", "2", "2", "100.0%", ci(indian["ci95"]), "–", indian["reason"])
    for sec in [alt, *audit["crime"]["person"].values()]:
        for attr in ("gender", "race"):
            for g, r in sec[attr].items():
                d = "–" if r["delta_pct"] is None else f"{r['delta_pct']:+.1f}%"
                rate = "–" if r["rate"] is None else pct(r["rate"])
                assert has_row(page, html.unescape(g), str(r["matches"]), str(r["n"]), rate), g
                assert any(row[:1] == [g] and row[5:6] == [d] for row in page.rows), g
    assert "Person captions by cap" in text
    # the word list is in a collapsible block
    assert re.search(r"<details><summary>Crime words \(2\)</summary>\s*<p>thief, robber</p>", text)


def test_crime_shows_both_references_and_the_matched_phrases(planted):
    audit, _, text = planted
    page = parse(text)
    alt = audit["crime"]["alt"]
    person_images = [s for s in _specs() if s.boxes]
    hits = [bool(re.search(r"\b(thief|robber)s?\b", s.alt or "")) for s in person_images]
    black = [h for s, h in zip(person_images, hits, strict=True) if any(b[1] == "black" for b in s.boxes)]
    rest = [h for s, h in zip(person_images, hits, strict=True) if not any(b[1] == "black" for b in s.boxes)]
    complement = 100 * ((sum(black) / len(black)) / (sum(rest) / len(rest)) - 1)
    assert audit["crime"]["alternative"]["alt"]["race"]["black"]["delta_pct"] == pytest.approx(complement)
    row = next(r for r in page.rows if r[:1] == ["black"] and len(r) == 9)
    assert row[7] == pct(sum(hits) / len(hits)) and row[8] == f"{complement:+.1f}%"
    assert "Δ% (complement)" in text and "--delta-reference all" in text
    assert "Matched phrases per word" in text
    for p in alt["top_phrases"]["thief"]:
        assert has_row(page, "thief", p["phrase"], str(p["count"]))


def test_sentiment_rows_match_the_planted_scores(planted):
    audit, _, text = planted
    page = parse(text)
    sec = audit["sentiment"]["person"]["cap"]
    caps = [
        (c, b) for s in _specs() if s.person_captions for c, b in zip(s.person_captions, s.boxes, strict=True)
    ]
    female = [PlantedScorer.value(c) for c, b in caps if c and c.strip() and b[0] == "female"]
    row = sec["gender"]["female"]
    assert row["n"] == len(female) and row["mean"] == pytest.approx(float(np.mean(female)))
    neg = sum(v <= -0.05 for v in female)
    pos = sum(v >= 0.05 for v in female)
    assert has_row(
        page,
        "gender: female",
        str(len(female)),
        f"{np.mean(female):.3f}",
        f"[{row['mean_ci95'][0]:.3f}, {row['mean_ci95'][1]:.3f}]",
        str(neg),
        pct(neg / len(female)),
        ci(row["negative"]["ci95"]),
        str(pos),
        pct(pos / len(female)),
    )
    # the small group keeps its counts, shows no mean, and says why
    small = sec["race"]["indian"]
    assert small["mean"] is None and small["reason"]
    assert has_row(page, "race: indian", "2", "–", "–")
    assert any(r[0] == "race: indian" and r[-1] == small["reason"] for r in page.rows)
    for kind in [audit["sentiment"]["alt"], sec]:
        for attr in ("gender", "race"):
            for g, r in kind[attr].items():
                mean = "–" if r["mean"] is None else f"{r['mean']:.3f}"
                assert has_row(page, f"{attr}: {g}", str(r["n"]), mean), g
    assert "Alt-texts of person images" in text


def test_themes_show_metrics_pmi_and_latent_names(planted):
    audit, _, text = planted
    page = parse(text)
    th = audit["themes"]
    m = th["sae"]["metrics"]
    assert has_row(page, "FVU (held-out)", f"{m['fvu']:.4f}")
    assert has_row(page, "L0 (mean active latents)", f"{m['l0']:.2f}")
    assert has_row(page, "Dead latents", f"{m['dead_latents']} of 16")
    n_rows = 0
    for attr, res in th["by_attribute"].items():
        for ident, info in res["identities"].items():
            assert f"{attr}: {ident}" in html.unescape(text)
            for t in info["themes"]:
                lat = res["latents"][str(t["latent"])]
                name = ", ".join(w["word"] for w in lat["words"][:4]) or "(no distinctive word)"
                lo, hi = t["ci95"]
                assert has_row(
                    page,
                    str(t["latent"]),
                    name,
                    f"{t['pmi']:.3f}",
                    f"[{lo:.3f}, {hi:.3f}]",
                    str(t["n_boot_used"]),
                    str(t["n_together"]),
                    str(t["n_identity"]),
                    str(t["n_latent"]),
                ), (attr, ident, t)
                n_rows += 1
        for lid in res["latents"]:
            assert f"Latent #{lid}:" in text
    assert n_rows >= 5
    # the "happy" direction makes some latent's distinctive words include "happy"
    assert any(
        w["word"] == "happy" for lat in th["by_attribute"]["gender"]["latents"].values() for w in lat["words"]
    )


def test_hostile_text_is_escaped_and_huge_captions_are_cut(planted):
    audit, _, text = planted
    shown = [
        c["caption"]
        for res in audit["themes"]["by_attribute"].values()
        for lat in res["latents"].values()
        for c in lat["top_captions"]
    ]
    assert HOSTILE_CAPTION in shown and HUGE_CAPTION in shown  # the test plants what it checks
    assert "<script" not in text.lower()
    assert str(escape(HOSTILE_CAPTION)) in text
    assert str(escape(HOSTILE_RACE)) in text  # a hostile group label, in tables
    assert "END-OF-HUGE" not in text and "z" * (CAPTION_CHARS + 10) not in text
    assert HUGE_CAPTION[: CAPTION_CHARS - 20] in text
    page = parse(text)
    assert any(HOSTILE_RACE in r for r in page.rows)  # shown as text, not run as a tag


def test_null_sections_are_explained(tmp_path):
    specs = [ImageSpec([("female", "white", 0.2)], alt=f"a thief {i}") for i in range(3)]
    specs += [ImageSpec([("male", "black", 0.2)], alt=f"a man {i}") for i in range(3)]
    ann = write_person_tables(tmp_path / "norace", specs)
    shutil.rmtree(ann / "attributes" / "race")
    audit = build_audit(ann, with_sentiment=False, with_themes=False)
    assert audit["composition"]["boxes"]["race"] is None and audit["crime"]["person"] is None
    text = render_persons_report(audit, tmp_path / "r.html").read_text("utf-8")
    page = parse(text)
    visible = " ".join(" ".join(page.text).split())
    assert "No race composition: the folder has no perceived_race labels" in visible
    assert (
        "Sentiment was not computed: VADER is not installed (pip install 'fairsets[persons-audit]')."
        in visible
    )
    assert (
        "Themes were not computed: cannot load sentence model 'minilm' <offline> & \"no cache\"." in visible
    )
    assert "Not computed: the folder has no person captions; run fairsets annotate caption." in visible
    assert "No perceived race labels for these texts." in visible
    assert has_row(page, "sentiment", "VADER is not installed (pip install 'fairsets[persons-audit]')")
    assert has_row(page, "Themes", "not run")
    # the gender rows are still all there, and no Δ with 3 texts per group (min count 5)
    assert has_row(page, "female", "3", "6", "50.0%")
    assert has_row(
        page, "female", "3", "3", "100.0%", ci(audit["crime"]["alt"]["gender"]["female"]["ci95"]), "–"
    )
    # whole sections missing from the document, too
    bare = {
        k: v for k, v in audit.items() if k not in ("composition", "crime", "sentiment", "themes", "skipped")
    }
    text = render_persons_report(bare, tmp_path / "bare.html").read_text("utf-8")
    visible = " ".join(" ".join(parse(text).text).split())
    assert (
        "The composition was not computed" in visible and "crime-word association was not computed" in visible
    )
    assert "Sentiment was not computed: the audit has no such section." in visible


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("composition", "boxes", "gender"), [1, 2]),
        (("composition", "boxes", "race", "groups"), "white"),
        (("composition", "persons_per_image", "bins"), 3),
        (("composition", "box_area", "counts"), {"a": 1}),
        (("crime", "alt", "gender", "female"), None),
        (("crime", "words"), 12),
        (("sentiment", "alt", "overall", "mean_ci95"), [0.1]),
        (("sentiment", "person", "cap", "race"), ["black"]),
        (("themes", "by_attribute", "gender", "identities", "female", "themes"), 7),
        (("themes", "sae", "metrics"), "fvu"),
    ],
)
def test_odd_values_inside_sections_render_without_a_crash(planted, tmp_path, where, value):
    """The check guards the document's shape; anything odd inside a section shows as "–" or a
    sentence instead of a traceback, and the rest of the report is still there."""
    import copy

    audit = copy.deepcopy(planted[0])
    node = audit
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    text = render_persons_report(audit, tmp_path / "odd.html").read_text("utf-8")
    page = parse(text)
    assert "<script" not in text.lower()
    assert has_row(page, "Annotation folder", 'ann<b>"x"') and has_row(page, "Shards", "3")
    assert all(src.startswith("data:image/png;base64,") for src in page.imgs) and len(page.imgs) >= 8


def test_control_characters_do_not_reach_the_page(planted, tmp_path):
    audit = dict(planted[0], annotations="ann\x00\x1b[31mred\nline")
    text = render_persons_report(audit, tmp_path / "ctl.html").read_text("utf-8")
    assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", text)
    assert has_row(parse(text), "Annotation folder", "ann [31mred line")


def test_same_audit_same_bytes(planted, tmp_path):
    audit, path, _ = planted
    again = render_persons_report(audit, tmp_path / "again.html")
    assert again.read_bytes() == path.read_bytes()
    other = dict(audit, annotations="other")
    assert render_persons_report(other, tmp_path / "other.html").read_bytes() != path.read_bytes()


def _good() -> dict:
    return {
        "schema": PERSONS_SCHEMA,
        "annotations": "ann",
        "fairsets_version": "0.1",
        "attributes": ["gender"],
        "n_shards": 1,
        "settings": {"min_count": 100, "crime_words": "default", "sentiment": None, "themes": None},
        "composition": None,
        "crime": None,
        "sentiment": None,
        "themes": None,
        "skipped": {"sentiment": None, "themes": None},
    }


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"schema": "fairsets.audit.vlm/1"}, "schema is"),
        ({"annotations": None}, "'annotations' must be a non-empty string"),
        ({"annotations": "/home/me/ann"}, "not a path"),
        ({"fairsets_version": 1}, "'fairsets_version'"),
        ({"attributes": "gender"}, "'attributes'"),
        ({"n_shards": -1}, "'n_shards'"),
        ({"n_shards": True}, "'n_shards'"),
        ({"settings": None}, "'settings' must be an object"),
        ({"settings": {"min_count": "100"}}, "min_count"),
        ({"settings": {"min_count": 1, "themes": [1]}}, "settings.themes"),
        ({"sentiment": [1]}, "'sentiment' must be an object or null"),
        ({"crime": {"person": "x"}}, "'crime.person'"),
        ({"themes": {"by_attribute": []}}, "by_attribute"),
    ],
)
def test_check_catches_bad_documents(change, problem, tmp_path):
    assert check_persons_audit(_good()) == []
    bad = _good() | change
    problems = check_persons_audit(bad)
    assert any(problem in p for p in problems), problems
    with pytest.raises(ValueError, match="cannot report this persons audit"):
        render_persons_report(bad, tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def test_check_rejects_non_objects():
    assert check_persons_audit([1, 2]) == ["the audit must be a JSON object, got list"]
    assert check_persons_audit({"schema": PERSONS_SCHEMA})  # required keys missing


def test_minimal_document_renders(tmp_path):
    text = render_persons_report(_good(), tmp_path / "r.html").read_text("utf-8")
    page = parse(text)
    assert not page.imgs and "Nothing was skipped" not in text  # four sections are not in it
    assert has_row(page, "composition", "not in the audit")


def test_report_renders_in_headless_chromium(planted, tmp_path):
    """Where a Chromium is installed, the report's plots render (a screenshot with colour in it)."""
    import subprocess

    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no headless Chromium on this machine (the report is checked by parsing above)")
    _, path, _ = planted
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={shot}",
            "--window-size=1200,2400",
            path.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    img = np.asarray(Image.open(shot).convert("RGB"))
    colours = {tuple(c) for c in img.reshape(-1, 3)[::97]}
    assert any(max(c) - min(c) > 80 for c in colours), "no coloured plot pixels in the screenshot"
