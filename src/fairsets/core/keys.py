"""Characters no sample key may hold, whoever chose the key (a shard's member names, a caller's rows).

A key is shown in tables, logs, reports and file listings. A control character breaks a line or a
terminal; a bidirectional control (U+202E RIGHT-TO-LEFT OVERRIDE and its kin) makes a key display
as another one (``abc\u202egpj.exe`` reads ``abcexe.jpg``). Keys fairsets makes itself are plain
ASCII (:func:`fairsets.core.data.validate_key`); keys taken from the outside are checked with
:func:`unsafe_key_chars`.
"""

from __future__ import annotations

__all__ = ["BIDI_CONTROLS", "unsafe_key_chars"]

#: Unicode's Bidi_Control characters: ALM, LRM, RLM, the embeddings and overrides (LRE, RLE, PDF,
#: LRO, RLO) and the isolates (LRI, RLI, FSI, PDI).
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def unsafe_key_chars(key: str) -> str | None:
    """What makes ``key`` unsafe to show, or None.

    Returns:
        ``"control characters"`` (C0, DEL, C1), ``"bidi control characters"`` or None.
    """
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in key):
        return "control characters"
    if not BIDI_CONTROLS.isdisjoint(key):
        return "bidi control characters"
    return None
