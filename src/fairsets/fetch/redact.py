"""Masking a secret (an API key) in text that came from outside: whole, and every piece of it.

A server can echo the key it was sent — in an error message ("Incorrect API key provided:
sk-abc12…"), in an answer, in a refusal — and a text is often clipped before it is stored or
printed. Masking only the whole key misses both a key the server quoted in part and a key cut in
two by a clip. :class:`Redactor` therefore masks every run of text that is a piece of the key at
least :data:`MIN_PIECE` characters long (the whole key is such a piece), and callers mask *before*
they clip, so no clip can leave a piece behind::

    redact = Redactor(os.environ.get("OPENAI_API_KEY"))
    redact("bad key sk-live-abcdef0123456789 (sent sk-live-abcd…)")  # 'bad key *** (sent ***…)'

A key shorter than :data:`MIN_PIECE` characters is masked whole; one shorter than
:data:`SHORTEST` characters is no secret (a local server's placeholder such as ``x``) and masking
it would rewrite ordinary words, so it is left alone. Only verbatim pieces are found: a server
that re-encodes the key (base64, reversed) is beyond any mask.

API:
    * ``MASK`` — what a piece is replaced with (``***``)
    * ``MIN_PIECE`` — the shortest piece of a long key that is masked (8)
    * ``Redactor(secret)`` — ``redactor(text) -> text``; ``bool(redactor)``: whether it masks anything
"""

from __future__ import annotations

__all__ = ["MASK", "MIN_PIECE", "SHORTEST", "Redactor"]

MASK = "***"
#: The shortest piece of a key masked on its own: shorter runs occur in ordinary text.
MIN_PIECE = 8
#: The shortest key masked at all.
SHORTEST = 4
_PROBE = 4


class Redactor:
    """Masks ``secret`` and every piece of it of :data:`MIN_PIECE` characters or more.

    Args:
        secret: the key (``None`` or ``""``: nothing to mask).
    """

    def __init__(self, secret: str | None) -> None:
        self._secret = secret or ""
        size = min(MIN_PIECE, len(self._secret))
        self._size = size
        masked = len(self._secret) >= SHORTEST
        self._pieces = (
            frozenset(self._secret[i : i + size] for i in range(len(self._secret) - size + 1))
            if masked
            else frozenset()
        )
        # every piece holds one of these (the key's 4-character runs at multiples of 4): only near
        # them can a piece start, so a text is searched for a few probes, not for every piece
        self._probes = (
            frozenset(self._secret[i : i + _PROBE] for i in range(0, len(self._secret) - _PROBE + 1, _PROBE))
            if masked
            else frozenset()
        )

    def __bool__(self) -> bool:
        return bool(self._pieces)

    def __call__(self, text: str) -> str:
        """``text`` with every piece of the key replaced by :data:`MASK` (anything else returned as is)."""
        pieces, size, secret = self._pieces, self._size, self._secret
        if not pieces or not isinstance(text, str) or len(text) < size:
            return text
        starts: set[int] = set()
        for probe in self._probes:
            at = text.find(probe)
            while at >= 0:
                starts.update(range(max(0, at - _PROBE + 1), at + 1))
                at = text.find(probe, at + 1)
        out: list[str] = []
        kept = 0
        for i in sorted(starts):
            if i < kept or text[i : i + size] not in pieces:
                continue
            j = i + size  # the longest piece starting here (pieces of a piece are pieces)
            while j < len(text) and text[i : j + 1] in secret:
                j += 1
            out += (text[kept:i], MASK)
            kept = j
        if not out:
            return text
        out.append(text[kept:])
        return "".join(out)
