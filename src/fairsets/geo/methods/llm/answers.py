"""Reading an LLM's answer: :func:`parse_answer` normalises it to an ISO 3166-1 alpha-3 code."""

from __future__ import annotations

import re

from ...countries import country_terms, fold, is_none_answer, normalize_country

__all__ = ["MalformedAnswer", "parse_answer"]


class MalformedAnswer(ValueError):
    """An LLM answer that names no recognisable country and is not a "no"."""


_THINK = re.compile(r"<think>.*?(</think>|$)", re.I | re.S)
_OUTPUT = re.compile(r"\boutput\s*:", re.I)
_MARKDOWN = re.compile(r"[*_`#>~]+")
_SEGMENTS = re.compile(r"[,;/|()\[\]{}\n]+")
_WORD = re.compile(r"[^\W_]+(?:[.'’-][^\W_]+)*\.?")
_NO_WORDS = frozenset({"no", "none", "unknown", "nowhere", "not", "cannot", "can't", "unspecified"})
#: Country codes that are also English words: not taken as codes inside a sentence, even in capitals.
_CODE_WORDS = frozenset(
    {
        "am",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "cod",
        "do",
        "fin",
        "gum",
        "in",
        "is",
        "it",
        "lie",
        "mac",
        "mar",
        "me",
        "my",
        "no",
        "pan",
        "per",
        "so",
        "to",
        "ton",
    }
)
_MAX_TERM_WORDS = 7


def _clean(text: str) -> str:
    """Drop markdown, surrounding quotes/brackets and trailing punctuation."""
    text = _MARKDOWN.sub(" ", text).strip()
    while True:
        before = text
        text = text.strip(" \t\"'“”‘’«».,:;!?")
        if len(text) >= 2 and text[0] + text[-1] in ("()", "[]", "{}", "<>"):
            text = text[1:-1]
        if text == before:
            return text


def _is_no(text: str) -> bool:
    """``No``, ``NO.``, ``No country``, ``None specified``, ``Not mentioned``…"""
    if is_none_answer(text):
        return True
    words = fold(text).split()
    # A whole answer "NA" is "not applicable" from a model, not Namibia (which it would name).
    return bool(words) and (words[0] in _NO_WORDS or " ".join(words[:2]) == "n a" or words == ["na"])


def _scan(text: str) -> str | None:
    """The last country named in free text: longest names first; codes only when written upper-case."""
    terms = country_terms()
    words = _WORD.findall(text)
    folded = [fold(w) for w in words]
    found: str | None = None
    i = 0
    while i < len(words):
        step = 1
        for n in range(min(_MAX_TERM_WORDS, len(words) - i), 0, -1):
            key = " ".join(f for f in folded[i : i + n] if f)
            if not key:
                continue
            hit = next((terms[k][key] for k in ("name", "alias", "demonym") if key in terms[k]), None)
            if hit is None and key.startswith("the "):
                hit = next((terms[k][key[4:]] for k in ("name", "alias") if key[4:] in terms[k]), None)
            if hit is None and n == 1:
                letters = words[i].replace(".", "")
                if len(letters) >= 2 and letters.isalpha() and letters.isupper() and key not in _CODE_WORDS:
                    hit = terms["code"].get(key)
            if hit is not None:
                found, step = hit, n
                break
        i += step
    return found


def parse_answer(text: str) -> str | None:
    """Normalise an LLM answer to an ISO alpha-3 code, or ``None`` for a "no country" answer.

    Handles the paper's format and the usual deviations: ``"Output: France"``, ``"France"``,
    ``"Output: (France)"``, ``"**France**"``, ``"'France'."``, ``"Output: No"``, ``"NO"``,
    ``"no."``, ``"United States of America"``, demonyms (``"Brazilian"``), sentences (``"The photo
    was taken in Brazil."``) and places with their country (``"Output: Paris, France"``: the last
    country named wins). ``<think>…</think>`` blocks of reasoning models are ignored.

    Args:
        text: the model's raw answer.

    Returns:
        The ISO 3166-1 alpha-3 code, or ``None`` when the answer says there is no country.

    Raises:
        MalformedAnswer: the answer is empty, or names no country and is not a "no".
    """
    body = _THINK.sub(" ", text or "").strip()
    if not body:
        raise MalformedAnswer("empty answer")
    plain = _MARKDOWN.sub(" ", body)
    marks = list(_OUTPUT.finditer(plain))
    if marks:
        rest = plain[marks[-1].end() :].strip()
        first = rest.splitlines()[0] if rest else ""
    else:
        lines = [ln for ln in plain.splitlines() if ln.strip()]
        first = lines[0] if lines else ""
    for candidate in dict.fromkeys((_clean(first), _clean(plain))):
        if not candidate:
            continue
        if _is_no(candidate):
            return None
        code = normalize_country(candidate)
        if code:
            return code
        for segment in reversed(_SEGMENTS.split(candidate)):
            seg = _clean(segment or "")
            if seg and not _is_no(seg) and (code := normalize_country(seg)):
                return code
        code = _scan(candidate)
        if code:
            return code
    raise MalformedAnswer(f"no country in answer {_clip(body)!r}")


def _clip(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
