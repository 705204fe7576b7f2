"""Tests for fairsets.select.split (identity-disjoint splitting helpers)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

import pytest

from fairsets.select.split import (
    allocate,
    assign_groups,
    derive_seed,
    identity_disjoint_split,
    identity_of,
    normalise_fractions,
)


def test_allocate() -> None:
    assert allocate(7) == {"train": 4, "test": 3}
    assert allocate(100) == {"train": 50, "test": 50}
    assert allocate(10, {"train": 0.8, "val": 0.1, "test": 0.1}) == {"train": 8, "val": 1, "test": 1}
    assert sum(allocate(11, {"a": 1, "b": 1, "c": 1}).values()) == 11
    assert allocate(0) == {"train": 0, "test": 0}


def test_normalise_fractions() -> None:
    assert normalise_fractions({"train": 3, "test": 1}) == {"train": 0.75, "test": 0.25}
    with pytest.raises(ValueError):
        normalise_fractions({"train": 0, "test": 0})
    with pytest.raises(ValueError):
        normalise_fractions({"train": -1, "test": 2})


def test_assign_groups_balances_and_is_deterministic() -> None:
    sizes = {f"p{i}": 1 + i % 4 for i in range(20)}
    a = assign_groups(sizes, {"train": 0.5, "test": 0.5}, seed=1)
    assert a == assign_groups(dict(reversed(list(sizes.items()))), {"train": 0.5, "test": 0.5}, seed=1)
    per = Counter()
    for g, s in a.items():
        per[s] += sizes[g]
    assert abs(per["train"] - per["test"]) <= 1
    # a zero-weight split gets nothing
    b = assign_groups(sizes, {"train": 1.0, "test": 0.0}, seed=1)
    assert set(b.values()) == {"train"}


def test_identity_disjoint_split() -> None:
    items = [(f"k{i:03d}", f"p{i % 7}") for i in range(70)] + [(f"n{i}", None) for i in range(6)]
    out = identity_disjoint_split(items, seed=3)
    ident = {k: identity_of(k, i) for k, i in items}
    where: dict[str, set[str]] = {}
    for k, s in out.items():
        where.setdefault(ident[k], set()).add(s)
    assert all(len(s) == 1 for s in where.values())
    counts = Counter(out.values())
    assert abs(counts["train"] - counts["test"]) <= 10
    three = identity_disjoint_split(items, seed=3, fractions={"train": 0.6, "val": 0.2, "test": 0.2})
    assert set(three.values()) == {"train", "val", "test"}
    with pytest.raises(ValueError, match="duplicate"):
        identity_disjoint_split([("a", "x"), ("a", "y")], seed=0)


def test_derive_seed_stable_across_processes() -> None:
    here = derive_seed(42, "balanced", "Kerala", "female")
    code = "from fairsets.select.split import derive_seed as d; print(d(42, 'balanced', 'Kerala', 'female'))"
    env = {**os.environ, "PYTHONHASHSEED": "123"}  # a different str hash salt must not matter
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert int(other.stdout) == here
    assert 0 <= here < 2**32
    assert derive_seed(1, "a") != derive_seed(2, "a")


def test_derive_seed_matches_vision() -> None:
    pytest.importorskip("albumentations")
    from fairsets.vision.augment import derive_seed as vision_derive_seed

    for parts in [(0,), (1, "mild", "key_x", 3), ("a", "b\x00c")]:
        assert derive_seed(*parts) == vision_derive_seed(*parts)


def test_select_imports_without_vision_deps() -> None:
    code = (
        "import sys; import fairsets.select; "
        "assert 'cv2' not in sys.modules and 'albumentations' not in sys.modules, 'heavy import'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
