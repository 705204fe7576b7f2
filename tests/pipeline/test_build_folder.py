"""The output folder of ``build`` and what ``validate`` checks: one-line errors (exit 2), no litter."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from fairsets.cli import app
from helpers import write_candidates, write_recipe

runner = CliRunner()


def _one_line_error(res, *needles: str) -> str:
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def _build(recipe: Path, out: Path, *extra: str):
    return runner.invoke(app, ["build", str(recipe), "--out", str(out), "--quiet", *extra])


@pytest.mark.timeout(60)
def test_out_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path / "r.toml", write_candidates(tmp_path / "c", 2), workers=0)
    target = tmp_path / "dataset.tar"
    target.write_bytes(b"not a folder")
    _one_line_error(_build(recipe, target), str(target), "is an existing file, not a folder")
    assert target.read_bytes() == b"not a folder"


@pytest.mark.timeout(180)
def test_non_empty_foreign_folder_needs_force(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path / "r.toml", write_candidates(tmp_path / "c", 4), quota=1, workers=0)
    out = tmp_path / "photos"
    out.mkdir()
    (out / "holiday.jpg").write_bytes(b"mine")
    _one_line_error(_build(recipe, out), str(out), "not a fairsets output", "--force")
    assert sorted(p.name for p in out.iterdir()) == ["holiday.jpg"]  # nothing written, no lock left

    res = _build(recipe, out, "--force")
    assert res.exit_code == 0, res.output
    assert (out / "manifest.json").is_file() and (out / "holiday.jpg").read_bytes() == b"mine"
    res = _build(recipe, out)  # now a fairsets output: builds again without --force
    assert res.exit_code == 0, res.output


@pytest.mark.timeout(60)
def test_empty_folder_and_new_folder_need_no_force(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path / "r.toml", tmp_path / "missing", workers=0)
    empty = tmp_path / "empty"
    empty.mkdir()
    # the source folder is missing: the build fails and leaves neither a lock nor a new folder
    _one_line_error(_build(recipe, empty), "no such file or folder")
    assert list(empty.iterdir()) == []
    new = tmp_path / "a" / "new"
    _one_line_error(_build(recipe, new), "no such file or folder")
    assert not (tmp_path / "a").exists()


@pytest.mark.timeout(60)
def test_failed_build_keeps_work_state_it_wrote(tmp_path: Path) -> None:
    """Only a build that wrote nothing but its locks is cleaned up; anything else is kept to resume."""
    recipe = write_recipe(tmp_path / "r.toml", tmp_path / "missing", workers=0)
    out = tmp_path / "o"
    (out / ".fairsets" / "markers").mkdir(parents=True)
    (out / ".fairsets" / "markers" / "x.json").write_text("{}")
    _one_line_error(_build(recipe, out), "no such file or folder")
    assert (out / ".fairsets" / "markers" / "x.json").is_file()


def test_validate_names_a_missing_source_path(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path / "r.toml", tmp_path / "nope.csv")
    _one_line_error(runner.invoke(app, ["validate", str(recipe)]), "source.path", str(tmp_path / "nope.csv"))


def test_validate_names_a_missing_supplement_path(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path / "r.toml", write_candidates(tmp_path / "c", 2))
    with recipe.open("a") as fh:
        fh.write('\n[[supplement]]\ntype = "local"\npath = "more/candidates.csv"\n')
    _one_line_error(runner.invoke(app, ["validate", str(recipe)]), "supplement 1.path", "more")


def test_validate_accepts_a_listing_that_the_prepare_hook_writes(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path / "r.toml", tmp_path / "later" / "candidates.csv")
    text = recipe.read_text().replace("[source]\n", '[source]\nprepare = "hook.py:make"\n')
    recipe.write_text(text)
    _one_line_error(runner.invoke(app, ["validate", str(recipe)]), "source.prepare", "hook.py")

    (tmp_path / "hook.py").write_text("def make(path):\n    raise SystemExit('validate ran the hook')\n")
    res = runner.invoke(app, ["validate", str(recipe)])
    assert res.exit_code == 0 and res.output.startswith("ok: t:"), res.output


@pytest.mark.timeout(60)
def test_an_empty_out_is_one_line_not_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fairsets.pipeline.build import BuildError, build
    from fairsets.pipeline.config import load_recipe

    recipe = write_recipe(tmp_path / "r.toml", write_candidates(tmp_path / "c", 2), workers=0)
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    for empty in ("", " "):
        res = runner.invoke(app, ["build", str(recipe), "--out", empty, "--quiet"])
        _one_line_error(res, "--out is empty", "--out my-dataset")
        with pytest.raises(BuildError, match=r"output folder is empty.*as out"):
            build(load_recipe(recipe), empty)
    assert list(here.iterdir()) == []


@pytest.mark.timeout(60)
def test_force_is_named_for_its_audience(tmp_path: Path) -> None:
    from fairsets.pipeline.build import BuildError, build
    from fairsets.pipeline.config import load_recipe

    recipe = write_recipe(tmp_path / "r.toml", write_candidates(tmp_path / "c", 2), workers=0)
    out = tmp_path / "photos"
    out.mkdir()
    (out / "holiday.jpg").write_bytes(b"mine")
    line = _one_line_error(_build(recipe, out), "pass --force to build into it")
    assert "force=True" not in line
    with pytest.raises(BuildError) as info:
        build(load_recipe(recipe), out)
    assert "pass force=True to build into it" in str(info.value) and "--force" not in str(info.value)


@pytest.mark.timeout(60)
def test_a_read_only_out_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import os

    recipe = write_recipe(tmp_path / "r.toml", write_candidates(tmp_path / "c", 2), workers=0)
    out = tmp_path / "ro" / "ds"
    real_mkdir = Path.mkdir

    def read_only(self: Path, *args, **kwargs) -> None:
        if self == out / ".fairsets":
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    _one_line_error(
        _build(recipe, out), "cannot create the output folder", "Read-only file system", "an --out folder"
    )
