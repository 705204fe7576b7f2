"""Request shaping per endpoint (extra_body, token_limit_field, temperature, reasoning, constrain,
logprobs) against loopback servers that imitate each server's style; default endpoints send and
key exactly what they did before the settings existed."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fairsets.fetch.cache import DiskCache
from fairsets.fetch.chat import ChatClient, ChatEndpoint, ChatRequest, user
from fairsets.fetch.chat.answer import parse_completion
from fairsets.fetch.chat.shaping import request_body
from openai_server import OpenAIServer, Step

CHOICES = ("A", "B", "C")


@pytest.fixture
def srv() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


def endpoint(srv: OpenAIServer, **settings: Any) -> ChatEndpoint:
    return ChatEndpoint.from_dict({"base_url": srv.base_url, "model": "m-1", "api_key_env": "", **settings})


def ask(
    srv: OpenAIServer,
    cache: Path | None = None,
    *,
    choices: tuple[str, ...] | None = CHOICES,
    **settings: Any,
) -> Any:
    client = ChatClient(endpoint(srv, **settings), cache_dir=cache, backoff=0.01)
    return client.run([ChatRequest([user("Which letter?")], max_tokens=16, choices=choices)]).results[0]


# ------------------------------------------------------------------ defaults: nothing changes


def test_a_default_endpoint_sends_and_keys_what_it_did_before(srv: OpenAIServer, tmp_path: Path) -> None:
    ep = endpoint(srv)
    request = ChatRequest([user("Which letter?")], max_tokens=16, seed=3, choices=CHOICES)
    messages = [{"role": "user", "content": "Which letter?"}]
    assert request.messages == messages
    # the body as written before shaping existed: these four fields and the seed, in this order
    before = {"model": "m-1", "messages": messages, "temperature": 0.0, "max_tokens": 16, "seed": 3}
    assert request_body(ep, request) == json.dumps(before).encode("ascii")
    client = ChatClient(ep, cache_dir=tmp_path / "cache")
    client.run([request])
    assert srv.bodies == [before]
    # the cache key as written before: the file's name is the SHA-256 of this JSON
    key = {
        "model": "m-1",
        "messages": messages,
        "temperature": 0.0,
        "max_tokens": 16,
        "seed": 3,
        "base_url": srv.base_url,
    }
    assert client.cache_key(request) == key
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    stored = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert [p.name.split(".")[0] for p in stored] == [digest]
    # and the stored answer holds what it held before (no option_probs field)
    assert set(json.loads(stored[0].read_bytes())) == {
        "text",
        "finish_reason",
        "prompt_tokens",
        "completion_tokens",
        "error",
        "refusal",
    }


def test_every_shaping_setting_enters_the_key_only_off_its_default(srv: OpenAIServer) -> None:
    plain = ChatClient(endpoint(srv))
    with_choices = ChatRequest([user("q")], choices=CHOICES)
    without = ChatRequest([user("q")])
    base = plain.cache_key(with_choices)
    assert "shaping" not in base
    cases: list[tuple[dict[str, Any], dict[str, Any] | None]] = [
        ({"extra_body": {"top_k": 1}}, {"extra_body": {"top_k": 1}}),
        ({"token_limit_field": "max_completion_tokens"}, {"token_limit_field": "max_completion_tokens"}),
        ({"temperature": "server-default"}, {"temperature": "server-default"}),
        ({"temperature": 0.6}, {"temperature": 0.6}),
        ({"reasoning": True}, {"reasoning": True, "reasoning_tokens": 2048}),
        ({"constrain": "grammar"}, {"choices": ["A", "B", "C"], "constrain": "grammar"}),
        ({"logprobs": True}, {"choices": ["A", "B", "C"], "logprobs": 6}),
        ({"on_ignored_constraint": "parse"}, None),  # changes nothing sent
        ({"max_concurrency": 99, "timeout": 5}, None),
    ]
    for settings, added in cases:
        key = ChatClient(endpoint(srv, **settings)).cache_key(with_choices)
        assert key == (base if added is None else {**base, "shaping": added}), settings
    # constrain and logprobs concern only requests with choices
    for settings in ({"constrain": "choice"}, {"logprobs": True}):
        assert ChatClient(endpoint(srv, **settings)).cache_key(without) == plain.cache_key(without)


# ------------------------------------------------------------------ what the server receives


def test_extra_body_token_field_and_temperature_reach_the_server(srv: OpenAIServer) -> None:
    ask(
        srv,
        choices=None,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}, "top_k": 1},
        token_limit_field="max_completion_tokens",
        temperature="server-default",
    )
    assert srv.bodies[-1] == {
        "model": "m-1",
        "messages": [{"role": "user", "content": "Which letter?"}],
        "max_completion_tokens": 16,
        "chat_template_kwargs": {"enable_thinking": False},
        "top_k": 1,
    }
    ask(srv, choices=None, temperature=1)
    assert srv.bodies[-1]["temperature"] == 1.0 and srv.bodies[-1]["max_tokens"] == 16


def test_each_constraint_style_writes_its_field(srv: OpenAIServer) -> None:
    expected = {
        "choice": {"structured_outputs": {"choice": ["A", "B", "C"]}},
        "guided_choice": {"guided_choice": ["A", "B", "C"]},
        "grammar": {"grammar": 'root ::= "A" | "B" | "C"'},
        "json_schema": {
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "answer",
                    "strict": True,
                    "schema": {
                        "type": "object",
                        "properties": {"answer": {"type": "string", "enum": ["A", "B", "C"]}},
                        "required": ["answer"],
                        "additionalProperties": False,
                    },
                },
            }
        },
    }
    plain = {"model", "messages", "temperature", "max_tokens"}
    for style, fields in expected.items():
        ask(srv, constrain=style)
        body = srv.bodies[-1]
        assert {k: body[k] for k in set(body) - plain} == fields, style
        ask(srv, choices=None, constrain=style)  # a free question is sent unconstrained
        assert set(srv.bodies[-1]) == plain, style
    ask(srv, logprobs=True)
    assert (srv.bodies[-1]["logprobs"], srv.bodies[-1]["top_logprobs"]) == (True, 6)


def test_a_grammar_escapes_quotes_and_backslashes(srv: OpenAIServer) -> None:
    srv.honours = "grammar"
    tricky = ('say "hi"', "back\\slash")
    result = ask(srv, choices=tricky, constrain="grammar")
    assert srv.bodies[-1]["grammar"] == 'root ::= "say \\"hi\\"" | "back\\\\slash"'
    assert result.text == 'say "hi"'  # the loopback server parsed the literals back


@pytest.mark.parametrize(
    ("honours", "style"),
    [
        ("structured_outputs", "choice"),
        ("guided_choice", "guided_choice"),
        ("grammar", "grammar"),
        ("response_format", "json_schema"),
    ],
)
def test_a_server_that_honours_the_style_answers_a_choice(
    srv: OpenAIServer, honours: str, style: str
) -> None:
    srv.honours = honours
    srv.default = Step(text="banana")
    result = ask(srv, constrain=style)
    assert result.text == "A"  # the loopback answers the first allowed choice; JSON read back
    srv.default = Step(text="C")
    assert ask(srv, constrain=style).text == "C"


def test_json_schema_answers_are_read_back_as_the_letter(srv: OpenAIServer) -> None:
    srv.default = Step(text='{"answer": "B"}')
    assert ask(srv, constrain="json_schema").text == "B"
    srv.default = Step(text=' "C" ')
    assert ask(srv, constrain="json_schema").text == "C"
    for free in ("B, because", '{"answer": "B", "why": 1}', "[1]", '{"answer": 2}', "{broken"):
        srv.default = Step(text=free)
        assert ask(srv, constrain="json_schema").text == free
    srv.default = Step(text='{"answer": "B"}')  # without choices the text is not read as JSON
    assert ask(srv, choices=None, constrain="json_schema").text == '{"answer": "B"}'


# ------------------------------------------------------------------ reasoning


@pytest.mark.parametrize(
    ("said", "answer"),
    [
        ("<think>A or B? The coat...</think>\n\nB", "B"),
        ("<THINK>x</THINK> <think>y</think>C", "C"),
        ("the template opened it; thinking...</think>A", "A"),
        ("<think>out of budget, still thinking about A", ""),
        ("B", "B"),
    ],
)
def test_reasoning_cuts_the_thinking_and_raises_the_budget(srv: OpenAIServer, said: str, answer: str) -> None:
    srv.default = Step(text=said)
    assert ask(srv, reasoning=True).text == answer
    assert srv.bodies[-1]["max_tokens"] == 2048  # max(16, reasoning_tokens)
    ask(srv, reasoning=True, reasoning_tokens=8)
    assert srv.bodies[-1]["max_tokens"] == 16
    assert ask(srv).text == said  # without reasoning the text is the server's


def test_reasoning_kept_apart_with_no_content_is_an_empty_answer() -> None:
    ep = ChatEndpoint(base_url="http://127.0.0.1:1/v1", model="m", reasoning=True)
    body = {
        "choices": [{"message": {"content": None, "reasoning_content": "hmm"}, "finish_reason": "length"}]
    }
    assert parse_completion(json.dumps(body).encode(), str, ep)["text"] == ""
    with pytest.raises(Exception, match="not text"):
        parse_completion(json.dumps(body).encode(), str, ep.model_copy(update={"reasoning": False}))


# ------------------------------------------------------------------ log-probabilities


def test_option_probs_are_read_stored_and_resumed(srv: OpenAIServer, tmp_path: Path) -> None:
    srv.logprobs = True
    lp = {"A": -0.2, " A": -2.5, "B": -1.9, "**": -4.0}
    srv.default = Step(text="A", top_logprobs=list(lp.items()))
    first = ask(srv, tmp_path / "cache", logprobs=True)
    expected = {"A": math.exp(-0.2) + math.exp(-2.5), "B": math.exp(-1.9), "C": 0.0}
    assert first.text == "A" and not first.cached
    assert first.option_probs == pytest.approx(expected, rel=1e-12)
    assert srv.bodies[-1]["top_logprobs"] == 6
    hits = srv.hits
    again = ask(srv, tmp_path / "cache", logprobs=True)
    assert again.cached and srv.hits == hits
    assert again.option_probs == first.option_probs
    # the same answer asked without logprobs is another key: asked again, no option_probs
    plain = ask(srv, tmp_path / "cache")
    assert not plain.cached and plain.option_probs is None


def test_a_server_without_logprobs_gives_none(srv: OpenAIServer) -> None:
    result = ask(srv, logprobs=True)  # the loopback ignores logprobs unless told
    assert result.ok and result.option_probs is None
    srv.logprobs = True
    assert ask(srv).option_probs is None  # not asked: not read


def test_the_answer_position_skips_json_and_thinking(srv: OpenAIServer) -> None:
    srv.logprobs = True
    srv.honours = "response_format"
    srv.default = Step(text="B", top_logprobs=[("B", -0.1), ("A", -2.4)])
    result = ask(srv, constrain="json_schema", logprobs=True)
    assert result.text == "B"
    assert result.option_probs == pytest.approx({"A": math.exp(-2.4), "B": math.exp(-0.1), "C": 0.0})
    srv.honours = None
    content = [
        {"token": "<think>", "logprob": -0.1, "top_logprobs": []},
        {"token": "A", "logprob": -0.1, "top_logprobs": [{"token": "A", "logprob": -0.1}]},
        {"token": "</think>", "logprob": -0.1, "top_logprobs": []},
        {"token": "\n", "logprob": -0.1, "top_logprobs": []},
        {"token": "C", "logprob": -0.5, "top_logprobs": [{"token": "C", "logprob": -0.5}]},
    ]
    srv.default = Step(text="<think>A</think>\nC", logprobs={"content": content})
    result = ask(srv, reasoning=True, logprobs=True)
    assert result.text == "C"
    assert result.option_probs == pytest.approx({"A": 0.0, "B": 0.0, "C": math.exp(-0.5)})


HOSTILE: list[tuple[Any, dict[str, float] | None]] = [
    (None, None),
    ("logprobs", None),
    ({"content": "A"}, None),
    ({"content": []}, None),
    ({"content": [None, 5, "x"]}, None),
    ({"content": [{"token": "A", "top_logprobs": "many"}]}, {"A": 0.0, "B": 0.0, "C": 0.0}),
    (
        {
            "content": [
                {
                    "token": "A",
                    "logprob": "high",
                    "top_logprobs": [
                        {"token": "A", "logprob": float("nan")},
                        {"token": "B", "logprob": 0.5},  # > 0: no probability
                        {"token": "C", "logprob": True},
                        {"token": "A", "logprob": "-0.1"},
                        {"token": 7, "logprob": -0.1},
                        {"token": "B", "logprob": float("-inf")},
                        {"token": "C", "logprob": -1e308},
                        "junk",
                    ],
                }
            ]
        },
        {"A": 0.0, "B": 0.0, "C": 0.0},
    ),
    (  # a token listed twice counts once; sums are capped at 1
        {
            "content": [
                {
                    "token": "A",
                    "logprob": 0.0,
                    "top_logprobs": [
                        {"token": "A", "logprob": 0.0},
                        {"token": "A", "logprob": 0.0},
                        {"token": "'A'", "logprob": -0.01},
                    ],
                }
            ]
        },
        {"A": 1.0, "B": 0.0, "C": 0.0},
    ),
    (  # llama.cpp asked for post-sampling probabilities; older builds name the token tok_str
        {
            "content": [
                {
                    "token": "B",
                    "prob": 0.7,
                    "top_probs": [
                        {"tok_str": "B", "prob": 0.7},
                        {"token": "C", "prob": 1.5},
                        {"token": "A", "prob": 0.2},
                    ],
                }
            ]
        },
        {"A": 0.2, "B": 0.7, "C": 0.0},
    ),
    (  # a top list as a {token: logprob} table; the chosen token left out of it counts too
        {"content": [{"token": "C", "logprob": -0.3, "top_logprobs": {"A": -1.0, "B": "x"}}]},
        {"A": math.exp(-1.0), "B": 0.0, "C": math.exp(-0.3)},
    ),
]


@pytest.mark.parametrize(("logprobs", "expected"), HOSTILE)
def test_hostile_logprobs_are_dropped_never_raised(
    srv: OpenAIServer, logprobs: Any, expected: dict[str, float] | None
) -> None:
    raw = {"choices": [{"message": {"content": "A"}, "finish_reason": "stop", "logprobs": logprobs}]}
    srv.default = Step(raw=json.dumps(raw).encode())  # NaN and Infinity as Python writes them
    result = ask(srv, logprobs=True)
    assert result.ok and result.text == "A"
    if expected is None:
        assert result.option_probs is None
    else:
        assert result.option_probs == pytest.approx(expected)
        assert all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in result.option_probs.values())


def test_a_cached_answer_with_bad_option_probs_is_asked_again(srv: OpenAIServer, tmp_path: Path) -> None:
    srv.logprobs = True
    srv.default = Step(text="A", top_logprobs=[("A", -0.1)])
    client = ChatClient(endpoint(srv, logprobs=True), cache_dir=tmp_path / "cache")
    request = ChatRequest([user("Which letter?")], max_tokens=16, choices=CHOICES)
    client.run([request])
    cache = DiskCache(tmp_path / "cache")
    key = client.cache_key(request)
    for bad in ({"A": 1.5}, {"A": "0.5"}, {"A": True}, ["A"], {"A": -0.1}):
        stored = json.loads(cache.get(key))  # type: ignore[arg-type]
        cache.put(key, json.dumps({**stored, "option_probs": bad}).encode())
        hits = srv.hits
        result = client.run([request]).results[0]
        assert not result.cached and srv.hits == hits + 1, bad
        assert result.option_probs == pytest.approx({"A": math.exp(-0.1), "B": 0.0, "C": 0.0})


# ------------------------------------------------------------------ the settings themselves


@pytest.mark.parametrize(
    ("settings", "needle"),
    [
        ({"extra_body": {"model": "x"}}, "extra_body: model: the client writes this field itself"),
        ({"extra_body": {"messages": []}}, "extra_body: messages: the client writes this field itself"),
        ({"extra_body": {"stream": True}}, "extra_body: stream:"),
        ({"extra_body": {"max_tokens": 5}}, "use its own setting"),
        ({"extra_body": {"top_k": float("nan")}}, "no dates, nan or inf"),
        ({"extra_body": "top_k=1"}, "extra_body: give a table"),
        (
            {"extra_body": {"grammar": "g"}, "constrain": "grammar"},
            "extra_body.grammar: constrain = 'grammar'",
        ),
        ({"token_limit_field": "max_new_tokens"}, "token_limit_field: Input should be 'max_tokens'"),
        ({"temperature": "none"}, 'temperature: give a number from 0 (e.g. 0.6), or "server-default"'),
        ({"temperature": -1}, "temperature: give a number"),
        ({"temperature": True}, "temperature: give a number"),
        ({"constrain": "regex"}, "constrain: Input should be 'none', 'choice'"),
        ({"on_ignored_constraint": "warn"}, "on_ignored_constraint: Input should be 'fail' or 'parse'"),
        ({"reasoning_tokens": 0}, "reasoning_tokens"),
    ],
)
def test_bad_settings_are_one_line_errors(settings: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValueError) as info:
        ChatEndpoint.from_dict({"base_url": "http://x.invalid/v1", "model": "m", **settings}, name="q")
    text = str(info.value)
    assert "\n" not in text and text.startswith("endpoint 'q': ") and needle in text, text


def test_settings_read_from_toml() -> None:
    import tomllib

    table = tomllib.loads(
        """
        base_url = "http://127.0.0.1:8000/v1"
        model = "o4-mini"
        token_limit_field = "max_completion_tokens"
        temperature = "server-default"
        reasoning = true
        reasoning_tokens = 4096
        constrain = "json_schema"
        on_ignored_constraint = "parse"
        logprobs = true
        extra_body = {reasoning_effort = "low", chat_template_kwargs = {enable_thinking = false}}
        """
    )
    ep = ChatEndpoint.from_dict(table, name="o4")
    assert (ep.temperature, ep.reasoning_tokens, ep.constrain, ep.on_ignored_constraint) == (
        "server-default",
        4096,
        "json_schema",
        "parse",
    )
    assert ep.extra_body == {"reasoning_effort": "low", "chat_template_kwargs": {"enable_thinking": False}}
    same = ChatEndpoint.from_dict(table, name="o4")
    assert hash(ep) == hash(same) and {ep, same} == {ep}  # still hashable, by its settings
    other = ChatEndpoint.from_dict({**table, "extra_body": {"reasoning_effort": "high"}}, name="o4")
    assert other != ep and len({ep, other}) == 2
