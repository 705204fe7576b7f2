"""Recipe schema: unknown keys are named, step parameters are validated at load time."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairsets.pipeline.config import RecipeError, load_recipe

BASE = """
name = "t"
groups = ["state", "gender"]
quota = 2

[source]
type = "local"
path = "x.csv"

[[steps]]
name = "decode"
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "r.toml"
    p.write_text(text)
    return p


def test_valid_recipe_loads_with_defaults(tmp_path: Path) -> None:
    r = load_recipe(write(tmp_path, BASE))
    assert r.groups == ["state", "gender"]
    assert r.variants == ["imbalanced", "balanced", "augmented"]
    assert r.executor.type == "local" and r.split.train == 0.5
    assert r.base_dir == tmp_path.resolve()


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ("colour = 1\n", "unknown key 'colour'"),
        ("[executor]\ntype = 'local'\nworkerz = 2\n", "unknown key 'executor.workerz'"),
        ("[dedup]\nhamm = 3\n", "unknown key 'dedup.hamm'"),
        ("[[steps]]\nname = 'grayscale'\nthreshhold = 3\n", "threshhold"),
        ("[[steps]]\nname = 'no_such_step'\n", "unknown step 'no_such_step'"),
        ("[split]\ntrain = 0.7\ntest = 0.7\n", "split"),
        ("[cells]\nregion = ['a']\n", "region"),
    ],
)
def test_bad_recipes_name_the_key(tmp_path: Path, extra: str, needle: str) -> None:
    # top-level keys must come before tables in TOML
    text = extra + BASE if not extra.startswith("[") else BASE + extra
    with pytest.raises(RecipeError, match=needle.replace(".", r"\.").replace("(", r"\(")):
        load_recipe(write(tmp_path, text))


def test_missing_required_key_is_named(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="missing key 'quota'"):
        load_recipe(write(tmp_path, BASE.replace("quota = 2\n", "")))


def test_not_toml(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="not valid TOML"):
        load_recipe(write(tmp_path, "name = \n"))


def test_overrides_apply_on_top(tmp_path: Path) -> None:
    r = load_recipe(write(tmp_path, BASE), overrides={"quota": 7, "seed": 3, "executor.workers": 4})
    assert (r.quota, r.seed, r.executor.workers) == (7, 3, 4)
