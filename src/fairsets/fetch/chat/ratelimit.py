"""Request and token rate limits of one chat endpoint, enforced before each request is sent.

Hosted APIs limit requests and tokens per minute and answer 429 beyond; a client that only honours
``Retry-After`` afterwards wastes requests and retries. :class:`RateLimits` holds a request back
until sending it keeps both limits:

* ``requests_per_minute`` (L): at most L requests start in any window of :data:`PERIOD` seconds
  (a log of start times), and starts are spaced at least ``PERIOD / L`` apart, so a server that
  counts in fixed minutes, in a sliding minute or in shorter slices of the minute (as some hosted
  APIs quantise their limits) never sees more than its share. Retries count: each one is a request.
* ``tokens_per_minute`` (T): the tokens asked for in any window of :data:`PERIOD` seconds stay
  at most T. A request's tokens are estimated before sending as :func:`estimate_tokens` gives:
  its text's characters ÷ 4 (rounded up), plus :data:`IMAGE_TOKENS` per image, plus the answer's
  budget (the token limit sent); a request estimated above T alone is sent when the window is
  empty (it could never be sent otherwise).

Both count a window longer than :data:`PERIOD` by 1 % of it, and at least a quarter second
(:func:`window`): a request reaches the server a little after it starts, and not always by the same
delay, so a window that is exact at the client could hold one request too many at the server.
Both wait without blocking the event loop and wake early when the batch stops.
"""

from __future__ import annotations

import asyncio
import collections
import math
import time
from typing import TYPE_CHECKING

from .messages import image_count, text_length

if TYPE_CHECKING:
    from .endpoint import ChatEndpoint
    from .exchange import ChatRequest

__all__ = ["IMAGE_TOKENS", "PERIOD", "RateLimits", "estimate_tokens", "window"]

#: The window the limits count in, in seconds (a minute).
PERIOD = 60.0
#: How much longer than :data:`PERIOD` the client's window is (network jitter at the server): this
#: share of the period, and at least :data:`MIN_SLACK` seconds.
SLACK = 0.01
MIN_SLACK = 0.25


def window() -> float:
    """The seconds the limits count in: :data:`PERIOD` and its slack."""
    return PERIOD + max(SLACK * PERIOD, MIN_SLACK)


#: Tokens counted per image: a 512 × 512 image at OpenAI's high detail (85 + 4 × 170 tiles).
IMAGE_TOKENS = 765


def estimate_tokens(request: ChatRequest, budget: int) -> int:
    """The tokens ``request`` is counted as: ⌈text characters ÷ 4⌉ + :data:`IMAGE_TOKENS` per image +
    ``budget`` (the answer's token limit)."""
    chars, images = text_length(request.messages), image_count(request.messages)
    return math.ceil(chars / 4) + IMAGE_TOKENS * images + max(0, int(budget))


class RateLimits:
    """The limits of one endpoint for one batch (``None`` each: unlimited)."""

    def __init__(self, requests_per_minute: int | None, tokens_per_minute: int | None) -> None:
        self.rpm = requests_per_minute
        self.tpm = tokens_per_minute
        self._starts: collections.deque[float] = collections.deque()
        self._tokens: collections.deque[tuple[float, int]] = collections.deque()
        self._token_sum = 0
        self._lock = asyncio.Lock()  # one waiter at a time: requests start in the order they asked

    @classmethod
    def of(cls, endpoint: ChatEndpoint) -> RateLimits | None:
        """The endpoint's limits, or ``None`` when it sets none."""
        if endpoint.requests_per_minute is None and endpoint.tokens_per_minute is None:
            return None
        return cls(endpoint.requests_per_minute, endpoint.tokens_per_minute)

    def _delay(self, now: float, tokens: int) -> float:
        """Seconds until a request of ``tokens`` may start (0: now)."""
        span = window()
        while self._starts and self._starts[0] <= now - span:
            self._starts.popleft()
        while self._tokens and self._tokens[0][0] <= now - span:
            self._token_sum -= self._tokens.popleft()[1]
        delay = 0.0
        if self.rpm is not None and self._starts:
            spacing = self._starts[-1] + span / self.rpm - now
            full = self._starts[0] + span - now if len(self._starts) >= self.rpm else 0.0
            delay = max(delay, spacing, full)
        if self.tpm is not None and self._tokens and self._token_sum + tokens > self.tpm:
            need = self._token_sum + tokens - self.tpm  # tokens that must leave the window first
            freed = 0
            for t, n in self._tokens:
                freed += n
                if freed >= need:
                    delay = max(delay, t + span - now)
                    break
        return max(0.0, delay)

    async def acquire(self, tokens: int, stop: asyncio.Event) -> bool:
        """Wait until a request of ``tokens`` may start and count it; ``False`` if ``stop`` was set first."""
        async with self._lock:
            while True:
                now = time.monotonic()
                delay = self._delay(now, tokens)
                if delay <= 0:
                    self._starts.append(now)
                    self._tokens.append((now, tokens))
                    self._token_sum += tokens
                    return True
                try:
                    await asyncio.wait_for(stop.wait(), delay)
                    return False
                except asyncio.TimeoutError:
                    pass
