"""Data bias of social categories: how often the alt-texts name a category beside one perceived
group rather than another, per category.

* **Gender** (:func:`data_bias`, the study's measure) — among the *single-gender* person images
  (the exclusive image-level rule of :mod:`.tables`: every gender-labelled box ``female``, or every
  one ``male``; ``unclear`` boxes beside them allowed; mixed, unclear-only and unlabelled images
  count nowhere) whose alt-text names ``c`` (:mod:`.categories`), the ``female`` and
  ``male`` counts, ``bias = (female − male) / (female + male)`` in [−1, 1] and ``share_female =
  female / (female + male)`` (the study's "proportion of female images"; bias = 2·share − 1, so ρ
  and R² are the same with either).
* **Race** (:func:`race_data_bias`, beyond the study) — among the *single-race* person images (the
  race-labelled boxes that are not ``unclear`` all share one race: the image's exclusive race group
  of :mod:`.tables` is a race) whose alt-text names ``c``, the count of each race ``g`` and ``share_g = n_g /
  n``: the data bias of ``g`` against the rest.

Only images whose alt-text is not blank (NULL, or nothing but whitespace: :func:`.tables.blank_sql`)
count, in every count and denominator. A category named in fewer than ``min_count`` such images is
dropped and listed with its counts. Innocent-sense phrases (:func:`.words.load_exclusions`) are
masked out of the alt-text before matching; ``exclusions=None`` uses the shipped list.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..tables import MIXED, UNCLEAR, UNLABELLED, blank_sql, labelled_attributes
from ..words import default_exclusions_path, load_exclusions, matched_phrases
from .categories import check_categories, count_named

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "RACE_GROUP_SQL",
    "RACE_SINGLE_SQL",
    "data_bias",
    "exclusions_record",
    "race_data_bias",
    "race_groups",
]

_GENDER_WHERE = "gender IN ('female', 'male')"
#: The one race of a single-race image: the image's exclusive race group (:mod:`.tables`).
RACE_GROUP_SQL = "race"
#: True for a single-race image: its exclusive race group is a race, not mixed, unclear or unlabelled.
RACE_SINGLE_SQL = f"race NOT IN ('{MIXED}', '{UNCLEAR}', '{UNLABELLED}')"

MATCH_RULE = (
    "the alt-text, lower-cased and with the innocent-sense phrases of the exclusions file masked "
    "out, names the category: one of its forms (itself and its plural by the inflect library) as "
    "whole words, a space in the category also matching a hyphen"
)


def exclusions_record(path: str | os.PathLike[str] | None, *, use: bool = True) -> tuple[list[str], dict]:
    """``(phrases, record)`` of the exclusions in use: the shipped file (``path=None``), yours, or
    none (``use=False``); ``record`` (for the JSON) names the file, its SHA-256 and its phrases."""
    if not use:
        return [], {"file": None, "sha256": None, "phrases": 0}
    p = Path(path) if path is not None else default_exclusions_path()
    phrases = load_exclusions(p)
    return list(phrases), {
        "file": p.name if path is not None else f"default ({p.name})",
        "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
        "phrases": len(phrases),
    }


def _exclusions(exclusions: Sequence[str] | None) -> list[str]:
    return list(load_exclusions() if exclusions is None else exclusions)


def _check_min_count(min_count: Any) -> int:
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
        raise ValueError(f"min_count must be a whole number ≥ 1, not {min_count!r}")
    return min_count


def _checked(
    con: duckdb.DuckDBPyConnection, categories: Sequence[str], min_count: Any, attr: str
) -> list[str]:
    """The checked categories, once ``min_count`` is checked and the folder has ``attr`` labels."""
    cats = check_categories(categories)
    _check_min_count(min_count)
    if not labelled_attributes(con, "boxes")[attr]:
        raise ValueError(
            f"the folder has no {attr} labels; run fairsets annotate classify --attribute {attr}"
        )
    return cats


def data_bias(
    con: duckdb.DuckDBPyConnection,
    categories: Sequence[str],
    *,
    min_count: int = 100,
    exclusions: Sequence[str] | None = None,
    top_phrases: int = 5,
) -> dict:
    """Per category, the female and male single-gender images whose alt-text names it.

    Args:
        con: a connection from :func:`fairsets.audit.persons.tables.connect` (needs gender labels).
        categories: the categories (:func:`.categories.load_categories`).
        min_count: keep a category when female + male ≥ this; the others are listed in ``dropped``.
        exclusions: phrases masked out of the alt-texts first (None: the shipped list; ``[]``: none).
        top_phrases: list the phrases (the match with a word each side) each kept category matched
            most often in these alt-texts, at most this many (0: none), so a reader can see what
            was counted (:func:`.words.matched_phrases`).

    Returns:
        ``{"categories": [{"category", "female", "male", "n", "bias", "share_female",
        "matched_phrases": [{"phrase", "count"}, ...]}, ...]`` (kept, in the order given),
        ``"dropped": [{"category", "female", "male", "n"}, ...]``,
        ``"n_single_gender"`` (single-gender images with a non-blank alt-text), ``"n_female"``,
        ``"n_male"``, ``"min_count"`` and ``"definitions"``.

    Raises:
        ValueError: no gender labels in the folder, a bad ``min_count`` or bad categories.
    """
    cats = _checked(con, categories, min_count, "gender")
    if isinstance(top_phrases, bool) or not isinstance(top_phrases, int) or top_phrases < 0:
        raise ValueError(f"top_phrases must be a whole number ≥ 0, not {top_phrases!r}")
    phrases = _exclusions(exclusions)
    counts, totals = count_named(con, cats, group_sql="gender", where_sql=_GENDER_WHERE, exclusions=phrases)
    kept, dropped = [], []
    for i, c in enumerate(cats):
        f, m = counts.get(("female", i), 0), counts.get(("male", i), 0)
        n = f + m
        if n >= min_count:
            kept.append(
                {"category": c, "female": f, "male": m, "n": n, "bias": (f - m) / n, "share_female": f / n}
            )
        else:
            dropped.append({"category": c, "female": f, "male": m, "n": n})
    if kept and top_phrases:
        texts = f"SELECT caption FROM person_images WHERE {_GENDER_WHERE} AND NOT {blank_sql('caption')}"
        found = matched_phrases(con, texts, [r["category"] for r in kept], phrases, top=top_phrases)
        low = {k.lower(): v for k, v in found.items()}
        for r in kept:
            r["matched_phrases"] = low.get(r["category"].lower(), [])
    n_f, n_m = totals.get("female", 0), totals.get("male", 0)
    return {
        "categories": kept,
        "dropped": dropped,
        "n_single_gender": n_f + n_m,
        "n_female": n_f,
        "n_male": n_m,
        "min_count": min_count,
        "definitions": {
            "images": "single-gender person images (image-level rule exclusive: every gender-labelled "
            "kept box female, or every one male; unclear boxes beside them allowed; mixed, "
            "unclear-only and unlabelled images count nowhere) whose alt-text is not NULL or blank",
            "n_single_gender": "such images, the denominator of n_female and n_male",
            "match": MATCH_RULE,
            "bias": "(female − male) / (female + male), in [-1, 1]; positive: named more with women",
            "share_female": "female / (female + male), the study's proportion of female images",
            "kept": f"categories named in at least {min_count} such images (female + male)",
            "matched_phrases": f"per kept category, the {top_phrases} phrases (the match with a word "
            "each side) it matched in the most of these alt-texts, after masking",
        },
    }


def race_groups(
    con: duckdb.DuckDBPyConnection, declared: Sequence[str] | None = None
) -> tuple[list[str], str]:
    """``(race groups, where they come from)``: ``declared`` (the race head's classes from the
    annotation manifest) when given, else the race labels present; ``unclear`` is never a group."""
    if declared:
        groups = [str(g) for g in declared if str(g) != "unclear"]
        return list(dict.fromkeys(groups)), "the classes of the race head recorded in the manifest"
    rows = con.execute(
        "SELECT DISTINCT perceived_race FROM boxes WHERE perceived_race IS NOT NULL "
        "AND perceived_race <> 'unclear' ORDER BY 1"
    ).fetchall()
    return [str(r[0]) for r in rows], "the race labels present (no race head recorded in the manifest)"


def race_data_bias(
    con: duckdb.DuckDBPyConnection,
    categories: Sequence[str],
    *,
    min_count: int = 100,
    exclusions: Sequence[str] | None = None,
    groups: Sequence[str] | None = None,
) -> dict:
    """Per category, the single-race images whose alt-text names it, by race, and each race's share.

    Args:
        con: a :func:`fairsets.audit.persons.tables.connect` connection (needs race labels).
        categories: the categories.
        min_count: keep a category named in at least this many single-race images.
        exclusions: as for :func:`data_bias`.
        groups: the declared race groups (:func:`race_groups`; None: the labels present).

    Returns:
        ``{"groups", "groups_source", "categories": [{"category", "n", "counts": {g: n_g},
        "shares": {g: n_g / n}}, ...], "dropped": [{"category", "n", "counts"}, ...],
        "n_single_race", "n_by_race": {g: images}, "other": {race: images} (single-race images
        of a race outside ``groups``, counted in n), "min_count", "definitions"}``.

    Raises:
        ValueError: no race labels in the folder, a bad ``min_count`` or bad categories.
    """
    cats = _checked(con, categories, min_count, "race")
    declared, source = race_groups(con, groups)
    counts, totals = count_named(
        con, cats, group_sql=RACE_GROUP_SQL, where_sql=RACE_SINGLE_SQL, exclusions=_exclusions(exclusions)
    )
    present = sorted({g for g, _ in counts} | set(totals))
    kept, dropped = [], []
    for i, c in enumerate(cats):
        by = {g: counts.get((g, i), 0) for g in dict.fromkeys([*declared, *present])}
        n = sum(by.values())
        row = {"category": c, "n": n, "counts": {g: by[g] for g in declared}}
        if n >= min_count:
            kept.append({**row, "shares": {g: by[g] / n for g in declared}})
        else:
            dropped.append(row)
    return {
        "groups": declared,
        "groups_source": source,
        "categories": kept,
        "dropped": dropped,
        "n_single_race": sum(totals.values()),
        "n_by_race": {g: totals.get(g, 0) for g in declared},
        "other": {g: n for g, n in totals.items() if g not in declared},
        "min_count": min_count,
        "definitions": {
            "images": "single-race person images (image-level rule exclusive: every race-labelled kept "
            "box that is not unclear has one and the same race; unclear boxes beside it allowed; "
            "mixed, unclear-only and unlabelled images count nowhere) whose alt-text is not NULL or "
            "blank",
            "groups": f"the race groups: {source}; unclear is a label, not a group",
            "match": MATCH_RULE,
            "share": "share_g(c) = single-race images of race g naming c / all single-race images "
            "naming c: the data bias of g against the rest (base rate: n_by_race / n_single_race)",
            "kept": f"categories named in at least {min_count} single-race images",
        },
    }
