"""The views every person audit reads: which boxes and images count, and the image-level gender rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from person_tables import ImageSpec, write_person_tables

from fairsets.annotate import layout
from fairsets.annotate.layout import AnnotationError
from fairsets.audit.persons.tables import connect, has_captions

CASES = [  # boxes' perceived gender → the image's group (the rule in tables.py's docstring)
    (["female"], "female"),
    (["female", "female", "unclear"], "female"),
    (["male", None], "male"),
    (["female", "male"], "mixed"),
    (["mixed"], "mixed"),
    (["unclear", "unclear"], "unclear"),
    ([None], "unclear"),
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
    assert con.execute("SELECT count(*) FROM boxes").fetchone()[0] == sum(len(gs) for gs, _ in CASES) + 1
    assert con.execute("SELECT count(*) FROM images").fetchone()[0] == len(CASES) + 1
    row = con.execute(
        "SELECT n_persons, n_female, n_male, n_unclear, races FROM person_images WHERE caption = 'img 1'"
    )
    assert row.fetchone() == (3, 2, 0, 1, ["white"])
    assert not has_captions(tmp_path / "ann")
    races = con.execute("SELECT races FROM person_images WHERE caption = 'img 0'").fetchone()[0]
    assert races == []  # no labelled race: an empty list, not NULL


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
