"""Sentiment per perceived group: every mean, share and interval against VADER called directly over
the planted specs and aggregated in plain Python; planted negativity recovered; the no-text and
min-count rules; each distinct text scored once whatever the batch size; the transformer scorer
against the model run directly with torch."""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import random
import statistics
from pathlib import Path

import pytest
from person_tables import ImageSpec, write_person_tables
from person_tables import image_group as _image_group

from fairsets.audit.persons.sentiment import TransformerScorer, VaderScorer, sentiment
from fairsets.audit.persons.tables import connect
from fairsets.core.step import MissingDependency
from fairsets.models import ModelUnavailable

NEGATIVE = ["police arrested a violent thief", "a sad and angry man, terrible day", "horrible war victims"]
NEUTRAL = ["a person standing", "portrait of a woman in a room", "a man at the station"]
POSITIVE = ["a happy smiling bride", "great fun with friends!", "a beautiful, lovely family picnic"]
MIXED_TONE = ["not bad at all", "the best of the worst", "he is not happy"]
POOL = NEGATIVE + NEUTRAL + POSITIVE + MIXED_TONE
Z = 1.959963984540054


@functools.cache
def _vader(text: str) -> float:
    """VADER's compound score, straight from vaderSentiment."""
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return SentimentIntensityAnalyzer().polarity_scores(text)["compound"]


def _wilson(k: int, n: int) -> list[float]:
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return [max(0.0, centre - half), min(1.0, centre + half)]


def _expected_row(values: list[float], min_count: int) -> dict:
    """A row in plain Python from the group's compound scores."""
    n = len(values)
    neg = sum(v <= -0.05 for v in values)
    pos = sum(v >= 0.05 for v in values)
    if n < min_count:
        return {"n": n, "neg": neg, "pos": pos, "mean": None}
    mean = sum(values) / n
    half = Z * statistics.stdev(values) / math.sqrt(n) if n > 1 else None
    return {
        "n": n,
        "neg": neg,
        "pos": pos,
        "mean": mean,
        "mean_ci95": None if half is None else [mean - half, mean + half],
        "neg_ci": _wilson(neg, n),
        "pos_ci": _wilson(pos, n),
    }


def _check_row(got: dict, want: dict, min_count: int) -> None:
    n = want["n"]
    assert got["n"] == n
    assert (got["negative"]["count"], got["negative"]["n"]) == (want["neg"], n)
    assert (got["positive"]["count"], got["positive"]["n"]) == (want["pos"], n)
    if want["mean"] is None:
        assert got["mean"] is None and got["mean_ci95"] is None
        assert got["negative"]["share"] is None and got["positive"]["ci95"] is None
        assert got["reason"] == f"fewer than {min_count} texts ({n})"
        return
    assert got["reason"] is None
    assert got["mean"] == pytest.approx(want["mean"], abs=1e-12)
    if want["mean_ci95"] is None:
        assert got["mean_ci95"] is None
    else:
        assert got["mean_ci95"] == pytest.approx(want["mean_ci95"], abs=1e-12)
    assert got["negative"]["share"] == pytest.approx(want["neg"] / n)
    assert got["positive"]["share"] == pytest.approx(want["pos"] / n)
    assert got["negative"]["ci95"] == pytest.approx(want["neg_ci"], abs=1e-12)
    assert got["positive"]["ci95"] == pytest.approx(want["pos_ci"], abs=1e-12)


def _check_section(got: dict, units: list[tuple], min_count: int) -> None:
    """``units``: (gender group, race group, text) for every text of the section (text may be
    blank); one group per attribute, so the groups' ``n`` sum to the overall ``n``."""
    scored = [(g, r, _vader(t)) for g, r, t in units if t is not None and t.strip()]
    assert got["no_text"] == len(units) - len(scored)
    _check_row(got["overall"], _expected_row([v for _, _, v in scored], min_count), min_count)
    for i, attr in enumerate(("gender", "race")):
        groups = {u[i] for u in scored}
        assert {g for g, row in got[attr].items() if row["n"]} == groups
        for g in groups:
            mine = [u[2] for u in scored if u[i] == g]
            _check_row(got[attr][g], _expected_row(mine, min_count), min_count)
        assert sum(row["n"] for row in got[attr].values()) == got["overall"]["n"]


def _random_specs(seed: int, n: int, *, captions: bool = False) -> tuple[list[ImageSpec], list, list]:
    rng = random.Random(seed)
    specs, alt_units, person_units = [], [], []
    for _ in range(n):
        boxes = [
            (
                rng.choice(["female", "male", "unclear", None]),
                # middle_eastern is rare: under the tests' min_count
                "middle_eastern" if rng.random() < 0.02 else rng.choice(["white", "black", "unclear", None]),
                0.1,
            )
            for _ in range(rng.choice([1, 1, 2, 3]))
        ]
        alt = rng.choice([*POOL, None, "", "   "]) if rng.random() < 0.1 else rng.choice(POOL)
        caps = [rng.choice([*POOL, "  "]) for _ in boxes] if captions else None
        specs.append(ImageSpec(boxes, alt=alt, person_captions=caps))
        alt_units.append((_image_group([b[0] for b in boxes]), _image_group([b[1] for b in boxes]), alt))
        for b, cap in zip(boxes, caps or [], strict=False):
            person_units.append((b[0] or "unlabelled", b[1] or "unlabelled", cap))
    return specs, alt_units, person_units


def test_alt_text_groups_match_vader_in_plain_python(tmp_path: Path) -> None:
    specs, units, _ = _random_specs(11, 600)
    specs += [ImageSpec([], alt="a horrible, awful scene without people")]  # no person: not counted
    ann = write_person_tables(tmp_path / "ann", specs, shard_size=250)
    got = sentiment(connect(ann), texts=("alt",), min_count=40)
    assert json.loads(json.dumps(got, allow_nan=False)) == got  # JSON-ready
    assert got["scorer"] == {"name": "vader", "kind": "vader"} and got["min_count"] == 40
    assert got["person"] is None and got["person_reason"] == "not asked for"
    assert set(got["alt"]) == {"overall", "no_text", "gender", "race"}
    assert got["group_rule"] == "exclusive" and "exclusive" in got["definitions"]["group_rule"]
    _check_section(got["alt"], units, 40)
    # some groups are under min_count and some over, so both branches were compared
    rows = [r for a in ("gender", "race") for r in got["alt"][a].values() if r["n"]]
    assert any(r["mean"] is None for r in rows) and any(r["mean"] is not None for r in rows)
    assert {"mean", "negative", "positive", "alt", "person", "no_text", "min_count"} <= set(
        got["definitions"]
    )


def test_planted_negative_captions_raise_that_groups_negative_ratio(tmp_path: Path) -> None:
    rng = random.Random(4)
    specs, units = [], []
    # 200 images with a black box: 120 negative alt-texts; 800 others: 80 negative.
    for i in range(1000):
        race = "black" if i < 200 else rng.choice(["white", "east_asian"])
        negative = i < 120 or 200 <= i < 280
        alt = rng.choice(NEGATIVE if negative else NEUTRAL + POSITIVE)
        gender = rng.choice(["female", "male"])
        specs.append(ImageSpec([(gender, race, 0.1)], alt=alt))
        units.append((gender, race, alt))
    ann = write_person_tables(tmp_path / "ann", specs, shard_size=400)
    got = sentiment(connect(ann), texts=["alt"], min_count=50)["alt"]
    black = got["race"]["black"]
    assert (black["negative"]["count"], black["n"]) == (120, 200)
    assert black["negative"]["share"] == pytest.approx(0.6)
    assert got["overall"]["negative"]["share"] == pytest.approx(0.2)
    for other in ("white", "east_asian"):
        row = got["race"][other]
        assert row["negative"]["share"] < 0.2 and row["negative"]["ci95"][1] < black["negative"]["ci95"][0]
        assert row["mean"] > black["mean"]
    assert black["mean_ci95"][1] < got["overall"]["mean"]
    _check_section(got, units, 50)


def test_no_text_and_min_count_rules(tmp_path: Path) -> None:
    specs = [ImageSpec([("female", "white", 0.1)], alt="a happy day")] * 10
    specs += [ImageSpec([("male", "white", 0.1)], alt=t) for t in (None, "", "  \t", "\n\u00a0")]
    specs += [ImageSpec([("male", "black", 0.1)], alt="a terrible day")] * 9
    con = connect(write_person_tables(tmp_path / "a", specs))
    got = sentiment(con, texts=("alt",), min_count=10)["alt"]
    assert got["no_text"] == 4 and got["overall"]["n"] == 19
    female, male = got["gender"]["female"], got["gender"]["male"]
    assert female["n"] == 10 and female["reason"] is None  # exactly min_count: reported
    assert female["mean"] == pytest.approx(_vader("a happy day")) and female["mean_ci95"] == pytest.approx(
        [female["mean"]] * 2
    )
    assert female["positive"]["share"] == 1.0 and female["negative"]["share"] == 0.0
    assert male["n"] == 9 and male["mean"] is None and male["reason"] == "fewer than 10 texts (9)"
    assert male["negative"] == {"count": 9, "n": 9, "share": None, "ci95": None}
    assert got["gender"]["mixed"]["n"] == 0 and got["gender"]["mixed"]["reason"] == "fewer than 10 texts (0)"
    assert list(got["gender"]) == ["female", "male", "mixed", "unclear"]
    assert got["race"]["white"]["n"] == 10  # the four textless white images are not texts
    with pytest.raises(ValueError, match="min_count"):
        sentiment(con, min_count=0)
    with pytest.raises(ValueError, match="texts must"):
        sentiment(con, texts="alt")
    with pytest.raises(ValueError, match="batch"):
        sentiment(con, batch=0)


def test_person_captions_per_captioner(tmp_path: Path) -> None:
    specs, alt_units, units_a = _random_specs(7, 300, captions=True)
    ann = write_person_tables(tmp_path / "ann", specs, shard_size=120, captioner="alpha")
    rng = random.Random(8)
    specs_b, units_b = [], []
    for spec in specs:  # same images and boxes, another captioner's wording (some captions failed)
        caps = [rng.choice([*NEGATIVE, *NEUTRAL, None]) for _ in spec.boxes]
        specs_b.append(ImageSpec(spec.boxes, alt=spec.alt, person_captions=caps))
        units_b += [
            (b[0] or "unlabelled", b[1] or "unlabelled", c)
            for b, c in zip(spec.boxes, caps, strict=True)
            if c
        ]
    write_person_tables(ann, specs_b, shard_size=120, captioner="beta")
    got = sentiment(connect(ann), min_count=30)
    assert sorted(got["person"]) == ["alpha", "beta"] and "person_reason" not in got
    _check_section(got["person"]["alpha"], units_a, 30)
    _check_section(got["person"]["beta"], units_b, 30)
    _check_section(got["alt"], alt_units, 30)
    assert got["person"]["beta"]["overall"]["positive"]["count"] == 0  # beta never wrote a positive caption
    no_caps = write_person_tables(tmp_path / "bare", [ImageSpec(s.boxes, alt=s.alt) for s in specs[:5]])
    bare = sentiment(connect(no_caps), min_count=1)
    assert bare["person"] is None and "annotate caption" in bare["person_reason"]


class Counting:
    """A scorer that records every batch it is given and scores by a rule the test can recompute."""

    name, kind = "counting", "vader"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.vader = VaderScorer()

    def score(self, texts):
        self.calls.append(list(texts))
        return self.vader.score(texts)


def test_each_distinct_text_scored_once_whatever_the_batch(tmp_path: Path) -> None:
    specs, _, person_units = _random_specs(21, 400, captions=True)
    ann = write_person_tables(tmp_path / "ann", specs, shard_size=150)
    distinct = {s.alt for s in specs if s.alt and s.alt.strip()} | {
        t for _, _, t in person_units if t and t.strip()
    }
    results = []
    for batch in (1, 4, 7, 10_000):
        scorer = Counting()
        results.append(sentiment(connect(ann), scorer=scorer, batch=batch, min_count=20))
        seen = [t for call in scorer.calls for t in call]
        assert sorted(seen) == sorted(distinct)  # every distinct text once, alt and person together
        assert all(1 <= len(call) <= batch for call in scorer.calls)
        if batch < len(distinct):
            assert len(scorer.calls) >= math.ceil(len(distinct) / batch)
    assert all(r == results[0] for r in results[1:])


def test_progress_counts_the_distinct_texts(tmp_path: Path) -> None:
    specs = [ImageSpec([("female", "white", 0.1)], alt=t) for t in POOL * 3]
    con = connect(write_person_tables(tmp_path / "a", specs))
    seen: dict = {}

    class Recorder:
        def stage(self, what, total, rates=()):
            import contextlib

            bar = con.execute("SELECT current_setting('enable_progress_bar')").fetchall()[0][0]
            seen.update(what=what, total=total, done=0, duckdb_bar=bar)

            def advance(n=1, **_):
                seen["done"] += n

            return contextlib.nullcontext(advance)

    con.execute("SET enable_progress_bar = true")
    sentiment(con, progress=Recorder(), batch=5, min_count=1)
    # DuckDB's own bar is off while the texts stream out, and the connection's setting restored after
    assert seen == {"what": "sentiment (vader)", "total": len(POOL), "done": len(POOL), "duckdb_bar": False}
    assert con.execute("SELECT current_setting('enable_progress_bar')").fetchall() == [(True,)]


def test_malformed_scores_are_a_clear_error(tmp_path: Path) -> None:
    con = connect(write_person_tables(tmp_path / "a", [ImageSpec([("male", "white", 0.1)], alt="hi")]))

    class Short:
        name, kind = "short", "vader"

        def score(self, texts):
            return []

    class BadLabel(Short):
        def score(self, texts):
            return [(float("nan"), "NEG") for _ in texts]

    with pytest.raises(ValueError, match="returned 0 scores for 1 texts"):
        sentiment(con, scorer=Short())

    class TooLarge(Short):
        def score(self, texts):
            return [(3.5, "POS") for _ in texts]

    class Unlabelled(Short):
        def score(self, texts):
            return [(0.5, "positive") for _ in texts]

    for bad in (BadLabel(), TooLarge(), Unlabelled()):
        with pytest.raises(ValueError, match=r"a value in \[-1, 1\] and one of NEG, NEU, POS"):
            sentiment(con, scorer=bad)
    with pytest.raises(ValueError, match="scorer must have"):
        sentiment(con, scorer=object())


def test_missing_vader_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "vaderSentiment" else real(name, *a)
    )
    with pytest.raises(MissingDependency, match=r"fairsets\[persons-audit\]"):
        VaderScorer()


# --- transformer scorer --------------------------------------------------------------------------

WORDS = ["a", "the", "man", "woman", "good", "bad", "happy", "sad", "is", "at", "beach", "terrible", "great"]


def _tiny_model(folder: Path, id2label: dict[int, str], seed: int = 0) -> Path:
    """A randomly initialised 3-class BERT with a WordPiece tokenizer built from a small vocab."""
    from fairsets.models import ensure_torchvision

    ensure_torchvision()
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n"
    )
    tokenizer = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), model_max_length=32)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=5 + len(WORDS),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        initializer_range=0.8,  # large weights, so texts get clearly different probabilities
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
    )
    BertForSequenceClassification(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _direct(folder: Path, texts: list[str], order: tuple[int, int, int]) -> list[tuple[float, int]]:
    """(P(pos) - P(neg), argmax class id) per text, one text at a time, with torch directly."""
    import torch
    from transformers import BertForSequenceClassification, BertTokenizerFast

    tok = BertTokenizerFast.from_pretrained(folder)
    model = BertForSequenceClassification.from_pretrained(folder).eval()
    out = []
    with torch.no_grad():
        for t in texts:
            enc = tok(t, truncation=True, max_length=32, return_tensors="pt")
            p = torch.softmax(model(**enc).logits[0], -1).tolist()
            neg, _, pos = order
            out.append((p[pos] - p[neg], max(range(3), key=lambda i: p[i])))
    return out


TEXTS = ["a good man", "the sad woman at the beach", "terrible", "great happy days " * 20, "zzz", "a"]


def test_transformer_scorer_matches_the_model_run_directly(tmp_path: Path) -> None:
    folder = _tiny_model(tmp_path / "tiny", {0: "NEG", 1: "NEU", 2: "POS"})
    scorer = TransformerScorer(str(folder), batch_size=4)
    assert (scorer.name, scorer.kind) == ("tiny", "transformer")  # a local folder by its name only
    got = scorer.score(TEXTS)
    want = _direct(folder, TEXTS, (0, 1, 2))
    assert [lab for _, lab in got] == [("NEG", "NEU", "POS")[i] for _, i in want]
    assert [v for v, _ in got] == pytest.approx([v for v, _ in want], abs=1e-5)
    assert len({round(v, 3) for v, _ in got}) > 2  # the texts really score differently
    assert scorer.score([]) == []


def test_transformer_labels_are_mapped_by_name(tmp_path: Path) -> None:
    # lower-case long names in another order: positive is class 0, negative class 2
    folder = _tiny_model(tmp_path / "named", {0: "positive", 1: "Neutral", 2: "NEGATIVE"}, seed=1)
    got = TransformerScorer(str(folder)).score(TEXTS)
    want = _direct(folder, TEXTS, (2, 1, 0))
    assert [lab for _, lab in got] == [("POS", "NEU", "NEG")[i] for _, i in want]
    assert [v for v, _ in got] == pytest.approx([v for v, _ in want], abs=1e-5)
    bad = _tiny_model(tmp_path / "bad", {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"})
    with pytest.raises(ValueError, match=r"\['LABEL_0', 'LABEL_1', 'LABEL_2'\]"):
        TransformerScorer(str(bad))


def test_transformer_sentiment_end_to_end(tmp_path: Path) -> None:
    folder = _tiny_model(tmp_path / "tiny", {0: "NEG", 1: "NEU", 2: "POS"}, seed=2)
    rng = random.Random(2)
    specs = [
        ImageSpec([(rng.choice(["female", "male"]), "white", 0.1)], alt=rng.choice(TEXTS)) for _ in range(60)
    ]
    got = sentiment(
        connect(write_person_tables(tmp_path / "a", specs)),
        scorer=TransformerScorer(str(folder)),
        min_count=5,
        texts=("alt",),
    )
    assert got["scorer"] == {"name": "tiny", "kind": "transformer"}
    direct = dict(zip(TEXTS, _direct(folder, TEXTS, (0, 1, 2)), strict=True))
    for g in ("female", "male"):
        mine = [direct[s.alt] for s in specs if s.boxes[0][0] == g]
        row = got["alt"]["gender"][g]
        assert row["n"] == len(mine)
        assert row["mean"] == pytest.approx(statistics.fmean(v for v, _ in mine), abs=1e-5)
        assert row["negative"]["count"] == sum(i == 0 for _, i in mine)
        assert row["positive"]["count"] == sum(i == 2 for _, i in mine)
    assert "P(positive) - P(negative)" in got["definitions"]["mean"]


def test_unavailable_model_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailable, match="cannot load sentiment model 'fairsets-test/no-such-model'"):
        TransformerScorer("fairsets-test/no-such-model")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelUnavailable, match="local model folder"):
        TransformerScorer(str(empty))


def test_vader_workers_give_the_same_numbers(tmp_path: Path) -> None:
    specs = _random_specs(5, 200)[0]
    con = connect(write_person_tables(tmp_path / "a", specs))
    one = sentiment(con, texts=("alt",), min_count=20)
    with VaderScorer(workers=2) as scorer:
        texts = [*POOL, *POOL]
        assert scorer.score(texts) == VaderScorer().score(texts)
        assert [v for v, _ in scorer.score(texts)] == [_vader(t) for t in texts]
        assert sentiment(con, texts=("alt",), min_count=20, scorer=scorer, batch=9) == one
    with pytest.raises(ValueError, match="workers"):
        VaderScorer(workers=0)
