"""The vote's questions and answers: one multiple-choice question per box, and its parsed reply.

Each annotator (a multimodal model behind a chat endpoint) is shown one crop and asked a
multiple-choice question about the perceived attribute. The question wording and the option
lists are those of the LAION-400M person-centric annotation method (Girrbach et al., ICLR 2026):

* ``gender``: ``male``, ``female``, ``mixed`` (both male and female people visible), ``unclear``;
* ``race``: ``white``, ``black``, ``east_asian``, ``latino_hispanic``, ``middle_eastern``,
  ``south_asian``, ``southeast_asian`` and ``unclear``.

The options are shuffled for every query (models favour early options), by a generator seeded
from ``(seed, annotator, item)``, so a re-run asks exactly the same question and the order still
differs between boxes and annotators. They are lettered ``A``, ``B``, … and the question ends with
"Answer with a single letter."

:func:`parse_answer` maps a reply back through that query's shuffle; see its docstring for the
exact rules. Replies are never guessed: anything that is not one clear letter is ``invalid`` (the
caller keeps the raw text), and a declined request is ``refused``.

Race candidates are first recalled from alt-texts by keyword (:func:`recall_candidates`); the
default keyword file ships with fairsets (``data/race_keywords.toml``) and can be replaced.
"""

from __future__ import annotations

import os
import random
import re
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10 needs the tomli backport
    import tomli as tomllib  # type: ignore[no-redef]

from fairsets.core.data import derive_seed
from fairsets.core.plurals import word_forms

from ..layout import AnnotationError

__all__ = [
    "ATTRIBUTES",
    "INSTRUCTION",
    "INVALID",
    "OK",
    "OPTIONS",
    "REFUSED",
    "Question",
    "build_question",
    "default_keywords_path",
    "load_keywords",
    "parse_answer",
    "recall_candidates",
]

#: Parse statuses.
OK, INVALID, REFUSED = "ok", "invalid", "refused"

#: The last line of every vote question.
INSTRUCTION = "Answer with a single letter."

#: Per attribute: the question, and the options as ``(label, text shown to the model)``.
OPTIONS: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "gender": (
        "What is the gender of the person in the image? Only answer if you are sure and there are "
        "visual cues in the image about the person's gender. If you are not sure, choose the option "
        "'gender is unclear / cannot tell / no person visible'.",
        (
            ("male", "only male person visible"),
            ("female", "only female person visible"),
            ("mixed", "both male and female people visible"),
            ("unclear", "gender is unclear / cannot tell / no person visible"),
        ),
    ),
    "race": (
        "What is the race of the person in the image? Only answer if you are sure and there are "
        "visual cues in the image about the person's race or ethnicity. If you are not sure, choose "
        "the option 'race is unclear / cannot tell / no person visible'.",
        (
            ("white", "White, European or Caucasian"),
            ("black", "Black, African, or African American"),
            ("east_asian", "East Asian, such as Chinese, Japanese, or Korean"),
            ("latino_hispanic", "Latino, Hispanic or South American"),
            ("middle_eastern", "Middle Eastern, Arab or North African"),
            ("south_asian", "Indian, Pakistani, or Bangladeshi"),
            ("southeast_asian", "Southeast Asian, such as Filipino, Thai, or Vietnamese"),
            ("unclear", "race is unclear / cannot tell / no person visible"),
        ),
    ),
}
#: The attributes a vote can ask about.
ATTRIBUTES = tuple(OPTIONS)

#: Only the start of a reply is read (a letter answer is a few characters).
_SCAN = 2000
#: Leading wrappers removed before the letter: whitespace, quotes, markdown, brackets, BOM/zero-width.
_WRAP = " \t\r\n\"'`*_#>([{“”‘’«»„\u200b\u200c\u200d\ufeff"
_PREFIX = re.compile(
    r"^(?:(?:the\s+)?(?:final\s+|correct\s+|best\s+)?(?:answer|option|choice)\b(?:\s+is)?\s*[:\-=]?"
    r"|(?:my\s+)?answer\s*[:\-=])\s*",
    re.IGNORECASE,
)
# After the letter: the end, or punctuation that closes a letter ("A.", "A)", "A:", "**A**").
_CLOSE = set(".):]},;!*_`\"'”’»")
# A second option letter after the first ("A or B", "A/B", "A, B", "A and C").
_SECOND = re.compile(r"^\s*(?:[,/&+|]|or\b|and\b|-)\s*[\"'*(]?[A-Za-z](?![A-Za-z])", re.IGNORECASE)
_REFUSAL = re.compile(
    r"^sorry\b"
    r"|\b(?:i\s*(?:am|'m|’m)\s+(?:sorry|unable|not\s+able|not\s+comfortable)|i\s+apologi[sz]e"
    r"|i\s+(?:can\s*not|can't|can’t|won't|won’t|will\s+not|do\s+not|don't|don’t)"
    r"(?:\s*[.!]?\s*$|\s+(?:help|assist|answer|provide|determine|identify|make|comply|do\s+that"
    r"|infer|guess|speculate|classify|tell|say|judge|label))"
    r"|as\s+an\s+ai\b|not\s+(?:appropriate|able)\s+to"
    r"|unable\s+to\s+(?:help|assist|answer|determine|identify))",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Question:
    """One query: the prompt text and how its letters map back to labels.

    Attributes:
        attribute: ``gender`` or ``race``.
        text: The full prompt (question, lettered options, instruction).
        options: Letter → label, in the order shown (``{"A": "female", "B": "unclear", …}``).
        texts: Letter → the option text shown.
    """

    attribute: str
    text: str
    options: dict[str, str]
    texts: dict[str, str]

    @property
    def letters(self) -> tuple[str, ...]:
        return tuple(self.options)


def _rng(seed: int, annotator: str, item_id: str) -> random.Random:
    return random.Random(derive_seed("vote-question", int(seed), annotator, item_id))


def build_question(attribute: str, item_id: str, seed: int, *, annotator: str = "") -> Question:
    """The multiple-choice question one annotator is asked about one item.

    Args:
        attribute: ``gender`` or ``race``.
        item_id: The item (``"{shard}/{key}/{box_id}"``, :func:`fairsets.annotate.heads.labels.item_id`).
        seed: The vote's seed.
        annotator: The annotator's name; each annotator sees its own option order.

    Returns:
        The question; the same arguments always give the same question.

    Raises:
        ValueError: An unknown attribute.
    """
    if attribute not in OPTIONS:
        raise ValueError(f"unknown attribute {attribute!r}; choose one of {', '.join(ATTRIBUTES)}")
    question, options = OPTIONS[attribute]
    order = list(options)
    _rng(seed, annotator, item_id).shuffle(order)
    letters = string.ascii_uppercase[: len(order)]
    lines = [f"{letter}. {text}" for letter, (_, text) in zip(letters, order, strict=True)]
    text = f"{question}\n" + "\n".join(lines) + f"\n\n{INSTRUCTION}"
    return Question(
        attribute=attribute,
        text=text,
        options={letter: label for letter, (label, _) in zip(letters, order, strict=True)},
        texts={letter: t for letter, (_, t) in zip(letters, order, strict=True)},
    )


def _strip_lead(text: str) -> str:
    while True:
        before = text
        text = text.lstrip(_WRAP)
        text = _PREFIX.sub("", text, count=1)
        if text == before:
            return text


def _letter(text: str, question: Question) -> str | None:
    """The one option letter ``text`` starts with, or ``None`` (see :func:`parse_answer`)."""
    if not text or text[0].upper() not in question.options or not text[0].isascii():
        return None
    letter, rest = text[0].upper(), text[1:]
    if _SECOND.match(rest):
        return None
    if not rest or rest[0] in _CLOSE:
        tail = rest.lstrip("".join(_CLOSE))
        return None if _SECOND.match(tail) else letter
    if rest[0].isspace():
        line, _, tail = rest.partition("\n")
        if not line.strip() and "\n" in rest:  # the letter alone on its line, then an explanation
            return None if re.fullmatch(r"\s*[A-Za-z][.)]?\s*", tail.partition("\n")[0]) else letter
        shown = question.texts[letter].lower()
        body = rest.strip().lstrip("-–—: ").lower()  # "A only male person visible", "A - only …"
        return letter if body.startswith(shown) else None
    return None


def parse_answer(raw: Any, question: Question) -> tuple[str | None, str]:
    """Map an annotator's reply back to a label through ``question``'s shuffle.

    The rules, applied to the first 2000 characters of the reply:

    1. Leading wrappers are removed, repeatedly: whitespace, quotes, markdown (``*``, ``_``, `````,
       ``#``, ``>``), opening brackets, a byte-order mark or zero-width space, a ``<think>…</think>``
       block (of any length), and prefixes such as ``Answer:``, ``The answer is`` or ``Option``.
    2. What is left must start with one of the question's letters, upper or lower case, ASCII only
       (a Cyrillic ``А`` or a full-width ``Ａ`` is not a letter here), followed by the end of the
       reply, closing punctuation (``.``, ``)``, ``:``, ``**``, …) and then anything, a line break
       and then an explanation, or a space and the text of that same option (``A only male person
       visible``, ``A - only male person visible``). ``A woman`` or ``a man`` is not an answer (the
       letter could be the article).
    3. Two letters (``A or B``, ``A/B``, ``A, B``) are not an answer.
    4. A reply that fails 2–3 and reads as a refusal (``I can't help with that``, ``I'm sorry``,
       ``Sorry, …``, ``I cannot.``, ``As an AI``) is ``refused``; any other is ``invalid``. A refusal
       is not the ``unclear`` option: the model declined the question, it did not answer it.

    Args:
        raw: The reply text (anything else, e.g. ``None``, is ``invalid``).
        question: The question the reply answers.

    Returns:
        ``(label, "ok")``, ``(None, "refused")`` or ``(None, "invalid")``.
    """
    if not isinstance(raw, str):
        return None, INVALID
    text = raw.lstrip()
    if text[:7].lower() == "<think>":  # a reasoning block, however long, comes before the answer
        end = text.lower().find("</think>")
        text = text[end + len("</think>") :] if end >= 0 else ""
    text = _strip_lead(text[:_SCAN]).rstrip()
    letter = _letter(text, question)
    if letter is not None:
        return question.options[letter], OK
    if _REFUSAL.search(text):
        return None, REFUSED
    return None, INVALID


# --- race candidates by alt-text keyword ---------------------------------------------------------


def default_keywords_path() -> Path:
    """The keyword file that ships with fairsets (see its header for where the list comes from)."""
    return Path(str(resources.files("fairsets.annotate").joinpath("data", "race_keywords.toml")))


def load_keywords(path: str | os.PathLike[str] | None = None) -> dict[str, list[str]]:
    """Read a keyword file: one TOML table per label with a ``keywords`` list.

    ``[black]`` / ``keywords = ["African American", …]``; labels are those of the race question
    (:data:`OPTIONS`), ``unclear`` excepted. A keyword may be listed under several labels.

    Raises:
        AnnotationError: A missing or unreadable file, an unknown label, or an empty keyword list.
    """
    p = Path(path) if path is not None else default_keywords_path()
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AnnotationError(
            f"{p}: no such keyword file; give a TOML file with one table per label"
        ) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise AnnotationError(f"{p}: not a readable TOML keyword file ({e})") from None
    labels = {label for label, _ in OPTIONS["race"][1]} - {"unclear"}
    out: dict[str, list[str]] = {}
    for label, table in data.items():
        if label not in labels:
            raise AnnotationError(f"{p}: unknown label [{label}]; use {', '.join(sorted(labels))}")
        words = table.get("keywords") if isinstance(table, dict) else None
        if (
            not isinstance(words, list)
            or not words
            or not all(isinstance(w, str) and w.strip() for w in words)
        ):
            raise AnnotationError(f"{p}: [{label}] needs keywords = a non-empty list of non-empty strings")
        out[label] = [w.strip() for w in words]
    if not out:
        raise AnnotationError(f"{p}: no labels; write one [label] table with keywords = [...]")
    return out


_TOKEN = re.compile(r"\w+")


def _forms(word: str) -> set[str]:
    """The lower-case forms the last word of a keyword matches: itself and its plurals
    (:func:`fairsets.core.plurals.word_forms`, the rule of every word list of fairsets)."""
    return set(word_forms(word))


def _gate(keyword: str) -> set[str] | None:
    """Words one of which an ASCII caption must contain to match ``keyword`` (None: no shortcut)."""
    words = [w for w in re.split(r"[\s\-]+", keyword.strip()) if w]
    if not words or not all(_TOKEN.fullmatch(w) and w.isascii() for w in words):
        return None
    return _forms(words[0]) if len(words) == 1 else {max(words[:-1], key=len).lower()}


def _word(word: str, last: bool) -> str:
    if not last:
        return re.escape(word)
    forms = sorted(word_forms(word), key=lambda f: (-len(f), f))
    return "(?:" + "|".join(re.escape(f) for f in forms) + ")"


def _pattern(keyword: str) -> str:
    words = [w for w in re.split(r"[\s\-]+", keyword.strip()) if w]
    parts = [_word(w, i == len(words) - 1) for i, w in enumerate(words)]
    return r"(?<!\w)" + r"[\s\-]+".join(parts) + r"(?!\w)"


def recall_candidates(
    captions: Mapping[str, str] | Iterable[tuple[str, str]],
    keywords: Mapping[str, Iterable[str]],
) -> dict[str, list[str]]:
    """The items whose alt-text names each label, by keyword.

    Matching is case-insensitive and on word boundaries (``Thai`` does not match ``Thailand``);
    the last word of a keyword also matches its plural (``Filipinos``, ``Black women``, ``Asian
    people``), and a space and a hyphen are interchangeable (``African-American``). A caption may
    be recalled for several labels. Recall only proposes boxes for the vote; it labels nothing.

    Args:
        captions: ``item → alt-text`` (a mapping or pairs); a non-string caption matches nothing.
        keywords: ``label → keywords`` (:func:`load_keywords`).

    Returns:
        ``label → items`` in input order, for every label in ``keywords`` (possibly empty).
    """
    compiled: dict[str, re.Pattern[str]] = {}
    gates: dict[str, set[str] | None] = {}
    for label, words in keywords.items():
        words = list(words)
        compiled[label] = re.compile("|".join(_pattern(k) for k in words), re.IGNORECASE)
        parts = [_gate(k) for k in words]
        gates[label] = None if any(g is None for g in parts) else set().union(*parts)  # type: ignore[arg-type]
    out: dict[str, list[str]] = {label: [] for label in compiled}
    pairs = captions.items() if isinstance(captions, Mapping) else captions
    for item, text in pairs:
        if not isinstance(text, str):
            continue
        # Shortcut: an ASCII caption without any gate word cannot match (most captions).
        tokens = set(_TOKEN.findall(text.lower())) if text.isascii() else None
        for label, rx in compiled.items():
            gate = gates[label]
            if tokens is not None and gate is not None and tokens.isdisjoint(gate):
                continue
            if rx.search(text):
                out[label].append(item)
    return out
