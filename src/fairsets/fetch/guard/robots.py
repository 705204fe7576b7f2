"""``X-Robots-Tag`` opt-outs: which directives apply to us (:func:`is_disallowed`)."""

from __future__ import annotations

import http.client
import re
from collections.abc import Iterable
from email.message import Message
from typing import Any

from .policy import FetchPolicy

_VALUED_DIRECTIVES = {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
_TOKEN_RE = re.compile(r"^[a-z0-9_.\-]+$")


def _robots_rules(values: Iterable[str]) -> list[tuple[str | None, str]]:
    """``[(robot or None, directive), ...]`` from ``X-Robots-Tag`` header values.

    ``"otherbot: noindex, noai"`` applies both directives to ``otherbot`` (Google's reading);
    ``"max-image-preview: none"`` is a directive with a value, not a robot name.
    """
    rules: list[tuple[str | None, str]] = []
    for value in values:
        robot: str | None = None
        for part in str(value).split(","):
            part = part.strip().lower()
            if not part:
                continue
            head, sep, rest = part.partition(":")
            head = head.strip()
            if sep and head not in _VALUED_DIRECTIVES and _TOKEN_RE.match(head):
                robot = head
                part = rest.strip()
                if not part:
                    continue
            directive = part.split(":", 1)[0].strip()
            rules.append((robot, directive))
    return rules


def is_disallowed(headers: Message | http.client.HTTPMessage | Any, policy: FetchPolicy) -> str | None:
    """Return the offending ``X-Robots-Tag`` directive, or None if our use is allowed.

    Args:
        headers: response headers (anything with ``get_all``).
        policy: gives the disallowed directives and our robot token.
    """
    values = headers.get_all("X-Robots-Tag") or []
    banned = set(policy.disallowed_directives)
    for robot, directive in _robots_rules(values):
        if directive in banned and robot in (None, policy.user_agent_token):
            return directive if robot is None else f"{robot}: {directive}"
    return None
