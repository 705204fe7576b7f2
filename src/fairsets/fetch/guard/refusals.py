"""The ways a guarded fetch ends without an answer: refusals (:class:`FetchRefused` and its kinds,
a decision about the sample) and :class:`TooSlow` (transient), and parsing their reasons back
from (possibly wrapped) message text.
"""

from __future__ import annotations

import re


class FetchRefused(Exception):
    """A fetch the policy refuses: a decision about the sample, not a transient failure.

    Attributes:
        reason: a short code (``blocked_address``, ``blocked_scheme``, ``invalid_url``,
            ``too_many_redirects``, ``too_large``, ``opted_out``).
        detail: human-readable detail (a host or address, never a full URL).
    """

    reason = "refused"

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(f"refused ({self.reason}): {detail}")


class BlockedAddress(FetchRefused):
    """The host resolves to an address the policy does not allow (loopback, private, ...)."""

    reason = "blocked_address"


class BlockedScheme(FetchRefused):
    """The URL (or a redirect target) uses a scheme outside ``policy.schemes``."""

    reason = "blocked_scheme"


class InvalidURL(FetchRefused):
    """The URL (or a redirect target) can never be fetched: no host, a malformed host or port,
    control characters, too long (:func:`fairsets.fetch.guard.urls.url_problem`)."""

    reason = "invalid_url"


class TooManyRedirects(FetchRefused):
    """More than ``policy.max_redirects`` redirects."""

    reason = "too_many_redirects"


class TooLarge(FetchRefused):
    """The body is (or announces to be) larger than ``policy.max_bytes``."""

    reason = "too_large"


class OptedOut(FetchRefused):
    """The response carries an ``X-Robots-Tag`` directive forbidding our use."""

    reason = "opted_out"


class TooSlow(TimeoutError):
    """A download passed its wall-clock deadline or fell below the minimum transfer rate.

    Transient (the server may be fast tomorrow), so a ``TimeoutError``: retried by
    :func:`fairsets.fetch.retry.call_with_retry`, and a sample that hits it *fails* (retriable
    with ``--retry-failed``) rather than being rejected. The text starts with
    ``too slow (<reason>)``, reason ``deadline``, ``min_rate`` or ``retry_after`` (the host asked,
    with a 429's ``Retry-After``, for a pause longer than ``retry_after_max``: :mod:`.hosts`); it
    names the host, never a URL.

    Attributes:
        reason: ``deadline`` or ``min_rate``.
        detail: what was measured, and the setting that decided.
    """

    def __init__(self, reason: str, detail: str | None = None) -> None:
        if detail is None:  # one message, as in ``type(exc)(f"host: {exc}")``: keep the reason
            reason, detail = too_slow_reason(reason) or ("deadline", reason)
        self.reason = reason
        self.detail = detail
        super().__init__(f"too slow ({reason}): {detail}")


_REFUSAL_RE = re.compile(r"refused \(([a-z_]+)\)")
_TOO_SLOW_RE = re.compile(r"too slow \((deadline|min_rate|retry_after)\): (.*?)>?$", re.S)


def too_slow_reason(text: str | None) -> tuple[str, str] | None:
    """Return ``(reason, detail)`` of a :class:`TooSlow` from its text, even wrapped by urllib.

    Args:
        text: an error message (``"<urlopen error too slow (deadline): ...>"``).

    Returns:
        ``("deadline" | "min_rate" | "retry_after", detail)``, or None if ``text`` is not a :class:`TooSlow`.
    """
    if not text:
        return None
    m = _TOO_SLOW_RE.search(text.strip())
    return (m.group(1), m.group(2)) if m else None


def refusal_reason(text: str | None) -> str | None:
    """Return the reason code of a :class:`FetchRefused` from its text (e.g. as stored by img2dataset).

    Args:
        text: an error message, possibly wrapped (``"<urlopen error refused (too_large): ...>"``).

    Returns:
        The reason code, or None if ``text`` is not a refusal.
    """
    if not text:
        return None
    m = _REFUSAL_RE.search(text)
    return m.group(1) if m else None


_FLAG_RE = re.compile(r"\(allowed only with (allow_[a-z_]+)=True\)")


def allowing_flag(text: str | None) -> str | None:
    """The policy flag that would have allowed a refused address (``allow_loopback``,
    ``allow_private``), read from a :class:`BlockedAddress` text (possibly wrapped, or stored as
    ``blocked_address: <detail>`` in a status row); None for any other text, and for addresses no
    flag allows (unspecified, multicast, reserved, ...).

    A refusal's text is the record of the policy that made it: a row refused under one policy is
    worth downloading again once the policy has the flag it names.
    """
    if not text or not (text.startswith("blocked_address") or refusal_reason(text) == "blocked_address"):
        return None
    m = _FLAG_RE.search(text)
    return m.group(1) if m else None
