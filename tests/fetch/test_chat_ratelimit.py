"""Rate limits of an endpoint (``requests_per_minute``, ``tokens_per_minute``), enforced before
sending: a loopback server that counts the requests in every window of the limit's period never
sees more than the limit, retries included, and a batch that stops wakes the requests held back.

The period is a minute in use; here it is shortened (``ratelimit.PERIOD``) so a test takes seconds.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator

import pytest

import fairsets.fetch.chat.ratelimit as ratelimit
from fairsets.fetch.chat import ChatClient, ChatEndpoint, ChatRequest, user
from openai_server import OpenAIServer, Step

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def srv() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


def most_in_a_window(times: list[float], period: float) -> int:
    """The most arrival times in any half-open window [t, t + period) starting at an arrival."""
    times = sorted(times)
    return max(sum(1 for u in times if t <= u < t + period) for t in times)


def ask(srv: OpenAIServer, n: int, **limits: int) -> list:
    ep = ChatEndpoint(base_url=srv.base_url, model="m", api_key_env="", max_concurrency=16, **limits)
    return (
        ChatClient(ep, backoff=0.01)
        .run([ChatRequest([user(f"q{i}")], max_tokens=8) for i in range(n)])
        .results
    )


def test_requests_per_minute_is_never_exceeded_in_any_window(
    srv: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ratelimit, "PERIOD", 1.0)
    srv.default = Step(delay=0.05)
    t0 = time.monotonic()
    results = ask(srv, 25, requests_per_minute=10)
    took = time.monotonic() - t0
    assert all(r.ok for r in results) and srv.hits == 25
    assert most_in_a_window(srv.times, 1.0) <= 10
    assert took >= 2.3  # 25 starts spaced 0.1 s apart: the limit paces, it does not only cap
    # spaced evenly: no two starts closer than the period ÷ limit (less the clock's jitter)
    gaps = [b - a for a, b in itertools.pairwise(sorted(srv.times))]
    assert min(gaps) >= 0.1 - 0.02


def test_retries_count_against_the_request_limit(srv: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ratelimit, "PERIOD", 1.0)
    srv.script = [Step(status=503)] * 6
    results = ask(srv, 8, requests_per_minute=5)
    assert all(r.ok for r in results) and srv.hits == 14
    assert most_in_a_window(srv.times, 1.0) <= 5


def test_tokens_per_minute_is_never_exceeded(srv: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ratelimit, "PERIOD", 1.0)
    request = ChatRequest([user("q0")], max_tokens=8)
    cost = math.ceil(len("q0") / 4) + 8  # the documented estimate: text ÷ 4, no image, the budget
    assert ratelimit.estimate_tokens(request, 8) == cost
    results = ask(srv, 12, tokens_per_minute=3 * cost)
    assert all(r.ok for r in results)
    assert most_in_a_window(srv.times, 1.0) <= 3
    assert max(srv.times) - min(srv.times) >= 3.0  # 12 requests, 3 per period


def test_an_image_counts_as_its_documented_tokens() -> None:
    request = ChatRequest([user("x" * 40, images=[b"\xff\xd8jpeg"])], max_tokens=16)
    assert ratelimit.estimate_tokens(request, 16) == 10 + ratelimit.IMAGE_TOKENS + 16


def test_a_stopped_batch_wakes_the_requests_held_back(
    srv: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ratelimit, "PERIOD", 30.0)  # the second request would wait 30 s
    ep = ChatEndpoint(
        base_url=srv.base_url, model="m", api_key_env="", max_concurrency=4, requests_per_minute=1
    )
    t0 = time.monotonic()
    with ChatClient(ep).stream([ChatRequest([user(f"q{i}")]) for i in range(4)]) as answers:
        for _i, result in answers:
            assert result.ok
            break
    assert time.monotonic() - t0 < 5 and srv.hits == 1
