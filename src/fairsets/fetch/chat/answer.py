"""Reading what a chat server sent back: a chat completion, or the message of an error body.

Everything here is untrusted: a body can be nested too deeply to decode, carry token counts that are
no counts (``NaN``, ``Infinity``, ``-5``, ``1e300``, ``true``), hold lone surrogates, or echo the
API key. So:

* JSON is decoded by the one decoder of untrusted answers,
  :func:`fairsets.fetch.answers.loads_json` (deep nesting, long numbers and bad UTF-8 become a
  :class:`BadCompletion`: that request fails as an invalid response, the batch goes on);
* a token count is a whole number from 0 up to 2**63 - 1, anything else is ``None`` (the answer is
  kept, the count unknown);
* every text taken from the server — the answer, a refusal, the finish reason, an error message,
  the quoted start of a body that is not JSON — goes through ``redact`` (a
  :class:`~fairsets.fetch.redact.Redactor`) *before* it is clipped, so neither the whole key nor a
  piece of it survives in a table, a cache entry, a log line or an error.

API:
    * ``BadCompletion(Exception)`` — a 200 whose body is not a chat completion
    * ``parse_completion(raw, redact, endpoint=None, choices=None) -> dict`` — the fields of a
      :class:`~fairsets.fetch.chat.ChatResult` (``text``, ``finish_reason``, token counts,
      ``error``, ``refusal``, ``option_probs``), read as the endpoint's shaping asks
      (:mod:`fairsets.fetch.chat.answer_forms`): thinking cut (``reasoning``), a JSON answer read
      back to its choice (``constrain = "json_schema"``), the choices' probabilities
      (``logprobs``); ``choices`` are the request's (``ChatRequest.choices``)
    * ``error_detail(body, redact) -> str`` — the message of an error body, masked, then clipped
    * ``token_count(value) -> int | None`` — a reported count, or None when it is no count
    * ``clip(text, limit) -> str``
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..answers import BadAnswer, loads_json
from .answer_forms import option_probs, strip_thinking, unwrap_json_answer

if TYPE_CHECKING:
    from .endpoint import ChatEndpoint

__all__ = ["BadCompletion", "clip", "error_detail", "parse_completion", "token_count"]

Redact = Callable[[str], str]

#: The largest token count taken as one (Parquet's int64).
_MAX_COUNT = 2**63 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")


class BadCompletion(Exception):
    """A 200 whose body is not a chat completion."""


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters (the last one an ellipsis) when longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def token_count(value: Any) -> int | None:
    """A token count as reported, or ``None`` when it is none: not a number, a bool, NaN, an
    infinity, a fraction, negative or beyond int64."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not value.is_integer():  # NaN and the infinities too
        return None
    count = int(value)
    return count if 0 <= count <= _MAX_COUNT else None


def _text(value: Any, redact: Redact) -> Any:
    """A string from the server made safe to keep: lone surrogates (valid JSON escapes, not valid
    Unicode text) replaced by U+FFFD, the key masked; anything else as is."""
    if not isinstance(value, str):
        return value
    if not value.isascii():
        value = _SURROGATE.sub("\ufffd", value)
    return redact(value)


def error_detail(body: bytes, redact: Redact) -> str:
    """The message of an OpenAI-style error body (``{"error": {"message": …}}``), else its text;
    masked, then on one line, then clipped to 200 characters."""
    try:
        data = loads_json(body, "chat endpoint", redact=redact)
    except BadAnswer as exc:
        return clip(_one_line(exc.start), 200)
    message: Any = None
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            message = next(
                (err[n] for n in ("message", "detail", "error") if isinstance(err.get(n), str)), None
            )
        elif isinstance(err, str):
            message = err
        if message is None and isinstance(data.get("detail"), str):
            message = data["detail"]
    if message is None:
        return clip(_one_line(redact(body[:65536].decode("utf-8", "replace"))), 200)
    return clip(_text(message, redact), 200)


def parse_completion(
    raw: bytes,
    redact: Redact,
    endpoint: ChatEndpoint | None = None,
    choices: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """The fields of a :class:`~fairsets.fetch.chat.ChatResult` read from a chat completion body.

    Args:
        raw: the body.
        redact: masks the key in every text kept.
        endpoint: the endpoint asked; its shaping says how the answer is read (``None``: as sent).
        choices: the request's allowed answers (``ChatRequest.choices``): a JSON-schema answer is
            read back to its choice, and ``option_probs`` is read, only for a request with them.

    Raises:
        BadCompletion: not JSON (undecodable, nested too deeply…), no ``choices[0].message``, or
            content that is not text; the message quotes the body masked, then clipped.
    """
    try:
        data = loads_json(raw, "chat endpoint", redact=redact)
    except BadAnswer as exc:
        nested = " (nested too deeply)" if exc.nested else ""
        raise BadCompletion(f"not JSON{nested}: {clip(_one_line(exc.start), 60)!r}") from None
    try:
        choice = data["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise BadCompletion("no choices[0].message.content") from None
    if not isinstance(message, dict):
        raise BadCompletion("choices[0].message is not an object")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    finish = choice.get("finish_reason") if isinstance(choice, dict) else None
    fields: dict[str, Any] = {
        "text": None,
        "finish_reason": clip(_text(finish, redact), 64) if isinstance(finish, str) else None,
        "prompt_tokens": token_count(usage.get("prompt_tokens")),
        "completion_tokens": token_count(usage.get("completion_tokens")),
        "error": None,
        "refusal": None,
    }
    reasoning = endpoint is not None and endpoint.reasoning
    content, refusal = _text(message.get("content"), redact), _text(message.get("refusal"), redact)
    if content is None and reasoning and _thought(message):
        content = ""  # a reasoning parser kept the thinking apart, and the budget ended inside it
    if isinstance(refusal, str) and refusal:
        fields["refusal"] = refusal
        fields["error"] = f"refused: {clip(refusal, 200)}"
    elif isinstance(content, str):
        fields["text"] = _shaped(content, endpoint, choices)
    elif finish == "content_filter":
        fields["error"] = "refused: content filter"
    else:
        raise BadCompletion(f"choices[0].message.content is {type(content).__name__}, not text")
    if endpoint is not None and endpoint.logprobs and choices and isinstance(choice, dict):
        probs = option_probs(choice.get("logprobs"), tuple(choices), after_thinking=reasoning)
        if probs is not None:
            fields["option_probs"] = probs
    return fields


def _thought(message: dict[str, Any]) -> bool:
    """Whether a message carries thinking apart from its content (vLLM's and llama.cpp's
    ``reasoning_content``, Ollama's and others' ``reasoning``)."""
    return any(isinstance(message.get(n), str) for n in ("reasoning_content", "reasoning"))


def _shaped(text: str, endpoint: ChatEndpoint | None, choices: tuple[str, ...] | None) -> str:
    """The answer's text as the caller uses it: thinking cut, a JSON answer read back."""
    if endpoint is None:
        return text
    if endpoint.reasoning:
        text = strip_thinking(text)
    if endpoint.constrain == "json_schema" and choices:
        text = unwrap_json_answer(text)
    return text
