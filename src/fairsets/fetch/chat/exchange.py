"""What a caller gives the chat client and gets back: :class:`ChatRequest`, :class:`ChatResult`, a
batch's :class:`ChatBatch`, and :class:`ChatServiceError`, the error that stops a whole batch.

How they are sent, cached and retried: :mod:`fairsets.fetch.chat.client`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .messages import Message

__all__ = ["ChatBatch", "ChatRequest", "ChatResult", "ChatServiceError"]


class ChatServiceError(RuntimeError):
    """The endpoint is unusable for every request: bad key, unknown model, wrong base_url, redirect."""


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion to ask for (``seed`` is sent only when set).

    ``accept``: whether an answer's text is usable by the caller (a vote reads a letter, a judge a
    verdict). An answer it refuses is returned and cached, but never final: a later batch asks the
    request again and keeps the cached answer only when asking fails (no answer, an error), so a
    re-run can mend it without losing it. Not part of the request sent or of its cache key.

    ``choices``: the only answers the question allows (a vote's option letters), or ``None`` for a
    free answer. An endpoint that constrains answers (``constrain``) sends them as its server's
    constraint, and one that asks for log-probabilities reads each choice's probability
    (``ChatResult.option_probs``).
    """

    messages: list[Message]
    temperature: float = 0.0
    max_tokens: int = 512
    seed: int | None = None
    choices: tuple[str, ...] | None = None
    accept: Callable[[str], bool] | None = field(default=None, compare=False, repr=False)


@dataclass
class ChatResult:
    """The outcome of one request: ``text`` or an ``error``, never both.

    ``no_response`` tells a request that never got an HTTP answer (refused, unknown host,
    timeout, dropped connection) from one the server answered with an error.

    ``option_probs``: for a request with ``choices`` to an endpoint that asks for
    log-probabilities, the probability the server gave each choice as the answer's first token
    (``None``: not asked, or the server returned none).
    """

    text: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None
    refusal: str | None = None
    cached: bool = False
    attempts: int = 0
    no_response: bool = False
    option_probs: dict[str, float] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class ChatBatch:
    """Results in request order, with the batch's totals."""

    results: list[ChatResult]
    requests_sent: int = 0
    retries: int = 0
    cache_hits: int = 0
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens summed over the results whose server reported them (cached ones too)."""
        return sum(r.prompt_tokens or 0 for r in self.results)

    @property
    def completion_tokens(self) -> int:
        """Completion tokens summed like :attr:`prompt_tokens`."""
        return sum(r.completion_tokens or 0 for r in self.results)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.results if r.error is not None)
