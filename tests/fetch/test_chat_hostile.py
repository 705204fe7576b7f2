"""The chat client against a hostile server: nested JSON, counts that are no counts, an echoed key,
and answers the caller cannot use (never cached as final)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairsets.fetch.chat import ChatClient, ChatEndpoint, ChatRequest, ChatServiceError, user
from fairsets.fetch.redact import Redactor
from openai_server import ECHO_KEY, OpenAIServer, Step, last_user_text, nested_json
from secret_sweep import leaks

SECRET = "sk-live-7f3Qz9XbL2mN8vR4tY6wK1pH5jD0cG"
ENV = "FAIRSETS_TEST_HOSTILE_KEY"


@pytest.fixture(scope="module")
def _server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:  # stopping one takes ~0.5 s: one for the module, reset per test
        yield server


@pytest.fixture
def srv(_server: OpenAIServer) -> OpenAIServer:
    _server.script, _server.respond, _server.default = [], None, Step()
    for seen in (_server.bodies, _server.headers, _server.times):
        seen.clear()
    return _server


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, SECRET)


def client(srv: OpenAIServer, cache: Path | None = None, max_concurrency: int = 4) -> ChatClient:
    ep = {"base_url": srv.base_url, "model": "m", "api_key_env": ENV, "max_concurrency": max_concurrency}
    return ChatClient(ChatEndpoint.from_dict(ep), cache_dir=cache, backoff=0.01, max_retries=0)


def ask(*texts: str, accept: object = None) -> list[ChatRequest]:
    extra = {"accept": accept} if accept is not None else {}
    return [ChatRequest([user(t)], **extra) for t in texts]  # type: ignore[arg-type]


def by_text(srv: OpenAIServer, steps: dict[str, Step]) -> None:
    srv.respond = lambda body: steps.get(last_user_text(body))


# --------------------------------------------------------------------------- nested JSON


def test_deeply_nested_json_fails_one_request_never_the_batch(srv: OpenAIServer) -> None:
    """Defect 2: ``json`` raises RecursionError on deep nesting; it aborted the whole batch."""
    by_text(
        srv,
        {
            "deep": Step(raw=nested_json()),
            "deep object": Step(raw=b'{"choices": ' + nested_json() + b"}"),
            "deep 400": Step(status=400, raw=nested_json()),
            "deep 500": Step(status=500, raw=nested_json()),
        },
    )
    batch = client(srv).run(ask("deep", "fine", "deep object", "deep 400", "deep 500"))
    errors = [r.error for r in batch.results]
    assert errors[0] == f"invalid response: not JSON (nested too deeply): {'[' * 59 + '…'!r}"
    assert batch.results[1].text == "echo: fine" and errors[1] is None
    assert errors[2] is not None and errors[2].startswith("invalid response: not JSON (nested too deeply)")
    assert errors[3] == "http 400: " + "[" * 199 + "…"  # the body's text, as for any body not JSON
    assert errors[4] == "http 500"


def test_a_fatal_answer_with_a_deeply_nested_body_is_still_one_clear_error(srv: OpenAIServer) -> None:
    srv.default = Step(status=401, raw=nested_json())
    with pytest.raises(ChatServiceError, match=r"refused the request \(HTTP 401\)"):
        client(srv).run(ask("a", "b"))


def test_a_deeply_nested_cache_entry_is_asked_again(srv: OpenAIServer, tmp_path: Path) -> None:
    c = client(srv, tmp_path / "cache")
    c.run(ask("q"))
    (entry,) = (tmp_path / "cache").rglob("*.bin")
    entry.write_bytes(nested_json())
    again = client(srv, tmp_path / "cache").run(ask("q"))
    assert again.results[0].text == "echo: q" and not again.results[0].cached and srv.hits == 2


# --------------------------------------------------------------------------- token counts


@pytest.mark.parametrize(
    ("usage", "kept"),
    [
        ((float("nan"), 3), (None, 3)),
        ((float("inf"), float("-inf")), (None, None)),
        ((-5, 7), (None, 7)),
        ((1e300, 2**70), (None, None)),
        ((True, "7"), (None, None)),
        ((2.5, 4.0), (None, 4)),
        ((0, 12), (0, 12)),
    ],
)
def test_token_counts_that_are_no_counts_are_null_and_the_answer_kept(
    srv: OpenAIServer, tmp_path: Path, usage: tuple[object, object], kept: tuple[int | None, int | None]
) -> None:
    """Defect 3: ``int(NaN)`` aborted the batch; negative counts were summed as given."""
    srv.script = [Step(text="an answer", usage=usage), Step(text="another", usage=(10, 1))]
    batch = client(srv, tmp_path / "cache", max_concurrency=1).run(ask("a", "b"))
    first = batch.results[0]
    assert (first.text, first.error, first.prompt_tokens, first.completion_tokens) == (
        "an answer",
        None,
        *kept,
    )
    assert batch.prompt_tokens == 10 + (kept[0] or 0) and batch.completion_tokens == 1 + (kept[1] or 0)
    again = client(srv, tmp_path / "cache").run(ask("a"))  # what was cached reads back the same
    assert (
        again.results[0].cached
        and (again.results[0].prompt_tokens, again.results[0].completion_tokens) == kept
    )


def test_bad_counts_in_a_cache_entry_read_as_null(srv: OpenAIServer, tmp_path: Path) -> None:
    client(srv, tmp_path / "cache").run(ask("q"))
    (entry,) = (tmp_path / "cache").rglob("*.bin")
    data = json.loads(entry.read_text())
    entry.write_text(json.dumps({**data, "prompt_tokens": -40, "completion_tokens": float("nan")}))
    hit = client(srv, tmp_path / "cache").run(ask("q")).results[0]
    assert hit.cached and hit.text == "echo: q" and (hit.prompt_tokens, hit.completion_tokens) == (None, None)


# --------------------------------------------------------------------------- the echoed key


def test_the_redactor_masks_the_key_and_every_piece_of_eight_or_more() -> None:
    redact = Redactor(SECRET)
    assert redact(f"key {SECRET}!") == "key ***!"
    assert redact(f"Incorrect API key provided: {SECRET[:12]}****{SECRET[-4:]}") == (
        f"Incorrect API key provided: *******{SECRET[-4:]}"
    )
    assert redact(f"{SECRET[5:20]} and {SECRET[20:]}") == "*** and ***"
    assert redact(SECRET[:7]) == SECRET[:7]  # 7 characters: ordinary text, left alone
    assert redact("nothing here") == "nothing here" and redact(SECRET * 3) == "*********"
    assert Redactor("tiny")("a tiny key, tinyer") == "a *** key, ***er"  # a short key masked whole
    assert Redactor("x")("x marks") == "x marks" and not Redactor("x") and not Redactor(None)


def _plain_mask(secret: str, text: str) -> str:
    """The redactor's rule by a plain scan: at each position the longest piece of 8 or more (of the
    whole key when shorter) is masked; keys under 4 characters are left alone."""
    size = min(8, len(secret))
    if len(secret) < 4:
        return text
    out, i, kept = [], 0, 0
    while i <= len(text) - size:
        if text[i : i + size] in secret:
            j = i + size
            while j < len(text) and text[i : j + 1] in secret:
                j += 1
            out += [text[kept:i], "***"]
            i = kept = j
        else:
            i += 1
    return "".join([*out, text[kept:]])


def test_the_redactor_masks_what_a_plain_scan_masks() -> None:
    import random

    rng = random.Random(26)
    for _ in range(1500):
        key = "".join(rng.choice("abc-") for _ in range(rng.randint(1, 30)))
        text = "".join(rng.choice("abc-x") for _ in range(rng.randint(0, 60)))
        if rng.random() < 0.6:
            a = rng.randint(0, len(key))
            b, at = rng.randint(a, len(key)), rng.randint(0, len(text))
            text = text[:at] + key[a:b] + text[at:]
        assert Redactor(key)(text) == _plain_mask(key, text), (key, text)


def test_an_echoed_key_is_never_written_whole_or_in_part(
    srv: OpenAIServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Defect 4: answers were stored unmasked, and error texts were clipped before masking, so the
    first characters of a key that started near the clip survived."""
    pad = "x" * 171  # the key straddles the 200-character clip of error texts
    escaped = "".join(f"\\u{ord(c):04x}" for c in SECRET).encode()  # JSON escapes: the key once decoded
    by_text(
        srv,
        {
            "answer": Step(text=f"Sure. Your key is {ECHO_KEY}."),
            "refusal": Step(refusal=f"{pad}{ECHO_KEY}"),
            "finish": Step(text="ok", finish_reason=f"stop {ECHO_KEY}"),
            "400": Step(status=400, error_message=f"{pad}{ECHO_KEY}"),
            "400 text": Step(status=400, raw=f"<html>{pad}{ECHO_KEY}</html>".encode()),
            "bad body": Step(raw=f"<html>{'y' * 40}{ECHO_KEY}</html>".encode()),
            "part": Step(text=f"Incorrect API key provided: {SECRET[:14]}*****{SECRET[-4:]}"),
            "escaped": Step(raw=b'{"choices": [{"message": {"content": "%s"}}]}' % escaped),
        },
    )
    caplog.set_level(logging.DEBUG)
    cache = tmp_path / "cache"
    asked = ("answer", "refusal", "finish", "400", "400 text", "bad body", "part", "escaped")
    batch = client(srv, cache).run(ask(*asked))
    results = [vars(r) for r in batch.results]
    assert results[0]["text"] == "Sure. Your key is ***." and results[1]["error"].endswith("***")
    assert results[7]["text"] == "***" and results[5]["error"].startswith("invalid response: not JSON")
    assert results[3]["error"] == f"http 400: {pad}***" and results[6]["text"].startswith(
        "Incorrect API key provided: ***"
    )
    again = client(srv, cache).run(ask("answer", "refusal", "finish", "part"))
    assert all(r.cached for r in again.results)
    srv.default = Step(status=401, error_message=f"invalid key {pad}{ECHO_KEY}")
    with pytest.raises(ChatServiceError) as info:
        client(srv).run(ask("fatal"))
    assert str(info.value).endswith(f"server says: invalid key {pad}***")  # masked, then clipped
    shown = json.dumps([results, [vars(r) for r in again.results]]) + str(info.value) + caplog.text
    assert not leaks(SECRET, cache, text=shown)


def test_a_redirect_with_a_hostile_location_is_one_clear_error(srv: OpenAIServer) -> None:
    """A Location that is no URL raised ValueError out of the batch; one holding the key printed it."""
    for location, shown in (
        ("http://[::1", "to elsewhere"),
        (f"http://{ECHO_KEY}.example/v1", "to ***.example"),
        (f"http://user:{ECHO_KEY}@other.example/v1", "to other.example"),
    ):
        srv.default = Step(status=302, headers={"Location": location})
        with pytest.raises(ChatServiceError, match="redirects") as info:
            client(srv).run(ask("q"))
        assert shown in str(info.value) and not leaks(SECRET, text=str(info.value))


def test_a_cache_entry_written_before_masking_is_masked_when_read(srv: OpenAIServer, tmp_path: Path) -> None:
    client(srv, tmp_path / "cache").run(ask("q"))
    (entry,) = (tmp_path / "cache").rglob("*.bin")
    entry.write_text(json.dumps({**json.loads(entry.read_text()), "text": f"the key: {SECRET}"}))
    hit = client(srv, tmp_path / "cache").run(ask("q")).results[0]
    assert hit.cached and hit.text == "the key: ***"
    c = client(srv, tmp_path / "cache")
    assert c.lookup(ask("q")[0]).text == "the key: ***"  # type: ignore[union-attr]


# --------------------------------------------------------------------------- unusable answers


def letter(text: str) -> bool:
    return text.strip() in ("A", "B")


def test_an_answer_the_caller_cannot_use_is_never_final(srv: OpenAIServer, tmp_path: Path) -> None:
    """Friction 8: an unusable answer was a final cache hit, replayed by every re-run, which could
    therefore never mend it."""
    srv.script = [Step(text="I think maybe"), Step(text="A")]
    cache = tmp_path / "cache"
    first = client(srv, cache, max_concurrency=1).run(ask("q1", "q2", accept=letter))
    assert [r.text for r in first.results] == ["I think maybe", "A"]
    again = client(srv, cache).run(ask("q1", "q2", accept=letter))  # the same server: asked again
    assert [(r.text, r.cached) for r in again.results] == [("echo: q1", False), ("A", True)]
    assert again.requests_sent == 1 and again.cache_hits == 1 and srv.hits == 3
    srv.script = [Step(text="B")]  # the server was fixed: the next run mends the answer
    fixed = client(srv, cache).run(ask("q1", "q2", accept=letter))
    assert [(r.text, r.cached) for r in fixed.results] == [("B", False), ("A", True)] and srv.hits == 4
    final = client(srv, cache).run(ask("q1", "q2", accept=letter))
    assert all(r.cached for r in final.results) and final.requests_sent == 0 and srv.hits == 4


def test_an_unusable_cached_answer_is_kept_when_asking_again_fails(srv: OpenAIServer, tmp_path: Path) -> None:
    srv.default = Step(text="no letter here")
    client(srv, tmp_path / "cache").run(ask("q", "r", accept=letter))
    srv.default = Step(status=503)  # the server is failing (or gone): nothing is lost
    batch = client(srv, tmp_path / "cache").run(ask("q", accept=letter))
    kept = batch.results[0]
    assert (batch.requests_sent, batch.cache_hits, batch.failed) == (1, 1, 0)
    assert (kept.text, kept.error, kept.cached) == ("no letter here", None, True) and srv.hits == 3
    assert (kept.attempts, srv.hits) == (1, 3)
    assert client(srv, tmp_path / "cache").lookup(ask("q", accept=letter)[0]) is None  # not final
    assert client(srv, tmp_path / "cache").lookup(ask("q")[0]).text == "no letter here"  # type: ignore[union-attr]
    srv.default = Step(text="A")
    mended = client(srv, tmp_path / "cache").run(ask("q", accept=letter)).results[0]
    assert (mended.text, mended.cached) == ("A", False)
    srv.default = Step(refusal="I can't help with that.")  # a refusal is the model's answer: final
    client(srv, tmp_path / "cache").run(ask("s", accept=lambda t: False))
    assert client(srv, tmp_path / "cache").run(ask("s", accept=lambda t: False)).results[0].cached
