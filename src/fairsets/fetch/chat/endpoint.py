"""Where a chat model lives: :class:`ChatEndpoint`, one table of ``annotators.toml``.

An endpoint is any server speaking the OpenAI chat-completions API (vLLM, llama.cpp's server,
Ollama, a hosted API). The API key is never part of the endpoint: ``api_key_env`` holds the
*name* of the environment variable the key is read from when a batch starts.

Usage::

    ep = ChatEndpoint.from_dict({"base_url": "http://127.0.0.1:8000/v1", "model": "qwen2-vl"})
    ep.chat_url   # 'http://127.0.0.1:8000/v1/chat/completions'

Request shaping: servers differ in what they accept, so an endpoint can say how its requests are
written (:mod:`fairsets.fetch.chat.shaping` writes them, :mod:`fairsets.fetch.chat.answer` reads
the answers). Every setting below is off by default, and a request to an endpoint that leaves them
all off is the same, byte for byte, as before they existed (so are its cache keys):

* ``extra_body``: a table of server-specific fields merged into every request (e.g.
  ``{chat_template_kwargs = {enable_thinking = false}}`` for vLLM, ``{top_k = 1}``); it may not
  name a field the client writes itself (``model``, ``messages``, ``stream``, the sampling and
  token settings below, or the field its ``constrain`` style sends);
* ``token_limit_field``: ``"max_tokens"`` (default) or ``"max_completion_tokens"`` (hosted
  reasoning models refuse ``max_tokens``);
* ``temperature``: unset (default: the request's own temperature is sent), a number sent instead
  of it, or ``"server-default"``: no temperature is sent (reasoning models refuse 0);
* ``reasoning = true``: the model thinks aloud first: ``<think>…</think>`` blocks (also an unclosed
  one, and a closing tag whose opening the server's template wrote) are cut from the answer, and
  every request may spend at least ``reasoning_tokens`` tokens (default 2048), so a 16-token vote
  is not used up inside the thinking;
* ``constrain``: for a request with ``choices`` (a vote's letters), how the server is told to
  answer nothing else: ``"none"`` (default), ``"choice"`` (vLLM 0.12 and later:
  ``structured_outputs = {choice = [...]}``), ``"guided_choice"`` (vLLM before 0.12),
  ``"grammar"`` (llama.cpp's server: a GBNF ``root ::= "A" | "B"``) or ``"json_schema"`` (Ollama,
  OpenAI and others: ``response_format`` with a JSON schema whose ``answer`` is one of the choices;
  the JSON is read back to the bare choice);
* ``on_ignored_constraint``: what :func:`fairsets.fetch.chat.probe.require_constraint` does when
  the server ignores or refuses the constraint: ``"fail"`` (default: the batch does not start) or
  ``"parse"`` (a warning; the answers are read as free text, as without a constraint);
* ``logprobs = true``: a request with ``choices`` asks for the log-probabilities of the answer's
  tokens, and ``ChatResult.option_probs`` holds each choice's probability.
"""

from __future__ import annotations

import json
import math
import re
import urllib.parse
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

__all__ = ["CONSTRAINT_FIELDS", "OWN_FIELDS", "SERVER_DEFAULT", "ChatEndpoint"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: ``temperature = "server-default"``: send no temperature, the server's default applies.
SERVER_DEFAULT = "server-default"
#: Fields the client writes itself: ``extra_body`` may not name them.
OWN_FIELDS = (
    "model",
    "messages",
    "stream",
    "n",
    "temperature",
    "max_tokens",
    "max_completion_tokens",
    "seed",
    "logprobs",
    "top_logprobs",
)
#: The request field each ``constrain`` style writes (``extra_body`` may not name it).
CONSTRAINT_FIELDS = {
    "choice": "structured_outputs",
    "guided_choice": "guided_choice",
    "grammar": "grammar",
    "json_schema": "response_format",
}
_MAX_EXTRA = 65_536  # bytes of extra_body as JSON


def _plain_json(value: Any, depth: int = 0) -> bool:
    """Whether a TOML value is JSON as it is: no date or time, no NaN or infinity, not too deep."""
    if depth > 16:
        return False
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_plain_json(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_json(v, depth + 1) for k, v in value.items())
    return False


class ChatEndpoint(BaseModel):
    """One OpenAI-compatible chat endpoint serving one model.

    Attributes:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1`` (``/chat/completions`` is
            appended); http or https, no ``user:password@``.
        model: the model name the server expects in requests.
        api_key_env: the NAME of the environment variable holding the key (empty: send no key,
            as a local server needs none). Never the key itself.
        max_concurrency: requests in flight at most.
        timeout: seconds one socket operation may take; a whole request gets twice that.
        name: what logs and results call this endpoint (default: the model name).
        requests_per_minute: at most this many requests start in any 60 s (``None``: no limit);
            enforced before sending, retries included.
        tokens_per_minute: at most this many tokens (the prompt's estimate plus the answer's
            budget) are asked for in any 60 s (``None``: no limit).
        extra_body, token_limit_field, temperature, reasoning, reasoning_tokens, constrain,
            on_ignored_constraint, logprobs: how requests are shaped (the module docstring).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str
    model: str = Field(min_length=1)
    api_key_env: str = "FAIRSETS_LLM_API_KEY"
    max_concurrency: int = Field(default=4, ge=1, le=1024)
    timeout: float = Field(default=120.0, gt=0)
    name: str | None = None
    requests_per_minute: int | None = Field(default=None, ge=1)
    tokens_per_minute: int | None = Field(default=None, ge=1)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    token_limit_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    temperature: float | str | None = None
    reasoning: bool = False
    reasoning_tokens: int = Field(default=2048, ge=1, le=1_000_000)
    constrain: Literal["none", "choice", "guided_choice", "grammar", "json_schema"] = "none"
    on_ignored_constraint: Literal["fail", "parse"] = "fail"
    logprobs: bool = False

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        parts = urllib.parse.urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1, not {value!r}"
            )
        if parts.username or parts.password:
            raise ValueError(
                "base_url must not carry user:password@; put the key in the variable api_key_env names"
            )
        if parts.query or parts.fragment:
            raise ValueError("base_url must be the API root without a query string or fragment")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _check_env(cls, value: str) -> str:
        value = value.strip()
        if value and not _ENV_NAME.match(value):
            # never echo the value: a pasted key must not end up in an error text
            raise ValueError(
                "api_key_env must be the NAME of an environment variable (letters, digits, _), "
                "not the key itself"
            )
        return value

    @field_validator("temperature", mode="before")
    @classmethod
    def _check_temperature(cls, value: Any) -> Any:
        if value is None or value == SERVER_DEFAULT:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 100:
            raise ValueError(
                f'give a number from 0 (e.g. 0.6), or "{SERVER_DEFAULT}" to send none; '
                "leave it out to send each request's own"
            )
        return float(value)

    @field_validator("extra_body", mode="before")
    @classmethod
    def _check_extra(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            raise ValueError("give a table of request fields, e.g. extra_body = {top_k = 1}")
        own = sorted(set(value) & set(OWN_FIELDS))
        if own:
            raise ValueError(
                f"{', '.join(own)}: the client writes this field itself; use its own setting "
                "(token_limit_field, temperature, logprobs…) or leave it out"
            )
        if not _plain_json(value):
            raise ValueError(
                "values must be strings, numbers, booleans, arrays or tables (no dates, nan or inf)"
            )
        if len(json.dumps(value)) > _MAX_EXTRA:
            raise ValueError(f"larger than {_MAX_EXTRA} bytes as JSON")
        return value

    @model_validator(mode="after")
    def _check_constraint_field(self) -> ChatEndpoint:
        field = CONSTRAINT_FIELDS.get(self.constrain)
        if field is not None and field in self.extra_body:
            raise ValueError(
                f"extra_body.{field}: constrain = {self.constrain!r} writes this field for every "
                'request with choices; leave it out of extra_body or set constrain = "none"'
            )
        return self

    def __hash__(self) -> int:
        """Endpoints stay hashable (a table of ``extra_body`` is not): hashed by their settings."""
        return hash(json.dumps(self.model_dump(), sort_keys=True, default=str))

    @property
    def label(self) -> str:
        """What logs, errors and results call this endpoint: ``name``, else the model."""
        return self.name or self.model

    @property
    def chat_url(self) -> str:
        """``{base_url}/chat/completions``."""
        return f"{self.base_url}/chat/completions"

    @property
    def where(self) -> str:
        """``host:port`` of the server: what errors and logs name (never a path or a key)."""
        parts = urllib.parse.urlsplit(self.base_url)
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        return f"{host}:{parts.port}" if parts.port else host

    @classmethod
    def from_dict(cls, table: dict[str, Any], name: str | None = None) -> ChatEndpoint:
        """Build an endpoint from a TOML table, with one clear error line for a bad one.

        Args:
            table: ``base_url``, ``model`` and optionally any other field of the class
                (``api_key_env``, ``max_concurrency``, ``timeout``, ``name``, the rate limits and
                the shaping settings of the module docstring).
            name: the table's name (e.g. ``[annotators.qwen]`` → ``"qwen"``), used when the
                table has no ``name`` of its own, and in the error.

        Raises:
            ValueError: an unknown key, a missing or invalid value (the message names the field).
        """
        where = f"endpoint {name!r}" if name else "endpoint"
        if not isinstance(table, dict):
            raise ValueError(f"{where}: expected a table of settings, got {type(table).__name__}")
        data = dict(table)
        if name is not None:
            data.setdefault("name", name)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                field = ".".join(str(p) for p in err["loc"])
                msg = err["msg"].removeprefix("Value error, ")
                if err["type"] == "extra_forbidden":
                    msg = f"unknown setting (known: {', '.join(cls.model_fields)})"
                problems.append(f"{field}: {msg}" if field else msg)
            raise ValueError(f"{where}: " + "; ".join(problems)) from None
