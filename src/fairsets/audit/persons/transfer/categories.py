"""Social categories for the bias-transfer audit: the list, and which alt-texts name each one.

The list that ships with fairsets is ``data/social_categories_wordnet.toml`` (fairsets' short
``social_categories.toml`` plus WordNet 3.0 person nouns; see its header);
:func:`load_categories` reads it or your own. An alt-text **names** a category when, after the
innocent-sense phrases (:func:`.words.load_exclusions`, e.g. "tailor-made", "model train") are
masked out of it (:func:`.words.masked_sql`), one of the category's forms occurs in it as whole
words, case-insensitively; the forms are the category and its plural (:func:`.words.word_forms`:
``nurses``, ``salespeople``, ``police officers``), a space in a category also matching a hyphen
(``make-up artist`` is not ``makeup artist``, though). :func:`category_pattern` is that rule as one
RE2 regular expression; :func:`count_named` counts, per image group, the images whose alt-text
names each category in one streamed DuckDB pass.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from ..tables import blank_sql
from ..words import masked_sql, read_word_file, sql_str, word_forms

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover
    pass  # type: ignore[no-redef]

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "category_pattern",
    "check_categories",
    "count_named",
    "default_categories_path",
    "load_categories",
]

#: Not a word character (a letter or digit of any script, or ``_``), in RE2 syntax as DuckDB runs it.
_NOT_WORD = r"[^\pL\pN_]"
#: What separates the words of a category in an alt-text.
_SEP = r"[\s\-]+"


def default_categories_path() -> Path:
    """The category file that ships with fairsets (see its header for provenance and licence)."""
    data = resources.files("fairsets.audit.persons").joinpath("data", "social_categories_wordnet.toml")
    return Path(str(data))


def load_categories(path: str | os.PathLike[str] | None = None) -> list[str]:
    """Read a category file: one or more TOML tables (kinds), each with ``categories = [...]``.

    ``None`` reads the list that ships with fairsets; a file of yours replaces it (it is not
    merged). Categories keep the file's order; the same category twice (any case) is an error.

    Raises:
        ValueError: a missing or unreadable file, a table without a non-empty ``categories`` list
            of non-empty strings, a duplicate, or no category at all (one line each).
    """
    p = Path(path) if path is not None else default_categories_path()
    data = read_word_file(p, "category", "categories")
    out: list[str] = []
    seen: dict[str, str] = {}
    for kind, table in data.items():
        words = table.get("categories") if isinstance(table, dict) else None
        if (
            not isinstance(words, list)
            or not words
            or not all(isinstance(w, str) and w.strip() for w in words)
        ):
            raise ValueError(f"{p}: [{kind}] needs categories = a non-empty list of non-empty strings")
        for w in words:
            word = " ".join(w.split())
            if word.lower() in seen:
                raise ValueError(f"{p}: {word!r} is listed twice ([{seen[word.lower()]}] and [{kind}])")
            seen[word.lower()] = kind
            out.append(word)
    if not out:
        raise ValueError(f"{p}: no categories; write a [kind] table with categories = [...]")
    return out


def check_categories(categories: Sequence[str]) -> list[str]:
    """``categories`` with runs of whitespace made one space; each once (any case), none empty."""
    if isinstance(categories, str):
        raise TypeError("categories is a sequence of strings, not one string")
    cats = [" ".join(str(c).split()) for c in categories]
    if not cats or not all(cats):
        raise ValueError("categories: give at least one category, none empty")
    lows = [c.lower() for c in cats]
    dups = sorted({c for c in lows if lows.count(c) > 1})
    if dups:
        raise ValueError(f"categories: {', '.join(dups)} given more than once; give each once")
    return cats


def _words(text: str) -> list[str]:
    return [w for w in re.split(r"[\s\-]+", text.strip()) if w]


def _forms(category: str) -> list[list[str]]:
    """Each form of ``category`` (:func:`.words.word_forms`) as its lower-case words."""
    out: list[list[str]] = []
    for form in word_forms(category) or [category.lower()]:
        words = _words(form.lower())
        if words and words not in out:
            out.append(words)
    return out


def category_pattern(category: str) -> str:
    """The regular expression (RE2 syntax, as DuckDB's ``regexp_matches`` runs it) that finds
    ``category`` in an alt-text: case-insensitive, whole words, any of its forms (itself and its
    plural: ``nurses``, ``secretaries``, ``police officers``, ``people``), a space matching hyphens
    and runs of spaces. :func:`count_named` runs it on the masked, lower-cased alt-text."""
    if not _words(category):
        raise ValueError("category_pattern: an empty category")
    alts = [_SEP.join(re.escape(w) for w in words) for words in _forms(category)]
    return f"(?i)(?:^|{_NOT_WORD})(?:" + "|".join(alts) + f")(?:$|{_NOT_WORD})"


def _alnum(word: str) -> bool:
    return all(ch.isalnum() or ch == "_" for ch in word)


def _token_forms(category: str) -> list[str] | None:
    """The lower-case words that can end ``category`` in an alt-text (the last word of each of its
    forms: ``officer``, ``officers``), or None when a word of a form holds a character outside
    words (``c++``): such a category is searched with its pattern alone."""
    forms = _forms(category)
    if not forms or not all(_alnum(w) for words in forms for w in words):
        return None
    return list(dict.fromkeys(words[-1] for words in forms))


def count_named(
    con: duckdb.DuckDBPyConnection,
    cats: Sequence[str],
    *,
    group_sql: str,
    where_sql: str,
    exclusions: Sequence[str] = (),
) -> tuple[dict[tuple[str, int], int], dict[str, int]]:
    """Per image group, the person images whose alt-text names each category, and all of them.

    Args:
        con: a :func:`.tables.connect` connection.
        cats: the categories (:func:`check_categories`).
        group_sql: SQL over a ``person_images`` row giving the image's group (``gender``).
        where_sql: SQL that keeps the images of the analysis (``gender IN ('female', 'male')``).
        exclusions: innocent-sense phrases masked out of the alt-text before matching.

    Returns:
        ``({(group, category index): images naming it}, {group: images})``. Only images with an
        alt-text that is not blank (:func:`.tables.blank_sql`) count, in both.

    One pass over the alt-texts: each masked alt-text is cut into its words once, and only the
    images with a word that can end a category (``nurse``, ``nurses``, ``officers``) are
    candidates. A candidate of a one-word category is a match (the whole-word rule of
    :func:`category_pattern` is exactly "one of the alt-text's words"); one of a longer category is
    checked with its pattern. A category with a character outside words (``c++``) is matched with
    its pattern on every alt-text that contains the longest word all its forms share. Counting
    every alt-text against every pattern instead costs one regular-expression pass per category
    (about 10x slower with a hundred categories).
    """
    lc = masked_sql("caption", list(exclusions))
    base = (
        f"SELECT shard, key, {group_sql} AS grp, {lc} AS lc FROM person_images "
        f"WHERE ({where_sql}) AND NOT {blank_sql('caption')}"
    )
    totals = {
        str(g): int(n) for g, n in con.execute(f"SELECT grp, count(*) FROM ({base}) GROUP BY grp").fetchall()
    }
    forms, patterns = [], []
    for i, c in enumerate(cats):
        tokens = _token_forms(c)
        if tokens is None:
            patterns.append((i, c))
            continue
        single = all(len(words) == 1 for words in _forms(c))
        forms += [(w, i, None if single else category_pattern(c)) for w in tokens]
    out: dict[tuple[str, int], int] = {}
    if forms:
        values = ", ".join(f"({sql_str(w)}, {i})" for w, i, _ in forms)
        # One constant pattern per longer category (compiled once), not a pattern column.
        checks = {i: p for _, i, p in forms if p}
        check = (
            "CASE f.cat "
            + " ".join(f"WHEN {i} THEN regexp_matches(w.lc, {sql_str(p)})" for i, p in checks.items())
            + " ELSE true END"
            if checks
            else "true"
        )
        rows = con.execute(
            f"WITH forms(word, cat) AS (VALUES {values}), "
            f"words AS (SELECT shard, key, grp, lc, unnest(list_distinct(regexp_extract_all(lc, "
            f"'[\\pL\\pN_]+'))) AS word FROM ({base})) "
            "SELECT grp, cat, count(*) FROM (SELECT DISTINCT w.shard, w.key, w.grp, f.cat "
            f"FROM words w JOIN forms f ON w.word = f.word WHERE {check}) GROUP BY ALL"
        ).fetchall()
        out.update({(str(g), int(i)): int(n) for g, i, n in rows})
    for i, c in patterns:
        # a cheap pre-test: the longest word every form of the category holds
        common = set.intersection(*(set(words) for words in _forms(c)))
        stem = f"contains(lc, {sql_str(max(sorted(common), key=len))}) AND " if common else ""
        rows = con.execute(
            f"SELECT grp, count(*) FROM ({base}) WHERE {stem}"
            f"regexp_matches(lc, {sql_str(category_pattern(c))}) GROUP BY grp"
        ).fetchall()
        out.update({(str(g), i): int(n) for g, n in rows})
    return out, totals
