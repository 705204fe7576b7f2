"""``[download] max_pixels``: the recipe sets the downloads' pixel cap (default: the decode step's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairsets.pipeline.config import RecipeError, load_recipe
from fairsets.pipeline.download import fetch_policy
from helpers import write_candidates, write_recipe


def _recipe(tmp_path: Path, *, decode: str = "", download: str = "", decode_step: bool = True) -> Path:
    path = write_recipe(tmp_path / "r.toml", write_candidates(tmp_path / "c", 1), workers=0)
    text = path.read_text()
    if not decode_step:
        text = text.replace('[[steps]]\nname = "decode"\n', "")
    text = text.replace('name = "decode"\n', f'name = "decode"\n{decode}\n')
    path.write_text(text + (f"\n[download]\n{download}\n" if download else ""))
    return path


def test_the_recipe_sets_the_download_pixel_cap(tmp_path: Path) -> None:
    recipe = load_recipe(_recipe(tmp_path, decode="max_pixels = 9000000", download="max_pixels = 1234"))
    assert fetch_policy(recipe).max_pixels == 1234


def test_the_download_cap_follows_the_decode_step_else_40_mp(tmp_path: Path) -> None:
    recipe = load_recipe(_recipe(tmp_path, decode="max_pixels = 9000000"))
    assert fetch_policy(recipe).max_pixels == 9_000_000
    assert fetch_policy(load_recipe(_recipe(tmp_path))).max_pixels == 40_000_000
    assert fetch_policy(load_recipe(_recipe(tmp_path, decode_step=False))).max_pixels == 40_000_000


@pytest.mark.parametrize("bad", ["0", "-5", '"big"'])
def test_a_bad_download_pixel_cap_is_a_recipe_error(tmp_path: Path, bad: str) -> None:
    with pytest.raises(RecipeError, match="max_pixels"):
        load_recipe(_recipe(tmp_path, download=f"max_pixels = {bad}"))
