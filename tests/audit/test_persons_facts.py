"""The per-shard fact tables of ``tables.connect(cache=…)`` give every audit number the plain views give,
whatever the label tables' order; they are reused while their inputs are unchanged and rebuilt after."""

from __future__ import annotations

import os
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from person_tables import ImageSpec, write_person_tables

from fairsets.annotate import layout
from fairsets.audit.persons import tables, transfer
from fairsets.audit.persons.composition import composition
from fairsets.audit.persons.crime import crime_association

GENDERS = ["female", "male", "mixed", "unclear", None]
RACES = ["white", "black", "east asian", "indian", None]
ALTS = ["a nurse at work", "two police-officers", "a thief", "Nurses and a CEO", None, "  ", "a day out"]


def _specs(n: int, seed: int) -> list[ImageSpec]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        boxes = [(rng.choice(GENDERS), rng.choice(RACES), rng.random()) for _ in range(rng.randint(1, 4))]
        caps = [rng.choice(ALTS) for _ in boxes]
        out.append(
            ImageSpec(boxes=boxes, alt=rng.choice(ALTS), person_captions=caps, dropped=rng.randint(0, 2))
        )
    return out


def _numbers(con) -> dict:
    cats = ["nurse", "police officer", "ceo", "thief"]
    return {
        "composition": composition(con),
        "crime": crime_association(con, ["thief"], min_count=1),
        "bias": transfer.data_bias(con, cats, min_count=1),
        "captions": con.execute("SELECT count(*), count(perceived_gender) FROM captions").fetchone(),
    }


@pytest.fixture()
def ann(tmp_path):
    return write_person_tables(tmp_path / "ann", _specs(300, 5), shard_size=70)


def test_facts_give_the_numbers_of_the_plain_views(ann, tmp_path):
    plain = _numbers(tables.connect(ann))
    assert plain["composition"]["n_boxes"] > 0
    assert _numbers(tables.connect(ann, cache=tmp_path / "facts")) == plain
    assert _numbers(tables.connect(ann, cache=tmp_path / "facts", threads=1)) == plain


def test_label_tables_out_of_box_order_are_joined_by_key(ann, tmp_path):
    plain = _numbers(tables.connect(ann))
    for attr in ("gender", "race"):
        path = layout.attribute_path(ann, attr, "00001")
        t = pq.read_table(path)
        order = list(range(t.num_rows))
        random.Random(1).shuffle(order)
        pq.write_table(t.take(order), path)
    os.remove(layout.attribute_path(ann, "race", "00002"))  # a shard not classified for race
    plain = _numbers(tables.connect(ann))
    assert _numbers(tables.connect(ann, cache=tmp_path / "facts")) == plain
    missing = tables.connect(ann, cache=tmp_path / "facts").execute(
        "SELECT count(*) FILTER (WHERE perceived_race IS NOT NULL) FROM boxes WHERE shard = '00002'"
    )
    assert missing.fetchone()[0] == 0


def test_facts_are_reused_and_rebuilt_when_a_shard_changes(ann, tmp_path):
    cache = tmp_path / "facts"
    tables.connect(ann, cache=cache)
    files = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}
    assert len(files) == 2 * 5 and not [p for p in cache.iterdir() if not p.name.endswith(".parquet")]
    tables.connect(ann, cache=cache)
    assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} == files  # nothing rebuilt
    path = layout.attribute_path(ann, "gender", "00003")
    t = pq.read_table(path)
    i = t.schema.get_field_index("perceived_gender")
    t = t.set_column(i, "perceived_gender", pa.array(["female"] * t.num_rows, pa.string()))
    pq.write_table(t, path)
    con = tables.connect(ann, cache=cache)
    now = {p.name for p in cache.iterdir()}
    assert len(now) == 10 and len(now - set(files)) == 2  # shard 00003's two tables, new; the old gone
    got = con.execute(
        "SELECT count(*) FILTER (WHERE perceived_gender <> 'female') FROM boxes WHERE shard = '00003'"
    )
    assert got.fetchone()[0] == 0
    assert _numbers(con) == _numbers(tables.connect(ann))
