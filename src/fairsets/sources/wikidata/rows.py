"""From SPARQL bindings to rows: image values normalised to Commons file paths, labels cleaned to
one line, and the order rows are kept in.
"""

from __future__ import annotations

import logging
import re
import urllib.error
import urllib.parse
from typing import Any

from fairsets.core.short_text import clip

from .states import State
from .terms import (
    ASSOCIATIONS,
    COMMONS_FILEPATH,
    _qnum,
)

log = logging.getLogger(__package__)  # one logger for the whole source, as before the split


MAX_LABEL_CHARS = 400


_ENTITY_RE = re.compile(r"^https?://www\.wikidata\.org/entity/(Q[1-9][0-9]*)$")
_COMMONS_RE = re.compile(
    r"^https?://commons\.(?:m\.)?wikimedia\.org/wiki/(?:Special:FilePath/|File:)(?P<name>[^?#]+)", re.I
)
_FILE_PREFIX_RE = re.compile(r"^(?:file|image):\s*", re.I)


def normalise_image(value: str) -> tuple[str, str]:
    """Return ``(url, "File:<name>")`` for a ``P18`` value (a Special:FilePath IRI or a file name)."""
    value = value.strip()
    m = _COMMONS_RE.match(value)
    if m:
        raw = m.group("name")
    elif "://" in value:  # some other URL: its last path segment
        raw = urllib.parse.urlsplit(value).path.rsplit("/", 1)[-1]
    else:  # a bare file name
        raw = value
    name = urllib.parse.unquote(raw).replace("_", " ")
    name = " ".join(_FILE_PREFIX_RE.sub("", name).split())
    return COMMONS_FILEPATH + urllib.parse.quote(name, safe=""), f"File:{name}"


def _value(binding: dict[str, Any], var: str) -> str | None:
    cell = binding.get(var)
    value = cell.get("value") if isinstance(cell, dict) else None
    return value if isinstance(value, str) else None


# Control characters, and the bidirectional embeddings, overrides and isolates that make a label
# display as something else (right-to-left *text* is kept: many Indian names are written in it).
_LABEL_JUNK = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]+")


def clean_label(text: str) -> str:
    """A label as one line: control and bidi-override characters and runs of white space become one
    space, and more than :data:`MAX_LABEL_CHARS` characters are cut (with ``…``)."""
    return clip(" ".join(_LABEL_JUNK.sub(" ", text).split()), MAX_LABEL_CHARS)


def _rows_of(bindings: list[dict[str, Any]], state: State, gender: str, association: str) -> list[dict]:
    rows = []
    for b in bindings:
        if not isinstance(b, dict):
            log.debug("skipping a binding that is not an object: %.200r", b)
            continue
        m = _ENTITY_RE.match(_value(b, "person") or "")
        image = _value(b, "image")
        if not m or not image:
            log.debug("skipping a binding without a Wikidata item or image: %s", b)
            continue
        person = m.group(1)
        label = clean_label(_value(b, "labelEn") or _value(b, "labelMul") or _value(b, "labelAny") or "")
        label = label or person
        url, file = normalise_image(image)
        rows.append(
            {
                "person": person,
                "label": label,
                "image": url,
                "file": file,
                "state": state.qid,
                "state_name": state.name,
                "gender": gender,
                "association": association,
            }
        )
    return rows


def _row_order(row: dict[str, Any]) -> tuple:
    assoc = row["association"]
    return (
        _qnum(row["person"]),
        row["person"],
        _qnum(row["state"]),
        row["state"],
        ASSOCIATIONS.index(assoc) if assoc in ASSOCIATIONS else len(ASSOCIATIONS),
        row["image"],
    )
