"""hybrid: the cheap method first; the LLM (a loopback OpenAI-compatible server) only where the cheap
method is unsure (a confidence below ``llm_below``) or, for a method without one, finds nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cli_helpers import run_cli
from fairsets.geo.methods import Prediction, get_method, method_from_spec
from geo_scored import register_scored
from servers import LoopbackServer, json_response

ANSWERS = {
    "Sunset over the Ring Road": "Output: Iceland",
    "A red kitchen": "Output: No",
    "Old barn at dusk": "Output: Canada",
    "DEU 0.6": "Output: Germany",
    "GBR 0.3": "Output: Ireland",
    "ITA 0.79": "Output: Italy",
}


@pytest.fixture()
def scored(monkeypatch):
    return register_scored(monkeypatch)


@pytest.fixture()
def server():
    with LoopbackServer() as srv:
        fail = set()

        def chat(req):
            text = json.loads(req.body)["messages"][-1]["content"]
            if any(f in text for f in fail):
                return json_response({"error": {"message": "model overloaded"}}, 400)
            answer = next((a for c, a in ANSWERS.items() if c in text), "Output: No")
            return json_response({"choices": [{"message": {"role": "assistant", "content": answer}}]})

        srv.route("/v1/chat/completions", chat)
        srv.fail = fail
        yield srv


def _llm(server, tmp_path) -> dict[str, Any]:
    return {
        "base_url": server.url("/v1"),
        "model": "m",
        "cache_dir": str(tmp_path / "c"),
        "concurrency": 2,
        "max_retries": 0,
    }


def _sent(server) -> list[str]:
    return [json.loads(r.body)["messages"][-1]["content"] for r in server.requests]


def test_only_low_confidence_captions_reach_the_llm(server, scored, tmp_path):
    method = get_method("hybrid", first=scored, llm=_llm(server, tmp_path))  # llm_below 0.8
    caps = ["FRA 0.95", "DEU 0.6", "none 0.99", "GBR 0.3", "ITA 0.79", "ESP 0.8"]
    preds = method.predict_detailed(caps)
    sent = _sent(server)
    # DEU 0.6 and ITA 0.79: unsure countries; GBR 0.3: rejected, so "no country" at 0.7
    assert len(sent) == 3 and server.hits("/v1/chat/completions") == 3
    assert {c for c in caps if any(c in s for s in sent)} == {"DEU 0.6", "GBR 0.3", "ITA 0.79"}
    assert [p.country for p in preds] == ["FRA", "DEU", None, "IRL", "ITA", "ESP"]
    # confident answers are offline's own, the country and the "no country" alike
    assert preds[0] == Prediction("FRA", 0.95, "FRA word", "FRA", 0.95)
    assert preds[2] == Prediction(None, 0.99, "", None, 0.0)
    assert preds[5].evidence == "ESP word" and preds[5].confidence == 0.8
    # the LLM's answers have no confidence and say who decided
    assert preds[3] == Prediction("IRL", None, "llm", "IRL", None, None)
    assert all(preds[i].evidence == "llm" and preds[i].confidence is None for i in (1, 3, 4))
    prov = method.provenance()
    assert prov["sent_to_llm"] == 3 and prov["captions"] == 6 and prov["share_sent_to_llm"] == 0.5
    assert prov["llm_below"] == 0.8
    assert method.predict(caps[:2]) == ["FRA", "DEU"]  # counts add up over calls
    assert method.provenance()["share_sent_to_llm"] == pytest.approx(4 / 8)


def test_llm_below_moves_the_share_sent(server, scored, tmp_path):
    caps = ["FRA 0.95", "DEU 0.6", "none 0.99", "GBR 0.3"]
    nothing = get_method("hybrid", first=scored, llm=_llm(server, tmp_path), llm_below=0.0)
    assert nothing.predict(caps) == ["FRA", "DEU", None, None]  # the first method's answers
    assert server.requests == [] and nothing.provenance()["share_sent_to_llm"] == 0.0
    everything = get_method("hybrid", first=scored, llm=_llm(server, tmp_path), llm_below=1.0)
    everything.predict(caps)
    assert len(server.requests) == 4


def test_min_confidence_is_the_first_methods_threshold(server, scored, tmp_path):
    method = get_method("hybrid", first=scored, llm=_llm(server, tmp_path), min_confidence=0.9, llm_below=0.0)
    assert method.predict(["FRA 0.95", "DEU 0.85"]) == ["FRA", None]
    assert method.spec()["first_options"] == {"min_confidence": 0.9}
    with pytest.raises(ValueError, match="min_confidence needs a first method with a confidence"):
        get_method("hybrid", first="string", llm=_llm(server, tmp_path), min_confidence=0.9)


def test_a_failed_llm_answer_keeps_the_first_answer_and_records_the_error(server, scored, tmp_path):
    server.fail.add("DEU 0.6")
    method = get_method("hybrid", first=scored, llm=_llm(server, tmp_path), llm_below=0.75)
    preds = method.predict_detailed(["FRA 0.95", "DEU 0.6", "GBR 0.3"])
    assert preds[1].country == "DEU" and preds[1].confidence == 0.6 and preds[1].evidence == "DEU word"
    assert preds[1].error.startswith("llm: ") and "model overloaded" in preds[1].error
    assert preds[2].country == "IRL" and preds[2].error is None
    codes, errors = method.predict_with_errors(["DEU 0.6", "FRA 0.95"])
    assert codes == ["DEU", "FRA"] and errors[0] and errors[1] is None


def test_a_first_method_without_confidence_sends_its_empty_answers(server, tmp_path):
    method = get_method("hybrid", first="string", llm=_llm(server, tmp_path))
    caps = ["Hotel in Nice", "Old barn at dusk", "A red kitchen"]
    assert method.predict(caps) == ["FRA", "CAN", None]
    sent = _sent(server)
    assert len(sent) == 2 and not any("Hotel in Nice" in s for s in sent)
    assert method.provenance()["sent_to_llm"] == 2
    spec = method.spec()
    assert spec["method"] == "hybrid" and spec["first"] == "string" and spec["llm"]["model"] == "m"
    assert spec["llm_below"] == 0.8
    rebuilt = method_from_spec(spec)
    assert rebuilt.spec() == spec


def test_with_offline_only_captions_below_llm_below_are_sent(server, tmp_path):
    offline = get_method("offline")
    caps = [
        "Eiffel Tower in Paris, France",
        "Hotel in Nice",
        "Paris",
        "Jordan smiles",
        "Union Jack bunting in Kent",
        "A red kitchen",
        "Sunset over the Ring Road",
    ]
    conf = [p.confidence for p in offline.predict_detailed(caps)]
    assert all(c is not None for c in conf)
    ranked = sorted(set(conf))
    assert len(ranked) >= 3, conf
    below = (ranked[len(ranked) // 2 - 1] + ranked[len(ranked) // 2]) / 2  # some sent, some kept
    method = get_method("hybrid", llm=_llm(server, tmp_path), llm_below=below)  # first: offline
    assert method.spec()["first"] == "offline"
    preds = method.predict_detailed(caps)
    expected = {c for c, x in zip(caps, conf, strict=True) if x < below}
    sent = _sent(server)
    assert 0 < len(expected) < len(caps) and len(sent) == len(expected)
    assert {c for c in caps if any(c in s for s in sent)} >= expected
    for x, p, o in zip(conf, preds, offline.predict_detailed(caps), strict=True):
        assert (p == o) if x >= below else (p.evidence == "llm")
    assert method.provenance()["share_sent_to_llm"] == pytest.approx(len(expected) / len(caps))


def test_evaluate_prints_the_share_sent(server, scored, tmp_path, capsys):
    lab = tmp_path / "lab.csv"
    lab.write_text("caption,country\nFRA 0.95,FRA\nDEU 0.6,DEU\nnone 0.99,\nGBR 0.3,GBR\n", encoding="utf-8")
    args = ["geo", "evaluate", lab, "-m", "hybrid", "--bootstrap", "0", "-o", tmp_path / "ev"]
    args += ["-O", f"first={scored}", "-O", f"llm.base_url={server.url('/v1')}", "-O", "llm.model=m"]
    args += ["-O", f"llm.cache_dir={tmp_path / 'c'}"]
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    assert "hybrid: 2 of 4 captions sent to the LLM (50.0%, confidence below 0.8)" in err
    res = json.loads((tmp_path / "ev" / "evaluation.json").read_text(encoding="utf-8"))["hybrid"]
    assert res["sent_to_llm"] == 2 and res["share_sent_to_llm"] == 0.5
    assert res["precision"] == pytest.approx(2 / 3) and res["recall"] == pytest.approx(2 / 3)  # IRL for GBR
    assert "pr_curve" not in res and res["pr_curve_skipped"] == "2 of 4 answers have no score"


def test_evaluate_chooses_the_hybrids_threshold_on_its_first_methods_curve(server, scored, tmp_path, capsys):
    """--threshold-from with hybrid: the first method's threshold, chosen on val's curve without an
    LLM call there (val: FRA 0.95 right, ITA 0.7 wrong, DEU 0.5 right → best F1 at 0.5, by hand)."""
    val = tmp_path / "val.csv"
    val.write_text("caption,country\nFRA 0.95,FRA\nITA 0.7,\nDEU 0.5,DEU\nnone 0.9,\n", encoding="utf-8")
    lab = tmp_path / "lab.csv"
    lab.write_text("caption,country\nFRA 0.95,FRA\nDEU 0.6,DEU\nnone 0.99,\nGBR 0.3,GBR\n", encoding="utf-8")
    args = ["geo", "evaluate", lab, "-m", "hybrid", "--bootstrap", "0", "-o", tmp_path / "ev"]
    args += ["-O", f"first={scored}", "-O", f"llm.base_url={server.url('/v1')}", "-O", "llm.model=m"]
    args += ["-O", f"llm.cache_dir={tmp_path / 'c'}", "--threshold-from", val]
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    res = json.loads((tmp_path / "ev" / "evaluation.json").read_text(encoding="utf-8"))["hybrid"]
    chosen = res["threshold_chosen_on"]
    assert chosen["threshold"] == 0.5 and chosen["file"] == "val.csv"
    assert (chosen["precision"], chosen["recall"]) == pytest.approx((2 / 3, 1.0))
    assert res["min_confidence"] == 0.5
    assert "threshold 0.500 chosen on val.csv" in " ".join(err.split())


def test_hybrid_refuses_an_llm_as_its_first_method_and_a_bad_llm_below():
    with pytest.raises(ValueError, match="first must be"):
        get_method("hybrid", first="llm", llm={"base_url": "http://127.0.0.1:9/v1", "model": "m"})
    for bad in (-0.1, 1.5, float("nan"), "high", True):
        with pytest.raises(ValueError, match="llm_below"):
            get_method("hybrid", llm={"base_url": "http://127.0.0.1:9/v1", "model": "m"}, llm_below=bad)
