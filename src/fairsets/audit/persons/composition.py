"""Who the annotated people are: shares of boxes and images by perceived gender and race, how many
people an image shows, and how large they are in it.

:func:`composition` reads the views of :mod:`.tables` with a handful of DuckDB aggregations (each
streams the Parquet tables once and returns a few rows), and returns a JSON-ready dict. Every share
comes as ``{"count", "n", "share", "ci95"}``: the count behind it, the total it is a share of, the
share (None when the total is 0) and its 95 % Wilson interval
(:func:`fairsets.annotate.judge.wilson_interval`; None when the total is 0).

**What each share is of** (also written into the result's ``definitions``):

* *boxes by gender / race* — the kept boxes **with a label** for that attribute; ``unclear`` is a
  label (the classifier saw a person but could not tell). Boxes with no label at all (NULL: the
  box could not be classified) are reported apart as ``missing``, a share of all kept boxes.
* *images by gender* — the images with at least one kept box (*person images*), one group each by
  the image-level rule of :mod:`.tables` (female / male / mixed / unclear). ``both_genders`` is the
  share of person images with at least one ``female`` **and** one ``male`` box (images that are
  ``mixed`` only through a box labelled ``mixed`` do not count there). ``missing`` counts the
  person images none of whose boxes has a gender label (the rule puts them in ``unclear``).
* *images with race g* — the share of person images with at least one box of perceived race
  ``g``; an image can be with several races, so these shares may sum over 1. ``only_unclear`` is the
  share of person images whose labelled boxes are all ``unclear``; ``missing`` counts person images
  with no race label at all.
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

from fairsets.annotate.judge import wilson_interval

if TYPE_CHECKING:
    import duckdb

__all__ = ["GENDERS", "composition", "share"]

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


def _columns(con: duckdb.DuckDBPyConnection, view: str) -> set[str]:
    return {row[0] for row in con.execute(f"DESCRIBE {view}").fetchall()}


def _labels(counts: dict[str | None, int], order: tuple[str, ...] = ()) -> dict[str, Any]:
    """Shares of the labelled boxes by label (fixed ``order`` first, then any other label) + missing."""
    missing = counts.pop(None, 0)
    labelled = sum(counts.values())
    names = list(order) + sorted(k for k in counts if k not in order)
    return {
        "n_labelled": labelled,
        "groups": {k: share(counts.get(k, 0), labelled) for k in names},
        "missing": share(missing, labelled + missing),
    }


def composition(con: duckdb.DuckDBPyConnection, *, area_bins: int = 20) -> dict[str, Any]:
    """Composition of the person annotations behind ``con`` (a :func:`.tables.connect` connection).

    Args:
        con: the connection with the ``boxes`` and ``person_images`` views.
        area_bins: equal-width bins of the box-area histogram on [0, 1].

    Returns:
        A JSON-ready dict: ``n_boxes``, ``n_images`` (ok images), ``n_person_images``, ``boxes``
        (``gender``, ``race``), ``images`` (``gender``, ``both_genders``, ``race``), ``unclear``,
        ``persons_per_image``, ``box_area``, ``missing_attributes`` and ``definitions`` — see the
        module docstring.
    """
    if not isinstance(area_bins, int) or isinstance(area_bins, bool) or area_bins < 1:
        raise ValueError(f"area_bins must be a positive integer; got {area_bins!r}")
    cols = _columns(con, "boxes")
    has = {a: f"perceived_{a}" in cols for a in ("gender", "race")}
    n_boxes = con.execute("SELECT count(*) FROM boxes").fetchone()[0]
    n_images = con.execute("SELECT count(*) FROM images").fetchone()[0]
    n_person = con.execute("SELECT count(*) FROM person_images").fetchone()[0]
    out: dict[str, Any] = {
        "n_boxes": n_boxes,
        "n_images": n_images,
        "n_person_images": n_person,
        "person_images": share(n_person, n_images),
        "boxes": {"gender": None, "race": None},
        "images": {"gender": None, "both_genders": None, "race": None},
        "unclear": {},
        "missing_attributes": {
            a: "the folder has no perceived_" + a + " labels; run fairsets annotate classify"
            for a, ok in has.items()
            if not ok
        },
    }
    if has["gender"]:
        rows = con.execute("SELECT perceived_gender, count(*) FROM boxes GROUP BY ALL").fetchall()
        out["boxes"]["gender"] = _labels(dict(rows), GENDERS)
        rows = con.execute("SELECT gender, count(*) FROM person_images GROUP BY ALL").fetchall()
        img = dict(rows)
        both, unlabelled = con.execute(
            "SELECT count(*) FILTER (WHERE n_female > 0 AND n_male > 0), "
            "count(*) FILTER (WHERE n_female + n_male + n_mixed + n_unclear = 0) FROM person_images"
        ).fetchone()
        names = list(GENDERS) + sorted(k for k in img if k not in GENDERS)
        out["images"]["gender"] = {
            "n_labelled": n_person,
            "groups": {k: share(img.get(k, 0), n_person) for k in names},
            "missing": share(unlabelled, n_person),
        }
        out["images"]["both_genders"] = share(both, n_person)
        out["unclear"]["boxes_gender"] = out["boxes"]["gender"]["groups"]["unclear"]
        out["unclear"]["images_gender"] = out["images"]["gender"]["groups"]["unclear"]
    if has["race"]:
        rows = con.execute("SELECT perceived_race, count(*) FROM boxes GROUP BY ALL").fetchall()
        out["boxes"]["race"] = _labels(dict(rows), ("unclear",))
        rows = con.execute(
            "SELECT r, count(*) FROM (SELECT unnest(races) AS r FROM person_images) GROUP BY r"
        ).fetchall()
        with_race = dict(rows)
        only_unclear, unlabelled = con.execute(  # races is NULL, not [], when no box has a label
            "SELECT count(*) FILTER (WHERE races = ['unclear']), "
            "count(*) FILTER (WHERE coalesce(len(races), 0) = 0) FROM person_images"
        ).fetchone()
        out["images"]["race"] = {
            "n_images": n_person,
            "groups": {k: share(with_race.get(k, 0), n_person) for k in sorted(with_race)},
            "only_unclear": share(only_unclear, n_person),
            "missing": share(unlabelled, n_person),
        }
        groups = out["boxes"]["race"]["groups"]
        out["unclear"]["boxes_race"] = groups["unclear"]
        out["unclear"]["images_race"] = out["images"]["race"]["only_unclear"]
    out["persons_per_image"] = _persons_per_image(con, n_person)
    out["box_area"] = _box_area(con, n_boxes, area_bins)
    out["definitions"] = DEFINITIONS | {"box_area": DEFINITIONS["box_area"].format(bins=area_bins)}
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
    "boxes": "kept boxes; a label share is of the boxes with a label for that attribute ('unclear' "
    "is a label); 'missing' is the boxes with no label (NULL), as a share of all kept boxes",
    "images_gender": "person images (at least one kept box), one group each: female/male when every "
    "labelled box is that gender, mixed when there are female and male boxes or a box labelled "
    "mixed, unclear otherwise; 'missing' is the person images with no gender label on any box",
    "both_genders": "person images with at least one female and one male box",
    "images_race": "person images with at least one box of perceived race g (an image can be with "
    "several, so the shares may sum over 1); 'only_unclear' is the images whose labelled boxes are "
    "all unclear; 'missing' is the images with no race label",
    "persons_per_image": "kept boxes per person image, bins 1..9 and >=10",
    "box_area": "box area / image area of the kept boxes in {bins} equal bins on [0, 1] (bin i is "
    "[i/{bins}, (i+1)/{bins}), the last holds 1); NULL or out-of-range values are 'invalid'",
}
