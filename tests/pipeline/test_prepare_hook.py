"""A source's ``prepare`` hook writes its listing under the output's work folder, never beside the recipe
(for an installed package, the recipe's folder is inside site-packages)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from fairsets.pipeline.build import build, check_sources
from fairsets.pipeline.config import load_recipe
from fairsets.sources import SourceError, build_source
from helpers import tree_digest

ROOT = Path(__file__).resolve().parents[2]


def _listing(folder: Path) -> list[tuple[str, int, int]]:
    return sorted(
        (p.relative_to(folder).as_posix(), p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")
    )


@pytest.mark.timeout(300)
def test_building_the_example_leaves_the_recipe_folder_unchanged(
    tmp_path: Path, example_out: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builders = tmp_path / "builders"
    shutil.copytree(
        ROOT / "builders", builders, ignore=shutil.ignore_patterns("example-candidates", "__pycache__")
    )
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # loading the hook caches no bytecode beside it
    before = _listing(builders)
    recipe = load_recipe(builders / "example.toml")
    check_sources(recipe)  # validate neither runs the hook nor writes
    assert _listing(builders) == before
    out = tmp_path / "out"
    build(recipe, out)
    assert _listing(builders) == before
    prepared = out / ".fairsets" / "prepared" / "example-candidates"
    assert (prepared / "candidates.csv").is_file() and (prepared / "images" / "astronaut.png").is_file()
    assert tree_digest(out) == tree_digest(example_out)  # where the recipe lies changes no published byte


def test_a_prepared_path_stays_in_the_prepared_folder(tmp_path: Path) -> None:
    (tmp_path / "hook.py").write_text("def make(path):\n    pass\n")
    params = {"path": "../escape.csv", "prepare": "hook.py:make"}
    with pytest.raises(SourceError, match=r"leaves the folder where the prepare hook writes"):
        build_source("local", params, tmp_path, ["state"])
    source = build_source("local", {**params, "path": "sub/l.csv"}, tmp_path, ["state"])
    with pytest.raises(SourceError, match=r"only a build has"):
        source.location  # noqa: B018 - outside a build there is no prepared folder
    work = tmp_path / "out" / ".fairsets"
    source = build_source("local", {**params, "path": "sub/l.csv"}, tmp_path, ["state"], workdir=work)
    assert source.location == work.absolute() / "prepared" / "sub" / "l.csv"
    absolute = tmp_path / "elsewhere" / "l.csv"
    source = build_source("local", {**params, "path": str(absolute)}, tmp_path, ["state"], workdir=work)
    assert source.location == absolute
