"""What is sent for a :class:`~fairsets.fetch.chat.ChatRequest` to one
:class:`~fairsets.fetch.chat.ChatEndpoint`: the JSON body of a chat completion.

* :func:`request_body`: the body (escaped ASCII: a lone surrogate cannot fail);
* :func:`request_fields`: the same body as a dict, before it is written;
* :func:`shaping_key`: what the endpoint's shaping settings add to a request's cache key (``None``
  when every one is at its default, so the keys of a default endpoint are those written before
  the settings existed);
* :func:`top_logprobs`: how many alternatives a request asks log-probabilities for;
* :func:`_body`: the bytes ``json.dumps`` gives, with inline images spliced in rather than scanned.

The endpoint's settings (see :mod:`fairsets.fetch.chat.endpoint`) apply in this order: the token
budget (``reasoning_tokens`` raises it when ``reasoning``) under ``token_limit_field``, the
temperature (the endpoint's, none for ``"server-default"``, else the request's), the seed, the
constraint and log-probabilities (only for a request with ``choices``), then ``extra_body``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .endpoint import SERVER_DEFAULT

if TYPE_CHECKING:
    from .endpoint import ChatEndpoint
    from .exchange import ChatRequest

__all__ = ["grammar", "request_body", "request_fields", "shaping_key", "token_budget", "top_logprobs"]

#: The most alternatives asked for per token (OpenAI's limit, vLLM's default ``--max-logprobs``).
MAX_TOP_LOGPROBS = 20


#: What a base64 data URL is made of; a URL of these only is its own JSON text (nothing to escape).
_DATA_URL = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=:;,-._"


def _body(payload: dict[str, Any]) -> bytes:
    """``json.dumps(payload).encode("ascii")``, with inline images spliced in rather than scanned
    by the encoder (a data URL of plain ASCII is its own JSON text): the same bytes, sooner."""
    import secrets

    urls: list[str] = []
    token = f"fairsets-image-{secrets.token_hex(8)}-"

    def swap(value: Any) -> Any:
        if isinstance(value, dict):
            url = value.get("url")
            if (
                isinstance(url, str)
                and url.startswith("data:")
                and url.isascii()
                and not url.encode("ascii").translate(None, _DATA_URL)  # 25 µs a 56 kB image
            ):
                urls.append(url)
                return {**value, "url": f"{token}{len(urls) - 1}"}
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    text = json.dumps({**payload, "messages": swap(payload["messages"])})
    for i, url in enumerate(urls):
        text = text.replace(f'"{token}{i}"', f'"{url}"', 1)
    return text.encode("ascii")


def top_logprobs(choices: tuple[str, ...]) -> int:
    """Alternatives asked for per token: twice the number of choices, at most 20 — room for the
    variants of one choice (``"A"``, ``" A"``) beside the other choices."""
    return max(1, min(MAX_TOP_LOGPROBS, 2 * len(choices)))


def grammar(choices: tuple[str, ...]) -> str:
    """The GBNF grammar (llama.cpp's server) whose only sentences are ``choices``:
    ``root ::= "A" | "B"``."""

    def literal(text: str) -> str:
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        return '"' + escaped.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") + '"'

    return "root ::= " + " | ".join(literal(c) for c in choices)


def json_schema(choices: tuple[str, ...]) -> dict[str, Any]:
    """``response_format`` asking for ``{"answer": <one of choices>}`` (an object at the root, as
    OpenAI's strict schemas require; Ollama and vLLM take it too)."""
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": list(choices)}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    return {"type": "json_schema", "json_schema": {"name": "answer", "strict": True, "schema": schema}}


def _constraint(endpoint: ChatEndpoint, choices: tuple[str, ...]) -> dict[str, Any]:
    """The field that constrains the answer to ``choices``, in the endpoint's style."""
    style = endpoint.constrain
    if style == "choice":
        return {"structured_outputs": {"choice": list(choices)}}
    if style == "guided_choice":
        return {"guided_choice": list(choices)}
    if style == "grammar":
        return {"grammar": grammar(choices)}
    if style == "json_schema":
        return {"response_format": json_schema(choices)}
    return {}


def token_budget(endpoint: ChatEndpoint, request: ChatRequest) -> int:
    """The token budget sent: the request's, at least ``reasoning_tokens`` for a reasoning model."""
    if endpoint.reasoning:
        return max(request.max_tokens, endpoint.reasoning_tokens)
    return request.max_tokens


def request_fields(endpoint: ChatEndpoint, request: ChatRequest) -> dict[str, Any]:
    """The body :func:`request_body` writes, as a dict (the messages are the request's own list)."""
    payload: dict[str, Any] = {"model": endpoint.model, "messages": request.messages}
    if endpoint.temperature is None:
        payload["temperature"] = request.temperature
    elif endpoint.temperature != SERVER_DEFAULT:
        payload["temperature"] = endpoint.temperature
    payload[endpoint.token_limit_field] = token_budget(endpoint, request)
    if request.seed is not None:
        payload["seed"] = request.seed
    if request.choices:
        payload |= _constraint(endpoint, request.choices)
        if endpoint.logprobs:
            payload |= {"logprobs": True, "top_logprobs": top_logprobs(request.choices)}
    payload |= endpoint.extra_body
    return payload


def shaping_key(endpoint: ChatEndpoint, request: ChatRequest) -> dict[str, Any] | None:
    """What the endpoint's shaping adds to the cache key of ``request``: each setting that changes
    what is sent or what is kept, only when it is not at its default; ``None`` when none is.

    ``on_ignored_constraint`` changes nothing sent and is never part of it; ``constrain``,
    ``logprobs`` and the choices count only for a request with ``choices``.
    """
    key: dict[str, Any] = {}
    if endpoint.extra_body:
        key["extra_body"] = endpoint.extra_body
    if endpoint.token_limit_field != "max_tokens":
        key["token_limit_field"] = endpoint.token_limit_field
    if endpoint.temperature is not None:
        key["temperature"] = endpoint.temperature
    if endpoint.reasoning:
        key["reasoning"] = True
        key["reasoning_tokens"] = endpoint.reasoning_tokens
    if request.choices and (endpoint.constrain != "none" or endpoint.logprobs):
        key["choices"] = list(request.choices)
        if endpoint.constrain != "none":
            key["constrain"] = endpoint.constrain
        if endpoint.logprobs:
            key["logprobs"] = top_logprobs(request.choices)
    return key or None


def request_body(endpoint: ChatEndpoint, request: ChatRequest) -> bytes:
    """The JSON body that asks ``endpoint`` for ``request`` (escaped ASCII: a lone surrogate cannot fail)."""
    return _body(request_fields(endpoint, request))
