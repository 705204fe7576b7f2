"""Sentiment of the texts about each perceived group: the mean score and the share of negative (and
positive) texts per group, with counts and 95 % intervals.

The LAION person-centric study scores every text with a sentiment model and compares groups by the
*negative ratio* (share of texts the model calls negative) and the mean VADER score. Here:

* **alt-text** (``texts`` has ``"alt"``): the alt-texts of the *person images* (images with at least
  one kept box, the ``person_images`` view of :mod:`.tables`); an image's alt-text is in the groups
  of its image by the one image-level rule of :mod:`.tables` (``group_rule``: ``exclusive`` by
  default — one gender and one race group per image, ``unlabelled`` when no box has a label — or
  ``any``), the same groups as :mod:`.crime` and :mod:`.composition`.
* **person captions** (``"person"``): each person caption in its own box's perceived gender and
  race group (``unlabelled`` when the box has no label); each captioner (``annotator``) gets its
  own section.

NULL and blank texts (nothing but whitespace: spaces, tabs, newlines, Unicode spaces) are not texts:
they are counted as ``no_text`` and left out of every number. Under the ``exclusive`` rule the
groups of one attribute partition the texts, so their ``n`` sum to ``overall``'s.

**Scores.** A scorer gives each text a value and a label ``NEG``/``NEU``/``POS``:

* :class:`VaderScorer` (the default; ``pip install 'fairsets[persons-audit]'``) — the value is VADER's
  compound score in [−1, 1]; the label is ``NEG`` when compound ≤ −0.05, ``POS`` when ≥ 0.05, else
  ``NEU`` (the thresholds VADER's authors recommend).
* :class:`TransformerScorer` — any Hugging Face text classifier with negative/neutral/positive
  classes (the pysentimiento models, e.g. ``pysentimiento/robertuito-sentiment-analysis``): the value
  is P(positive) − P(negative) and the label the most probable class.

Per group (a *row*): ``n`` texts; ``mean`` of the values with its normal-approximation 95 % interval
``mean ± 1.96 · s / √n`` (``s`` the sample standard deviation; no interval for ``n`` < 2);
``negative`` and ``positive``: the count of texts with that label, its share of ``n`` and the 95 %
Wilson interval (:func:`.composition.share`). A row with fewer than ``min_count`` texts (``overall``
included) keeps its counts but has ``None`` for the mean, the shares and the intervals, with the
``reason``. Sums of values are kept as exact integers in units of 10⁻¹² (a mean is off by at most
5·10⁻¹³), so the numbers do not depend on the batch size or on the order DuckDB sums in.

**Streaming, and each text scored once.** DuckDB collects the *distinct* non-blank texts of all the
kinds asked for (an alt-text that is also a person caption, or that thousands of images share, is
scored once); they stream out of DuckDB in Arrow batches of ``batch`` texts, each batch is scored and
its ``(text, value, label)`` rows are appended to a Parquet file in a temporary folder (under
``$TMPDIR``; it is removed at the end). DuckDB then joins the texts with that file and aggregates by
group, returning a few rows. No Python list ever holds more than one batch of texts, and the cost is
that of scoring the distinct texts: VADER is pure Python, some 7–14 thousand short captions a second
on one core, so ``VaderScorer(workers=N)`` scores each batch in ``N`` processes.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fairsets.audit.persons.composition import group_order, share
from fairsets.audit.persons.sentiment_scorers import (
    LABELS,
    VADER_THRESHOLD,
    SentimentScorer,
    TransformerScorer,
    VaderScorer,
)
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

if TYPE_CHECKING:
    import duckdb

    from fairsets.core.progress import Progress

__all__ = [
    "LABELS",
    "VADER_THRESHOLD",
    "SentimentScorer",
    "TransformerScorer",
    "VaderScorer",
    "sentiment",
]

_TEXTS = ("alt", "person")
_Z95 = 1.959963984540054
#: Values are summed as integers in units of 1e-12 (exact, so independent of DuckDB's summation
#: order; a mean is off by at most 5e-13).
_UNIT = 10**12
#: The largest |value| a scorer may return (1, with room for float rounding of P(pos) − P(neg)).
_MAX_VALUE = 1.0 + 1e-9


def _row(n: int, neg: int, pos: int, total: int, total_sq: int, min_count: int) -> dict[str, Any]:
    """One group's row from its counts and the exact sums of its values and squares in units of
    :data:`_UNIT` (integers, so the result does not depend on the order of summation)."""
    if n < min_count:
        blank = lambda count: {"count": int(count), "n": int(n), "share": None, "ci95": None}  # noqa: E731
        return {
            "n": int(n),
            "mean": None,
            "mean_ci95": None,
            "negative": blank(neg),
            "positive": blank(pos),
            "reason": f"fewer than {min_count} texts ({n})",
        }
    mean = total / (n * _UNIT)
    ci = None
    if n >= 2:  # sample variance (Σv² − (Σv)²/n) / (n − 1), in exact integers until the division
        var = max(0, n * total_sq * _UNIT - total * total) / (_UNIT * _UNIT * n * (n - 1))
        half = _Z95 * math.sqrt(var / n)
        ci = [mean - half, mean + half]
    return {
        "n": int(n),
        "mean": mean,
        "mean_ci95": ci,
        "negative": share(neg, n),
        "positive": share(pos, n),
        "reason": None,
    }


def _section(rows: Iterable[tuple[Any, ...]], has: dict[str, bool], min_count: int) -> dict[str, Any]:
    """A SECTION from ``(gender groups, race groups, label, count, sum, sum of squares)`` rows (the
    groups are lists, None when the folder has no such labels; label None: a NULL or blank text)."""
    no_text = 0
    acc: dict[tuple[str, Any], list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    for genders, races, label, count, total, total_sq in rows:
        if label is None:
            no_text += count
            continue
        keys = [("overall", None)]
        keys += [("gender", g) for g in genders or []] + [("race", r) for r in races or []]
        for key in keys:
            a = acc[key]
            a[0] += count
            a[1] += count if label == "NEG" else 0
            a[2] += count if label == "POS" else 0
            a[3] += total
            a[4] += total_sq

    def row(key: tuple[str, Any]) -> dict[str, Any]:
        n, neg, pos, total, total_sq = acc.get(key, (0, 0, 0, 0, 0))
        return _row(int(n), int(neg), int(pos), int(total), int(total_sq), min_count)

    out: dict[str, Any] = {"overall": row(("overall", None)), "no_text": no_text}
    for attr in ("gender", "race"):
        names = group_order(attr, {g for a, g in acc if a == attr})
        out[attr] = {g: row((attr, g)) for g in names} if has[attr] else None
    return out


def _check_scores(scores: Any, n: int, scorer: SentimentScorer) -> tuple[list[float], list[str]]:
    """Values and labels of one batch, or a ValueError naming the scorer and what is wrong."""
    scores = list(scores)
    if len(scores) != n:
        raise ValueError(f"sentiment scorer {scorer.name!r} returned {len(scores)} scores for {n} texts")
    values, labels = [], []
    for value, label in scores:
        value = float(value)
        if not -_MAX_VALUE <= value <= _MAX_VALUE or label not in LABELS:  # NaN fails too
            raise ValueError(
                f"sentiment scorer {scorer.name!r} returned ({value!r}, {label!r}); each score must be "
                f"a value in [-1, 1] and one of {', '.join(LABELS)}"
            )
        values.append(value)
        labels.append(label)
    return values, labels


def _score_texts(
    con: duckdb.DuckDBPyConnection,
    sources: list[str],
    scorer: SentimentScorer,
    batch: int,
    path: Path,
    progress: Progress | None,
) -> int:
    """Score the distinct non-blank texts of ``sources`` into the Parquet file ``path``; their count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    distinct = (
        "SELECT DISTINCT text FROM ("
        + " UNION ALL ".join(f"SELECT caption AS text FROM {s}" for s in sources)
        + f") WHERE NOT {blank_sql('text')}"
    )
    total = con.execute(f"SELECT count(*) FROM ({distinct})").fetchall()[0][0] if progress is not None else 0
    schema = pa.schema([("text", pa.string()), ("value", pa.float64()), ("label", pa.string())])
    stage = (
        progress.stage(f"sentiment ({scorer.name})", total, rates=("texts",))
        if progress is not None
        else contextlib.nullcontext(lambda n=1, **_: None)
    )
    done = 0
    reader = con.sql(distinct).to_arrow_reader(batch)
    with stage as advance, pq.ParquetWriter(str(path), schema) as writer, reader:
        for record in reader:
            texts = record.column(0).to_pylist()
            if not texts:
                continue
            values, labels = _check_scores(scorer.score(texts), len(texts), scorer)
            columns = [record.column(0).cast(pa.string()), pa.array(values, pa.float64()), pa.array(labels)]
            writer.write_table(pa.Table.from_arrays(columns, schema=schema))
            done += len(texts)
            advance(len(texts), texts=len(texts))
    return done


def sentiment(
    con: duckdb.DuckDBPyConnection,
    *,
    texts: Sequence[str] = _TEXTS,
    scorer: SentimentScorer | None = None,
    min_count: int = 100,
    batch: int = 10_000,
    progress: Progress | None = None,
    group_rule: str = DEFAULT_GROUP_RULE,
) -> dict[str, Any]:
    """Sentiment per perceived group (see the module docstring).

    Args:
        con: a :func:`.tables.connect` connection.
        texts: ``"alt"`` (alt-texts of person images) and/or ``"person"`` (person captions).
        scorer: a :class:`SentimentScorer` (default: :class:`VaderScorer`).
        min_count: the fewest texts a row needs for its mean and shares (fewer gives ``None`` and a
            reason; the counts stay).
        batch: texts per scoring batch (memory holds one batch of texts at a time).
        progress: a :class:`~fairsets.core.progress.Progress` for a bar over the distinct texts.
        group_rule: the image-level group rule of the alt-texts (:mod:`.tables`).

    Returns:
        A JSON-ready dict: ``scorer`` (``name``, ``kind``), ``min_count``, ``group_rule``, ``alt``
        (a section: ``overall``, ``no_text``, ``gender``, ``race``; None when not asked for),
        ``person`` (``{annotator: section}``, or None with ``person_reason``) and ``definitions``.
        A row is ``n``, ``mean``, ``mean_ci95``, ``negative`` and ``positive`` (``count``, ``n``,
        ``share``, ``ci95``) and ``reason``.

    Raises:
        ValueError: an unknown kind of text, a bad ``min_count`` or ``batch``, or a scorer that
            returns a malformed score.
        MissingDependency: no scorer given and vaderSentiment is not installed.
    """
    bad = [t for t in texts if t not in _TEXTS] if not isinstance(texts, str) else [texts]
    if bad or isinstance(texts, str) or not texts:
        raise ValueError(f"texts must name some of {', '.join(_TEXTS)}; got {texts!r}")
    for what, value in (("min_count", min_count), ("batch", batch)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{what} must be a positive integer; got {value!r}")
    check_group_rule(group_rule)
    if scorer is None:
        scorer = VaderScorer()
    if not isinstance(scorer, SentimentScorer):
        raise ValueError(f"scorer must have name, kind and score(texts); got {type(scorer).__name__}")
    has_captions = "captions" in view_names(con)
    sources = (["person_images"] if "alt" in texts else []) + (
        ["captions"] if "person" in texts and has_captions else []
    )
    out: dict[str, Any] = {
        "scorer": {"name": str(scorer.name), "kind": str(scorer.kind)},
        "min_count": min_count,
        "group_rule": group_rule,
        "alt": None,
        "person": None,
    }
    with tempfile.TemporaryDirectory(prefix="fairsets-sentiment-") as tmp:
        path = Path(tmp) / "scores.parquet"
        # DuckDB's own progress bar would draw over ours while the texts stream out for minutes
        bar = con.execute("SELECT current_setting('enable_progress_bar')").fetchall()[0][0]
        con.execute("SET enable_progress_bar = false")
        try:
            _score_texts(con, sources, scorer, batch, path, progress)
        finally:
            con.execute(f"SET enable_progress_bar = {'true' if bar else 'false'}")
        scores = "read_parquet('" + str(path).replace("'", "''") + "')"
        agg = (
            f"s.label, count(*), coalesce(sum(round(s.value * {_UNIT})::BIGINT), 0), "
            f"coalesce(sum(round(s.value * s.value * {_UNIT})::BIGINT), 0) "
            f"FROM {{view}} t LEFT JOIN {scores} s ON t.caption = s.text GROUP BY ALL"
        )
        if "alt" in texts:
            g, r = groups_sql("gender", group_rule, "t."), groups_sql("race", group_rule, "t.")
            rows = con.execute(f"SELECT {g}, {r}, " + agg.format(view="person_images")).fetchall()
            has = labelled_attributes(con, "boxes")
            out["alt"] = _section(rows, has, min_count)
        if "person" in texts and has_captions:
            has = labelled_attributes(con, "captions")
            g, r = (own_box_groups_sql(a, has[a], "t.") for a in ("gender", "race"))
            rows = con.execute(f"SELECT t.annotator, {g}, {r}, " + agg.format(view="captions")).fetchall()
            per: dict[str, list] = defaultdict(list)
            for annotator, *row in rows:
                per[annotator].append(tuple(row))
            out["person"] = {a: _section(per[a], has, min_count) for a in sorted(per)}
    if "person" not in texts:
        out["person_reason"] = "not asked for"
    elif not has_captions:
        out["person_reason"] = "the folder has no person captions; run fairsets annotate caption"
    out["definitions"] = _definitions(scorer.kind, min_count, group_rule)
    return out


def _definitions(kind: str, min_count: int, group_rule: str) -> dict[str, str]:
    if kind == "vader":
        value = "VADER compound score in [-1, 1]"
        labels = "negative: compound <= -0.05; positive: compound >= 0.05 (VADER's thresholds)"
    else:
        value = "P(positive) - P(negative) of the classifier, in [-1, 1]"
        labels = "negative / positive: the classifier's most probable class"
    return {
        "mean": f"mean {value} over the group's texts, with the normal-approximation 95 % interval "
        "mean +- 1.96 * sd / sqrt(n) (none for n < 2)",
        "negative": f"share of the group's texts labelled negative, with its 95 % Wilson interval; {labels}",
        "positive": "share of the group's texts labelled positive, with its 95 % Wilson interval",
        "negative_ratio": "the paper's negative ratio: the 'negative' share",
        "alt": "alt-texts of person images (at least one kept box), each in its image's groups by the "
        "group rule",
        "group_rule": group_rule_definition(group_rule),
        "person": "person captions per captioner, each in its own box's perceived gender and race group; "
        "'unlabelled' when the box has no label",
        "no_text": "NULL or blank texts, left out of every number",
        "scoring": "each distinct text is scored once; identical texts share its score",
        "min_count": f"rows with fewer than {min_count} texts keep their counts but have null mean, shares "
        "and intervals (see reason)",
    }
