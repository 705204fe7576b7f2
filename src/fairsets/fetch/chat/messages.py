"""Chat messages with text and images, in the OpenAI vision format.

Images travel inline as ``data:image/jpeg;base64,...`` URLs in ``image_url`` content parts, the
form vLLM, llama.cpp's server and Ollama accept::

    msgs = [system("You label people."), user("Who is highlighted?", images=[jpeg])]

:func:`cache_form` gives the same messages with every inline image replaced by the SHA-256 of
its bytes: what cache keys are made of (small, and stable across re-encodings of the key).

:func:`image_digest_part` names an image by that digest instead of carrying it: a request built
with it has the cache key of the same request with the image's bytes, so a caller that recorded
the SHA-256 of a JPEG it sent can find the answer (:meth:`~fairsets.fetch.chat.ChatClient.lookup`)
without making the JPEG again. Such a request is only for looking up: the client refuses to send
it (:func:`has_digest_image`).

The last :data:`RECENT_IMAGES` images made into parts are remembered with their data URL and
digest, so the same JPEG asked of several models (``annotate vote`` shows one view to every
annotator) is encoded once, and no cache key decodes a URL this module made.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = [
    "cache_form",
    "has_digest_image",
    "image_digest_part",
    "image_part",
    "system",
    "text_part",
    "user",
]

Message = dict[str, Any]
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
#: Images whose data URL and digest are remembered (a few MB of JPEG views at most).
RECENT_IMAGES = 64
_recent_lock = threading.Lock()
_recent_parts: OrderedDict[tuple[str, bytes], str] = OrderedDict()  # (mime, bytes) → data URL
_recent_digests: dict[str, str] = {}  # data URL → "sha256:<hex>"


def _data_url(data: bytes, mime: str) -> str:
    key = (mime, data)
    with _recent_lock:
        url = _recent_parts.get(key)
        if url is not None:
            _recent_parts.move_to_end(key)
            return url
    encoded = base64.b64encode(data).decode("ascii")
    url = f"data:{mime};base64,{encoded}"
    digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
    with _recent_lock:
        _recent_parts[key] = url
        _recent_digests[url] = digest
        while len(_recent_parts) > RECENT_IMAGES:
            _, old = _recent_parts.popitem(last=False)
            _recent_digests.pop(old, None)
    return url


def text_part(text: str) -> dict[str, Any]:
    """A text content part."""
    return {"type": "text", "text": str(text)}


def image_part(data: bytes, mime: str = "image/jpeg") -> dict[str, Any]:
    """An image content part carrying ``data`` (encoded image bytes) as a base64 data URL."""
    if not isinstance(data, (bytes, bytearray)) or not data:
        raise ValueError("an image part needs the encoded image bytes (e.g. a JPEG), not an empty value")
    return {"type": "image_url", "image_url": {"url": _data_url(bytes(data), mime)}}


def image_digest_part(sha256_hex: str) -> dict[str, Any]:
    """An image content part naming the image by the SHA-256 of its encoded bytes (lower-case hex).

    Its request has the same cache key as with :func:`image_part` of those bytes; it can be looked
    up, never sent.
    """
    digest = f"sha256:{str(sha256_hex).strip().lower()}"
    if not _DIGEST.match(digest):
        raise ValueError(f"{sha256_hex!r} is not a SHA-256 (64 hexadecimal digits)")
    return {"type": "image_url", "image_url": {"url": digest}}


def _image_urls(messages: list[Message]) -> Iterator[dict[str, Any]]:
    """The ``image_url`` object (``{"url": ...}``) of each image part of ``messages``, in order."""
    for msg in messages:
        content = msg.get("content") if isinstance(msg, dict) else None
        if not isinstance(content, list):
            continue
        for part in content:
            image = part.get("image_url") if isinstance(part, dict) else None
            if isinstance(image, dict):
                yield image


def text_length(messages: list[Message]) -> int:
    """The characters of the text of ``messages``: string contents and the ``text`` of text parts."""
    total = 0
    for msg in messages:
        content = msg.get("content") if isinstance(msg, dict) else None
        parts = [content] if isinstance(content, str) else content if isinstance(content, list) else []
        for part in parts:
            text = part.get("text") if isinstance(part, dict) else part
            total += len(text) if isinstance(text, str) else 0
    return total


def image_count(messages: list[Message]) -> int:
    """How many image parts ``messages`` hold."""
    return sum(1 for _ in _image_urls(messages))


def has_digest_image(messages: list[Message]) -> bool:
    """Whether an image of ``messages`` is given by its digest (:func:`image_digest_part`)."""
    return any(str(image.get("url", "")).startswith("sha256:") for image in _image_urls(messages))


def system(text: str) -> Message:
    """A system message."""
    return {"role": "system", "content": str(text)}


def user(text: str, images: Iterable[bytes | dict[str, Any]] = ()) -> Message:
    """A user message: plain text, or the images followed by the text.

    Each image is its encoded bytes (a JPEG) or an image part already made
    (:func:`image_part`, :func:`image_digest_part`).
    """
    images = list(images)
    if not images:
        return {"role": "user", "content": str(text)}
    parts = [dict(i) if isinstance(i, dict) else image_part(i) for i in images]
    return {"role": "user", "content": [*parts, text_part(text)]}


def _digest_data_url(url: str) -> str:
    with _recent_lock:
        known = _recent_digests.get(url)
    if known is not None:
        return known
    head, sep, payload = url.partition(",")
    if not (sep and head.startswith("data:") and head.endswith(";base64")):
        return url
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return url
    return f"sha256:{hashlib.sha256(raw).hexdigest()}"


def _copy(value: Any) -> Any:
    """A copy of a JSON-like value (dicts and lists copied, the rest shared: strings are immutable)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def cache_form(messages: list[Message]) -> list[Message]:
    """``messages`` with each inline image URL replaced by ``sha256:<hex>`` of its decoded bytes."""
    out = _copy(messages)
    for image in _image_urls(out):
        url = image.get("url")
        if isinstance(url, str):
            image["url"] = _digest_data_url(url)
    return out
