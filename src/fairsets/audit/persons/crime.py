"""Crime-word association: how much more (or less) often the texts of images showing a perceived
group use a crime word than a reference set of texts.

For a group ``g`` and a kind of text, with the reference set ``R`` (``delta_reference``)::

    Δ_g = P(crime word | text of g) / P(crime word | text of R) − 1     (in percent)

* ``all`` (the default, the paper's reading): ``R`` is every text of that kind (``overall``);
* ``complement``: ``R`` is the texts of that kind **not** in ``g``.

Both are computed; the one not chosen is under ``alternative`` (the same data can read +14 % or
+91 % for the same group, so the reference is always stated).

* **alt-text** (``texts`` has ``"alt"``): the texts are the alt-texts of the *person images* (images
  with at least one kept box, the ``person_images`` view of :mod:`.tables`); an image's alt-text is
  "of g" when the image is in group ``g`` by the one image-level rule of :mod:`.tables`
  (``group_rule``: ``exclusive`` by default — one gender and one race group per image, ``mixed``,
  ``unclear`` and ``unlabelled`` included — or ``any``: every group one of its boxes has).
* **person captions** (``"person"``): the texts are the person captions (``annotate caption``),
  each "of" its own box's labels (``unlabelled`` when the box has none); each captioner
  (``annotator``) gets its own section, as their wording differs.

A text *matches* when at least one word of the list occurs in it **after the innocent-sense
phrases are blanked** (:mod:`.words`: ``masked_sql`` blanks the exclusion phrases — "killer whale",
"cardiac arrest", "true crime novel" … — and ``word_pattern`` finds whole words with their
inflections). The rate of a group is its matching texts over its texts, with its 95 % Wilson
interval; NULL and blank texts are not texts (they are counted as ``no_text``). Δ is ``None``, with
the ``reason``, when the group has fewer than ``min_count`` texts (a ratio of a handful of
captions is noise), when the reference set is empty or none of its texts matches (the ratio is
undefined). The counts behind every ratio (``matches`` and ``n`` per group, its ``reference`` and
overall) are in the result, and ``top_phrases`` lists, per word, the phrases it matched most (so a
reader can audit what was counted).

**Streaming.** The pattern is one RE2 regular expression run inside DuckDB with
``regexp_matches``: one pass over each kind of text, grouped by the groups, returns a few rows, so
no caption is ever held in Python. RE2 runs in time linear in the text, so a huge or hostile
caption cannot hang the audit.

The word list is :func:`load_crime_words`: the default ``data/crime_words.toml`` (its header gives
its provenance, licence and intent) or a user TOML file with the same ``words = [...]`` key; the
exclusions are :func:`.words.load_exclusions`' (the shipped phrase table, or a user file).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fairsets.annotate.layout import AnnotationError
from fairsets.audit.persons.composition import group_order, share
from fairsets.audit.persons.tables import (
    DEFAULT_GROUP_RULE,
    blank_sql,
    check_group_rule,
    group_rule_definition,
    groups_sql,
    labelled_attributes,
    own_box_groups_sql,
    view_names,
)
from fairsets.audit.persons.words import (
    EXCLUSIONS_RULE,
    MATCH_RULE,
    dedupe_words,
    load_exclusions,
    masked_sql,
    matched_phrases,
    read_word_file,
    sql_str,
    word_pattern,
)

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "DELTA_REFERENCES",
    "crime_association",
    "default_crime_words_path",
    "load_crime_words",
    "word_pattern",
]

_TEXTS = ("alt", "person")
#: The reference sets of Δ (see the module docstring); the first is the default.
DELTA_REFERENCES = ("all", "complement")


def default_crime_words_path() -> Path:
    """The crime-word file that ships with fairsets (its header says where the list comes from)."""
    return Path(str(resources.files("fairsets.audit.persons").joinpath("data", "crime_words.toml")))


def load_crime_words(path: str | os.PathLike[str] | None = None) -> list[str]:
    """The crime words of a TOML file with one key, ``words = ["thief", "drug dealer", …]``.

    ``None`` reads the default list. Entries are stripped and de-duplicated case-insensitively
    (first spelling kept).

    Raises:
        AnnotationError: a missing or unreadable file, another key than ``words``, or ``words`` not
            a non-empty list of non-empty strings (one line each).
    """
    p = Path(path) if path is not None else default_crime_words_path()
    data = read_word_file(p, "word", "words", AnnotationError)
    extra = sorted(set(data) - {"words"})
    if extra:
        raise AnnotationError(f"{p}: unknown key {extra[0]!r}; the file has one key, words = [...]")
    words = data.get("words")
    if not isinstance(words, list) or not words or not all(isinstance(w, str) and w.strip() for w in words):
        raise AnnotationError(f"{p}: words must be a non-empty list of non-empty strings")
    return dedupe_words(words)


def _rate(matches: int, n: int) -> dict[str, Any]:
    entry = share(matches, n)
    return {"matches": entry["count"], "n": entry["n"], "rate": entry["share"], "ci95": entry["ci95"]}


def _delta(matches: int, n: int, ref_matches: int, ref_n: int, reference: str, min_count: int) -> dict:
    """Δ of a group of ``matches`` / ``n`` against a reference set of ``ref_matches`` / ``ref_n``."""
    ref = {"matches": ref_matches, "n": ref_n, "rate": ref_matches / ref_n if ref_n else None}
    delta, reason = None, None
    if n < min_count:
        reason = f"fewer than {min_count} texts ({n})"
    elif not ref_n:
        reason = f"the reference set ({reference}) has no text"
    elif not ref_matches:
        reason = f"no text of the reference set ({reference}) matches a crime word"
    else:
        delta = 100.0 * ((matches / n) / ref["rate"] - 1.0)
    return {"delta_pct": delta, "reason": reason, "reference": ref}


def _section(
    rows: Iterable[tuple[Any, Any, bool | None, int]], has: dict[str, bool], min_count: int, reference: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(section, its alternative)`` from ``(gender groups, race groups, hit, count)`` rows (groups
    are lists, None without labels; hit None is a NULL/blank text): rates, and Δ against the
    chosen ``reference`` in the section and against the other one in the alternative."""
    total = matched = no_text = 0
    by: dict[str, dict[str, list[int]]] = {
        "gender": defaultdict(lambda: [0, 0]),
        "race": defaultdict(lambda: [0, 0]),
    }
    for genders, races, hit, count in rows:
        if hit is None:
            no_text += count
            continue
        total += count
        matched += count if hit else 0
        for attr, groups in (("gender", genders), ("race", races)):
            for g in groups or []:
                by[attr][g][0] += count if hit else 0
                by[attr][g][1] += count
    other = next(r for r in DELTA_REFERENCES if r != reference)
    out: dict[str, Any] = {"overall": _rate(matched, total), "no_text": no_text}
    alternative: dict[str, Any] = {}
    for attr in ("gender", "race"):
        if not has[attr]:
            out[attr] = alternative[attr] = None
            continue
        out[attr], alternative[attr] = {}, {}
        for g in group_order(attr, by[attr]):
            m, n = by[attr].get(g, (0, 0))
            refs = {"all": (matched, total), "complement": (matched - m, total - n)}
            deltas = {r: _delta(m, n, *refs[r], r, min_count) for r in DELTA_REFERENCES}
            out[attr][g] = _rate(m, n) | deltas[reference]
            alternative[attr][g] = deltas[other]
    return out, alternative


def _exclusion_count(exclusions: Any) -> int | None:
    try:
        return len(exclusions)
    except TypeError:
        return None


def crime_association(
    con: duckdb.DuckDBPyConnection,
    words: Sequence[str] | None = None,
    *,
    min_count: int = 100,
    texts: Sequence[str] = _TEXTS,
    group_rule: str = DEFAULT_GROUP_RULE,
    delta_reference: str = DELTA_REFERENCES[0],
    exclusions: Any = None,
    top_phrases: int = 10,
) -> dict[str, Any]:
    """Crime-word association Δ per perceived group (see the module docstring).

    Args:
        con: a :func:`.tables.connect` connection.
        words: the crime words (default: :func:`load_crime_words`'s default list).
        min_count: the fewest texts a group needs for its Δ (fewer gives ``None`` and a reason).
        texts: ``"alt"`` (alt-texts of person images) and/or ``"person"`` (person captions).
        group_rule: the image-level group rule of the alt-texts (:mod:`.tables`).
        delta_reference: ``"all"`` (default) or ``"complement"``; the other is under ``alternative``.
        exclusions: innocent-sense phrases blanked before matching (:func:`.words.load_exclusions`;
            None: the shipped table; an empty sequence: none).
        top_phrases: the most frequent matched phrases listed per word (0: none).

    Returns:
        A JSON-ready dict: ``words``, ``pattern``, ``n_exclusions``, ``min_count``, ``group_rule``,
        ``delta_reference``, ``alt`` (``overall``, ``no_text``, ``gender``, ``race`` with
        ``matches``/``n``/``rate``/``ci95``/``delta_pct``/``reason``/``reference`` per group, and
        ``top_phrases``), ``person`` (``{annotator: section}``, or ``None`` with
        ``person_reason``), ``alternative`` (the other reference's Δ per group) and
        ``definitions``.

    Raises:
        ValueError: an unknown kind of text, group rule or reference, a bad ``min_count`` or an
            empty word list.
    """
    bad = [t for t in texts if t not in _TEXTS]
    if bad or isinstance(texts, str) or not texts:
        raise ValueError(f"texts must name some of {', '.join(_TEXTS)}; got {texts!r}")
    if not isinstance(min_count, int) or isinstance(min_count, bool) or min_count < 1:
        raise ValueError(f"min_count must be a positive integer; got {min_count!r}")
    check_group_rule(group_rule)
    if delta_reference not in DELTA_REFERENCES:
        raise ValueError(
            f"delta reference must be one of {', '.join(DELTA_REFERENCES)}; got {delta_reference!r}"
        )
    words = dedupe_words(words) if words is not None else load_crime_words()
    if not words or not all(isinstance(w, str) and w.strip() for w in words):
        raise ValueError("the crime words must be a non-empty list of non-empty strings")
    if exclusions is None:
        exclusions = load_exclusions()
    pattern = word_pattern(words)
    hit = (  # NULL: no text; a literal pattern, so DuckDB compiles it once
        f"CASE WHEN {blank_sql('caption')} THEN NULL "
        f"ELSE regexp_matches({masked_sql('caption', exclusions)}, {sql_str(pattern)}) END"
    )
    other = next(r for r in DELTA_REFERENCES if r != delta_reference)
    out: dict[str, Any] = {
        "words": list(words),
        "pattern": pattern,
        "n_exclusions": _exclusion_count(exclusions),
        "min_count": min_count,
        "group_rule": group_rule,
        "delta_reference": delta_reference,
    }
    alternative: dict[str, Any] = {"delta_reference": other}

    def phrases(sql: str) -> dict[str, Any]:
        if not top_phrases:
            return {}
        found = matched_phrases(con, sql, words, exclusions, top=top_phrases)
        return {entry: rows for entry, rows in found.items() if rows}

    if "alt" in texts:
        has = labelled_attributes(con, "boxes")
        rows = con.execute(
            f"SELECT {groups_sql('gender', group_rule)}, {groups_sql('race', group_rule)}, {hit} AS hit, "
            "count(*) FROM person_images GROUP BY ALL"
        ).fetchall()
        out["alt"], alternative["alt"] = _section(rows, has, min_count, delta_reference)
        out["alt"]["top_phrases"] = phrases(
            f"SELECT caption FROM person_images WHERE NOT {blank_sql('caption')}"
        )
    if "person" in texts:
        if "captions" not in view_names(con):
            out["person"] = alternative["person"] = None
            out["person_reason"] = "the folder has no person captions; run fairsets annotate caption"
        else:
            has = labelled_attributes(con, "captions")
            g, r = (own_box_groups_sql(a, has[a]) for a in ("gender", "race"))
            rows = con.execute(
                f"SELECT annotator, {g}, {r}, {hit} AS hit, count(*) FROM captions GROUP BY ALL"
            ).fetchall()
            per: dict[str, list] = defaultdict(list)
            for annotator, *row in rows:
                per[annotator].append(tuple(row))
            out["person"], alternative["person"] = {}, {}
            for a in sorted(per):
                out["person"][a], alternative["person"][a] = _section(per[a], has, min_count, delta_reference)
                out["person"][a]["top_phrases"] = phrases(
                    f"SELECT caption FROM captions WHERE annotator = {sql_str(a)} "
                    f"AND NOT {blank_sql('caption')}"
                )
    out["alternative"] = alternative
    out["definitions"] = _definitions(min_count, group_rule, delta_reference)
    return out


_REFERENCE = {
    "all": "every text of that kind (overall), the paper's reading",
    "complement": "the texts of that kind not in the group",
}


def _definitions(min_count: int, group_rule: str, reference: str) -> dict[str, str]:
    """What every number of :func:`crime_association` is (copied into its result)."""
    other = next(r for r in DELTA_REFERENCES if r != reference)
    return {
        "delta_pct": "100 * (rate of the group / rate of the reference set - 1): how much more (+) or less "
        f"(-) often the group's texts contain a crime word; reference set: {_REFERENCE[reference]} "
        f"(--delta-reference {reference})",
        "alternative": f"delta_pct against the other reference set: {_REFERENCE[other]}",
        "rate": "texts with at least one crime word / texts, with its 95 % Wilson interval",
        "reference": "matches, n and rate of the reference set the group's delta_pct divides by",
        "match": MATCH_RULE,
        "exclusions": EXCLUSIONS_RULE,
        "top_phrases": "per word that matched, the phrases (the match with a word either side) it matched "
        "most often, each counted once per text",
        "alt": "alt-texts of person images (at least one kept box), each in its image's groups by the "
        "group rule",
        "group_rule": group_rule_definition(group_rule),
        "person": "person captions per captioner, each in its own box's perceived gender and race group; "
        "'unlabelled' when the box has no label",
        "no_text": "NULL or blank texts, left out of every rate",
        "min_count": f"delta_pct is null (see reason) for groups with fewer than {min_count} texts, or when "
        "the reference set is empty or none of its texts matches",
    }
