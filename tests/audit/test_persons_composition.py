"""Composition of person annotations: every share, histogram and interval against plain Python over
the planted specs (the Wilson interval recomputed here from its formula)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from person_tables import ImageSpec, image_group, image_groups_any, write_person_tables

from fairsets.audit.persons.composition import composition
from fairsets.audit.persons.tables import connect

GENDERS = ["female", "male", "mixed", "unclear", None]
RACES = ["white", "black", "east_asian", "middle_eastern", "unclear", None]


def wilson(k: int, n: int) -> tuple[float, float]:
    z = 1.959963984540054
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (0.0 if k == 0 else c - h, 1.0 if k == n else c + h)


def check(entry: dict, k: int, n: int) -> None:
    assert (entry["count"], entry["n"]) == (k, n)
    assert entry["share"] == pytest.approx(k / n)
    assert entry["ci95"] == pytest.approx(wilson(k, n), abs=1e-12)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[ImageSpec], dict]:
    rng = random.Random(7)
    specs = []
    for _ in range(400):
        n = rng.choice([0, 1, 1, 1, 2, 2, 3, 4, 9, 10, 13])
        boxes = [
            (rng.choice(GENDERS), rng.choice(RACES), rng.choice([0.0, 0.049, 0.05, 0.31, 0.999, 1.0]))
            for _ in range(n)
        ]
        specs.append(ImageSpec(boxes, alt="x"))
    specs.append(ImageSpec([], status="rejected"))  # not an ok image: no person image
    ann = write_person_tables(tmp_path_factory.mktemp("comp") / "ann", specs, shard_size=90)
    return specs[:-1], composition(connect(ann))


def test_box_shares_by_gender_and_race(planted) -> None:
    specs, got = planted
    boxes = [b for s in specs for b in s.boxes]
    assert got["n_boxes"] == len(boxes) and got["n_images"] == len(specs)
    for i, attr in enumerate(["gender", "race"]):
        labels = ["unlabelled" if b[i] is None else b[i] for b in boxes]
        section = got["boxes"][attr]
        assert section["n"] == len(boxes) and section["n_labelled"] == len(boxes) - labels.count("unlabelled")
        assert set(section["groups"]) == set(labels) | ({"female", "male", "mixed"} if i == 0 else set())
        for g, entry in section["groups"].items():
            check(entry, labels.count(g), len(boxes))  # one denominator: every kept box
        assert sum(e["count"] for e in section["groups"].values()) == len(boxes)
    check(got["unclear"]["boxes_race"], [b[1] for b in boxes].count("unclear"), len(boxes))


def test_image_shares_by_gender_both_genders_and_race(planted) -> None:
    specs, got = planted
    person = [s for s in specs if s.boxes]
    n = len(person)
    assert got["n_person_images"] == n and got["group_rule"] == "exclusive"
    check(got["person_images"], n, len(specs))
    for i, attr in enumerate(["gender", "race"]):
        groups = [image_group([b[i] for b in s.boxes]) for s in person]
        table = got["images"][attr]
        assert table["n"] == n and not table["multi_membership"]
        assert set(groups) <= set(table["groups"])
        for g, entry in table["groups"].items():
            check(entry, groups.count(g), n)
        check(got["unclear"][f"images_{attr}"], groups.count("unclear"), n)
    both = sum(1 for s in person if {"female", "male"} <= {b[0] for b in s.boxes})
    check(got["images"]["both_genders"], both, n)


def test_shares_of_one_table_sum_to_one_and_unlabelled_is_not_unclear(planted) -> None:
    """Finding 5: images with no label were counted in 'unclear' and listed again as their own row
    (rows summed over 100 %), and image race shares kept unlabelled images in the denominator while
    every race share counted an image for each race it had."""
    specs, got = planted
    person = [s for s in specs if s.boxes]
    unlabelled = sum(all(b[0] is None for b in s.boxes) for s in person)
    only_unclear = sum({b[0] for b in s.boxes} - {None} == {"unclear"} for s in person)
    assert unlabelled and only_unclear  # the planted data has both
    gender = got["images"]["gender"]["groups"]
    assert (gender["unlabelled"]["count"], gender["unclear"]["count"]) == (unlabelled, only_unclear)
    for kind in ("boxes", "images"):
        for attr in ("gender", "race"):
            table = got[kind][attr]
            assert sum(e["count"] for e in table["groups"].values()) == table["n"]
            assert sum(e["share"] for e in table["groups"].values()) == pytest.approx(1.0)
    assert got["images"]["race"]["sum_of_shares"] == 1.0
    race_unlabelled = sum(all(b[1] is None for b in s.boxes) for s in person)
    assert got["images"]["race"]["groups"]["unlabelled"]["count"] == race_unlabelled > 0
    assert "unclear" in got["definitions"]["unlabelled"]
    assert "exclusive" in got["definitions"]["group_rule"]


def test_group_rule_any_is_declared_multi_membership_and_the_alternative(planted) -> None:
    specs, got = planted
    person = [s for s in specs if s.boxes]
    n = len(person)
    alt = got["alternative"]
    assert alt["group_rule"] == "any"
    for i, attr in enumerate(["gender", "race"]):
        table = alt["images"][attr]
        assert table["multi_membership"] and table["group_rule"] == "any"
        members = [image_groups_any([b[i] for b in s.boxes]) for s in person]
        for g, entry in table["groups"].items():
            check(entry, sum(g in m for m in members), n)
        assert table["sum_of_shares"] == pytest.approx(sum(len(m) for m in members) / n)
        assert table["sum_of_shares"] > 1


def test_persons_per_image_and_box_area_histograms(planted) -> None:
    specs, got = planted
    person = [s for s in specs if s.boxes]
    counts = [len(s.boxes) for s in person]
    hist = got["persons_per_image"]
    assert hist["bins"][0] == "1" and hist["bins"][-1] == ">=10"
    want = [counts.count(i) for i in range(1, 10)] + [sum(c >= 10 for c in counts)]
    assert hist["counts"] == want and want[-1] > 0
    for entry, k in zip(hist["shares"], want, strict=True):
        check(entry, k, len(person))
    assert hist["max"] == 13 and hist["mean"] == pytest.approx(sum(counts) / len(counts))
    areas = [b[2] for s in specs for b in s.boxes]
    area = got["box_area"]
    assert len(area["edges"]) == 21 and area["edges"][-1] == 1.0
    want = [0] * 20
    for a in areas:
        want[min(int(a * 20), 19)] += 1  # 0.05 → bin 1, 0.049 → bin 0, 1.0 → the last bin
    assert area["counts"] == want and area["invalid"] == 0
    assert area["counts"][0] == sum(a < 0.05 for a in areas) and area["counts"][19] == sum(
        a >= 0.95 for a in areas
    )
    check(area["shares"][6], want[6], len(areas))


def test_small_folder_and_missing_labels(tmp_path: Path) -> None:
    spec = [
        ImageSpec([("female", None, 0.2), ("male", None, 0.3)]),
        ImageSpec([]),
        ImageSpec([(None, None, 0.1)]),
    ]
    ann = write_person_tables(tmp_path / "ann", spec)
    got = composition(connect(ann), area_bins=4)
    assert got["images"]["gender"]["groups"]["mixed"]["count"] == 1
    assert got["images"]["gender"]["groups"]["unclear"]["count"] == 0  # the unlabelled image is not unclear
    check(got["images"]["gender"]["groups"]["unlabelled"], 1, 2)
    assert "unclear" not in got["boxes"]["race"]["groups"]
    check(got["boxes"]["race"]["groups"]["unlabelled"], 3, 3)
    assert list(got["images"]["race"]["groups"]) == ["unlabelled"]
    swapped = composition(connect(ann), group_rule="any")
    assert swapped["group_rule"] == "any" and swapped["alternative"]["group_rule"] == "exclusive"
    assert swapped["alternative"]["images"]["gender"] == got["images"]["gender"]
    assert swapped["images"]["gender"] == got["alternative"]["images"]["gender"]
    assert swapped["images"]["gender"]["groups"]["female"]["count"] == 1  # the mixed image is female too
    assert got["box_area"]["counts"] == [2, 1, 0, 0]  # 0.1, 0.2 | 0.3
    assert got["definitions"]["box_area"].startswith("box area")
    import json

    json.dumps(got)  # JSON-ready
    with pytest.raises(ValueError, match="area_bins"):
        composition(connect(ann), area_bins=0)
    with pytest.raises(ValueError, match="group rule"):
        composition(connect(ann), group_rule="every")


def test_folder_without_race_labels(tmp_path: Path) -> None:
    ann = write_person_tables(tmp_path / "ann", [ImageSpec([("male", "white", 0.2)])])
    for f in (ann / "attributes" / "race").iterdir():
        f.unlink()
    got = composition(connect(ann))
    assert got["boxes"]["race"] is None and got["images"]["race"] is None
    assert "race" in got["missing_attributes"] and "classify" in got["missing_attributes"]["race"]
    check(got["boxes"]["gender"]["groups"]["male"], 1, 1)
