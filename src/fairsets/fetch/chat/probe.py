"""What one chat endpoint can do, asked of the server itself: :func:`probe_endpoint` and
:func:`require_constraint`.

:func:`probe_endpoint` sends a handful of small requests (no cache) and returns a
:class:`ProbeReport`:

* **answers**: a plain question gets a text answer (else the error, and nothing more is asked);
* **latency**: the median of ``samples`` such requests, one at a time (seconds, request sent to
  answer read);
* **constraint** (only when the endpoint's ``constrain`` is not ``"none"``): a question built so
  that a model left free answers *outside* the allowed set — it asks for a fruit's name while the
  choices are ``A`` and ``B`` — is sent with the constraint. ``"obeyed"``: the answer is one of the
  choices; ``"ignored"``: it is not (the server dropped the field: vLLM 0.12 drops
  ``guided_choice``, most servers drop fields they do not know); ``"unsupported"``: the server
  refused the request (HTTP 4xx, e.g. llama.cpp for a grammar it cannot parse); ``"unknown"``: no
  answer for another reason; ``"not asked"``: the endpoint sets no constraint;
* **logprobs**: a two-choice question asking for log-probabilities (whatever the endpoint's
  ``logprobs``: the report says whether turning it on would work) comes back with them;
* **suggested concurrency**, with its rule in ``concurrency_rule``:

  - an endpoint with a rate limit (hosted APIs): Little's law, ``ceil(rate per second × median
    latency)`` in flight keeps the rate without queueing behind it; the rate is
    ``requests_per_minute``, or ``tokens_per_minute`` divided by the tokens of one probe request
    (prompt + completion as the server counted them), whichever is lower;
  - otherwise ``burst`` identical requests are sent at once: when the server answers them in
    under 4/3 of one request's latency it batches them (vLLM, SGLang: hundreds in flight is
    usual) and :data:`BATCHING_START` is suggested, to raise while latency holds; else it served
    about ``burst × latency / wall time`` at once — its parallel slots (Ollama's
    ``OLLAMA_NUM_PARALLEL``, llama.cpp's ``--parallel``) — and that is suggested.

:func:`require_constraint` asks the constraint question alone before a batch that relies on it,
and raises :class:`~fairsets.fetch.chat.ChatServiceError` (one line naming the annotator) when the
constraint is not obeyed and the endpoint's ``on_ignored_constraint`` is ``"fail"``; with
``"parse"`` it logs a warning and the answers are read as free text.

Every server text in a report (an error, an answer quoted) is masked by the client, put on one
line and clipped; never printed as markup by the command (``fairsets annotate probe``).
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from dataclasses import dataclass

from .client import ChatClient
from .endpoint import ChatEndpoint
from .exchange import ChatRequest, ChatResult, ChatServiceError
from .messages import user

__all__ = [
    "BATCHING_START",
    "CONSTRAINT_QUESTION",
    "ProbeReport",
    "constraint_support",
    "probe_endpoint",
    "require_constraint",
]

log = logging.getLogger(__name__)

#: The question a free model answers outside its choices (``A``, ``B``).
CONSTRAINT_QUESTION = (
    "Do not answer with a letter. Reply with exactly one English word: the name of a fruit, "
    "for example banana."
)
_CHOICES = ("A", "B")
_PLAIN_QUESTION = "Reply with the single word: ready"
_LOGPROB_QUESTION = "Is the sky blue on a clear day? A: yes. B: no. Answer with a single letter."
#: In flight suggested for a server that batches (vLLM, SGLang): a start, to raise while latency holds.
BATCHING_START = 64
#: A burst answered within this factor of one request's latency was served all at once.
_BATCHED = 4 / 3
_MAX_CONCURRENCY = 1024


@dataclass(frozen=True)
class ProbeReport:
    """What :func:`probe_endpoint` found (see the module docstring for each field's rule)."""

    name: str
    where: str
    answers: bool
    error: str | None = None
    constraint: str = "not asked"
    constraint_detail: str = ""
    logprobs: bool = False
    latency: float | None = None
    samples: int = 0
    suggested_concurrency: int | None = None
    concurrency_rule: str = ""


def _line(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _client(endpoint: ChatEndpoint, retries: int = 1) -> ChatClient:
    return ChatClient(endpoint, max_retries=retries, backoff=0.5, max_wait=5.0)


def _ask(endpoint: ChatEndpoint, request: ChatRequest) -> tuple[ChatResult, float]:
    """One request, no cache: its result and the seconds it took (``ChatServiceError`` raised)."""
    start = time.perf_counter()
    result = _client(endpoint).run([request]).results[0]
    return result, time.perf_counter() - start


def constraint_support(endpoint: ChatEndpoint) -> tuple[str, str]:
    """``(status, detail)`` of the endpoint's constraint: ``"not asked"``, ``"obeyed"``,
    ``"ignored"``, ``"unsupported"`` or ``"unknown"`` (see the module docstring); ``detail`` quotes
    the answer or the error, masked, on one line, clipped.

    Raises:
        ChatServiceError: the endpoint is unusable (a refused key, an unknown model, a redirect).
    """
    if endpoint.constrain == "none":
        return "not asked", ""
    request = ChatRequest([user(CONSTRAINT_QUESTION)], max_tokens=16, choices=_CHOICES)
    result, _ = _ask(endpoint, request)
    if result.error is not None:
        status = "unsupported" if result.error.startswith("http 4") else "unknown"
        return status, _line(result.error)
    text = (result.text or "").strip()
    if text in _CHOICES:
        return "obeyed", f"answered {text!r}"
    return "ignored", f"answered {_line(text, 40)!r} where only A or B was allowed"


def require_constraint(endpoint: ChatEndpoint) -> str:
    """Check, before a batch, that the server obeys the endpoint's ``constrain`` (nothing is asked
    when it is ``"none"``): the status of :func:`constraint_support`.

    Raises:
        ChatServiceError: the constraint is not obeyed and ``on_ignored_constraint`` is ``"fail"``
            (one line: the annotator, what the server did, the fix); or the endpoint is unusable.
    """
    status, detail = constraint_support(endpoint)
    if status in ("not asked", "obeyed"):
        return status
    did = {"ignored": "ignores", "unsupported": "refuses", "unknown": "did not answer a test of"}[status]
    text = (
        f"annotator {endpoint.label}: the server at {endpoint.where} {did} constrain = "
        f"{endpoint.constrain!r} ({detail})"
    )
    if endpoint.on_ignored_constraint == "parse":
        log.warning('%s; its answers are read as free text (on_ignored_constraint = "parse")', text)
        return status
    raise ChatServiceError(
        f"{text}; set constrain to the style the server obeys (choice: vLLM 0.12+, guided_choice: "
        "older vLLM, grammar: llama.cpp, json_schema: Ollama or OpenAI; fairsets annotate probe "
        'tells), or on_ignored_constraint = "parse" to read free answers'
    )


def _logprob_support(endpoint: ChatEndpoint) -> bool:
    asking = endpoint.model_copy(update={"logprobs": True, "constrain": "none"})
    request = ChatRequest([user(_LOGPROB_QUESTION)], max_tokens=16, choices=_CHOICES)
    result, _ = _ask(asking, request)
    return result.error is None and result.option_probs is not None


def _rate_per_minute(endpoint: ChatEndpoint, tokens: int | None) -> tuple[float, str] | None:
    """The request rate the endpoint's limits allow, with the words saying which limit."""
    rates: list[tuple[float, str]] = []
    if endpoint.requests_per_minute:
        rates.append(
            (float(endpoint.requests_per_minute), f"requests_per_minute {endpoint.requests_per_minute}")
        )
    if endpoint.tokens_per_minute and tokens:
        rate = endpoint.tokens_per_minute / tokens
        rates.append((rate, f"tokens_per_minute {endpoint.tokens_per_minute} / {tokens} tokens a request"))
    return min(rates) if rates else None


def _concurrency(
    endpoint: ChatEndpoint, latency: float, tokens: int | None, burst: int
) -> tuple[int | None, str]:
    limit = _rate_per_minute(endpoint, tokens)
    if limit is not None:
        rate, which = limit
        n = min(_MAX_CONCURRENCY, max(1, math.ceil(rate / 60 * latency)))
        return n, (
            f"{n} = ceil({which} = {rate:.4g}/min ÷ 60 × median latency {latency:.3g} s): "
            "requests in flight that keep the rate limit busy (Little's law)"
        )
    if burst < 2:
        return None, "not measured (no rate limit, and no burst sent)"
    burst_endpoint = endpoint.model_copy(update={"max_concurrency": burst})
    request = ChatRequest([user(_PLAIN_QUESTION)], max_tokens=16)
    start = time.perf_counter()
    batch = _client(burst_endpoint, retries=0).run([request] * burst)
    wall = time.perf_counter() - start
    if batch.failed:
        return None, f"not measured: {batch.failed} of {burst} requests sent at once failed"
    if wall <= _BATCHED * latency:
        return BATCHING_START, (
            f"{burst} requests sent at once took {wall:.3g} s, one alone {latency:.3g} s: the server "
            f"batches (vLLM, SGLang serve hundreds); start at {BATCHING_START} and raise it while "
            "latency holds"
        )
    parallel = min(burst, max(1, round(burst * latency / wall)))
    return parallel, (
        f"{parallel} = {burst} requests × {latency:.3g} s alone ÷ {wall:.3g} s at once: the "
        "requests the server serves in parallel (its slots: Ollama's OLLAMA_NUM_PARALLEL, "
        "llama.cpp's --parallel)"
    )


def probe_endpoint(endpoint: ChatEndpoint, *, samples: int = 3, burst: int = 8) -> ProbeReport:
    """Ask the server what it can do (see the module docstring); nothing is cached.

    Args:
        endpoint: the endpoint to probe.
        samples: plain requests sent one at a time to measure latency (1 or more).
        burst: requests sent at once to measure parallelism when the endpoint has no rate limit
            (0 or 1: not measured).

    Never raises for the server: a refused key, an unknown model or an unreachable host is the
    report's ``error``.
    """
    name, where = endpoint.label, endpoint.where
    plain = ChatRequest([user(_PLAIN_QUESTION)], max_tokens=16)
    times: list[float] = []
    tokens: int | None = None
    try:
        for _ in range(max(1, samples)):
            result, seconds = _ask(endpoint, plain)
            if result.error is not None:
                return ProbeReport(name, where, answers=False, error=_line(result.error, 200))
            times.append(seconds)
            if tokens is None and result.prompt_tokens is not None:
                tokens = result.prompt_tokens + (result.completion_tokens or 0)
        constraint, detail = constraint_support(endpoint)
        logprobs = _logprob_support(endpoint)
        latency = statistics.median(times)
        suggested, rule = _concurrency(endpoint, latency, tokens, burst)
    except ChatServiceError as exc:
        return ProbeReport(name, where, answers=bool(times), error=_line(str(exc), 200))
    return ProbeReport(
        name,
        where,
        answers=True,
        constraint=constraint,
        constraint_detail=detail,
        logprobs=logprobs,
        latency=latency,
        samples=len(times),
        suggested_concurrency=suggested,
        concurrency_rule=rule,
    )
