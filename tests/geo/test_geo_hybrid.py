"""hybrid: the cheap method first; the LLM (a loopback OpenAI-compatible server) only on the rest."""

from __future__ import annotations

import json

import pytest

from fairsets.geo.methods import get_method
from servers import LoopbackServer, json_response

ANSWERS = {"Sunset over the Ring Road": "Output: Iceland", "A red kitchen": "Output: No"}


@pytest.fixture()
def server():
    with LoopbackServer() as srv:

        def chat(req):
            body = json.loads(req.body)
            text = body["messages"][-1]["content"]
            answer = next((a for c, a in ANSWERS.items() if c in text), "Output: No")
            return json_response({"choices": [{"message": {"role": "assistant", "content": answer}}]})

        srv.route("/v1/chat/completions", chat)
        yield srv


def test_only_captions_without_a_country_reach_the_llm(server, tmp_path):
    method = get_method(
        "hybrid",
        first="offline",
        llm={"base_url": server.url("/v1"), "model": "m", "cache_dir": str(tmp_path / "c"), "concurrency": 2},
    )
    caps = ["Hotel in Nice", "Sunset over the Ring Road", "A red kitchen"]
    assert method.predict(caps) == ["FRA", "ISL", None]
    sent = [json.loads(r.body)["messages"][-1]["content"] for r in server.requests]
    assert len(sent) == 2 and not any("Hotel in Nice" in s for s in sent)
    assert method.provenance()["sent_to_llm"] == 2
    spec = method.spec()
    assert spec["method"] == "hybrid" and spec["first"] == "offline" and spec["llm"]["model"] == "m"


def test_hybrid_refuses_an_llm_as_its_first_method():
    with pytest.raises(ValueError, match="first must be"):
        get_method("hybrid", first="llm", llm={"base_url": "http://127.0.0.1:9/v1", "model": "m"})
