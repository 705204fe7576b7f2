"""Evaluation: the paper's precision/recall definitions, the none confusion, label parsing."""

from __future__ import annotations

import pytest

from fairsets.geo.evaluate import LabelError, evaluate, load_labelled


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
