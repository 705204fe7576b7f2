"""The ``llm`` caption → country method against a small OpenAI-compatible server on loopback."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fairsets.fetch.chat import ChatClient, ChatServiceError
from fairsets.geo.methods.base import get_method, method_from_spec
from fairsets.geo.methods.llm import LLMMethod, LLMServiceError, MalformedAnswer, parse_answer
from servers import LoopbackServer, Request, Response, json_response

pytestmark = pytest.mark.usefixtures("no_egress")

ROUTE = "/v1/chat/completions"
SECRET = "sk-test-9f3c2a7d1b5e8c0a"

#: What the fake model answers for a caption (anything else: "Output: No").
ANSWERS = {
    "Happy boys at Copacabana Beach": "Output: Brazil",
    "Kitchen and dining space": "Output: No",
    "Sunset over the Eiffel Tower": "Output: Paris, France",
    "A traditional Japanese house in Kyoto": "**Japan**",
    "Yellow cab in Manhattan": "The photo was taken in the United States of America.",
    "A Dutch windmill": "Output: Dutch",
    "Nice view": "I think it could be somewhere in the mountains, maybe",
}

#: The paper's Mixtral instruction (Appendix A.4), typed out here independently of the module.
PAPER_TEXT = (
    "Given the caption: Happy boys at Copacabana Beach , Identify the country associated with the "
    "location mentioned in the caption. If no location or country is specified, output 'No'. Use the "
    "format 'Output: (country name/No)'. The output should only be 'No' or the name of the country."
)
GEOTAGGER_TEXT = (
    "You are a geotagging agent who tags each given text to a country. The only output you give is "
    "either the country name or 'NO' in case the text cannot be tagged to a country"
)


def completion(content: Any) -> Response:
    """An OpenAI-style chat completion carrying ``content``."""
    return json_response(
        {
            "id": "cmpl-1",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
        }
    )


def caption_of(messages: list[dict[str, str]]) -> str:
    """Recover the caption from the messages of any of the three prompt styles."""
    if messages[0]["role"] == "system":
        return messages[-1]["content"]
    text = messages[-1]["content"]
    m = re.match(r"Given the caption: (.*) , Identify the country", text, re.S) or re.search(
        r"Caption: (.*)$", text, re.S
    )
    assert m, f"unexpected prompt {text!r}"
    return m.group(1)


@dataclass
class FakeLLM:
    """The chat route: answers from ``ANSWERS``; per-caption overrides; records in-flight counts."""

    srv: LoopbackServer
    overrides: dict[str, Callable[[Request], Response]] = field(default_factory=dict)
    delay: float = 0.0
    inflight: int = 0
    max_inflight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, req: Request) -> Response:
        with self.lock:
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            if self.delay:
                time.sleep(self.delay)
            body = json.loads(req.body)
            caption = caption_of(body["messages"])
            if caption in self.overrides:
                return self.overrides[caption](req)
            return completion(ANSWERS.get(caption, "Output: No"))
        finally:
            with self.lock:
                self.inflight -= 1

    @property
    def base_url(self) -> str:
        return self.srv.url("/v1")

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.body) for r in self.srv.requests if r.path == ROUTE]

    def hits(self) -> int:
        return self.srv.hits(ROUTE)


@pytest.fixture(scope="module")
def _server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:  # stopping one takes ~0.5 s: share it within the module
        yield srv


@pytest.fixture
def llm(_server: LoopbackServer) -> FakeLLM:
    with _server._lock:
        _server.requests.clear()
    _server.routes.clear()
    fake = FakeLLM(_server)
    _server.route(ROUTE, fake.handle)
    return fake


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("FAIRSETS_LLM_BASE_URL", "FAIRSETS_LLM_MODEL", "FAIRSETS_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FAIRSETS_CACHE_DIR", str(tmp_path / "default-cache"))


def make(fake: FakeLLM | None = None, **options: Any) -> LLMMethod:
    """A method on the fake server with tiny backoff and no cache unless asked."""
    options.setdefault("base_url", fake.base_url if fake else None)
    options.setdefault("model", "mixtral-test")
    options.setdefault("backoff", 0.01)
    options.setdefault("max_wait", 5.0)
    options.setdefault("cache_dir", None)
    method = get_method("llm", **options)
    assert isinstance(method, LLMMethod)
    return method


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_codes_in_order_with_duplicates(llm: FakeLLM) -> None:
    captions = [
        "Happy boys at Copacabana Beach",
        "Kitchen and dining space",
        "Sunset over the Eiffel Tower",
        "Happy boys at Copacabana Beach",
        "A traditional Japanese house in Kyoto",
        "",
        "Yellow cab in Manhattan",
        "A Dutch windmill",
        "Sunset over the Eiffel Tower",
    ]
    method = make(llm)
    codes, errors = method.predict_with_errors(captions)
    assert codes == ["BRA", None, "FRA", "BRA", "JPN", None, "USA", "NLD", "FRA"]
    assert errors == [None] * len(captions)
    assert llm.hits() == 6  # each distinct, non-blank caption asked once
    assert method.predict(["A Dutch windmill", "Happy boys at Copacabana Beach"]) == ["NLD", "BRA"]
    counts = method.provenance()["counts"]
    assert counts["requests"] == 8 and counts["answered"] == 8
    assert counts["retries"] == counts["failed"] == counts["malformed"] == counts["cache_hits"] == 0


def test_paper_prompt_is_verbatim(llm: FakeLLM) -> None:
    make(llm).predict(["Happy boys at Copacabana Beach"])
    (body,) = llm.bodies()
    assert body == {
        "model": "mixtral-test",
        "messages": [{"role": "user", "content": PAPER_TEXT}],
        "temperature": 0.0,
        "max_tokens": 16,
    }
    (req,) = llm.srv.requests
    assert req.method == "POST" and req.headers["Content-Type"] == "application/json"
    assert "Authorization" not in req.headers  # no key configured: none sent


def test_geotagger_and_custom_prompts(llm: FakeLLM) -> None:
    codes = make(llm, prompt="geotagger", temperature=0.2, max_tokens=8).predict(["A Dutch windmill"])
    assert codes == ["NLD"]
    (body,) = llm.bodies()
    assert body["messages"] == [
        {"role": "system", "content": GEOTAGGER_TEXT},
        {"role": "user", "content": "A Dutch windmill"},
    ]
    assert body["temperature"] == 0.2 and body["max_tokens"] == 8

    template = "Where was this taken? Answer {{in JSON}}? Caption: {caption}"
    assert make(llm, prompt=template).predict(["Weird {braces} here"]) == [None]
    assert llm.bodies()[-1]["messages"] == [
        {"role": "user", "content": "Where was this taken? Answer {{in JSON}}? Caption: Weird {braces} here"}
    ]
    with pytest.raises(ValueError, match=r"prompt must be one of \['geotagger', 'paper'\]"):
        make(llm, prompt="papr")


def test_key_sent_as_bearer_and_never_leaked(
    llm: FakeLLM, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("MY_LLM_KEY", SECRET)
    seen: list[str] = []

    def echo_then_answer(req: Request) -> Response:
        seen.append(req.headers.get("Authorization", ""))
        if len(seen) == 1:  # a server that echoes the credentials in its error text
            return json_response({"error": {"message": f"slow down, {req.headers['Authorization']}"}}, 429)
        return completion("Output: Brazil")

    llm.overrides["Happy boys at Copacabana Beach"] = echo_then_answer
    llm.overrides["Nice view"] = lambda req: json_response({"error": {"message": f"bad {SECRET}"}}, 400)
    caplog.set_level(logging.DEBUG)
    cache = tmp_path / "cache"
    method = make(llm, api_key_env="MY_LLM_KEY", cache_dir=str(cache))
    codes, errors = method.predict_with_errors(["Happy boys at Copacabana Beach", "Nice view"])

    assert codes == ["BRA", None]
    assert seen == [f"Bearer {SECRET}"] * 2
    assert all(r.headers.get("Authorization") == f"Bearer {SECRET}" for r in llm.srv.requests)
    assert errors[1] == "http 400: bad ***"
    assert "slow down, Bearer ***" in caplog.text  # the retry warning, masked
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert len(files) == 1 and files[0].read_bytes() == b"Output: Brazil"
    texts = {
        "spec": json.dumps(method.spec()),
        "provenance": json.dumps(method.provenance()),
        "logs": caplog.text,
        "errors": json.dumps(errors),
        "cache": "".join(p.read_text() for p in files),
    }
    assert method.spec()["api_key_env"] == "MY_LLM_KEY"
    for where, text in texts.items():
        assert SECRET not in text, where


def test_refused_key_raises_without_the_key(llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRSETS_LLM_API_KEY", SECRET)

    def auth(req: Request) -> Response:
        return json_response(
            {"error": {"message": f"Incorrect API key: {req.headers.get('Authorization')}"}}, 401
        )

    llm.srv.route(ROUTE, auth)
    with pytest.raises(LLMServiceError, match=r"HTTP 401.*FAIRSETS_LLM_API_KEY was refused") as info:
        make(llm, concurrency=2).predict([f"caption {i}" for i in range(30)])
    assert SECRET not in str(info.value) and "Bearer ***" in str(info.value)
    assert llm.hits() <= 2  # the first answers stop the batch

    monkeypatch.delenv("FAIRSETS_LLM_API_KEY")
    with pytest.raises(LLMServiceError, match=r"no key was sent \(\$FAIRSETS_LLM_API_KEY is unset\)"):
        make(llm).predict(["caption"])


@pytest.mark.timeout(60)
def test_refused_key_wins_over_abandoned_requests(llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fatal answer is the batch's error even when the abandoned requests complete first."""
    monkeypatch.setenv("FAIRSETS_LLM_API_KEY", SECRET)
    llm.overrides["refused"] = lambda req: json_response({"error": {"message": "bad key"}}, 401)
    # the other workers wait on a long Retry-After: the 401 wakes them, and they end "abandoned"
    busy = lambda req: Response(503, {"Retry-After": "30"}, b"busy")  # noqa: E731
    captions = [f"caption {i}" for i in range(40)]
    for c in captions:
        llm.overrides[c] = busy
    captions.insert(6, "refused")
    original = ChatClient._ask  # one request with its retries: the method asks through the chat client

    async def fatal_completes_last(self: ChatClient, *args: Any) -> Any:
        try:
            return await original(self, *args)
        except ChatServiceError:
            await asyncio.sleep(0.3)  # the fatal request completes after every abandoned one
            raise

    monkeypatch.setattr(ChatClient, "_ask", fatal_completes_last)
    started = time.monotonic()
    with pytest.raises(LLMServiceError, match=r"HTTP 401.*FAIRSETS_LLM_API_KEY was refused"):
        make(llm, concurrency=8, max_retries=3, max_wait=60.0, abort_after=3).predict(captions)
    assert time.monotonic() - started < 10  # the sleeping retries stopped at once

    monkeypatch.setattr(ChatClient, "_ask", original)
    for _ in range(20):  # the unforced race, repeated
        with pytest.raises(LLMServiceError, match=r"HTTP 401.*FAIRSETS_LLM_API_KEY was refused"):
            make(llm, concurrency=8, max_retries=3, max_wait=60.0, abort_after=3).predict(captions)


def test_malformed_and_invalid_answers_are_per_caption_errors(llm: FakeLLM) -> None:
    llm.overrides["html"] = lambda req: Response(200, {"Content-Type": "text/html"}, b"<html>proxy</html>")
    llm.overrides["no choices"] = lambda req: json_response({"choices": []})
    llm.overrides["null content"] = lambda req: completion(None)
    llm.overrides["too long"] = lambda req: json_response(
        {"error": {"message": "context length exceeded"}}, 400
    )
    captions = [
        "Nice view",
        "html",
        "Happy boys at Copacabana Beach",
        "no choices",
        "null content",
        "too long",
    ]
    codes, errors = make(llm).predict_with_errors(captions)
    assert codes == [None, None, "BRA", None, None, None]
    assert errors == [
        "malformed answer: 'I think it could be somewhere in the mountains, maybe'",
        "invalid response: not JSON: '<html>proxy</html>'",
        None,
        "invalid response: no choices[0].message.content",
        "invalid response: choices[0].message.content is NoneType, not text",
        "http 400: context length exceeded",
    ]


def test_retry_after_is_honoured(llm: FakeLLM) -> None:
    calls: list[float] = []

    def limited(req: Request) -> Response:
        calls.append(time.monotonic())
        if len(calls) == 1:
            return Response(429, {"Retry-After": "1"}, b"rate limited")
        return completion("Output: France")

    llm.overrides["Sunset over the Eiffel Tower"] = limited
    method = make(llm, backoff=0.01, max_wait=5.0)
    assert method.predict_with_errors(["Sunset over the Eiffel Tower", "A Dutch windmill"]) == (
        ["FRA", "NLD"],
        [None, None],
    )
    assert len(calls) == 2 and calls[1] - calls[0] >= 0.9  # waited for Retry-After, not the 0.01 s backoff
    assert method.provenance()["counts"]["retries"] == 1


def test_persistent_500_fails_only_that_caption(llm: FakeLLM) -> None:
    llm.overrides["broken"] = lambda req: Response(500, {}, b"internal error")
    captions = ["Happy boys at Copacabana Beach", "broken", "A Dutch windmill", "broken"]
    method = make(llm, max_retries=2)
    codes, errors = method.predict_with_errors(captions)
    assert codes == ["BRA", None, "NLD", None]
    assert errors == [None, "http 500 after 2 retries", None, "http 500 after 2 retries"]
    assert sum(caption_of(b["messages"]) == "broken" for b in llm.bodies()) == 3
    counts = method.provenance()["counts"]
    assert counts["failed"] == 1 and counts["retries"] == 2 and counts["answered"] == 2


def test_timeouts_are_retried_then_a_per_caption_error(llm: FakeLLM) -> None:
    llm.overrides["slow"] = lambda req: Response(200, {}, b"{}", delay=1.0)
    method = make(llm, timeout=0.2, max_retries=1)
    codes, errors = method.predict_with_errors(["slow", "A Dutch windmill"])
    assert codes == [None, "NLD"]
    assert errors[0] == f"no answer from 127.0.0.1:{llm.srv.port} within 0.2s after 1 retries"
    assert sum(caption_of(b["messages"]) == "slow" for b in llm.bodies()) == 2


def test_a_failing_service_aborts_the_batch(llm: FakeLLM) -> None:
    llm.srv.route(ROUTE, lambda req: Response(503, {}, b"overloaded"))
    with pytest.raises(
        LLMServiceError, match=r"failed 3 captions in a row \(last: http 503 after 1 retries\)"
    ):
        make(llm, concurrency=2, max_retries=1, abort_after=3).predict([f"caption {i}" for i in range(40)])
    assert llm.hits() <= 20  # not 80: queued captions were cancelled, retries stopped


def test_bounded_concurrency(llm: FakeLLM) -> None:
    llm.delay = 0.1
    captions = [f"A street in town {i}" for i in range(12)]
    assert make(llm, concurrency=3).predict(captions) == [None] * 12
    assert llm.hits() == 12
    assert 1 < llm.max_inflight <= 3


def test_progress_bar_on_large_batches(llm: FakeLLM, capsys: pytest.CaptureFixture[str]) -> None:
    captions = [f"A street in town {i}" for i in range(60)] + ["A Dutch windmill"]
    assert make(llm, progress=True).predict(captions) == [None] * 60 + ["NLD"]
    assert "llm geotagging" in capsys.readouterr().err


def test_disk_cache(llm: FakeLLM, tmp_path: Path) -> None:
    captions = ["Happy boys at Copacabana Beach", "Nice view", "Kitchen and dining space"]
    first = make(llm, cache_dir=str(tmp_path / "c"))
    result = first.predict_with_errors(captions)
    assert llm.hits() == 3
    raw = sorted(p.read_bytes() for p in (tmp_path / "c").rglob("*.bin"))
    assert raw == sorted(ANSWERS[c].encode() for c in captions)  # raw answers, not codes

    # same model and prompt served elsewhere (here: nowhere): every answer comes from the cache; the
    # malformed one is not final, so it is asked again, and kept when asking fails
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    second = make(base_url=dead, cache_dir=str(tmp_path / "c"))
    assert second.predict_with_errors(captions) == result
    assert llm.hits() == 3
    assert second.provenance()["counts"]["cache_hits"] == 3
    assert second.provenance()["counts"]["requests"] == 1

    # a different prompt, model or max_tokens is a different question
    make(llm, cache_dir=str(tmp_path / "c"), prompt="geotagger").predict(captions)
    assert llm.hits() == 6
    make(llm, cache_dir=str(tmp_path / "c"), model="other").predict(captions[:1])
    make(llm, cache_dir=str(tmp_path / "c"), max_tokens=32).predict(captions[:1])
    assert llm.hits() == 8


def test_cache_folders_of_earlier_versions_stay_valid(tmp_path: Path) -> None:
    """A cache written before the method asked through the shared chat client answers without requests."""
    from fairsets.fetch.cache import DiskCache

    old = DiskCache(tmp_path / "c")
    captions = ["Happy boys at Copacabana Beach", "A Dutch windmill"]
    for caption, answer in zip(captions, ["Output: Brazil", "Output: Netherlands"], strict=True):
        key = {  # the layout of the first version, typed out here
            "v": 1,
            "model": "mixtral-test",
            "system": None,
            "user": PAPER_TEXT.replace("Happy boys at Copacabana Beach", "{caption}"),
            "temperature": 0.0,
            "max_tokens": 16,
            "caption": caption,
        }
        old.put(key, answer.encode())
    method = make(base_url=f"http://127.0.0.1:{closed_port()}/v1", cache_dir=str(tmp_path / "c"))
    assert method.predict_with_errors(captions) == (["BRA", "NLD"], [None, None])
    counts = method.provenance()["counts"]
    assert counts["requests"] == 0 and counts["cache_hits"] == 2


def test_default_cache_dir_from_env(llm: FakeLLM, tmp_path: Path) -> None:
    method = get_method("llm", base_url=llm.base_url, model="m")
    assert method.predict(["A Dutch windmill"]) == ["NLD"]
    assert len(list((tmp_path / "default-cache" / "geo-llm").rglob("*.bin"))) == 1
    assert "cache_dir" not in method.spec()  # resolved where the method runs
    assert make(llm, cache_dir="").cache.folder is None


def test_unknown_model_404_raises(llm: FakeLLM) -> None:
    def models(req: Request) -> Response:
        name = json.loads(req.body)["model"]
        if name != "mixtral-test":
            return json_response({"error": {"message": f"The model `{name}` does not exist."}}, 404)
        return completion("Output: Brazil")

    llm.srv.route(ROUTE, models)
    with pytest.raises(LLMServiceError, match=r"HTTP 404 .*The model `nope` does not exist.*'nope'"):
        make(llm, model="nope", concurrency=2).predict([f"caption {i}" for i in range(20)])
    assert llm.hits() <= 2


def test_wrong_path_and_redirects_raise(llm: FakeLLM) -> None:
    with pytest.raises(LLMServiceError, match=r"HTTP 404 for /api/chat/completions"):
        make(base_url=llm.srv.url("/api")).predict(["x"])
    llm.srv.route(ROUTE, lambda req: Response(307, {"Location": "http://127.0.0.2:9/v1/chat/completions"}))
    with pytest.raises(LLMServiceError, match=r"redirects \(HTTP 307 to 127\.0\.0\.2"):
        make(llm).predict(["x"])


@pytest.mark.parametrize("n", [1, 30])
def test_connection_refused_raises(n: int) -> None:
    port = closed_port()
    method = make(base_url=f"http://127.0.0.1:{port}/v1", max_retries=1)
    with pytest.raises(
        LLMServiceError, match=rf"could not reach the llm endpoint 127\.0\.0\.1:{port} \(cannot connect"
    ):
        method.predict([f"caption {i}" for i in range(n)])


def test_options_and_spec(llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=r"base_url=.*FAIRSETS_LLM_BASE_URL"):
        get_method("llm", model="m")
    with pytest.raises(ValueError, match=r"model=.*FAIRSETS_LLM_MODEL"):
        get_method("llm", base_url=llm.base_url)
    with pytest.raises(ValueError, match="must not carry credentials") as info:
        get_method("llm", base_url="http://bob:hunter2@127.0.0.1:1/v1", model="m")
    assert "hunter2" not in str(info.value)
    with pytest.raises(ValueError, match="NAME of an environment variable"):
        get_method("llm", base_url=llm.base_url, model="m", api_key_env=SECRET)
    with pytest.raises(ValueError, match="concurrency must be an integer >= 1"):
        make(llm, concurrency=0)

    monkeypatch.setenv("FAIRSETS_LLM_BASE_URL", llm.base_url + "/")
    monkeypatch.setenv("FAIRSETS_LLM_MODEL", "mixtral-env")
    method = get_method("llm", cache_dir=None, max_retries=0)
    spec = method.spec()
    assert spec["method"] == "llm" and spec["model"] == "mixtral-env"
    assert spec["base_url"] == llm.base_url + "/" and spec["cache_dir"] is None
    json.dumps(spec)  # JSON-friendly
    monkeypatch.delenv("FAIRSETS_LLM_MODEL")
    rebuilt = method_from_spec(spec)  # self-contained: the env is not needed again
    assert rebuilt.predict(["A Dutch windmill"]) == ["NLD"]
    assert llm.bodies()[-1]["model"] == "mixtral-env"
    prov = rebuilt.provenance()
    assert prov["base_url_host"] == f"127.0.0.1:{llm.srv.port}"
    assert prov["prompt"] == "paper" and len(prov["prompt_sha256"]) == 64
    assert prov["temperature"] == 0.0 and prov["max_tokens"] == 16 and prov["model"] == "mixtral-env"
    assert make(llm, prompt="Caption: {caption}").provenance()["prompt_sha256"] != prov["prompt_sha256"]


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        ("Output: France", "FRA"),
        ("France", "FRA"),
        ("Output: No", None),
        ("No", None),
        ("NO", None),
        ("no.", None),
        ("Output: (No)", None),
        ("No location or country is specified.", None),
        ("Output: (France)", "FRA"),
        ("The photo was taken in Brazil.", "BRA"),
        ("United States of America", "USA"),
        ("**Output:** *Japan*", "JPN"),
        ('"Japan".', "JPN"),
        ("'France'", "FRA"),
        ("Output: Paris, France", "FRA"),
        ("Output: New York, USA", "USA"),
        ("Output: Georgia, United States", "USA"),  # the last country named wins
        ("Atlanta is in Georgia, in the United States", "USA"),
        ("Brazilian", "BRA"),
        ("Output: Dutch", "NLD"),
        ("Output: Türkiye", "TUR"),
        ("The caption mentions Sarajevo, Bosnia and Herzegovina.", "BIH"),
        ("It is in the US.", "USA"),
        ("Sure!\nOutput: Kenya", "KEN"),
        ("<think>Paris is in France</think>\nOutput: France", "FRA"),
        ("Output: NO\n(The caption mentions no place.)", None),
    ],
)
def test_parse_answer(answer: str, code: str | None) -> None:
    assert parse_answer(answer) == code


@pytest.mark.parametrize("answer", ["I think it could be…", "", "   ", "IT department", "Output: a kitchen"])
def test_parse_answer_malformed(answer: str) -> None:
    with pytest.raises(MalformedAnswer):
        parse_answer(answer)
    assert issubclass(MalformedAnswer, ValueError)
