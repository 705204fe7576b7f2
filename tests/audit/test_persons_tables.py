"""The views every person audit reads: which boxes and images count, and the image-level gender rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from person_tables import ImageSpec, write_person_tables
from person_tables import image_group as exclusive

from fairsets.annotate import layout
from fairsets.annotate.layout import AnnotationError
from fairsets.audit.persons.tables import connect, group_rule_definition, groups_sql, has_captions

CASES = [  # boxes' perceived gender → the image's group (the rule in tables.py's docstring)
    (["female"], "female"),
    (["female", "female", "unclear"], "female"),
    (["male", None], "male"),
    (["female", "male"], "mixed"),
    (["mixed"], "mixed"),
    (["unclear", "unclear"], "unclear"),
    ([None], "unlabelled"),  # no label is not "unclear"
]

RACE_CASES = [  # boxes' perceived race → the image's exclusive race group (the same rule)
    (["white"], "white"),
    (["white", "unclear", None], "white"),
    (["black", "white"], "mixed"),
    (["unclear", "unclear"], "unclear"),
    ([None, None], "unlabelled"),
    (["black", "black", "east_asian", "unclear"], "mixed"),
]


def test_image_gender_rule_and_counts(tmp_path: Path) -> None:
    specs = [
        ImageSpec([(g, "white" if i else None, 0.1) for i, g in enumerate(gs)], alt=f"img {n}")
        for n, (gs, _) in enumerate(CASES)
    ]
    specs += [ImageSpec([], alt="nobody"), ImageSpec([("female", "black", 0.2)], status="rejected")]
    specs[0].dropped = 2
    con = connect(write_person_tables(tmp_path / "ann", specs, shard_size=3))
    got = dict(con.sql("SELECT caption, gender FROM person_images").fetchall())
    assert got == {f"img {n}": want for n, (_, want) in enumerate(CASES)}  # no box-less or rejected image
    assert all(exclusive(gs) == want for gs, want in CASES)
    assert con.execute("SELECT count(*) FROM boxes").fetchone()[0] == sum(len(gs) for gs, _ in CASES) + 1
    assert con.execute("SELECT count(*) FROM images").fetchone()[0] == len(CASES) + 1
    row = con.execute(
        "SELECT n_persons, n_female, n_male, n_unclear, races FROM person_images WHERE caption = 'img 1'"
    )
    assert row.fetchone() == (3, 2, 0, 1, ["white"])
    assert not has_captions(tmp_path / "ann")
    races, race = con.execute("SELECT races, race FROM person_images WHERE caption = 'img 0'").fetchone()
    assert races == [] and race == "unlabelled"  # no labelled race: an empty list, not NULL


@pytest.mark.parametrize("cache", [False, True])
def test_one_group_rule_for_race_and_gender_exclusive_and_any(tmp_path: Path, cache: bool) -> None:
    """The exclusive race column follows the same rule as gender; under ``any`` an image is in every
    group one of its boxes has (``unlabelled`` when none), so its groups may be several."""
    import itertools

    pairs = list(itertools.zip_longest(CASES, RACE_CASES, fillvalue=([None], "unlabelled")))
    specs = [
        ImageSpec(
            [(g, r, 0.1) for g, r in itertools.zip_longest(gs, rs)],
            alt=f"img {n}",
        )
        for n, ((gs, _), (rs, _)) in enumerate(pairs)
    ]
    con = connect(write_person_tables(tmp_path / "ann", specs), cache=tmp_path / "facts" if cache else None)
    rows = con.sql(
        f"SELECT caption, gender, race, {groups_sql('gender', 'any')}, {groups_sql('race', 'any')}, "
        f"{groups_sql('race', 'exclusive')} FROM person_images"
    ).fetchall()
    got = {caption: rest for caption, *rest in rows}
    for n, ((gs, _), (rs, _)) in enumerate(pairs):
        genders = list(gs) + [None] * (len(rs) - len(gs))
        races = list(rs) + [None] * (len(gs) - len(rs))
        g, r, g_any, r_any, r_list = got[f"img {n}"]
        assert (g, r) == (exclusive(genders), exclusive(races))
        assert r_list == [exclusive(races)]
        for labels, members in ((genders, g_any), (races, r_any)):
            named = sorted({x for x in labels if x is not None})
            assert members == (named or ["unlabelled"])
    for rule in ("exclusive", "any"):
        assert rule in group_rule_definition(rule)
    with pytest.raises(ValueError, match="group rule"):
        groups_sql("gender", "some")


def test_person_captions_carry_their_box_labels(tmp_path: Path) -> None:
    spec = [ImageSpec([("female", "black", 0.1), ("male", "white", 0.1)], person_captions=["she runs", None])]
    ann = write_person_tables(tmp_path / "ann", spec)
    con = connect(ann)
    assert has_captions(ann)
    assert con.sql("SELECT caption, perceived_gender, perceived_race FROM captions").fetchall() == [
        ("she runs", "female", "black")  # the failed caption is not text
    ]


def test_unfinished_shards_are_left_out_and_nothing_finished_is_an_error(tmp_path: Path) -> None:
    ann = write_person_tables(tmp_path / "ann", [ImageSpec([("female", None, 0.1)])] * 4, shard_size=2)
    layout.marker_path(ann, "persons", "00001").unlink()
    assert connect(ann).execute("SELECT count(*) FROM person_images").fetchone()[0] == 2
    layout.marker_path(ann, "persons", "00000").unlink()
    with pytest.raises(AnnotationError, match="annotate persons"):
        connect(ann)
