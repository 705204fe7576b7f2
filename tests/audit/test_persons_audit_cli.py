"""``fairsets audit persons`` end to end: planted numbers in audit.json, the report, resuming
byte for byte, and one-line errors."""

from __future__ import annotations

import json
import random

import pytest
from person_tables import ImageSpec, write_person_tables
from person_tables import image_group as _image_group
from typer.testing import CliRunner

from fairsets.audit.persons import run as audit_run
from fairsets.cli import app

runner = CliRunner()

SPORT = ["kicks a football", "runs a marathon", "plays tennis on a clay court", "lifts weights at the gym"]
ART = ["paints a canvas", "plays the violin", "reads poetry aloud", "dances ballet on stage"]


def _specs(n: int = 400, seed: int = 3) -> list[ImageSpec]:
    """``n`` images, one or two persons each; women's person captions planted with art, men's with
    sport; alt-texts of male images name a thief 3x as often as female ones (60 % vs 20 %)."""
    rng = random.Random(seed)
    specs = []
    for i in range(n):
        gender = "female" if i % 2 else "male"
        race = ["white", "black", "east asian"][i % 3]
        boxes = [(gender, race, 0.05 + 0.01 * (i % 7))]
        if i % 5 == 0:
            boxes.append(("unclear", race, 0.02))
        words = ART if gender == "female" else SPORT
        caps = [f"A person who {rng.choice(words)} in the afternoon" for _ in boxes]
        thief = (i % 10 == 1) if gender == "female" else (i % 10 in (0, 2, 4))
        alt = "a thief caught on camera" if thief else rng.choice(["a happy day", "a sad day", "our trip"])
        specs.append(ImageSpec(boxes=boxes, alt=alt, person_captions=caps))
    return specs


@pytest.fixture(scope="module")
def ann(tmp_path_factory):
    return write_person_tables(tmp_path_factory.mktemp("persons") / "ann", _specs(), shard_size=150)


def _run(*args: str):
    return runner.invoke(app, ["audit", "persons", *args])


@pytest.fixture(scope="module")
def audited(ann, tmp_path_factory):
    out = tmp_path_factory.mktemp("audit") / "out"
    res = _run(str(ann), "--out", str(out), "--sae-steps", "300", "--n-boot", "20", "-q")
    assert res.exit_code == 0, res.output
    return out


def test_audit_json_holds_the_planted_numbers(audited):
    doc = json.loads((audited / "audit.json").read_text(encoding="utf-8"))
    assert doc["schema"] == "fairsets.audit.persons/1"
    assert doc["annotations"] == "ann" and doc["n_shards"] == 3
    assert doc["attributes"] == ["gender", "race"]
    specs = _specs()
    comp = doc["composition"]
    assert comp["n_boxes"] == sum(len(s.boxes) for s in specs)
    assert comp["n_person_images"] == 400
    female = comp["images"]["gender"]["groups"]["female"]
    assert (female["count"], female["n"]) == (200, 400)
    alt = doc["crime"]["alt"]["gender"]
    # female images (odd i): thief when i % 10 == 1 -> 40 of 200; male (even i): i % 10 in (0, 2, 4)
    # -> 120 of 200; overall 160 of 400, so male Δ = 0.6 / 0.4 - 1 = +50 %
    assert (alt["female"]["matches"], alt["female"]["n"]) == (40, 200)
    assert (alt["male"]["matches"], alt["male"]["n"]) == (120, 200)
    assert alt["male"]["delta_pct"] == pytest.approx(50.0)
    assert alt["female"]["delta_pct"] == pytest.approx(-50.0)
    assert doc["crime"]["person"]["cap"]["overall"]["n"] == comp["n_boxes"]


def test_themes_tie_the_planted_topics_to_their_gender(audited):
    doc = json.loads((audited / "audit.json").read_text(encoding="utf-8"))
    th = doc["themes"]
    assert th is not None, doc["skipped"]
    assert th["text"] == "person" and th["n_texts"] == th["n_available"] and not th["sampled"]
    assert 0 <= th["sae"]["metrics"]["fvu"] < 1
    by = th["by_attribute"]["gender"]
    latents = th["by_attribute"]["gender"]["latents"]

    def top_words(identity: str) -> set[str]:
        best = by["identities"][identity]["themes"][0]["latent"]
        return {w["word"] if isinstance(w, dict) else w for w in latents[str(best)]["words"]}

    art_words = {"canvas", "paints", "violin", "poetry", "ballet", "dances", "stage"}
    sport_words = {"football", "kicks", "marathon", "tennis", "clay", "court", "lifts", "weights", "gym"}
    assert top_words("female") & art_words and not top_words("female") & sport_words
    assert top_words("male") & sport_words and not top_words("male") & art_words


def test_report_is_written(audited):
    html = (audited / "report.html").read_text(encoding="utf-8")
    assert html.lstrip().lower().startswith("<!doctype html") and "data:image/png;base64," in html
    assert "<script" not in html.lower()


class _Interrupt(Exception):
    pass


class _StopAfter:
    """A progress whose SAE stage raises after ``n`` steps (a run killed mid-training)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def stage(self, what, total, **kw):
        import contextlib

        @contextlib.contextmanager
        def ctx():
            seen = [0]

            def advance(k=1, **more):
                seen[0] += k
                if what.startswith("training") and seen[0] >= self.n:
                    raise _Interrupt

            yield advance

        return ctx()


def test_an_interrupted_run_resumes_to_the_same_bytes(ann, audited, tmp_path):
    out = tmp_path / "again"
    kw = dict(sae_steps=300, n_boot=20)
    with pytest.raises(_Interrupt):
        audit_run.run_persons_audit(ann, out, progress=_StopAfter(150), **kw)
    assert not (out / "audit.json").exists()
    assert list((out / ".work").glob("sae-*/sae-checkpoint.pt")), "the checkpoint of step 100 is kept"
    audit_run.run_persons_audit(ann, out, **kw)
    assert (out / "audit.json").read_bytes() == (audited / "audit.json").read_bytes()
    assert (out / "report.html").read_bytes() == (audited / "report.html").read_bytes()


def test_left_out_sections_say_why(ann, tmp_path):
    doc = audit_run.run_persons_audit(ann, tmp_path / "o", sentiment=None, themes=None, report=False)
    assert doc["sentiment"] is None and doc["themes"] is None
    assert doc["skipped"]["sentiment"] and doc["skipped"]["themes"]
    assert not (tmp_path / "o" / "report.html").exists()


def test_a_custom_word_list_and_min_count(ann, tmp_path):
    words = tmp_path / "words.toml"
    words.write_text('words = ["sad day"]\n', encoding="utf-8")
    out = tmp_path / "o"
    res = _run(str(ann), "--out", str(out), "--crime-words", str(words), "--min-count", "250",
               "--sentiment", "none", "--themes", "none", "-q")  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert doc["settings"]["crime_words"] == "words.toml" and doc["crime"]["words"] == ["sad day"]
    rows = doc["crime"]["alt"]["gender"]
    assert rows["female"]["delta_pct"] is None and rows["female"]["reason"]  # 200 < 250 texts
    assert doc["crime"]["alt"]["overall"]["n"] == 400


@pytest.mark.parametrize(
    "args, needle",
    [
        (["{missing}", "--out", "{out}"], "missing"),
        (["{ann}", "--out", "{out}", "--crime-words", "{missing}"], "--crime-words"),
        (["{ann}", "--out", "{out}", "--themes-text", "boxes"], "--themes-text"),
        (["{ann}", "--out", "{out}", "--themes", "{missing}", "--sentiment", "none"], "missing"),
        (["{ann}", "--out", "{out}", "--min-count", "0", "--themes", "none"], "min_count"),
        (["{ann}", "--out", "{file}"], "file"),
        (["{ann}", "--out", "{out}", "--exclusions", "{missing}"], "--exclusions"),
        (["{ann}", "--out", "{out}", "--exclusions", "{file}", "--themes", "none"], "exclusion file"),
        (["{ann}", "--out", "{out}", "--group-rule", "some"], "--group-rule"),
        (["{ann}", "--out", "{out}", "--delta-reference", "box"], "--delta-reference"),
        (["{ann}", "--out", "{out}", "--pmi", "soft"], "--pmi"),
        (["{ann}", "--out", "{out}", "--correct-with", "{missing}"], "--correct-with"),
        (["{ann}", "--out", "{out}", "--correct-with", "{file}", "--themes", "none"], "verify"),
    ],
)
def test_errors_are_one_line(ann, tmp_path, args, needle):
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    values = {"ann": ann, "out": tmp_path / "o", "missing": tmp_path / "missing", "file": tmp_path / "afile"}
    res = _run(*[a.format(**{k: str(v) for k, v in values.items()}) for a in args])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in res.output and needle in lines[0], res.output


def test_a_corrupt_table_is_one_line(tmp_path):
    ann = write_person_tables(tmp_path / "ann", _specs(20), shard_size=10)
    victim = sorted((ann / "boxes").glob("*.parquet"))[0]
    victim.write_bytes(victim.read_bytes()[:40])
    res = _run(str(ann), "--out", str(tmp_path / "o"), "--sentiment", "none", "--themes", "none")
    assert res.exit_code == 2, res.output
    assert "cannot be read" in res.output and "Traceback" not in res.output


def test_sentiment_with_two_workers_gives_the_same_numbers(ann, audited, tmp_path):
    out = tmp_path / "o"
    res = _run(str(ann), "--out", str(out), "--workers", "2", "--themes", "none", "-q")
    assert res.exit_code == 0, res.output
    one = json.loads((audited / "audit.json").read_text(encoding="utf-8"))["sentiment"]
    two = json.loads((out / "audit.json").read_text(encoding="utf-8"))["sentiment"]
    assert one is not None and two == one
    assert one["alt"]["overall"]["n"] == 400 and one["scorer"]["name"] == "vader"


def _norm(line: str) -> str:
    return " ".join(line.split())


def test_summary_prints_every_groups_delta_and_sentiment(ann, tmp_path):
    """Finding 9: the summary printed only the largest |Δ|; now it prints the paper's tables — Δ for
    every group (against all texts, and the complement beside it) and sentiment per group
    (negative ratio, mean VADER score) — each number recomputed here from the planted texts."""
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    res = _run(str(ann), "--out", str(tmp_path / "o"), "--themes", "none", "--min-count", "20")
    assert res.exit_code == 0, res.output
    lines = {_norm(line) for line in res.output.splitlines()}
    specs = _specs()
    units = [
        (_image_group([b[0] for b in s.boxes]), _image_group([b[1] for b in s.boxes]), s.alt) for s in specs
    ]
    hit = {u[2]: "thief" in u[2] for u in units}
    n, k = len(units), sum(hit[u[2]] for u in units)
    vader = SentimentIntensityAnalyzer()
    score = {t: vader.polarity_scores(t)["compound"] for t in hit}
    groups = [("gender", g) for g in ("female", "male")] + [
        ("race", r) for r in ("black", "east asian", "white")
    ]
    for attr, g in groups:
        i = 0 if attr == "gender" else 1
        mine = [u[2] for u in units if u[i] == g]
        rest = [u[2] for u in units if u[i] != g]
        m, mr = sum(hit[t] for t in mine), sum(hit[t] for t in rest)
        d_all = 100 * ((m / len(mine)) / (k / n) - 1)
        d_comp = 100 * ((m / len(mine)) / (mr / len(rest)) - 1)
        want = f"{attr} {g} {len(mine)} {m} {100 * m / len(mine):.1f} % {d_all:+.1f} % {d_comp:+.1f} %"
        assert want in lines, (want, res.output)
        values = [score[t] for t in mine]
        neg = sum(v <= -0.05 for v in values) / len(values)
        want = f"{attr} {g} {len(mine)} {neg:.3f} {sum(values) / len(values):+.3f}"
        assert want in lines, (want, res.output)
    assert (
        "crime-word Δ = rate of the group / rate of all texts of that kind − 1 (--delta-reference all)"
        in lines
    )
    assert any(line.startswith("gender mixed 0 0") and "n < 20" in line for line in lines)
    assert "group texts matches rate Δ Δ (complement)" in lines


def test_summary_prints_data_as_text_not_markup(tmp_path):
    specs = [ImageSpec([("male", "[red]evil[/red]", 0.1)], alt="a thief") for _ in range(5)]
    ann = write_person_tables(tmp_path / "ann", specs)
    res = _run(str(ann), "--out", str(tmp_path / "o"), "--themes", "none", "--sentiment", "none",
               "--min-count", "1")  # fmt: skip
    assert res.exit_code == 0, res.output
    lines = [_norm(line) for line in res.output.splitlines()]
    assert any(line.startswith("race [red]evil[/red] 5 5 100.0 % +0.0 %") for line in lines), res.output
    assert "person images by perceived race: [red]evil[/red] 100.0 %" in lines


def test_group_rule_delta_reference_and_mask_flags_reach_the_audit(ann, tmp_path):
    out = tmp_path / "o"
    res = _run(str(ann), "--out", str(out), "--group-rule", "any", "--delta-reference", "complement",
               "--sentiment", "none", "--themes", "none", "-q")  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert doc["settings"]["group_rule"] == "any" and doc["settings"]["delta_reference"] == "complement"
    assert doc["composition"]["group_rule"] == "any" and doc["crime"]["group_rule"] == "any"
    assert doc["crime"]["delta_reference"] == "complement"
    assert doc["crime"]["alternative"]["delta_reference"] == "all"
    # under "any" the images with an unclear box are in "unclear" too: 80 of the 400 (every fifth)
    assert doc["composition"]["images"]["gender"]["groups"]["unclear"]["count"] == 80
    assert doc["composition"]["images"]["gender"]["multi_membership"] is True
    for key in ("perceived", "group_rule", "unclear_vs_unlabelled", "delta_reference"):
        assert doc["definitions"][key]
    assert "any" in doc["definitions"]["group_rule"] and "complement" in doc["definitions"]["delta_reference"]


def _verify_report(path, confusion: dict[str, dict[str, int]], attr: str = "gender"):
    labels = list(confusion)
    report = {
        "attribute": attr,
        "human_vs_classifier": {"h1": {}},
        "confusion": {
            "labels": labels,
            "default_column": "h1",
            "by_human_column": {"h1": [[confusion[t][c] for c in labels] for t in labels]},
        },
    }
    path.write_text(json.dumps(report), encoding="utf-8")
    return path


def test_correct_with_reports_corrected_shares_beside_the_raw(ann, tmp_path):
    import numpy as np

    confusion = {
        "female": {"female": 180, "male": 15, "unclear": 5},
        "male": {"female": 30, "male": 165, "unclear": 5},
        "unclear": {"female": 5, "male": 5, "unclear": 90},
    }
    report = _verify_report(tmp_path / "verify_gender.json", confusion)
    out = tmp_path / "o"
    res = _run(str(ann), "--out", str(out), "--correct-with", str(report), "--sentiment", "none",
               "--themes", "none")  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    got = doc["composition"]["corrected"]["gender"]
    assert got["source"] == "verify_gender.json" and doc["settings"]["correct_with"] == ["verify_gender.json"]
    boxes = [b[0] for s in _specs() for b in s.boxes]
    labels = ["female", "male", "unclear"]
    observed = np.array([boxes.count(g) for g in labels], float) / len(boxes)
    for g, p in zip(labels, observed, strict=True):
        assert got["raw"][g] == pytest.approx(p)
    m = np.array([[confusion[t][c] for c in labels] for t in labels], float)
    m /= m.sum(axis=1, keepdims=True)
    true = np.linalg.solve(m.T, observed)  # regular and positive here: no clipping
    assert (true > 0).all()
    for g, p in zip(labels, true / true.sum(), strict=True):
        assert got["corrected"][g] == pytest.approx(p, abs=1e-9)
        lo, hi = got["ci95"][g]
        assert lo <= got["corrected"][g] <= hi
    assert "corrected with verify_gender.json" in res.output
    from fairsets.audit.persons.card import persons_card_section

    block = persons_card_section(doc)
    assert "| Group | Raw share | Corrected share | 95 % CI |" in block
    fixed = true / true.sum()
    lo, hi = got["ci95"]["female"]
    row = f"| boxes `female` | {100 * observed[0]:.1f} % | {100 * fixed[0]:.1f} % | "
    row += f"{100 * lo:.1f}–{100 * hi:.1f} % |"
    assert row in block
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "corrected for the classifier&#39;s confusion" in html or "corrected for the classifier's" in html
    bad = _run(str(ann), "--out", str(tmp_path / "o2"), "--correct-with", str(tmp_path / "nope.json"))
    assert bad.exit_code == 2 and "--correct-with" in bad.output
