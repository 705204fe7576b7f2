"""Identity words masked in the theme texts before they are embedded (``--no-identity-mask`` keeps
them).

The themes of :mod:`.themes` are meant to say what the texts about a perceived group talk about.
When the texts still say "man", "she" or "Asian", the latents most tied to each group are those
words themselves, and a real theme (sports, culture, markets) does not reach the top. So every
identity word is replaced by a neutral word first (``replacement``, "person" by default: "a
woman surfing" is embedded as "a person surfing"). The words are the lists that define the
groups:

* **gender** — ``data/identity_words.toml`` (its header gives its provenance): gendered person
  nouns, kinship and address terms, third-person pronouns, every form listed;
* **race** — the alt-text keywords of the race groups (``fairsets/annotate/data/race_keywords.toml``,
  :func:`fairsets.annotate.vote.prompts.load_keywords`), with the plural of each keyword's last
  word (:func:`.words.word_forms`).

Matching is case-insensitive, whole words (the neighbours of a match are not letters, digits or
``_``), and a space in an entry matches any run of spaces or hyphens. Longer entries are tried
first, so "African American" is one match, not two. Python's :mod:`re` runs on the theme sample
only (at most ``--themes-max-texts`` texts).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10 needs the tomli backport
    import tomli as tomllib  # type: ignore[no-redef]

from fairsets.annotate.layout import AnnotationError

__all__ = ["IdentityMask", "default_identity_words_path", "load_identity_mask"]


def default_identity_words_path() -> Path:
    """The gender word file that ships with fairsets (its header says where the list comes from)."""
    return Path(str(resources.files("fairsets.audit.persons").joinpath("data", "identity_words.toml")))


def _forms(entry: str, plural: bool) -> list[str]:
    low = " ".join(entry.lower().split())
    if not plural:
        return [low] if low else []
    from .words import word_forms

    return list(word_forms(low))


def _source(form: str) -> str:
    parts = []
    for ch in form:
        parts.append(r"[\s\-]+" if ch == " " else re.escape(ch))
    return "".join(parts)


@dataclass(frozen=True)
class IdentityMask:
    """Replaces the identity words of texts (see the module docstring).

    Attributes:
        words: ``{attribute: [entries]}`` as read (entries of race keywords without their plurals).
        replacement: what every match becomes.
        sources: ``{attribute: file name}`` of each list.
    """

    words: dict[str, list[str]]
    replacement: str
    sources: dict[str, str]
    pattern: Any

    def mask(self, texts: Sequence[str]) -> tuple[list[str], dict[str, int]]:
        """``(masked texts, counts)``: counts are ``texts_masked`` (texts with a replacement) and
        ``words_masked`` (replacements in all)."""
        out, changed, total = [], 0, 0
        for text in texts:
            new, n = self.pattern.subn(self.replacement, text)
            out.append(new)
            changed += n > 0
            total += n
        return out, {"texts_masked": changed, "words_masked": total}

    def describe(self) -> dict[str, Any]:
        """JSON-ready: the lists' sources and sizes and the replacement."""
        return {
            "replacement": self.replacement,
            "sources": dict(self.sources),
            "n_words": {a: len(w) for a, w in self.words.items()},
        }


def _read_toml(p: Path, what: str) -> dict[str, Any]:
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AnnotationError(f"{p}: no such {what} file") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise AnnotationError(f"{p}: not a readable TOML {what} file ({e})") from None


def load_identity_mask(
    gender_words: str | os.PathLike[str] | None = None,
    race_keywords: str | os.PathLike[str] | None = None,
    attributes: Sequence[str] = ("gender", "race"),
) -> IdentityMask:
    """The mask of the identity words of ``attributes``.

    Args:
        gender_words: a TOML file like ``data/identity_words.toml`` (``replacement`` and
            ``[gender] words = [...]``); None: the shipped one.
        race_keywords: a race keyword file (:func:`fairsets.annotate.vote.prompts.load_keywords`);
            None: the shipped one.
        attributes: which lists to mask (``gender``, ``race``).

    Raises:
        AnnotationError: a missing or malformed file (one line).
    """
    from fairsets.annotate.vote.prompts import default_keywords_path, load_keywords

    p = Path(gender_words) if gender_words is not None else default_identity_words_path()
    data = _read_toml(p, "identity word")
    replacement = data.get("replacement", "person")
    table = data.get("gender")
    gender = table.get("words") if isinstance(table, dict) else None
    if not isinstance(replacement, str) or not isinstance(gender, list) or not gender:
        raise AnnotationError(f'{p}: needs replacement = "..." and [gender] words = a non-empty list')
    if not all(isinstance(w, str) and w.strip() for w in gender):
        raise AnnotationError(f"{p}: [gender] words must be non-empty strings")
    words: dict[str, list[str]] = {}
    sources: dict[str, str] = {}
    forms: set[str] = set()
    if "gender" in attributes:
        words["gender"] = [w.strip() for w in gender]
        sources["gender"] = p.name
        forms.update(f for w in gender for f in _forms(w, plural=False))
    if "race" in attributes:
        rp = Path(race_keywords) if race_keywords is not None else default_keywords_path()
        keywords = load_keywords(rp)
        words["race"] = sorted({k for ks in keywords.values() for k in ks}, key=str.lower)
        sources["race"] = rp.name
        forms.update(f for w in words["race"] for f in _forms(w, plural=True))
    alternation = "|".join(_source(f) for f in sorted(forms, key=lambda f: (-len(f), f)))
    pattern = re.compile(rf"(?<!\w)(?:{alternation})(?!\w)" if forms else r"(?!)", re.IGNORECASE)
    return IdentityMask(words=words, replacement=replacement, sources=sources, pattern=pattern)
