"""``fairsets card lint``: what a published folder's card and Croissant file still lack.

:func:`lint_folder` reads ``README.md`` and ``croissant.json`` of a built dataset or of a prepared
annotation folder and returns one plain-text line per finding:

* a section of the dataset card template (:data:`TEMPLATE_SECTIONS`) that the card lacks;
* a section whose text holds the template's placeholder
  (:data:`fairsets.publish.card.sections.PLACEHOLDER`), naming where to write it;
* a section with no text and no sub-section;
* ``croissant.json`` missing, a ``rai:`` key outside the RAI vocabulary or of the wrong type
  (:func:`fairsets.publish.rai.check_rai`), a required RAI property missing
  (:func:`fairsets.publish.rai.missing_rai`).

Headings inside fenced code and ``<details>`` blocks are text, not sections. No finding is markup:
the card's Markdown escapes are undone in the lines.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ..rai import check_rai, missing_rai
from ..rai_text import PERSON_WRITTEN
from .sections import PLACEHOLDER

__all__ = ["TEMPLATE_SECTIONS", "card_sections", "lint_folder"]

#: The dataset card template's sections (``huggingface_hub``'s ``datasetcard_template.md``) every
#: card of fairsets has, by heading (compared without case).
TEMPLATE_SECTIONS = (
    "Uses",
    "Direct use",
    "Out-of-scope use",
    "Source data",
    "Data collection and processing",
    "Who are the source data producers?",
    "Annotations",
    "Annotation process",
    "Who are the annotators?",
    "Personal and sensitive information",
    "Bias, risks and limitations",
    "Recommendations",
    "Maintenance and versioning",
    "Dataset card contact",
)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~])")


def _plain(text: str) -> str:
    """One line of plain text from card Markdown (escapes undone, whitespace collapsed)."""
    return " ".join(_ESCAPE.sub(r"\1", text).split())


def card_sections(text: str) -> list[tuple[int, str, str]]:
    """``[(level, heading, body)]`` of a card's Markdown (the YAML header and code blocks skipped;
    a body is the text up to the next heading of any level)."""
    if text.startswith("---"):
        parts = text.split("\n---", 2)
        text = parts[2] if len(parts) == 3 else text
        text = text.split("\n", 1)[1] if "\n" in text else ""
    sections: list[tuple[int, str, list[str]]] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        m = None if fenced else _HEADING.match(line)
        if m:
            sections.append((len(m.group(1)), m.group(2), []))
        elif sections:
            sections[-1][2].append(line)
    return [(lvl, head, "\n".join(body).strip()) for lvl, head, body in sections]


def _card_findings(text: str) -> list[str]:
    sections = card_sections(text)
    heads = {_plain(h).lower() for _, h, _ in sections}
    out = [
        f"README.md: section {name!r} is missing" for name in TEMPLATE_SECTIONS if name.lower() not in heads
    ]
    for i, (level, head, body) in enumerate(sections):
        name = _plain(head)
        if PLACEHOLDER in body:
            for line in body.splitlines():
                if PLACEHOLDER in line:
                    out.append(f"README.md: section {name!r} is a placeholder: {_plain(line.lstrip('- '))}")
        elif not body:
            has_sub = i + 1 < len(sections) and sections[i + 1][0] > level
            if not has_sub:
                out.append(f"README.md: section {name!r} is empty")
    return out


def _croissant_findings(path: Path, where: str) -> list[str]:
    if not path.is_file():
        return ["croissant.json is missing: publish it with its Responsible-AI properties"]
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return [f"croissant.json cannot be read ({' '.join(str(e).split())})"]
    if not isinstance(doc, dict):
        return ["croissant.json is not a JSON object"]
    out = [f"croissant.json: {p}" for p in check_rai(doc)]
    fields = {prop: field for field, prop in PERSON_WRITTEN.items()}
    for prop in missing_rai(doc):
        hint = f" (write it in {where} {fields[prop]})" if prop in fields else ""
        out.append(f"croissant.json: required RAI property rai:{prop} is missing{hint}")
    return out


def lint_folder(folder: str | os.PathLike[str], *, where: str = "[publish.rai]") -> list[str]:
    """The findings of a built dataset or prepared annotation folder (empty: nothing is missing).

    Args:
        folder: The folder holding ``README.md`` and ``croissant.json``.
        where: Where the person-written facts are written, named in the hints (a recipe's
            ``[publish.rai]``, or the ``--rai`` file of an annotation publish).
    """
    root = Path(folder)
    card = root / "README.md"
    if not card.is_file():
        return ["README.md is missing: build or prepare the folder first"]
    out = _card_findings(card.read_text(encoding="utf-8"))
    return out + _croissant_findings(root / "croissant.json", where)
