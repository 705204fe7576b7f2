"""Crime-word association: how much more (or less) often the texts of images showing a perceived
group use a crime word than the texts of person images overall.

For a group ``g`` and a kind of text::

    Δ_g = P(crime word | text of g) / P(crime word | any text of that kind) − 1     (in percent)

* **alt-text** (``texts`` has ``"alt"``): the texts are the alt-texts of the *person images* (images
  with at least one kept box, the ``person_images`` view of :mod:`.tables`); an image's alt-text is
  "of g" when the image is in gender group ``g`` (the image-level rule of :mod:`.tables`) or is
  *with race g* (at least one box of perceived race ``g``; an image can be with several races).
* **person captions** (``"person"``): the texts are the person captions (``annotate caption``),
  each "of" its own box's labels (perceived gender and race); the baseline is all person captions.
  Each captioner (``annotator``) gets its own section, as their wording differs.

A text *matches* when at least one word of the list occurs in it (see :func:`word_pattern` for
the rule: whole words, case-insensitive, plurals of each entry's last word). The rate of a group is
its matching texts over its texts, with its 95 % Wilson interval; NULL and blank texts are not
texts (they are counted as ``no_text``). Δ is ``None``, with the ``reason``, when the group has
fewer than ``min_count`` texts (a ratio of a handful of captions is noise) or when no text of the
baseline matches (the ratio is undefined). The counts behind every ratio (``matches`` and ``n``
per group and overall) are in the result.

**Streaming.** The pattern is one RE2 regular expression built from the word list (every entry
escaped, so a user's ``"c++"`` or ``"a.b"`` is literal text) and run inside DuckDB with
``regexp_matches``: one pass over each kind of text, grouped by the labels, returns a few rows, so
no caption is ever held in Python. RE2 runs in time linear in the text, so a huge or hostile
caption cannot hang the audit.

The word list is :func:`load_crime_words`: the default ``data/crime_words.toml`` (its header gives
its provenance, licence and intent) or a user TOML file with the same ``words = [...]`` key.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10 needs the tomli backport
    import tomli as tomllib  # type: ignore[no-redef]

from fairsets.annotate.layout import AnnotationError
from fairsets.audit.persons.composition import GENDERS, share
from fairsets.audit.persons.tables import blank_sql
from fairsets.audit.persons.words import word_forms

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "crime_association",
    "default_crime_words_path",
    "load_crime_words",
    "word_forms",
    "word_pattern",
]

#: What counts as a word character for the whole-word rule (Unicode letters, digits, underscore).
_WORD = r"\pL\pN_"
_TEXTS = ("alt", "person")


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
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AnnotationError(f"{p}: no such word file; give a TOML file with words = [...]") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise AnnotationError(f"{p}: not a readable TOML word file ({e})") from None
    extra = sorted(set(data) - {"words"})
    if extra:
        raise AnnotationError(f"{p}: unknown key {extra[0]!r}; the file has one key, words = [...]")
    words = data.get("words")
    if not isinstance(words, list) or not words or not all(isinstance(w, str) and w.strip() for w in words):
        raise AnnotationError(f"{p}: words must be a non-empty list of non-empty strings")
    return _dedupe(words)


def _dedupe(words: Iterable[str]) -> list[str]:
    out, seen = [], set()
    for w in words:
        w = " ".join(w.split())
        if w.lower() not in seen:
            seen.add(w.lower())
            out.append(w)
    return out


def _literal(form: str) -> str:
    """RE2 source matching ``form`` literally, a space matching any run of spaces or hyphens."""
    parts = []
    for ch in form:
        if ch == " ":
            parts.append(r"[\s\-]+")
        elif ch.isalnum() or ch == "_" or ord(ch) > 127:
            parts.append(ch)
        else:  # ASCII punctuation: RE2 takes any of it escaped as a literal
            parts.append("\\" + ch)
    return "".join(parts)


def word_pattern(words: Sequence[str]) -> str:
    """The RE2 pattern (DuckDB's ``regexp_matches``) that finds any of ``words`` as a whole word.

    Case-insensitive; an entry matches with any of :func:`word_forms`; its neighbours must not be
    letters, digits or ``_`` (Unicode-aware), so ``thief`` does not match ``thiefdom``; every
    character is literal (regex metacharacters are escaped).
    """
    forms = sorted({f for w in words for f in word_forms(w)}, key=lambda f: (-len(f), f))
    if not forms:
        raise ValueError("the crime-word list is empty")
    alternation = "|".join(_literal(f) for f in forms)
    return f"(?i)(?:^|[^{_WORD}])(?:{alternation})(?:$|[^{_WORD}])"


def _rate(matches: int, n: int, base: dict[str, Any] | None, min_count: int) -> dict[str, Any]:
    entry = share(matches, n)
    out = {"matches": entry["count"], "n": entry["n"], "rate": entry["share"], "ci95": entry["ci95"]}
    if base is None:
        return out
    delta, reason = None, None
    if n < min_count:
        reason = f"fewer than {min_count} texts ({n})"
    elif not base["matches"]:
        reason = "no text of the baseline matches a crime word"
    else:
        delta = 100.0 * (out["rate"] / base["rate"] - 1.0)
    return out | {"delta_pct": delta, "reason": reason}


def _section(
    rows: Iterable[tuple[Any, Any, bool | None, int]], has: dict[str, bool], min_count: int, race_list: bool
) -> dict[str, Any]:
    """Rates and Δ from ``(gender, race(s), hit, count)`` rows; hit None is a NULL/blank text."""
    total = matched = no_text = 0
    by = {"gender": defaultdict(lambda: [0, 0]), "race": defaultdict(lambda: [0, 0])}
    missing = {"gender": 0, "race": 0}
    for gender, race, hit, count in rows:
        if hit is None:
            no_text += count
            continue
        total += count
        matched += count if hit else 0
        races = (race or []) if race_list else ([race] if race is not None else [])
        for attr, labels in (("gender", [gender] if gender is not None else []), ("race", races)):
            if not labels:
                missing[attr] += count
            for label in labels:
                by[attr][label][0] += count if hit else 0
                by[attr][label][1] += count
    base = _rate(matched, total, None, min_count)
    out: dict[str, Any] = {"overall": base, "no_text": no_text}
    for attr in ("gender", "race"):
        if not has[attr]:
            out[attr] = None
            continue
        order = [g for g in GENDERS if attr == "gender"]
        names = order + sorted(k for k in by[attr] if k not in order)
        out[attr] = {k: _rate(*by[attr].get(k, (0, 0)), base, min_count) for k in names}
        out[f"{attr}_missing"] = missing[attr]
    return out


def _literal_sql(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _views(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}


def _columns(con: duckdb.DuckDBPyConnection, view: str) -> set[str]:
    return {row[0] for row in con.execute(f"DESCRIBE {view}").fetchall()}


def crime_association(
    con: duckdb.DuckDBPyConnection,
    words: Sequence[str] | None = None,
    *,
    min_count: int = 100,
    texts: Sequence[str] = _TEXTS,
) -> dict[str, Any]:
    """Crime-word association Δ per perceived group (see the module docstring).

    Args:
        con: a :func:`.tables.connect` connection.
        words: the crime words (default: :func:`load_crime_words`'s default list).
        min_count: the fewest texts a group needs for its Δ (fewer gives ``None`` and a reason).
        texts: ``"alt"`` (alt-texts of person images) and/or ``"person"`` (person captions).

    Returns:
        A JSON-ready dict: ``words``, ``pattern``, ``min_count``, ``alt`` (``overall``, ``no_text``,
        ``gender``, ``race`` with ``matches``/``n``/``rate``/``ci95``/``delta_pct``/``reason`` per
        group; ``gender_missing``/``race_missing``: texts whose image or box has no such label),
        ``person`` (``{annotator: section}``, or ``None`` with ``person_reason``) and
        ``definitions``.

    Raises:
        ValueError: an unknown kind of text, a bad ``min_count`` or an empty word list.
    """
    bad = [t for t in texts if t not in _TEXTS]
    if bad or isinstance(texts, str) or not texts:
        raise ValueError(f"texts must name some of {', '.join(_TEXTS)}; got {texts!r}")
    if not isinstance(min_count, int) or isinstance(min_count, bool) or min_count < 1:
        raise ValueError(f"min_count must be a positive integer; got {min_count!r}")
    words = _dedupe(words) if words is not None else load_crime_words()
    if not words or not all(isinstance(w, str) and w.strip() for w in words):
        raise ValueError("the crime words must be a non-empty list of non-empty strings")
    pattern = word_pattern(words)
    hit = (  # NULL: no text; a literal pattern, so DuckDB compiles it once
        f"CASE WHEN {blank_sql('caption')} THEN NULL "
        f"ELSE regexp_matches(caption, {_literal_sql(pattern)}) END"
    )
    out: dict[str, Any] = {"words": list(words), "pattern": pattern, "min_count": min_count}
    if "alt" in texts:
        cols = _columns(con, "boxes")
        has = {"gender": "perceived_gender" in cols, "race": "perceived_race" in cols}
        rows = con.execute(
            f"SELECT gender, races, {hit} AS hit, count(*) FROM person_images GROUP BY ALL"
        ).fetchall()
        out["alt"] = _section(rows, has, min_count, race_list=True)
    if "person" in texts:
        if "captions" not in _views(con):
            out["person"] = None
            out["person_reason"] = "the folder has no person captions; run fairsets annotate caption"
        else:
            cols = _columns(con, "captions")
            has = {a: f"perceived_{a}" in cols for a in ("gender", "race")}
            g = "perceived_gender" if has["gender"] else "NULL::VARCHAR"
            r = "perceived_race" if has["race"] else "NULL::VARCHAR"
            rows = con.execute(
                f"SELECT annotator, {g}, {r}, {hit} AS hit, count(*) FROM captions GROUP BY ALL"
            ).fetchall()
            per: dict[str, list] = defaultdict(list)
            for annotator, *row in rows:
                per[annotator].append(tuple(row))
            out["person"] = {a: _section(per[a], has, min_count, race_list=False) for a in sorted(per)}
    out["definitions"] = DEFINITIONS | {"min_count": DEFINITIONS["min_count"].format(m=min_count)}
    return out


#: What every number of :func:`crime_association` is (copied into its result).
DEFINITIONS = {
    "delta_pct": "100 * (rate of the group / overall rate - 1): how much more (+) or less (-) often "
    "the group's texts contain a crime word than all texts of that kind",
    "rate": "texts with at least one crime word / texts, with its 95 % Wilson interval",
    "match": "case-insensitive whole-word match of any listed word, the last word of an entry also "
    "in its plural; a space in an entry matches spaces or hyphens",
    "alt": "alt-texts of person images (at least one kept box); an image is in its image-level gender "
    "group and in every race group it has a box of",
    "person": "person captions per captioner, each in its own box's perceived gender and race group",
    "no_text": "NULL or blank texts, left out of every rate",
    "min_count": "delta_pct is null (see reason) for groups with fewer than {m} texts or when no text "
    "of the baseline matches",
}
