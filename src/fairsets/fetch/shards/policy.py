"""Rows a download leaves out by policy: a deny list of URLs, and a listing's safety column.

* A **deny list** (``fairsets download --deny FILE``) holds one URL or one sha256 (hex, of the URL's
  UTF-8 bytes) a line — the form published removal lists take; blank lines and ``#`` comments are
  skipped. A row whose URL, or whose URL's sha256, is on it is refused before download with the
  reason ``denied: ...``.
* A **safety rule** (``--drop-unsafe 'punsafe>0.5'``, repeatable; a row matching any rule is
  dropped) compares a listing column with a value: ``>``, ``>=``, ``<``, ``<=`` with a number,
  ``==`` and ``!=`` with a number or a text (``NSFW==NSFW`` for LAION-400M's column). A row whose
  cell is null or not a number (for a numeric rule) does not match: it is kept, and counted as
  ``unscored``. A matching row is refused with the reason ``unsafe: ...``.

Refused rows keep their place (the listing's keys follow the row order) and land in
``status.parquet`` as ``rejected`` with their reason; the counts are recorded in the download's
``.fairsets/listing.json`` under ``policy``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .listing import REJECT_COL, Listing, ListingError

__all__ = ["RowPolicy", "SafetyRule", "apply_policy", "parse_rule", "read_deny_file", "url_hash"]

_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")
_RULE = re.compile(r"^\s*(?P<col>[^<>=!]+?)\s*(?P<op>>=|<=|==|!=|>|<)\s*(?P<value>.*?)\s*$")
_OPS = {
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


def url_hash(url: str) -> str:
    """sha256 (hex) of a URL's UTF-8 bytes, as published removal lists give them."""
    return hashlib.sha256(url.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class SafetyRule:
    """``column op value``: ``value`` a float (numeric rule) or a text (``==``, ``!=``)."""

    column: str
    op: str
    value: float | str

    @property
    def text(self) -> str:
        v = self.value
        return f"{self.column}{self.op}{v:g}" if isinstance(v, float) else f"{self.column}{self.op}{v}"

    def matches(self, cell: Any) -> bool | None:
        """True/False; None when the cell cannot be compared (null, or not a number for a numeric rule)."""
        if cell is None:
            return None
        if isinstance(self.value, float):
            if isinstance(cell, bool):
                return None
            try:
                x = float(cell)
            except (TypeError, ValueError):
                return None
            if x != x:  # NaN
                return None
            return _OPS[self.op](x, self.value)
        return _OPS[self.op](str(cell), self.value)


def parse_rule(text: str) -> SafetyRule:
    """A rule from ``COLUMN OP VALUE`` (see the module docstring); :class:`ListingError` if malformed."""
    m = _RULE.match(text or "")
    if not m or not m["value"]:
        raise ListingError(
            f"--drop-unsafe {text!r}: not COLUMN OP VALUE; write e.g. 'punsafe>0.5' or 'NSFW==NSFW'"
        )
    col, op, raw = m["col"], m["op"], m["value"]
    try:
        value: float | str = float(raw)
    except ValueError:
        value = raw
        if op not in ("==", "!="):
            raise ListingError(
                f"--drop-unsafe {text!r}: {op} needs a number; compare text with == or !="
            ) from None
    return SafetyRule(col, op, value)


def read_deny_file(path: str | Path) -> frozenset[str]:
    """The sha256 of every URL on a deny list (lines that are 64 hex digits are taken as hashes)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ListingError(f"--deny {path}: cannot be read ({exc}); give a UTF-8 text file") from None
    out = set()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        out.add(line.lower() if _HEX64.match(line) else url_hash(line))
    return frozenset(out)


@dataclass(frozen=True)
class RowPolicy:
    """What a download leaves out: URL hashes (``deny``, from ``deny_name``) and safety rules."""

    deny: frozenset[str] = frozenset()
    deny_name: str = ""
    rules: tuple[SafetyRule, ...] = field(default_factory=tuple)

    @property
    def settings(self) -> dict[str, Any]:
        """What the download folder records, to refuse a later run under another policy."""
        digest = hashlib.sha256("\n".join(sorted(self.deny)).encode()).hexdigest() if self.deny else None
        return {"deny_sha256": digest, "deny_entries": len(self.deny), "rules": [r.text for r in self.rules]}


def apply_policy(listing: Listing, policy: RowPolicy) -> tuple[Listing, dict[str, int]]:
    """Refuse (in place of the row: empty URL, a reason) the rows the policy drops.

    Only rows not refused already are considered. Returns the new listing and the counts
    ``denied``, ``unsafe`` and ``unscored`` (rows a rule could not compare).
    """
    table = listing.table
    counts = {"denied": 0, "unsafe": 0, "unscored": 0}
    if not policy.deny and not policy.rules:
        return listing, counts
    for rule in policy.rules:
        if rule.column not in listing.extras:
            shown = ", ".join(repr(c) for c in listing.extras[:12])
            raise ListingError(
                f"--drop-unsafe {rule.text!r}: the listing has no column {rule.column!r} (other columns: "
                f"{shown or 'none'}); name a column of the listing"
            )
    why = table.column(REJECT_COL).to_pylist()
    urls = table.column("url").to_pylist()
    cells = {r.column: table.column(r.column).to_pylist() for r in policy.rules}
    deny_label = f" {policy.deny_name}" if policy.deny_name else ""
    for i, url in enumerate(urls):
        if why[i] is not None:
            continue
        if policy.deny and url and url_hash(url) in policy.deny:
            why[i] = f"denied: the URL is on the deny list{deny_label}"
            counts["denied"] += 1
            continue
        unscored = False
        for rule in policy.rules:
            hit = rule.matches(cells[rule.column][i])
            if hit:
                why[i] = f"unsafe: {rule.text} ({rule.column} = {str(cells[rule.column][i])[:40]!r})"
                counts["unsafe"] += 1
                break
            unscored = unscored or hit is None
        else:
            counts["unscored"] += unscored
    refused = pa.array([w is not None for w in why])
    table = table.set_column(
        table.column_names.index("url"), "url", pc.if_else(refused, pa.scalar("", pa.string()), table["url"])
    )
    table = table.set_column(table.column_names.index(REJECT_COL), REJECT_COL, pa.array(why, pa.string()))
    return Listing(table, listing.extras), counts
