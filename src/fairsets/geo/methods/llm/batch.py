"""Asking the endpoint: one batch of captions through :class:`~fairsets.fetch.chat.ChatClient`,
under the geo error policy.

The HTTP side — concurrency cap, retries honouring ``Retry-After``, the key kept out of every
text, redirects refused, fatal answers (401/403/404/405) stopping the batch with the first one —
is the shared chat client's. What is geo's own lives here:

* :class:`_AnswerClient` keeps the cache layout this method has always had: the key is (model,
  prompt, temperature, max_tokens, caption), never the endpoint; the value is the raw answer
  text (so a parser fix applies to cached runs). An answer :func:`~.answers.parse_answer` cannot
  read (a malformed answer) is not cached: it is never final, the next run asks it again (and a
  malformed answer an earlier version cached is asked again too). Entries written by earlier
  versions stay valid: an upgraded run over cached captions sends no request.
* :meth:`_Requests._ask_all` applies the policy described in :mod:`fairsets.geo.methods.llm`:
  abort after ``abort_after`` captions failing in a row, "could not reach the llm endpoint" when
  no request got any HTTP response, and a progress bar for large batches.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from ....fetch.chat import ChatBatch, ChatClient, ChatRequest, ChatResult, ChatServiceError
from .answers import MalformedAnswer, parse_answer

__all__ = ["LLMServiceError"]

log = logging.getLogger(__package__)  # the package's logger, as before the split

_PROGRESS_MIN = 50  # captions in a batch before a progress bar is worth drawing
_CACHE_VERSION = 1


class LLMServiceError(ChatServiceError):
    """The endpoint is misconfigured or unusable (bad key, unknown model, unreachable, failing)."""


@dataclass(frozen=True)
class _CaptionRequest(ChatRequest):
    """A chat request that knows the caption it asks about (part of the cache key)."""

    caption: str = ""


def _readable(text: str) -> bool:
    """Whether :func:`parse_answer` reads ``text`` (a country or a "no"): only such answers are cached."""
    try:
        parse_answer(text)
    except MalformedAnswer:
        return False
    return True


class _AnswerClient(ChatClient):
    """The chat client with the geo cache layout: raw answers keyed by prompt and caption."""

    def __init__(self, *args: Any, system: str | None, user: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.system_prompt = system
        self.user_template = user

    def question_key(self, request: ChatRequest) -> dict[str, Any]:
        if not isinstance(request, _CaptionRequest):  # not one of ours: the generic key
            return super().question_key(request)
        return {
            "v": _CACHE_VERSION,
            "model": self.endpoint.model,
            "system": self.system_prompt,
            "user": self.user_template,
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "caption": request.caption,
        }

    def encode_answer(self, result: ChatResult) -> bytes | None:
        return result.text.encode("utf-8") if result.text is not None else None

    def decode_answer(self, raw: bytes) -> ChatResult:
        return ChatResult(text=raw.decode("utf-8"))


class _Requests:
    """The requests of :class:`~fairsets.geo.methods.llm.LLMMethod`, which sets the attributes below
    and provides ``messages``."""

    model: str
    options: dict[str, Any]
    abort_after: int
    temperature: float
    max_tokens: int
    _client: _AnswerClient
    _where: str
    _lock: threading.Lock
    _counts: dict[str, int]

    def _ask_all(self, captions: list[str]) -> tuple[dict[str, str], dict[str, str]]:
        """Raw answers and per-caption errors for ``captions`` (distinct), cache first.

        Raises:
            LLMServiceError: a fatal answer, ``abort_after`` failures in a row, or no HTTP response
                at all.
        """
        from fairsets.core.progress import Progress

        requests = [
            _CaptionRequest(
                self.messages(c),
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                accept=_readable,
                caption=c,
            )
            for c in captions
        ]
        answers: dict[str, str] = {}
        errors: dict[str, str] = {}
        state = {"in_a_row": 0, "got_response": False, "last": ""}
        bar = Progress(self.options.get("progress")) if len(captions) >= _PROGRESS_MIN else Progress(False)

        def on_result(i: int, result: ChatResult) -> None:  # one call at a time (the client's lock)
            advance()
            caption = captions[i]
            if result.text is not None:
                answers[caption] = result.text
                if not result.cached:
                    state["in_a_row"], state["got_response"] = 0, True
                return
            errors[caption] = state["last"] = result.error or "failed"
            if result.refusal is not None:  # the model answered: the server works
                state["in_a_row"], state["got_response"] = 0, True
                return
            state["got_response"] = state["got_response"] or not result.no_response
            state["in_a_row"] += 1
            if self.abort_after and state["in_a_row"] >= self.abort_after:
                if not state["got_response"]:
                    raise self._unreachable(state["last"])
                raise LLMServiceError(
                    f"llm endpoint {self._where} failed {state['in_a_row']} captions in a row "
                    f"(last: {state['last']}); stopping the batch — check that the server is up "
                    f"and serves model {self.model!r}"
                )

        try:
            with bar.stage(f"llm geotagging ({self.model})", len(captions)) as advance:
                batch = self._client.run(requests, on_result)
        except LLMServiceError:
            raise
        except ChatServiceError as exc:  # a misconfiguration: the first fatal answer
            raise LLMServiceError(str(exc)) from None
        self._count(batch)
        sent = [r for r in batch.results if not r.cached]
        if sent and not state["got_response"]:
            raise self._unreachable(state["last"])
        return answers, errors

    def _count(self, batch: ChatBatch) -> None:
        with self._lock:
            self._counts["cache_hits"] += batch.cache_hits
            self._counts["requests"] += batch.requests_sent
            self._counts["retries"] += batch.retries
            self._counts["answered"] += sum(1 for r in batch.results if r.text is not None and not r.cached)
            self._counts["prompt_tokens"] += batch.prompt_tokens
            self._counts["completion_tokens"] += batch.completion_tokens

    def _unreachable(self, last_error: str) -> LLMServiceError:
        return LLMServiceError(
            f"could not reach the llm endpoint {self._where} ({last_error}); is the server running "
            "and base_url right?"
        )
