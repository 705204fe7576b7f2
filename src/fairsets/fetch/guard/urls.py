"""Whether an http(s) URL can be fetched at all (:func:`url_problem`), decided from its text alone.

A URL without a host (``http://``, ``http:///x.jpg``, ``http://:80/``), with a host no DNS name
can be (an empty or over-long label, more than 253 characters, a broken IPv6 literal), a port
outside 1-65535, white space or control characters, or longer than :data:`MAX_URL_CHARS` fails
the same way on every try: the guard refuses it as ``invalid_url`` (a decision, ``rejected``)
before any lookup or connection, so ``--retry-failed`` never tries it again.
"""

from __future__ import annotations

import ipaddress
import urllib.parse

#: Longest URL fetched, in characters (longer ones are refused as ``invalid_url``).
MAX_URL_CHARS = 8192
_MAX_HOST = 253
_MAX_LABEL = 63


def _host_problem(host: str) -> str | None:
    """``host`` as ``urlsplit`` gives it (no brackets, lower case)."""
    if ":" in host:  # only an IPv6 literal has a colon in its host
        try:
            ipaddress.IPv6Address(host.split("%", 1)[0])
        except ValueError:
            return "the host is not an IPv6 address"
        return None
    name = host[:-1] if host.endswith(".") else host
    try:
        encoded = name.encode("ascii") if name.isascii() else name.encode("idna")
    except UnicodeError:
        return "the host is not a valid domain name"
    if len(encoded) > _MAX_HOST:
        return f"the host is longer than {_MAX_HOST} characters"
    if any(not 0 < len(label) <= _MAX_LABEL for label in encoded.split(b".")):
        return f"the host has an empty label or one longer than {_MAX_LABEL} characters"
    return None


def url_problem(url: str) -> str | None:
    """Why the http(s) URL ``url`` can never be fetched, or None. None too for a URL of another
    scheme or none (the guard's scheme check refuses those) and for any address (checked at the
    socket).

    Args:
        url: a URL.

    Returns:
        A short reason (no part of the URL in it), or None.
    """
    if len(url) > MAX_URL_CHARS:
        return f"longer than {MAX_URL_CHARS} characters"
    if any(ord(c) <= 0x20 or ord(c) == 0x7F for c in url):
        return "white space or control characters in the URL"
    try:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme.lower() not in ("http", "https"):
            return None
        port = parts.port
    except ValueError:  # a broken IPv6 literal or bracket, a port that is not a number or out of range
        return "malformed host or port"
    if not parts.hostname:
        return "no host in the URL"
    if port == 0:
        return "port 0"
    return _host_problem(parts.hostname)
