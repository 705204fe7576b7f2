"""Bounded reading and decoding of API answers (MediaWiki, SerpAPI, SPARQL) from untrusted servers.

An API answer is data from the outside world: it can be a decompression bomb (a 300 kB gzip
body that inflates to gigabytes — ``requests`` inflates ``Content-Encoding: gzip``/``deflate``
whatever was asked for), endless, nested thousands of levels deep (``json`` raises
``RecursionError``), carry a number with more digits than Python converts (``ValueError``), or
not be UTF-8. These helpers turn each of those into one :class:`BadAnswer` (a ``ValueError``:
not retried) that names the service, never a URL with its query string:

* :func:`read_capped` reads a streamed ``requests`` response, *decoded* bytes counted, and stops
  past ``max_bytes`` (urllib3 inflates at most what is asked per read, so the cap holds before
  the memory is spent);
* :func:`read_capped_stream` does the same for a file-like body (``urllib``'s responses);
* :func:`loads_json` decodes UTF-8 JSON, any failure a :class:`BadAnswer` (the one decoder of
  untrusted JSON: the chat client uses it too, with ``redact`` masking its key in the quote).

API:
    * ``MAX_ANSWER_BYTES`` — the default cap (64 MiB)
    * ``BadAnswer(ValueError)`` — an answer that is too large or cannot be decoded
    * ``read_capped(resp, max_bytes, what) -> bytes``
    * ``read_capped_stream(fp, max_bytes, what) -> bytes``
    * ``loads_json(body, what, redact=None) -> Any``
    * ``cached_json(data, what, kind=list) -> Any | None`` — a cache entry, None if broken
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_ANSWER_BYTES", "BadAnswer", "cached_json", "loads_json", "read_capped", "read_capped_stream"]

log = logging.getLogger(__name__)

MAX_ANSWER_BYTES = 64 * 1024 * 1024
_CHUNK = 64 * 1024
_QUOTED = 120  # characters of a bad answer quoted in its message
_QUOTED_WINDOW = 4096  # bytes of it masked before the quote is cut (longer than any key)


class BadAnswer(ValueError):
    """An API answer that is larger than allowed or cannot be decoded (a decision, not retried).

    ``nested``: the answer is JSON nested too deeply to decode; ``start``: the beginning of the
    answer as text (what :func:`loads_json` quotes, with ``redact`` applied), for a caller that
    words its own message.
    """

    def __init__(self, message: str, *, nested: bool = False, start: str = "") -> None:
        super().__init__(message)
        self.nested = nested
        self.start = start


def _too_large(what: str, max_bytes: int) -> BadAnswer:
    return BadAnswer(
        f"{what} answered more than {max_bytes} bytes (after decompression); refused as too large"
    )


def read_capped(resp: Any, max_bytes: int, what: str) -> bytes:
    """The decoded body of a ``requests`` response made with ``stream=True``, at most ``max_bytes``.

    Args:
        resp: the response (its body not read yet).
        max_bytes: the most decoded bytes accepted.
        what: the service, for the message (a host, never a URL).

    Returns:
        The body, decompressed as ``Content-Encoding`` says.

    Raises:
        BadAnswer: the decoded body passes ``max_bytes`` (the response is closed).
    """
    parts: list[bytes] = []
    seen = 0
    try:
        for chunk in resp.iter_content(chunk_size=_CHUNK):
            seen += len(chunk)
            if seen > max_bytes:
                raise _too_large(what, max_bytes)
            parts.append(chunk)
    finally:
        resp.close()
    return b"".join(parts)


def read_capped_stream(fp: Any, max_bytes: int, what: str) -> bytes:
    """At most ``max_bytes`` from the file-like ``fp`` (read in chunks, never all at once).

    Raises:
        BadAnswer: ``fp`` holds more than ``max_bytes``.
    """
    parts: list[bytes] = []
    seen = 0
    while True:
        chunk = fp.read(min(_CHUNK, max_bytes - seen + 1))
        if not chunk:
            return b"".join(parts)
        seen += len(chunk)
        if seen > max_bytes:
            raise _too_large(what, max_bytes)
        parts.append(chunk)


def cached_json(data: bytes | None, what: str, kind: type = list) -> Any:
    """A cached JSON answer of type ``kind``, or None when absent or unusable (then ask again).

    Cache files are written atomically, but a disk, a copy or a hand can still break one: an entry
    that does not decode, or is not a ``kind``, is logged and treated as a miss.
    """
    if data is None:
        return None
    try:
        value = loads_json(data, what)
    except BadAnswer as exc:
        log.warning("ignoring a broken cache entry (%s); asking again", exc)
        return None
    if not isinstance(value, kind):
        log.warning("ignoring a cache entry of %s that is not a JSON %s; asking again", what, kind.__name__)
        return None
    return value


def loads_json(body: bytes, what: str, *, redact: Callable[[str], str] | None = None) -> Any:
    """Decode a UTF-8 JSON answer.

    Args:
        body: the answer's bytes.
        what: the service, for the message.
        redact: applied to the quoted start of a bad answer *before* it is clipped (a secret the
            server echoed is masked whole, never cut into a piece that survives).

    Raises:
        BadAnswer: not UTF-8, not JSON, nested too deeply, or a number too long to convert; the
            message names ``what`` and quotes the start of the answer.
    """
    try:
        return json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        nested = isinstance(exc, RecursionError)
        why = "nested too deeply" if nested else str(exc)[:200]
        start = body[:_QUOTED_WINDOW].decode("utf-8", "replace")
        start = redact(start) if redact is not None else start
        snippet = start[:_QUOTED]
        raise BadAnswer(
            f"{what} answered something that is not usable JSON ({why}): {snippet!r}",
            nested=nested,
            start=start,
        ) from None
