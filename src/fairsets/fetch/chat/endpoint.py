"""Where a chat model lives: :class:`ChatEndpoint`, one table of ``annotators.toml``.

An endpoint is any server speaking the OpenAI chat-completions API (vLLM, llama.cpp's server,
Ollama, a hosted API). The API key is never part of the endpoint: ``api_key_env`` holds the
*name* of the environment variable the key is read from when a batch starts.

Usage::

    ep = ChatEndpoint.from_dict({"base_url": "http://127.0.0.1:8000/v1", "model": "qwen2-vl"})
    ep.chat_url   # 'http://127.0.0.1:8000/v1/chat/completions'
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = ["ChatEndpoint"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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
            table: ``base_url``, ``model`` and optionally ``api_key_env``, ``max_concurrency``,
                ``timeout``, ``name``.
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
                field = ".".join(str(p) for p in err["loc"]) or "table"
                msg = err["msg"].removeprefix("Value error, ")
                if err["type"] == "extra_forbidden":
                    msg = f"unknown setting (known: {', '.join(cls.model_fields)})"
                problems.append(f"{field}: {msg}")
            raise ValueError(f"{where}: " + "; ".join(problems)) from None
