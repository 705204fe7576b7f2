"""What is sent for a :class:`~fairsets.fetch.chat.ChatRequest` to one
:class:`~fairsets.fetch.chat.ChatEndpoint`: the JSON body of a chat completion.

* :func:`request_body`: the body (escaped ASCII: a lone surrogate cannot fail);
* :func:`_body`: the bytes ``json.dumps`` gives, with inline images spliced in rather than scanned.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .endpoint import ChatEndpoint
    from .exchange import ChatRequest

__all__ = ["request_body"]


_PLAIN_JSON = re.compile(r'[\x00-\x1f"\\]')


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
                and not _PLAIN_JSON.search(url)
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


def request_body(endpoint: ChatEndpoint, request: ChatRequest) -> bytes:
    """The JSON body that asks ``endpoint`` for ``request`` (escaped ASCII: a lone surrogate cannot fail)."""
    payload: dict[str, Any] = {
        "model": endpoint.model,
        "messages": request.messages,
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
    }
    if request.seed is not None:
        payload["seed"] = request.seed
    return _body(payload)
