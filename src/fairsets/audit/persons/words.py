"""Word matching of the persons audits: which texts a word list matches, which phrases do not count.

Crime words (:mod:`.crime`) and social categories (:mod:`.transfer`) use one rule, written here
once (the recall keywords of ``annotate vote`` share its plurals):

* **Forms** (:func:`word_forms`, the rule of :mod:`fairsets.core.plurals`): an entry matches in
  its own form and in the plural(s) of its last word by the ``inflect`` library (``person`` →
  ``people``, ``salesperson`` → ``salespeople``/``salespersons``, ``hero`` → ``heroes``,
  ``robbery`` → ``robberies``, ``policewoman`` → ``policewomen``, ``thief`` → ``thieves``); a
  multi-word entry also in inflect's plural of the whole phrase (``partners in crime``).
* **Whole words** (:func:`word_pattern`): case-insensitive; a match's neighbours are not letters,
  digits or ``_`` (Unicode-aware), so ``thief`` does not match ``thiefdom``; every character of an
  entry is literal (``c++`` is ``c++``); a space in an entry matches any run of spaces or hyphens
  (``drug dealer`` = ``drug-dealer``).
* **Innocent senses** (:func:`load_exclusions`, :func:`masked_sql`): phrases in which a listed word
  does not carry its listed sense ("killer whale", "cardiac arrest", "vacuum cleaner") are masked
  out of a text before the words are matched. The list ships as ``data/innocent_senses.toml`` (its
  header gives provenance and choices); a user file in the same format replaces it.
* **Audit trail** (:func:`matched_phrases`): for each entry, the phrases (the match with one
  neighbouring word each side) that matched most often, counted in DuckDB, so a reader can see what
  a count is made of.

Every pattern is RE2 (DuckDB's regular expressions: no look-arounds, time linear in the text) and is
passed to DuckDB as a constant, so it is compiled once per query; no caption is held in Python.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10 needs the tomli backport
    import tomli as tomllib  # type: ignore[no-redef]

from fairsets.core.plurals import word_forms

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "EXCLUSIONS_RULE",
    "MATCH_RULE",
    "dedupe_words",
    "default_exclusions_path",
    "load_exclusions",
    "mask_pattern",
    "masked_sql",
    "matched_phrases",
    "read_word_file",
    "sql_str",
    "word_forms",
    "word_pattern",
]

#: The matching rule, in words, for the ``definitions`` block of an audit that uses :func:`word_pattern`.
MATCH_RULE = (
    "case-insensitive whole-word match of any listed entry (neighbours are not letters, digits or _), "
    "the entry's last word also in its English plural(s) by the inflect library (person/people, "
    "salesperson/salespeople/salespersons, hero/heroes, robbery/robberies, thief/thieves); every "
    "character literal; a space in an entry matches any run of spaces or hyphens"
)
#: The exclusion rule, in words, for the same block (with the exclusion file's name beside it).
EXCLUSIONS_RULE = (
    "before matching, innocent-sense phrases (e.g. killer whale, cardiac arrest, vacuum cleaner) are "
    "replaced by a space: whole words, case-insensitive, the phrase's last word also in its plural, "
    "a space or hyphen in a phrase matching any run of spaces or hyphens"
)

#: What counts as a word character for the whole-word rule (Unicode letters, digits, underscore).
_WORD = r"\pL\pN_"


def _literal(form: str) -> str:
    """RE2 source matching ``form`` literally, a space matching any run of spaces or hyphens."""
    parts = []
    for ch in form:
        if ch == " ":
            parts.append(r"[\s\-]+")
        elif ch.isalnum() or ch == "_" or ord(ch) > 127:
            parts.append(ch)
        else:  # ASCII punctuation and controls: RE2 takes any of them escaped as a literal
            parts.append("\\" + ch if ch.isprintable() else f"\\x{ord(ch):02x}")
    return "".join(parts)


def _alternation(words: Iterable[str], hyphen_is_space: bool = False) -> str:
    entries = [" ".join(w.replace("-", " ").split()) if hyphen_is_space else w for w in words]
    forms = sorted({f for w in entries for f in word_forms(w)}, key=lambda f: (-len(f), f))
    if not forms:
        raise ValueError("the word list is empty; give at least one non-empty entry")
    return "|".join(_literal(f) for f in forms)


def word_pattern(words: Sequence[str]) -> str:
    """The RE2 pattern (DuckDB's ``regexp_matches``) that finds any of ``words`` as a whole word.

    Case-insensitive; an entry matches with any of :func:`word_forms` (longer forms tried first);
    its neighbours must not be letters, digits or ``_`` (Unicode-aware); every character is
    literal (regex metacharacters are escaped); a space matches any run of spaces or hyphens.

    Raises:
        ValueError: no non-empty entry.
    """
    return f"(?i)(?:^|[^{_WORD}])(?:{_alternation(words)})(?:$|[^{_WORD}])"


# --- innocent-sense exclusions --------------------------------------------------------------------


def default_exclusions_path() -> Path:
    """The innocent-sense phrase file that ships with fairsets (its header gives its provenance)."""
    return Path(str(resources.files("fairsets.audit.persons").joinpath("data", "innocent_senses.toml")))


def read_word_file(p: Path, what: str, key: str, error: type[Exception] = ValueError) -> dict[str, Any]:
    """The TOML table of a word-list file (crime words, exclusions, categories), or ``error`` in one
    line naming the file: missing (with the ``key = [...]`` it should hold) or unreadable."""
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{p}: no such {what} file; give a TOML file with {key} = [...]") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise error(f"{p}: not a readable TOML {what} file ({reason})") from None


def load_exclusions(path: str | os.PathLike[str] | None = None) -> list[str]:
    """The innocent-sense phrases of a TOML file: ``phrases = [...]`` at the top and/or in tables
    (``[crime_words] phrases = [...]``; table names are for the reader), flattened in file order.

    ``None`` reads the default file. Phrases are whitespace-normalised and de-duplicated
    case-insensitively (first spelling kept). An empty list is allowed: it turns exclusions off.

    Raises:
        ValueError: a missing or unreadable file, a key other than ``phrases``, or ``phrases`` not a
            list of non-empty strings (one line each).
    """
    p = Path(path) if path is not None else default_exclusions_path()
    data = read_word_file(p, "exclusion", "phrases")
    lists: list[tuple[str, Any]] = []
    for key, value in data.items():
        if isinstance(value, dict):
            extra = sorted(set(value) - {"phrases"})
            if extra or "phrases" not in value:
                raise ValueError(f"{p}: [{key}] needs exactly one key, phrases = [...]")
            lists.append((f"[{key}] phrases", value["phrases"]))
        elif key == "phrases":
            lists.append(("phrases", value))
        else:
            raise ValueError(f"{p}: unknown key {key!r}; write phrases = [...] (optionally in [tables])")
    if not lists:
        raise ValueError(f"{p}: no phrases; write phrases = [...] (an empty list turns exclusions off)")
    for where, phrases in lists:
        if not isinstance(phrases, list) or not all(isinstance(x, str) and x.strip() for x in phrases):
            raise ValueError(f"{p}: {where} must be a list of non-empty strings")
    return dedupe_words(phrase for _, phrases in lists for phrase in phrases)


def dedupe_words(words: Iterable[str]) -> list[str]:
    """``words`` with runs of white space made one space and repeats (any case) left out, the first
    spelling kept, in order."""
    out, seen = [], set()
    for w in words:
        w = " ".join(w.split())
        if w.lower() not in seen:
            seen.add(w.lower())
            out.append(w)
    return out


def mask_pattern(exclusions: Sequence[str]) -> str:
    """The RE2 pattern :func:`masked_sql` replaces: any exclusion phrase (or the plural of its last
    word) as whole words, case-insensitive, a space or hyphen in a phrase matching any run of spaces
    or hyphens. Group 1 and 3 are the boundary characters (kept), group 2 the phrase."""
    return f"(?i)(^|[^{_WORD}])({_alternation(exclusions, hyphen_is_space=True)})($|[^{_WORD}])"


def sql_str(text: str) -> str:
    """``text`` as an SQL string literal (quotes doubled), for the constant patterns of the audits."""
    return "'" + text.replace("'", "''") + "'"


def masked_sql(column_sql: str, exclusions: Sequence[str]) -> str:
    """A DuckDB expression: ``lower(column_sql)`` with every exclusion phrase replaced by one space.

    The replacement runs twice, because a match takes the character after it as its right
    boundary and so hides that character from a phrase that follows at once ("killer whale killer
    whale"); after two passes no phrase is left (each remaining one had its left boundary taken by
    a phrase replaced in the first pass). With no exclusions the expression is ``lower(column)``.
    """
    low = f"lower({column_sql})"
    if not exclusions:
        return low
    pat = sql_str(mask_pattern(exclusions))
    return f"regexp_replace(regexp_replace({low}, {pat}, '\\1 \\3', 'g'), {pat}, '\\1 \\3', 'g')"


# --- what matched --------------------------------------------------------------------------------


def _key(form: str) -> str:
    """A match or form with its separators (runs of spaces and hyphens) folded, to find its entry."""
    return re.sub(r"[\s\-]+", " ", form.lower())


# Token marks of :func:`matched_phrases` (control characters, removed from the texts first): a run
# of word characters is wrapped in W…W; any other character but whitespace and "-" in P…P, its
# opening P written L when a word ends right before it and its closing P written R when a word
# starts right after it. A form, marked the same way, then matches exactly where the whole-word
# rule of :func:`word_pattern` lets it, and a match never takes a character of its neighbours, so
# adjacent matches ("thief drug dealers") are all found in one left-to-right pass, the longest form
# at each place first.
_MARK_OPEN, _MARK_CLOSE, _W, _P, _R, _L = "\x01", "\x02", "\x03", "\x04", "\x05", "\x06"
_CONTROL = _MARK_OPEN + _MARK_CLOSE + _W + _P + _R + _L


def _is_word(ch: str) -> bool:  # \pL, \pN or _ (what RE2 calls a letter or a number)
    return ch.isalpha() or ch.isnumeric() or ch == "_"


def _tokens(form: str) -> str:
    """``form`` with the token marks of the texts (see the comment above)."""
    out, run = [], []
    for ch in form + " ":
        if _is_word(ch):
            run.append(ch)
            continue
        if run:
            out.append(_W + "".join(run) + _W)
            run = []
        out.append(ch if ch in " \t\n\r\f-" else _P + ch + _P)
    marked = "".join(out)[:-1]
    return marked.replace(_W + _P, _W + _L).replace(_P + _W, _R + _W)


def _tokens_sql(text_sql: str) -> str:
    words = f"regexp_replace({text_sql}, '([{_WORD}]+)', chr(3) || '\\1' || chr(3), 'g')"
    other = f"regexp_replace({words}, '([^{_WORD}\\s\\-\\x03])', chr(4) || '\\1' || chr(4), 'g')"
    return (
        f"replace(replace({other}, chr(3) || chr(4), chr(3) || chr(6)), chr(4) || chr(3), chr(5) || chr(3))"
    )


def _layers(entries: list[str]) -> list[int]:
    """Each entry's nesting depth: 0 when no other entry's form lies inside one of its forms as whole
    words, else one more than the deepest entry that does (``drug dealer`` 1, ``dealer`` 0). Entries
    of one depth never nest, so a pass per depth finds every entry's matches on its own."""
    keys = [{_key(f) for f in word_forms(w)} for w in entries]
    by_key: dict[str, set[int]] = {}
    for i, ks in enumerate(keys):
        for k in ks:
            by_key.setdefault(k, set()).add(i)
    inside: list[set[int]] = []
    for i, ks in enumerate(keys):
        found: set[int] = set()
        for k in ks:
            t = k.split(" ")
            for a in range(len(t)):
                for b in range(a + 1, len(t) + 1):
                    if b - a < len(t):
                        found |= by_key.get(" ".join(t[a:b]), set())
        inside.append(found - {i})
    depth: dict[int, int] = {}

    def level(i: int, path: frozenset[int] = frozenset()) -> int:
        if i not in depth:
            below = [level(j, path | {i}) for j in inside[i] if j not in path]
            depth[i] = 1 + max(below) if below else 0
        return depth[i]

    return [level(i) for i in range(len(entries))]


def matched_phrases(
    con: duckdb.DuckDBPyConnection,
    texts_sql: str,
    words: Sequence[str],
    exclusions: Sequence[str] = (),
    *,
    top: int = 10,
) -> dict[str, list[dict[str, Any]]]:
    """The phrases each entry matched most often, so a reader can audit what a count is made of.

    ``texts_sql`` is a SELECT whose column ``caption`` holds the texts (NULLs are skipped). Each
    text is lower-cased and its exclusion phrases masked (:func:`masked_sql`); then every place
    where an entry's form occurs by the rule of :func:`word_pattern` is found, for each entry on its
    own: "drug dealers" is a match of ``drug dealer`` and one of ``dealer`` (entries that overlap
    without one lying inside the other, "drug dealer" and "dealer friend" in "drug dealer friend",
    take the first at a place; of an entry's own forms the longest). A match's **phrase** is the
    word before it (a run of letters, digits and ``_``, whatever separates them), the matched text
    with its whitespace runs made one space, and the word after it, joined by single spaces; at the
    start or end of a text the missing side is left out. A phrase's **count** is the number of
    texts it occurs in for that entry (a text repeating a phrase counts once). Everything runs in
    DuckDB (``regexp_replace``, ``string_split``, ``unnest``, ``GROUP BY``), one pass per nesting
    depth of the entries; its cost grows with the number of entries, so pass the ones to report.

    Returns:
        ``{entry: [{"phrase": str, "count": int}, ...]}`` for every entry (in the order given,
        de-duplicated case-insensitively), at most ``top`` phrases each, by count (descending) then
        phrase; an entry that matched nothing has ``[]``. A form shared by two entries counts for
        both.

    Raises:
        ValueError: no non-empty entry, or ``top`` not a positive integer.
    """
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ValueError(f"top must be a positive integer; got {top!r}")
    entries: list[str] = []
    seen: set[str] = set()
    for w in words:
        w = " ".join(str(w).split())
        if w and w.lower() not in seen:
            seen.add(w.lower())
            entries.append(w)
    if not any(word_forms(w) for w in entries):
        raise ValueError("the word list is empty; give at least one non-empty entry")
    layers = _layers(entries)
    rows = sorted({(_key(f), layers[i], i) for i, w in enumerate(entries) for f in word_forms(w)})
    keys = ", ".join(f"({sql_str(k)}, {d}, {i})" for k, d, i in rows)
    controls = " || ".join(f"chr({ord(c)})" for c in _CONTROL)
    clean = f"translate(caption, {controls}, '{' ' * len(_CONTROL)}')"
    word, nonword = r"[\pL\pN_]", r"[^\pL\pN_]"
    passes = []
    for depth in sorted(set(layers)):
        forms = {f for i, w in enumerate(entries) if layers[i] == depth for f in word_forms(w)}
        core = "|".join(_literal(_tokens(f)) for f in sorted(forms, key=lambda f: (-len(f), f)))
        marked = f"regexp_replace(tok, {sql_str('(?i)(' + core + ')')}, chr(1) || '\\1' || chr(2), 'g')"
        passes.append(
            f"SELECT rid, {depth} AS depth, string_split(translate({marked}, "
            f"{controls.split(' || ', 2)[2]}, ''), chr(1)) AS parts FROM t"
        )
    sql = f"""
        WITH t AS (SELECT row_number() OVER () AS rid, {_tokens_sql(masked_sql(clean, exclusions))} AS tok
                   FROM ({texts_sql}) AS src WHERE caption IS NOT NULL),
        p AS (SELECT * FROM ({" UNION ALL ".join(passes)}) WHERE len(parts) > 1),
        o AS (SELECT rid, depth, parts, unnest(range(2, len(parts) + 1)) AS k FROM p),
        e AS (SELECT rid, depth, split_part(parts[k], chr(2), 1) AS hit,
                     regexp_extract(replace(array_to_string(parts[1:k - 1], ''), chr(2), ''),
                                    '({word}+){nonword}*$', 1) AS lw,
                     regexp_extract(replace(split_part(parts[k], chr(2), 2)
                                            || array_to_string(parts[k + 1:], ''), chr(2), ''),
                                    '^{nonword}*({word}+)', 1) AS rw
              FROM o),
        f AS (SELECT rid, depth, regexp_replace(hit, '[\\s\\-]+', ' ', 'g') AS key,
                     concat_ws(' ', nullif(lw, ''), regexp_replace(hit, '\\s+', ' ', 'g'), nullif(rw, ''))
                         AS phrase
              FROM e),
        keys(key, depth, entry) AS (VALUES {keys}),
        r AS (SELECT k.entry, f.phrase, count(DISTINCT f.rid) AS n
              FROM f JOIN keys k ON f.key = k.key AND f.depth = k.depth GROUP BY ALL)
        SELECT entry, phrase, n FROM (
            SELECT *, row_number() OVER (PARTITION BY entry ORDER BY n DESC, phrase) AS rank FROM r)
        WHERE rank <= {top} ORDER BY entry, rank
    """
    out: dict[str, list[dict[str, Any]]] = {e: [] for e in entries}
    for entry, phrase, n in con.execute(sql).fetchall():
        out[entries[int(entry)]].append({"phrase": phrase, "count": int(n)})
    return out
