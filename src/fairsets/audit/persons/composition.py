"""Who the annotated people are: shares of boxes and images by perceived gender and race, how many
people an image shows, and how large they are in it.

:func:`composition` reads the views of :mod:`.tables` with a handful of DuckDB aggregations (each
streams the Parquet tables once and returns a few rows), and returns a JSON-ready dict. Every share
comes as ``{"count", "n", "share", "ci95"}``: the count behind it, the total it is a share of, the
share (None when the total is 0) and its 95 % Wilson interval
(:func:`fairsets.annotate.captions.judge.wilson_interval`; None when the total is 0).

**What each share is of** (also written into the result's ``definitions``). Every table has one
denominator, named in its ``n``, and — under the default ``exclusive`` rule — its rows sum to 1:

* *boxes by gender / race* — all kept boxes, one row per label (``unclear`` is a label: the
  classifier saw a person but could not tell) and ``unlabelled`` for the boxes with no label at all
  (NULL: the box was never classified). ``n_labelled`` is the number with a label.
* *images by gender / race* — the images with at least one kept box (*person images*), grouped by
  the image-level rule of :mod:`.tables` (:func:`.tables.groups_sql`): ``exclusive`` (default) gives
  each image one group — the one label of its boxes, ``mixed``, ``unclear`` or ``unlabelled`` — so
  the rows sum to 1; ``any`` puts an image in every group one of its boxes has
  (``multi_membership`` is true and the rows may sum over 1). The other rule's tables are under
  ``alternative``. ``both_genders`` is the share of person images with at least one ``female``
  **and** one ``male`` box (an image ``mixed`` only through a box labelled ``mixed`` does not count).
* *unclear* — the ``unclear`` rows of the four tables above, side by side.
* *persons per image* — kept boxes per person image, in bins ``1`` … ``9`` and ``>=10``, with the
  maximum and the mean.
* *box area* — the kept boxes' ``area_frac`` (box area / image area) in ``bins`` equal bins on
  [0, 1]; bin ``i`` holds ``[i/bins, (i+1)/bins)``, the last one also holds 1. Values that are NULL
  or outside [0, 1] are counted as ``invalid``, never binned.

An attribute the folder has no labels for gives ``None`` for its sections, with the reason in
``missing_attributes``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fairsets.annotate.captions.judge import wilson_interval

from .tables import (
    DEFAULT_GROUP_RULE,
    GROUP_RULES,
    MIXED,
    UNCLEAR,
    UNLABELLED,
    group_rule_definition,
    groups_sql,
    labelled_attributes,
)

if TYPE_CHECKING:
    import duckdb

__all__ = ["GENDERS", "composition", "group_order", "share"]

#: The perceived gender labels, in the order reports show them.
GENDERS = ("female", "male", "mixed", "unclear")

#: Persons-per-image bins: 1 … 9, then everything from 10 on.
_MAX_EXACT = 9


def share(count: int, n: int) -> dict[str, Any]:
    """``{"count", "n", "share", "ci95"}`` for ``count`` of ``n`` (share and interval None at n = 0)."""
    if n <= 0:
        return {"count": int(count), "n": int(n), "share": None, "ci95": None}
    low, high = wilson_interval(count, n)
    return {"count": int(count), "n": int(n), "share": count / n, "ci95": [low, high]}


def group_order(attr: str, seen: Any) -> list[str]:
    """The rows of a table of ``attr``: the gender labels in their fixed order (every one, even
    when empty), then every other group seen sorted, ``mixed``, ``unclear`` and ``unlabelled``
    last (``unlabelled`` only when seen)."""
    seen = {g for g in seen if g is not None}
    first = list(GENDERS) if attr == "gender" else []
    tail = [g for g in (MIXED, UNCLEAR) if g in seen and g not in first]
    rest = sorted(g for g in seen if g not in first and g not in tail and g != UNLABELLED)
    return first + rest + tail + ([UNLABELLED] if UNLABELLED in seen else [])


def _box_table(con: duckdb.DuckDBPyConnection, attr: str, n_boxes: int) -> dict[str, Any]:
    """Kept boxes by label, ``unlabelled`` for NULL, all of one denominator (rows sum to 1)."""
    rows = dict(con.execute(f"SELECT perceived_{attr}, count(*) FROM boxes GROUP BY ALL").fetchall())
    counts = {(UNLABELLED if k is None else k): v for k, v in rows.items()}
    counts.setdefault(UNLABELLED, 0)
    return {
        "n": n_boxes,
        "n_labelled": n_boxes - counts[UNLABELLED],
        "groups": {g: share(counts.get(g, 0), n_boxes) for g in group_order(attr, counts)},
    }


def _image_table(con: duckdb.DuckDBPyConnection, attr: str, rule: str, n_person: int) -> dict[str, Any]:
    """Person images by group under ``rule`` (:func:`.tables.groups_sql`)."""
    rows = con.execute(
        f"SELECT g, count(*) FROM (SELECT unnest({groups_sql(attr, rule)}) AS g FROM person_images) "
        "GROUP BY g"
    ).fetchall()
    counts = dict(rows)
    counts.setdefault(UNLABELLED, 0)
    groups = {g: share(counts.get(g, 0), n_person) for g in group_order(attr, counts)}
    return {
        "n": n_person,
        "group_rule": rule,
        "multi_membership": rule == "any",
        "groups": groups,
        "sum_of_shares": sum(e["count"] for e in groups.values()) / n_person if n_person else None,
    }


def composition(
    con: duckdb.DuckDBPyConnection, *, area_bins: int = 20, group_rule: str = DEFAULT_GROUP_RULE
) -> dict[str, Any]:
    """Composition of the person annotations behind ``con`` (a :func:`.tables.connect` connection).

    Args:
        con: the connection with the ``boxes`` and ``person_images`` views.
        area_bins: equal-width bins of the box-area histogram on [0, 1].
        group_rule: the image-level group rule, ``exclusive`` (default) or ``any``; the other one's
            image tables are under ``alternative``.

    Returns:
        A JSON-ready dict: ``n_boxes``, ``n_images`` (ok images), ``n_person_images``,
        ``group_rule``, ``boxes`` (``gender``, ``race``), ``images`` (``gender``, ``both_genders``,
        ``race``), ``unclear``, ``persons_per_image``, ``box_area``, ``missing_attributes``,
        ``alternative`` and ``definitions`` — see the module docstring.
    """
    if not isinstance(area_bins, int) or isinstance(area_bins, bool) or area_bins < 1:
        raise ValueError(f"area_bins must be a positive integer; got {area_bins!r}")
    if group_rule not in GROUP_RULES:
        raise ValueError(f"group rule must be one of {', '.join(GROUP_RULES)}; got {group_rule!r}")
    other = next(r for r in GROUP_RULES if r != group_rule)
    has = labelled_attributes(con, "boxes")
    n_boxes = con.execute("SELECT count(*) FROM boxes").fetchone()[0]
    n_images = con.execute("SELECT count(*) FROM images").fetchone()[0]
    n_person = con.execute("SELECT count(*) FROM person_images").fetchone()[0]
    out: dict[str, Any] = {
        "n_boxes": n_boxes,
        "n_images": n_images,
        "n_person_images": n_person,
        "person_images": share(n_person, n_images),
        "group_rule": group_rule,
        "boxes": {"gender": None, "race": None},
        "images": {"gender": None, "both_genders": None, "race": None},
        "unclear": {},
        "missing_attributes": {
            a: "the folder has no perceived_" + a + " labels; run fairsets annotate classify"
            for a, ok in has.items()
            if not ok
        },
        "alternative": {"group_rule": other, "images": {"gender": None, "race": None}},
    }
    for attr in ("gender", "race"):
        if not has[attr]:
            continue
        out["boxes"][attr] = _box_table(con, attr, n_boxes)
        out["images"][attr] = _image_table(con, attr, group_rule, n_person)
        out["alternative"]["images"][attr] = _image_table(con, attr, other, n_person)
        for kind in ("boxes", "images"):
            table = out[kind][attr]
            out["unclear"][f"{kind}_{attr}"] = table["groups"].get(UNCLEAR) or share(0, table["n"])
    if has["gender"]:
        both = con.execute(
            "SELECT count(*) FILTER (WHERE n_female > 0 AND n_male > 0) FROM person_images"
        ).fetchone()[0]
        out["images"]["both_genders"] = share(both, n_person)
    out["persons_per_image"] = _persons_per_image(con, n_person)
    out["box_area"] = _box_area(con, n_boxes, area_bins)
    out["definitions"] = DEFINITIONS | {
        "box_area": DEFINITIONS["box_area"].format(bins=area_bins),
        "group_rule": group_rule_definition(group_rule),
        "alternative": f"the image tables under the other rule: {group_rule_definition(other)}",
    }
    return out


def _persons_per_image(con: duckdb.DuckDBPyConnection, n_person: int) -> dict[str, Any]:
    rows = con.execute(
        f"SELECT least(n_persons, {_MAX_EXACT + 1}) AS b, count(*) FROM person_images GROUP BY b"
    ).fetchall()
    counts = dict(rows)
    top, mean = con.execute("SELECT max(n_persons), avg(n_persons) FROM person_images").fetchone()
    labels = [str(i) for i in range(1, _MAX_EXACT + 1)] + [f">={_MAX_EXACT + 1}"]
    return {
        "bins": labels,
        "counts": [int(counts.get(i, 0)) for i in range(1, _MAX_EXACT + 2)],
        "shares": [share(counts.get(i, 0), n_person) for i in range(1, _MAX_EXACT + 2)],
        "max": None if top is None else int(top),
        "mean": None if mean is None else float(mean),
    }


def _box_area(con: duckdb.DuckDBPyConnection, n_boxes: int, bins: int) -> dict[str, Any]:
    rows = con.execute(
        f"SELECT least(floor(area_frac * {bins})::BIGINT, {bins - 1}) AS b, count(*) FROM boxes "
        "WHERE area_frac >= 0 AND area_frac <= 1 GROUP BY b"
    ).fetchall()
    counts = dict(rows)
    binned = sum(counts.values())
    mean, median = con.execute(
        "SELECT avg(area_frac), median(area_frac) FROM boxes WHERE area_frac >= 0 AND area_frac <= 1"
    ).fetchone()
    return {
        "edges": [i / bins for i in range(bins + 1)],
        "counts": [int(counts.get(i, 0)) for i in range(bins)],
        "shares": [share(counts.get(i, 0), binned) for i in range(bins)],
        "invalid": n_boxes - binned,
        "mean": None if mean is None else float(mean),
        "median": None if median is None else float(median),
    }


#: What every number of :func:`composition` is (copied into its result).
DEFINITIONS = {
    "share": "count / n with its 95 % Wilson score interval; share and interval are null when n = 0",
    "boxes": "all kept boxes (n), one row per label ('unclear' is a label: the classifier could not "
    "tell) and 'unlabelled' for boxes with no label (never classified); the rows sum to 1",
    "images": "person images (at least one kept box; n), grouped by the image-level group rule "
    "(group_rule); under the exclusive rule every image is in one row and the rows sum to 1 "
    "(sum_of_shares); under 'any' an image can be in several rows",
    "unlabelled": "no label at all (NULL) — not the same as 'unclear', which is a label",
    "both_genders": "person images with at least one female and one male box",
    "unclear": "the 'unclear' rows of the box and image tables",
    "persons_per_image": "kept boxes per person image, bins 1..9 and >=10",
    "box_area": "box area / image area of the kept boxes in {bins} equal bins on [0, 1] (bin i is "
    "[i/{bins}, (i+1)/{bins}), the last holds 1); NULL or out-of-range values are 'invalid'",
}
