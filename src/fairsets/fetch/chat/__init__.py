"""One OpenAI-compatible chat client for every model call (captions, votes, descriptions).

* :class:`ChatEndpoint`: base_url, model, the name of the key's environment variable,
  concurrency and timeout; :meth:`ChatEndpoint.from_dict` validates a TOML table.
* :func:`system`, :func:`user`, :func:`image_part`: messages with text and inline JPEG images.
* :func:`image_digest_part`: an image named by its SHA-256, for cache look-ups without the bytes.
* :class:`ChatClient`: batches with bounded concurrency, retries, a resumable disk cache; see
  :mod:`fairsets.fetch.chat.client` for the error policy. ``run(requests)`` answers a list;
  ``stream(requests)`` (a :class:`ChatStream`) reads an iterable lazily and yields answers as they
  come, keeping ``max_concurrency`` requests in flight; ``lookup(request)`` only reads the cache.
"""

from __future__ import annotations

from .client import ChatClient
from .endpoint import ChatEndpoint
from .exchange import ChatBatch, ChatRequest, ChatResult, ChatServiceError
from .messages import cache_form, image_digest_part, image_part, system, text_part, user
from .stream import ChatStream

__all__ = [
    "ChatBatch",
    "ChatClient",
    "ChatEndpoint",
    "ChatRequest",
    "ChatResult",
    "ChatServiceError",
    "ChatStream",
    "cache_form",
    "image_digest_part",
    "image_part",
    "system",
    "text_part",
    "user",
]
