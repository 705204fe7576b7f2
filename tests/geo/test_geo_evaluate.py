"""Evaluation: the paper's precision/recall definitions, the none confusion, label parsing, the
precision–recall curve of scored methods, its operating points, and the ``geo evaluate`` CLI."""

from __future__ import annotations

import itertools
import json
import logging
import random
import sys

import pytest

from cli_helpers import assert_one_line_error, run_cli
from fairsets.geo.evaluate import (
    LabelError,
    choose_threshold,
    evaluate,
    evaluate_predictions,
    load_labelled,
    operating_points,
    plot_pr,
    pr_curve,
    write_evaluation,
)
from fairsets.geo.methods import Prediction
from geo_scored import register_scored


def test_precision_and_recall_follow_the_papers_definitions():
    gold = ["FRA", "FRA", None, None, "USA", "IND"]
    pred = ["FRA", None, "GBR", None, "CAN", "IND"]
    r = evaluate(gold, pred, bootstrap=0)
    # correct = 2 (FRA, IND); predicted = 4 (FRA, GBR, CAN, IND); annotated = 4
    assert r["correct"] == 2 and r["predicted"] == 4 and r["annotated"] == 4
    assert r["precision"] == pytest.approx(2 / 4)
    assert r["recall"] == pytest.approx(2 / 4)
    assert r["f1"] == pytest.approx(0.5)
    c = r["none_confusion"]
    assert c == {
        "none→none": 1,
        "none→country": 1,
        "country→none": 1,
        "country→other country": 1,
        "country→same country": 2,
    }
    assert r["accuracy_with_none"] == pytest.approx(3 / 6)
    # per continent: recall over annotated (EU: 1 of 2), precision over predicted (NA: 0 of 1)
    assert r["per_continent"]["EU"]["recall"] == pytest.approx(0.5)
    assert r["per_continent"]["NA"]["precision"] == 0.0


def test_bootstrap_intervals_bracket_the_estimate():
    gold = ["FRA"] * 50 + [None] * 50
    pred = ["FRA"] * 40 + [None] * 10 + ["DEU"] * 5 + [None] * 45
    r = evaluate(gold, pred, bootstrap=500, seed=1)
    lo, hi = r["precision_ci95"]
    assert lo <= r["precision"] <= hi and hi - lo < 0.3
    assert evaluate(gold, pred, bootstrap=500, seed=1) == r


def test_labels_accept_codes_names_and_none_spellings(tmp_path):
    f = tmp_path / "l.csv"
    f.write_text(
        "caption,country\na,FRA\nb,France\nc,fr\nd,\ne,none\nf,No\ng,United States of America\n",
        encoding="utf-8",
    )
    caps, gold = load_labelled(f)
    assert caps == list("abcdefg")
    assert gold == ["FRA", "FRA", "FRA", None, None, None, "USA"]


def test_bad_labels_and_missing_columns_are_clear_errors(tmp_path):
    f = tmp_path / "l.csv"
    f.write_text("caption,country\na,Atlantis\n", encoding="utf-8")
    with pytest.raises(LabelError, match="Atlantis"):
        load_labelled(f)
    g = tmp_path / "m.csv"
    g.write_text("text_only\nx\n", encoding="utf-8")
    with pytest.raises(LabelError, match="caption column"):
        load_labelled(g)


# -- precision–recall curves and operating points ----------------------------------------------
# Six captions: gold, the best country before any threshold, and its probability.
GOLD6 = ["FRA", "FRA", "DEU", None, "USA", None]
CAND6 = ["FRA", "GBR", "DEU", "ITA", "USA", None]
SCORE6 = [0.9, 0.8, 0.8, 0.6, 0.3, 0.0]


def test_pr_curve_points_match_a_hand_count():
    curve = pr_curve(GOLD6, CAND6, SCORE6)
    # 4 captions are annotated. Highest threshold first: 0.9 admits FRA (right); 0.8 admits GBR
    # (wrong) and DEU (right) together; 0.6 admits ITA (gold none); 0.3 admits USA (right). The
    # caption without a candidate is never predicted, so 0.0 is no threshold.
    assert [p["threshold"] for p in curve] == [0.3, 0.6, 0.8, 0.9]
    assert [p["predicted"] for p in curve] == [5, 4, 3, 1]
    assert [p["precision"] for p in curve] == pytest.approx([3 / 5, 2 / 4, 2 / 3, 1.0])
    assert [p["recall"] for p in curve] == pytest.approx([3 / 4, 2 / 4, 2 / 4, 1 / 4])
    assert [p["f1"] for p in curve] == pytest.approx([2 / 3, 1 / 2, 4 / 7, 2 / 5])


def test_operating_points_best_f1_and_lowest_threshold_reaching_a_precision():
    curve = pr_curve(GOLD6, CAND6, SCORE6)
    ops = operating_points(curve, 0.65)
    assert ops["best_f1"]["threshold"] == 0.3 and ops["best_f1"]["f1"] == pytest.approx(2 / 3)
    # precision is not monotone: 0.6 → 0.50, 0.8 → 0.67; the lowest threshold reaching 0.65 is 0.8
    assert ops["at_target"]["threshold"] == 0.8 and ops["at_target"]["recall"] == pytest.approx(0.5)
    assert operating_points(curve, 0.6)["at_target"]["threshold"] == 0.3
    assert operating_points(curve, 0.86)["at_target"]["threshold"] == 0.9
    assert operating_points(pr_curve(["FRA"], ["DEU"], [0.7]), 0.5)["at_target"] is None
    assert operating_points([], 0.86) == {"best_f1": None, "target_precision": 0.86, "at_target": None}
    with pytest.raises(ValueError, match="target precision"):
        operating_points(curve, 0.0)


def test_pr_curve_agrees_with_evaluate_at_every_threshold_and_is_monotone():
    rng = random.Random(7)
    codes = ["FRA", "DEU", "USA", None]
    gold = [rng.choice(codes) for _ in range(300)]
    cand = [g if rng.random() < 0.6 else rng.choice(codes) for g in gold]
    score = [round(rng.random(), 2) for _ in gold]  # ties on purpose
    curve = pr_curve(gold, cand, score)
    ts = [p["threshold"] for p in curve]
    assert ts == sorted(set(ts)) and set(ts) == {s for s, c in zip(score, cand, strict=True) if c}
    for a, b in itertools.pairwise(curve):
        assert b["predicted"] < a["predicted"] and b["recall"] <= a["recall"]
    for p in curve:
        pred = [c if s >= p["threshold"] else None for c, s in zip(cand, score, strict=True)]
        r = evaluate(gold, pred, bootstrap=0)
        assert (p["precision"], p["recall"], p["predicted"]) == pytest.approx(
            (r["precision"], r["recall"], r["predicted"])
        )


def test_pr_curve_rejects_bad_input_clearly():
    with pytest.raises(ValueError, match="2 labels, 1 candidates"):
        pr_curve(["FRA", None], ["FRA"], [0.5])
    with pytest.raises(ValueError, match="caption 2: score nan"):
        pr_curve(["FRA", "DEU"], ["FRA", "DEU"], [0.5, float("nan")])
    with pytest.raises(ValueError, match="not a number"):
        pr_curve(["FRA"], ["FRA"], ["high"])
    assert pr_curve([], [], []) == []


def _preds(cands, scores, t=0.5):
    return [
        Prediction(c if c and s >= t else None, s if c and s >= t else 1 - s, f"{c} ev", c, s)
        for c, s in zip(cands, scores, strict=True)
    ]


def test_a_method_with_no_scores_gets_no_curve_and_no_error():
    preds = [Prediction(c, None, "", c, None) for c in ["FRA", "GBR", "DEU", None, None, None]]
    r = evaluate_predictions(GOLD6, preds, bootstrap=0)
    assert "pr_curve" not in r and "operating_points" not in r and "pr_curve_skipped" not in r
    assert r["precision"] == pytest.approx(2 / 3) and r["method_errors"] == 0
    mixed = [*_preds(CAND6[:3], SCORE6[:3]), *preds[3:]]  # a hybrid: the LLM's answers have no score
    r = evaluate_predictions(GOLD6, mixed, bootstrap=0)
    assert "pr_curve" not in r and r["pr_curve_skipped"] == "3 of 6 answers have no score"


def test_the_curve_passes_through_the_methods_own_operating_point():
    r = evaluate_predictions(GOLD6, _preds(CAND6, SCORE6, t=0.8), bootstrap=0, target_precision=0.65)
    at = next(p for p in r["pr_curve"] if p["threshold"] == 0.8)
    assert (r["precision"], r["recall"]) == pytest.approx((at["precision"], at["recall"]))
    assert r["operating_points"]["at_target"]["threshold"] == 0.8


def test_errors_carry_confidence_evidence_and_failures(tmp_path):
    preds = _preds(CAND6, SCORE6)
    preds[5] = Prediction(None, 0.9, "", None, 0.0, "llm: http 500")  # gold none, answer none, failed
    r = evaluate_predictions(GOLD6, preds, captions=[f"c{i}" for i in range(6)], bootstrap=0)
    rows = {row["caption"]: row for row in r["errors"]}
    assert set(rows) == {"c1", "c3", "c4", "c5"}  # GBR for FRA; ITA for none; USA too low; the failure
    assert rows["c1"] == {
        "caption": "c1",
        "gold": "FRA",
        "predicted": "GBR",
        "confidence": 0.8,
        "evidence": "GBR ev",
        "error": "",
    }
    assert rows["c5"]["error"] == "llm: http 500" and rows["c4"]["confidence"] == 0.7
    assert r["method_errors"] == 1
    write_evaluation({"m": r}, tmp_path)
    with (tmp_path / "errors-m.csv").open(encoding="utf-8") as fh:
        header = fh.readline().strip()
    assert header == "caption,gold,predicted,confidence,evidence,error"
    saved = json.loads((tmp_path / "evaluation.json").read_text(encoding="utf-8"))["m"]
    assert saved["pr_curve"] == r["pr_curve"] and "errors" not in saved
    # plain evaluate() keeps its three columns
    write_evaluation({"p": evaluate(GOLD6, CAND6, captions=list("abcdef"), bootstrap=0)}, tmp_path)
    assert (tmp_path / "errors-p.csv").read_text(encoding="utf-8").splitlines()[0] == "caption,gold,predicted"


def test_plot_is_a_png_and_skipped_without_curve_or_matplotlib(tmp_path, monkeypatch, caplog):
    r = evaluate_predictions(GOLD6, _preds(CAND6, SCORE6), bootstrap=0)
    path = plot_pr({"a": r, "b": r}, tmp_path / "pr.png")
    assert path == tmp_path / "pr.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    unscored = evaluate_predictions(GOLD6, [Prediction(c) for c in CAND6], bootstrap=0)
    assert plot_pr({"u": unscored}, tmp_path / "u.png") is None and not (tmp_path / "u.png").exists()
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)  # import fails
    caplog.set_level(logging.WARNING)
    assert plot_pr({"a": r}, tmp_path / "none.png") is None
    assert "matplotlib is not installed" in caplog.text and not (tmp_path / "none.png").exists()


# -- the CLI ------------------------------------------------------------------------------------
@pytest.fixture()
def scored(monkeypatch):
    return register_scored(monkeypatch)


@pytest.fixture()
def labelled(tmp_path):
    f = tmp_path / "lab.csv"
    rows = [f"{c or 'none'} {s},{g or ''}" for g, c, s in zip(GOLD6, CAND6, SCORE6, strict=True)]
    f.write_text("caption,country\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return f


def test_cli_writes_curve_plot_and_reports_the_target_precision(scored, labelled, tmp_path, capsys):
    out = tmp_path / "ev"
    args = ["geo", "evaluate", labelled, "-m", scored, "-m", "string", "--bootstrap", "0", "-o", out]
    code, stdout, err = run_cli([*args, "--target-precision", "0.65", "--min-confidence", "0.8"], capsys)
    assert code == 0, err
    flat = " ".join(stdout.split())
    assert "t=0.80 → R=0.500" in flat  # the lowest threshold reaching P 0.65, as counted by hand
    res = json.loads((out / "evaluation.json").read_text(encoding="utf-8"))
    s = res[scored]
    assert s["min_confidence"] == 0.8  # --min-confidence reached the method that takes it
    assert s["precision"] == pytest.approx(2 / 3) and s["recall"] == pytest.approx(0.5)
    assert [p["threshold"] for p in s["pr_curve"]] == [0.3, 0.6, 0.8, 0.9]
    assert s["operating_points"]["best_f1"]["threshold"] == 0.3
    assert "pr_curve" not in res["string"] and "min_confidence" not in res["string"]
    assert (out / f"pr-{scored}.png").read_bytes()[:4] == b"\x89PNG"
    assert not (out / "pr-string.png").exists()
    header = (out / f"errors-{scored}.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header == "caption,gold,predicted,confidence,evidence,error"


def test_cli_min_confidence_for_methods_without_one_is_a_one_line_error(labelled, capsys):
    code, _, err = run_cli(["geo", "evaluate", labelled, "-m", "string", "--min-confidence", "0.7"], capsys)
    assert_one_line_error(code, err, "--min-confidence", "offline")
    code, _, err = run_cli(["geo", "evaluate", labelled, "--min-confidence", "1.5"], capsys)
    assert_one_line_error(code, err, "between 0 and 1")
    code, _, err = run_cli(["geo", "evaluate", labelled, "--target-precision", "0"], capsys)
    assert_one_line_error(code, err, "--target-precision")


# -- a threshold chosen on another set -----------------------------------------------------------
# A validation set, counted by hand: gold FRA DEU ITA CAN (4 with a country), two with none.
#   t=0.9: P 1/1 R 1/4; t=0.7: P 2/2 R 2/4; t=0.6: P 3/3 R 3/4 (F1 0.857, the best);
#   t=0.5: P 3/4 R 3/4 (the lowest threshold with P ≥ 0.7); t=0.4: P 3/5; t=0.2: P 3/6.
VAL = [("FRA 0.9", "FRA"), ("DEU 0.7", "DEU"), ("ITA 0.6", "ITA"), ("USA 0.5", "CAN"),
       ("GBR 0.4", ""), ("ESP 0.2", ""), ("none 0.9", "")]  # fmt: skip


def _val_preds(t=0.99):
    from geo_scored import ScoredMethod

    return [g or None for _, g in VAL], ScoredMethod(min_confidence=t).predict_detailed([c for c, _ in VAL])


def test_choose_threshold_reads_the_best_f1_or_the_target_off_the_choosing_set():
    gold, preds = _val_preds()
    best = choose_threshold(gold, preds)
    assert best["threshold"] == 0.6 and best["rule"] == "best-f1" and best["n"] == 7
    assert (best["precision"], best["recall"]) == pytest.approx((1.0, 0.75))
    target = choose_threshold(gold, preds, rule="target", target_precision=0.7)
    assert target["threshold"] == 0.5 and target["precision"] == pytest.approx(0.75)
    wrong = [Prediction(None, 0.1, "", "DEU", 0.9)]  # the only candidate is wrong: P 0 everywhere
    with pytest.raises(ValueError, match=r"no threshold reaches precision 0\.5"):
        choose_threshold(["FRA"], wrong, rule="target", target_precision=0.5)
    assert choose_threshold(["FRA"], wrong)["precision"] == 0.0  # best F1 still has a point
    with pytest.raises(ValueError, match="unknown threshold rule"):
        choose_threshold(gold, preds, rule="median")
    with pytest.raises(ValueError, match="have no score"):
        choose_threshold(gold, [Prediction(p.country) for p in preds])
    with pytest.raises(ValueError, match="no caption has a candidate"):
        choose_threshold([None], [Prediction(None, 0.9, "", None, 0.0)])


@pytest.fixture()
def val_file(tmp_path):
    f = tmp_path / "val.csv"
    f.write_text("caption,country\n" + "\n".join(f"{c},{g}" for c, g in VAL) + "\n", encoding="utf-8")
    return f


@pytest.mark.parametrize(("rule", "t"), [("best-f1", 0.6), ("target", 0.5)])
def test_cli_applies_a_threshold_chosen_on_another_set(scored, labelled, val_file, tmp_path, capsys, rule, t):
    out = tmp_path / "ev"
    args = ["geo", "evaluate", labelled, "-m", scored, "--bootstrap", "0", "-o", out]
    extra = ["--threshold-from", val_file, "--threshold-rule", rule, "--target-precision", "0.7"]
    code, _, err = run_cli([*args, *extra], capsys)
    assert code == 0, err
    s = json.loads((out / "evaluation.json").read_text(encoding="utf-8"))[scored]
    assert s["min_confidence"] == t and s["threshold_chosen_on"]["threshold"] == t
    assert s["threshold_chosen_on"]["file"] == "val.csv" and s["threshold_chosen_on"]["rule"] == rule
    # on the evaluated set (GOLD6/CAND6/SCORE6) at 0.5 or 0.6 by hand: FRA ✓, GBR for FRA ✗, DEU ✓,
    # ITA for none ✗ answered; USA 0.3 not: P 2/4, R 2/4 (gold FRA FRA DEU USA)
    assert (s["precision"], s["recall"]) == pytest.approx((0.5, 0.5))
    assert f"threshold {t:.3f} chosen on val.csv" in " ".join(err.split())


def test_cli_threshold_from_errors_are_one_line(scored, labelled, val_file, capsys):
    base = ["geo", "evaluate", labelled, "--bootstrap", "0"]
    code, _, err = run_cli([*base, "-m", scored, "--threshold-from", labelled], capsys)
    assert_one_line_error(code, err, "evaluated file itself")
    code, _, err = run_cli(
        [*base, "-m", scored, "--threshold-from", val_file, "--min-confidence", "0.5"], capsys
    )
    assert_one_line_error(code, err, "--min-confidence")
    code, _, err = run_cli([*base, "-m", "string", "--threshold-from", val_file], capsys)
    assert_one_line_error(code, err, "give no confidence")
    code, _, err = run_cli([*base, "-m", "nosuch", "--threshold-from", val_file], capsys)
    assert_one_line_error(code, err, "unknown geo method")
    code, _, err = run_cli(
        [*base, "-m", scored, "-O", "min_confidence=0.9", "--threshold-from", val_file], capsys
    )
    assert_one_line_error(code, err, "-O min_confidence")
    code, _, err = run_cli(
        [*base, "-m", scored, "--threshold-from", val_file, "--threshold-rule", "x"], capsys
    )
    assert_one_line_error(code, err, "--threshold-rule")
    wrong = val_file.with_name("wrong.csv")
    wrong.write_text("caption,country\nDEU 0.9,FRA\n", encoding="utf-8")
    code, _, err = run_cli(
        [*base, "-m", scored, "--threshold-from", wrong, "--threshold-rule", "target"], capsys
    )
    assert_one_line_error(code, err, "no threshold reaches precision 0.86")
