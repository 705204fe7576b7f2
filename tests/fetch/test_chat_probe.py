"""The probe of a chat endpoint against loopback servers imitating vLLM, llama.cpp, Ollama and a
server that ignores every constraint; require_constraint fails closed in one line."""

from __future__ import annotations

import logging
import math
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from fairsets.fetch.chat import ChatEndpoint, ChatServiceError
from fairsets.fetch.chat.probe import BATCHING_START, probe_endpoint, require_constraint
from openai_server import OpenAIServer, Step


@pytest.fixture
def srv() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


def endpoint(srv: OpenAIServer, **settings: Any) -> ChatEndpoint:
    table = {"base_url": srv.base_url, "model": "m-1", "api_key_env": "", **settings}
    return ChatEndpoint.from_dict(table, name=settings.pop("name", "voter1"))


@pytest.mark.parametrize(
    ("honours", "rejects", "style", "expected"),
    [
        ("structured_outputs", (), "choice", "obeyed"),  # vLLM 0.12+
        ("guided_choice", (), "guided_choice", "obeyed"),  # older vLLM
        ("grammar", (), "grammar", "obeyed"),  # llama.cpp
        ("response_format", (), "json_schema", "obeyed"),  # Ollama, OpenAI
        ("guided_choice", (), "choice", "ignored"),  # vLLM before 0.12 drops structured_outputs
        (None, (), "choice", "ignored"),  # a server that knows no constraint
        (None, (), "json_schema", "ignored"),
        (None, ("grammar",), "grammar", "unsupported"),  # refused outright
        (None, (), "none", "not asked"),
    ],
)
def test_the_probe_classifies_each_server(
    srv: OpenAIServer, honours: str | None, rejects: tuple[str, ...], style: str, expected: str
) -> None:
    srv.honours, srv.rejects = honours, frozenset(rejects)
    report = probe_endpoint(endpoint(srv, constrain=style), samples=2, burst=0)
    assert report.answers and report.error is None
    assert report.constraint == expected, report
    assert report.name == "voter1" and report.where == srv.base_url.split("//")[1].split("/")[0]
    if expected == "ignored":
        assert "where only A or B was allowed" in report.constraint_detail
    if expected == "unsupported":
        assert "http 400" in report.constraint_detail and "grammar" in report.constraint_detail
    asked = [b for b in srv.bodies if "Reply with exactly one English word" in str(b["messages"])]
    assert len(asked) == (0 if style == "none" else 1)


def test_the_probe_reports_logprob_support(srv: OpenAIServer) -> None:
    report = probe_endpoint(endpoint(srv), samples=1, burst=0)
    assert report.logprobs is False
    asked = srv.bodies[-1]
    assert asked["logprobs"] is True and asked["top_logprobs"] == 4  # asked even when not configured
    srv.logprobs = True
    assert probe_endpoint(endpoint(srv), samples=1, burst=0).logprobs is True
    srv.rejects = frozenset({"logprobs"})  # a hosted reasoning model refuses the field
    assert probe_endpoint(endpoint(srv), samples=1, burst=0).logprobs is False


def test_latency_is_the_median_and_a_rate_limit_sets_the_concurrency(srv: OpenAIServer) -> None:
    delays = iter([0.05, 0.3, 0.1])
    srv.respond = lambda body: Step(delay=next(delays, 0.0), usage=(90, 10))
    report = probe_endpoint(endpoint(srv, requests_per_minute=600), samples=3, burst=8)
    assert 0.1 <= report.latency < 0.3  # the middle one of three, not the mean
    assert report.samples == 3
    # Little's law: 600 requests a minute = 10 a second, times the latency
    assert report.suggested_concurrency == math.ceil(600 / 60 * report.latency)
    assert "requests_per_minute 600" in report.concurrency_rule and "Little's law" in report.concurrency_rule
    # tokens_per_minute over the tokens of one request (90 + 10 as the server counted them), if lower
    srv.respond = lambda body: Step(delay=0.2, usage=(90, 10))
    report = probe_endpoint(endpoint(srv, requests_per_minute=6000, tokens_per_minute=30_000), burst=8)
    assert report.suggested_concurrency == math.ceil(30_000 / 100 / 60 * report.latency)
    assert "tokens_per_minute 30000 / 100 tokens a request" in report.concurrency_rule
    burst_bodies = [
        b for b in srv.bodies if b["messages"][0]["content"] == "Reply with the single word: ready"
    ]
    assert len(burst_bodies) == 3 + 3  # two probes of three samples: no burst under a rate limit


def test_a_batching_server_and_a_slotted_server_get_their_concurrency(srv: OpenAIServer) -> None:
    srv.default = Step(delay=0.5)  # long beside a client's start on a busy machine
    report = probe_endpoint(endpoint(srv), samples=1, burst=8)
    assert report.suggested_concurrency == BATCHING_START, report.concurrency_rule
    assert "batches" in report.concurrency_rule
    slots = threading.Semaphore(2)  # a server with two parallel slots (llama.cpp --parallel 2)

    def slotted(body: dict[str, Any]) -> Step:
        with slots:
            import time

            time.sleep(0.5)
        return Step()

    srv.respond = slotted
    srv.default = Step()
    report = probe_endpoint(endpoint(srv), samples=1, burst=8)
    assert report.suggested_concurrency == 2, report.concurrency_rule
    assert "parallel" in report.concurrency_rule and "--parallel" in report.concurrency_rule


def test_a_server_that_does_not_answer_is_reported_not_raised(srv: OpenAIServer) -> None:
    srv.default = Step(status=404, error_message="model 'm-1' not found")
    report = probe_endpoint(endpoint(srv, constrain="choice"), burst=0)
    assert not report.answers and "HTTP 404" in (report.error or "") and "voter1" in (report.error or "")
    assert report.constraint == "not asked" and srv.hits == 1
    srv.default = Step(status=400, error_message="bad model")
    report = probe_endpoint(endpoint(srv), burst=0)
    assert not report.answers and report.error == "http 400: bad model"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = ChatEndpoint(base_url=f"http://127.0.0.1:{port}/v1", model="m", api_key_env="", name="gone")
    report = probe_endpoint(down, burst=0)
    assert not report.answers and "cannot connect" in (report.error or "")


def test_require_constraint_fails_closed_in_one_line_naming_the_annotator(srv: OpenAIServer) -> None:
    with pytest.raises(ChatServiceError) as info:
        require_constraint(endpoint(srv, constrain="choice", name="qwen-vl"))
    text = str(info.value)
    assert "\n" not in text
    assert (
        text.startswith("annotator qwen-vl: the server at 127.0.0.1:")
        and "ignores constrain = 'choice'" in text
    )
    assert "answered 'echo: Do not answer with a letter" in text and 'on_ignored_constraint = "parse"' in text
    srv.rejects = frozenset({"grammar"})
    with pytest.raises(
        ChatServiceError, match=r"annotator voter1: .* refuses constrain = 'grammar' \(http 400"
    ):
        require_constraint(endpoint(srv, constrain="grammar"))


def test_require_constraint_parse_falls_back_with_a_warning(
    srv: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="fairsets.fetch.chat.probe"):
        status = require_constraint(endpoint(srv, constrain="json_schema", on_ignored_constraint="parse"))
    assert status == "ignored"
    assert any("ignores constrain = 'json_schema'" in r.getMessage() for r in caplog.records)
    srv.honours = "response_format"
    assert require_constraint(endpoint(srv, constrain="json_schema")) == "obeyed"
    hits = srv.hits
    assert require_constraint(endpoint(srv)) == "not asked" and srv.hits == hits  # nothing sent
