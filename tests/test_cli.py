"""The CLI: --help everywhere, one-line reasons and non-zero exit on bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from fairsets.cli import app
from helpers import write_candidates, write_recipe

runner = CliRunner()


@pytest.mark.parametrize(
    "args", [["--help"], ["build", "--help"], ["validate", "--help"], ["steps", "--help"]]
)
def test_help(args: list[str]) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "Usage" in res.output


def _err(res) -> str:
    return (res.stderr if hasattr(res, "stderr") else res.output).strip()


def test_bad_recipe_one_line(tmp_path: Path) -> None:
    r = tmp_path / "r.toml"
    r.write_text(
        'name = "x"\ngroups = ["a"]\nquota = 1\nbogus = 2\n[source]\npath = "p"\n[[steps]]\nname = "decode"\n'
    )
    res = runner.invoke(app, ["build", str(r), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    err = _err(res)
    assert "unknown key 'bogus'" in err and len(err.splitlines()) == 1


def test_missing_column_one_line(tmp_path: Path) -> None:
    listing = tmp_path / "l.csv"
    listing.write_text("path,state,license\na.jpg,Goa,CC0-1.0\n")
    res = runner.invoke(
        app, ["build", str(write_recipe(tmp_path / "r.toml", listing)), "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 2
    assert "missing required column(s) gender" in _err(res) and len(_err(res).splitlines()) == 1


def test_unreadable_folder_one_line(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        ["build", str(write_recipe(tmp_path / "r.toml", tmp_path / "nope")), "--out", str(tmp_path / "o")],
    )
    assert res.exit_code == 2 and "no such file or folder" in _err(res)


def test_build_prints_summary(tmp_path: Path) -> None:
    listing = write_candidates(tmp_path / "c", 4)
    res = runner.invoke(
        app,
        [
            "build",
            str(write_recipe(tmp_path / "r.toml", listing, quota=1, workers=0)),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "per-sample steps" in res.output and "balanced" in res.output


def test_validate_and_steps() -> None:
    root = Path(__file__).resolve().parents[1]
    res = runner.invoke(app, ["validate", str(root / "builders" / "example.toml")])
    assert res.exit_code == 0 and "ok: fairsets-example" in res.output
    res = runner.invoke(app, ["steps"])
    assert res.exit_code == 0 and "detect_face" in res.output and "crop" in res.output


def test_publish_dry_run_lists_files_and_sizes(example_out: Path) -> None:
    """``fairsets publish --dry-run`` on the example: every manifest file with its size, no token needed."""
    import json

    res = CliRunner().invoke(app, ["publish", str(example_out), "--repo-id", "someone/example", "--dry-run"])
    assert res.exit_code == 0, res.output
    files = json.loads((example_out / "manifest.json").read_text())["files"]
    for rel in [*files, "manifest.json"]:
        line = next(ln for ln in res.output.splitlines() if rel in ln)
        assert str((example_out / rel).stat().st_size) in line
    assert ".fairsets" not in res.output
