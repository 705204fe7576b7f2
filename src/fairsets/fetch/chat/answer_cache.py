"""The chat client's answer cache: what a request is cached under, how an answer is stored and read
back, and which cached answers are final.

:class:`CachedAnswers` is the part of :class:`~fairsets.fetch.chat.ChatClient` that reads and writes
its :class:`~fairsets.fetch.cache.DiskCache`. A caller with an on-disk layout of its own
(:mod:`fairsets.geo.methods.llm`) overrides :meth:`~CachedAnswers.question_key`,
:meth:`~CachedAnswers.encode_answer` and :meth:`~CachedAnswers.decode_answer`. The key is never part
of a cache key, and a cached entry's texts are masked when read.

The endpoint's shaping settings (:func:`~fairsets.fetch.chat.shaping.shaping_key`) join the key as
``"shaping"`` only when one is not at its default — in :meth:`~CachedAnswers.cache_key`, so a
subclass's own :meth:`~CachedAnswers.question_key` gets them too — and an endpoint at the defaults
keeps the keys written before the settings existed. A stored answer holds ``option_probs`` only
when it has them (so a default answer is stored as before); read back, each must be a number in
[0, 1] for a choice, or the entry is unreadable (asked again).
"""

from __future__ import annotations

import json
import logging
import math
from typing import TYPE_CHECKING, Any

from ..answers import loads_json
from .answer import token_count
from .exchange import ChatRequest, ChatResult
from .messages import cache_form
from .shaping import shaping_key

if TYPE_CHECKING:
    from ..cache import DiskCache
    from ..redact import Redactor
    from .endpoint import ChatEndpoint

__all__ = ["CachedAnswers"]

log = logging.getLogger("fairsets.fetch.chat.client")  # the chat client's one logger
_STORED = ("text", "finish_reason", "prompt_tokens", "completion_tokens", "error", "refusal")
_TEXTS = ("text", "finish_reason", "error", "refusal")
_PROBS = "option_probs"


def _final(request: ChatRequest, result: ChatResult) -> bool:
    """Whether a cached ``result`` is a final answer to ``request``: not when the request's
    ``accept`` refuses its text (then it is asked again, see :class:`~fairsets.fetch.chat.ChatRequest`)."""
    return result.text is None or request.accept is None or bool(request.accept(result.text))


def _probabilities(value: Any) -> bool:
    """Whether a cached ``option_probs`` is one: a table of choices to numbers in [0, 1]."""
    return isinstance(value, dict) and all(
        isinstance(k, str)
        and isinstance(v, (int, float))
        and not isinstance(v, bool)
        and math.isfinite(v)
        and 0.0 <= v <= 1.0
        for k, v in value.items()
    )


class CachedAnswers:
    """Cache keys, the stored form of an answer and the cached answer read back (a subclass with its
    own on-disk layout overrides the first three). Set by :class:`~fairsets.fetch.chat.ChatClient`:
    ``endpoint``, ``cache`` and ``key_by_endpoint``."""

    endpoint: ChatEndpoint
    cache: DiskCache
    key_by_endpoint: bool

    def question_key(self, request: ChatRequest) -> dict[str, Any]:
        """What was asked: model, messages (images as their SHA-256) and sampling settings."""
        return {
            "model": self.endpoint.model,
            "messages": cache_form(request.messages),
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "seed": request.seed,
        }

    def cache_key(self, request: ChatRequest) -> dict[str, Any]:
        """:meth:`question_key`, plus ``base_url`` when ``key_by_endpoint`` and the endpoint's shaping
        settings when one is not at its default; never the API key."""
        key = self.question_key(request)
        if self.key_by_endpoint:
            key["base_url"] = self.endpoint.base_url
        shaping = shaping_key(self.endpoint, request)
        if shaping is not None:
            key["shaping"] = shaping
        return key

    def encode_answer(self, result: ChatResult) -> bytes | None:
        """The bytes cached for an answer (``None``: do not cache it)."""
        stored: dict[str, Any] = {name: getattr(result, name) for name in _STORED}
        if result.option_probs is not None:
            stored[_PROBS] = result.option_probs
        return json.dumps(stored, ensure_ascii=False).encode("utf-8")

    def decode_answer(self, raw: bytes) -> ChatResult:
        """The answer :meth:`encode_answer` cached; ``ValueError`` for an unreadable entry."""
        data = loads_json(raw, "the chat cache")
        if not isinstance(data, dict) or set(data) - {*_STORED, _PROBS}:
            raise ValueError("not a cached chat answer")
        if any(data.get(n) is not None and not isinstance(data[n], str) for n in _TEXTS):
            raise ValueError("not a cached chat answer")
        counts: dict[str, Any] = {n: token_count(data.get(n)) for n in ("prompt_tokens", "completion_tokens")}
        probs = data.get(_PROBS)
        if probs is not None:
            if not _probabilities(probs):
                raise ValueError("not a cached chat answer")
            counts[_PROBS] = {k: float(v) for k, v in probs.items()}
        return ChatResult(**{**data, **counts})

    def _cached(self, key: dict[str, Any], redact: Redactor) -> ChatResult | None:
        """The answer cached under ``key``; an unreadable entry counts as none (it is asked again).
        Its texts are masked (an entry written before answers were masked may hold the key)."""
        raw = self.cache.get(key)
        if raw is None:
            return None
        try:
            result = self.decode_answer(raw)
        except (UnicodeDecodeError, ValueError, TypeError):
            log.warning("chat: an unreadable cache entry is asked again")
            return None
        for name in _TEXTS:
            value = getattr(result, name)
            if isinstance(value, str):
                setattr(result, name, redact(value))
        result.cached = True
        return result
