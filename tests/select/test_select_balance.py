"""Tests for fairsets.select.balance.select (balanced, identity-disjoint selection plans)."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict

import pyarrow as pa
import pytest

from fairsets.core.data import validate_key
from fairsets.select import Plan, PlanItem, select

GROUPS = ["state", "gender"]
ALL = ["imbalanced", "balanced", "augmented"]


def rows(state: str, gender: str, n_images: int, n_ids: int | None, prefix: str | None = None) -> list[dict]:
    """``n_images`` pool rows of one cell spread round-robin over ``n_ids`` identities (None: null ids)."""
    prefix = prefix or f"{state}_{gender}"
    return [
        {
            "key": f"{prefix}_{i:04d}",
            "state": state,
            "gender": gender,
            "identity": None if n_ids is None else f"{prefix}_p{i % n_ids}",
        }
        for i in range(n_images)
    ]


def pool_fixture() -> list[dict]:
    return (
        rows("Kerala", "female", 40, 8)  # over-full
        + rows("Kerala", "male", 10, 4)  # exactly full
        + rows("Goa", "female", 6, 3)  # under-full
        + rows("Goa", "male", 3, 1)  # single identity
        + rows("Assam", "female", 7, None)  # null identities: each image its own identity
    )


EXPECTED = [{"state": s, "gender": g} for s in ("Assam", "Goa", "Kerala") for g in ("female", "male")]


def by_cell(plan: Plan, variant: str) -> dict[tuple, list[PlanItem]]:
    out: dict[tuple, list[PlanItem]] = defaultdict(list)
    for it in plan.variant(variant):
        out[it.cell].append(it)
    return out


def identity_map(pool: list[dict]) -> dict[str, str]:
    return {r["key"]: r["identity"] if r["identity"] is not None else f"own:{r['key']}" for r in pool}


@pytest.fixture(scope="module")
def plan() -> Plan:
    return select(pool_fixture(), GROUPS, quota=10, variants=ALL, seed=7, cells=EXPECTED)


def test_exact_quota_per_cell(plan: Plan) -> None:
    cells = by_cell(plan, "balanced")
    for cell in [
        ("Kerala", "female"),
        ("Kerala", "male"),
        ("Goa", "female"),
        ("Goa", "male"),
        ("Assam", "female"),
    ]:
        assert len(cells[cell]) == 10, cell
    # over-full: no augmentation needed; exactly full: all real images used, none augmented
    assert not any(it.augmented for it in cells[("Kerala", "female")])
    kerala_m = cells[("Kerala", "male")]
    assert sorted(it.key for it in kerala_m) == sorted(r["key"] for r in rows("Kerala", "male", 10, 4))
    assert not any(it.augmented for it in kerala_m)
    # under-full: all 6 real images + 4 mild augmentations
    goa_f = cells[("Goa", "female")]
    assert sum(not it.augmented for it in goa_f) == 6
    assert sum(it.augmented for it in goa_f) == 4


def test_augmented_items_have_dicts_and_keys(plan: Plan) -> None:
    for it in plan.variant("balanced"):
        validate_key(it.key)
        if it.augmented:
            assert it.augment["kind"] == "mild"
            assert isinstance(it.augment["seed"], int) and 0 <= it.augment["seed"] < 2**32
            assert it.key == f"{it.source_key}-aug{it.augment['index']}"
            assert re.fullmatch(r".+-aug\d+", it.key)
        else:
            assert it.key == it.source_key and it.augment is None
    for variant in ALL:
        keys = [it.key for it in plan.variant(variant)]
        assert len(keys) == len(set(keys)), variant


def test_identity_disjoint_and_augmentations_stay_in_source_split(plan: Plan) -> None:
    ident = identity_map(pool_fixture())
    for variant in ALL:
        splits_of: dict[str, set[str]] = defaultdict(set)
        real_split = {it.key: it.split for it in plan.variant(variant) if not it.augmented}
        for it in plan.variant(variant):
            splits_of[ident[it.source_key]].add(it.split)
            if it.augmented and it.source_key in real_split:
                assert it.split == real_split[it.source_key]
        assert all(len(s) == 1 for s in splits_of.values()), variant
    # the same person is in the same split in every variant
    where = {v: {ident[it.source_key]: it.split for it in plan.variant(v)} for v in ALL}
    for person, split in where["balanced"].items():
        assert where["imbalanced"][person] == split
        assert where["augmented"][person] == split


def test_fifty_fifty_per_cell(plan: Plan) -> None:
    cells = by_cell(plan, "balanced")
    for cell in [("Kerala", "female"), ("Kerala", "male"), ("Goa", "female"), ("Assam", "female")]:
        counts = Counter(it.split for it in cells[cell])
        assert counts == {"train": 5, "test": 5}, cell
    # enough real images on both sides: 50/50 of real images, no augmentation
    assert Counter((it.split, it.augmented) for it in cells[("Kerala", "female")]) == {
        ("train", False): 5,
        ("test", False): 5,
    }


def test_odd_quota_gives_ceil_to_train() -> None:
    plan = select(rows("Goa", "female", 30, 6), GROUPS, quota=7, variants=["balanced"], seed=1)
    assert Counter(it.split for it in plan.items) == {"train": 4, "test": 3}


def test_single_identity_cell_reported(plan: Plan) -> None:
    goa_m = by_cell(plan, "balanced")[("Goa", "male")]
    assert Counter(it.split for it in goa_m) == {"train": 10}
    assert sum(it.augmented for it in goa_m) == 7
    report = next(c for c in plan.cells if c.cell == {"state": "Goa", "gender": "male"})
    assert report.identities == 1 and report.available == 3
    assert report.counts["balanced"]["train"].real == 3
    assert report.counts["balanced"]["train"].augmented == 7
    assert report.counts["balanced"]["test"].total == 0
    assert any("1 identity, split forced to train=10/test=0" in n for n in report.notes)
    assert "state=Goa, gender=male: 1 identity, split forced to train=10/test=0" in plan.warnings


def test_empty_expected_cell_reported_and_absent(plan: Plan) -> None:
    assert not [it for it in plan.items if it.cell == ("Assam", "male")]
    report = next(c for c in plan.cells if c.cell == {"state": "Assam", "gender": "male"})
    assert report.available == 0 and "no real image" in report.notes
    assert all(c.total == 0 for splits in report.counts.values() for c in splits.values())
    assert any(w.startswith("state=Assam, gender=male: no real image") for w in plan.warnings)
    assert [c.cell for c in plan.cells] == [dict(c) for c in EXPECTED]


def test_same_seed_same_plan_different_seed_different_choice() -> None:
    a = select(pool_fixture(), GROUPS, 10, ALL, seed=3, cells=EXPECTED)
    b = select(list(reversed(pool_fixture())), GROUPS, 10, ALL, seed=3, cells=EXPECTED)
    assert a.items == b.items and a.warnings == b.warnings
    assert json.dumps(a.to_dict(), sort_keys=True) == json.dumps(b.to_dict(), sort_keys=True)
    choices = set()
    for seed in range(4):
        p = select(pool_fixture(), GROUPS, 10, ["balanced"], seed=seed)
        choices.add(tuple(it.key for it in p.items if it.cell == ("Kerala", "female")))
    assert len(choices) > 1


def test_adding_a_cell_keeps_other_cells() -> None:
    base = rows("Kerala", "female", 40, 8) + rows("Goa", "female", 6, 3)
    a = select(base, GROUPS, 10, ALL, seed=5)
    b = select(base + rows("Bihar", "male", 25, 5), GROUPS, 10, ALL, seed=5)
    assert a.items == [it for it in b.items if it.cell != ("Bihar", "male")]


def test_augmented_variant_is_2n_with_colour_copies(plan: Plan) -> None:
    bal = {(it.split, it.key): it for it in plan.variant("balanced")}
    cells = by_cell(plan, "augmented")
    for cell, items in by_cell(plan, "balanced").items():
        aug = cells[cell]
        assert len(aug) == 2 * len(items) == 20
        colour = [it for it in aug if it.augment and it.augment["kind"] == "colour"]
        assert len(colour) == len(items)
        # the balanced items are all there, unchanged, in the same split
        assert {(it.split, it.key) for it in aug if it not in colour} == {(it.split, it.key) for it in items}
        for it in colour:
            assert it.key == f"{it.source_key}-col{it.augment['index']}"
            base = it.augment.get("base")
            if base is not None:
                assert base["kind"] == "mild"
                src = bal[(it.split, f"{it.source_key}-aug{base['index']}")]
                assert src.augment == base
            else:
                assert (it.split, it.source_key) in bal
    assert sum(c.counts["augmented"]["train"].total for c in plan.cells) == sum(
        2 * c.counts["balanced"]["train"].total for c in plan.cells
    )


def test_imbalanced_is_all_rows(plan: Plan) -> None:
    pool = pool_fixture()
    items = plan.variant("imbalanced")
    assert sorted(it.key for it in items) == sorted(r["key"] for r in pool)
    assert not any(it.augmented for it in items)
    kerala_f = Counter(it.split for it in items if it.cell == ("Kerala", "female"))
    assert kerala_f == {"train": 20, "test": 20}  # 8 identities x 5 images: an even split exists


def test_pyarrow_table_and_rows() -> None:
    pool = pool_fixture()
    a = select(pa.Table.from_pylist(pool), GROUPS, 10, ALL, seed=2)
    b = select(pool, GROUPS, 10, ALL, seed=2)
    assert a.items == b.items
    table = pa.Table.from_pylist(a.to_rows())
    assert table.num_rows == len(a.items)
    assert {"variant", "split", "key", "source_key", "state", "gender", "augment"} <= set(table.column_names)
    cells = pa.Table.from_pylist(a.cell_rows())
    assert cells.num_rows == len(a.cells) * 3 * 2
    json.dumps(a.to_dict())


def test_items_sorted() -> None:
    plan = select(pool_fixture(), GROUPS, 10, ALL, seed=4)
    keys = [(it.variant, it.split, it.cell, it.key) for it in plan.items]
    assert keys == sorted(keys)


def test_unexpected_and_null_rows_reported() -> None:
    pool = rows("Goa", "female", 4, 2) + rows("Mars", "female", 2, 1)
    pool.append({"key": "nogender", "state": "Goa", "gender": None, "identity": "x"})
    plan = select(pool, GROUPS, 4, ["imbalanced"], seed=0, cells=[{"state": "Goa", "gender": "female"}])
    assert {it.cell for it in plan.items} == {("Goa", "female")}
    assert any("null 'gender'" in w for w in plan.warnings)
    assert any("not among the expected cells" in w and "Mars" in w for w in plan.warnings)


def test_errors() -> None:
    pool = rows("Goa", "female", 4, 2)
    with pytest.raises(ValueError, match="sideways"):
        select(pool, GROUPS, 4, ["sideways"], seed=0)
    with pytest.raises(ValueError, match="quota"):
        select(pool, GROUPS, 0, ["balanced"], seed=0)
    with pytest.raises(ValueError, match="duplicate key"):
        select(pool + pool[:1], GROUPS, 4, ["balanced"], seed=0)
    with pytest.raises(ValueError, match="illegal sample key"):
        select([{**pool[0], "key": "a.jpg"}], GROUPS, 4, ["balanced"], seed=0)
    with pytest.raises(ValueError, match="region"):
        select(pool, ["state", "region"], 4, ["balanced"], seed=0)
    with pytest.raises(ValueError, match="collides"):
        clash = [*rows("Goa", "female", 1, 1, "x"), {**pool[0], "key": "x_0000-aug1"}]
        select(clash, GROUPS, 4, ["balanced"], seed=0)


def test_a_person_in_two_cells_is_refused_not_split_both_ways() -> None:
    # 20 people with 2 images in each of two cells: planned per cell, half of them used to land in
    # train in one cell and in test in the other.
    pool = [
        {"key": f"k_{s}_{p}_{j}", "state": s, "gender": "f", "identity": f"p{p}"}
        for s in ("A", "B")
        for p in range(20)
        for j in range(2)
    ]
    with pytest.raises(ValueError, match=r"20 identities in more than one cell, e\.g\. 'p0'"):
        select(pool, GROUPS, 10, ["imbalanced"], seed=1)
    # one cell per person: fine, and identity-disjoint
    ok = [r for r in pool if (r["state"] == "A") == (int(r["identity"][1:]) % 2 == 0)]
    plan = select(ok, GROUPS, 10, ["imbalanced"], seed=1)
    sides: dict[str, set[str]] = defaultdict(set)
    by_key = {r["key"]: r for r in ok}
    for it in plan.items:
        sides[by_key[it.key]["identity"]].add(it.split)
    assert all(len(s) == 1 for s in sides.values())


def test_cross_cell_identities_home_is_the_cell_with_most_images() -> None:
    from fairsets.select.split import cross_cell_identities

    pool = [
        {"state": "B", "gender": "f", "identity": "x"},
        {"state": "A", "gender": "f", "identity": "x"},
        {"state": "B", "gender": "f", "identity": "x"},
        {"state": "A", "gender": "f", "identity": "y"},
        {"state": "B", "gender": "f", "identity": "y"},
        {"state": "A", "gender": "f", "identity": None},
        {"state": "B", "gender": "f", "identity": ""},
        {"state": "A", "gender": "f", "identity": "z"},
    ]
    assert cross_cell_identities(pool, GROUPS) == {
        "x": (("B", "f"), [("A", "f")]),
        "y": (("A", "f"), [("B", "f")]),  # a tie: the first cell in sorted order
    }
