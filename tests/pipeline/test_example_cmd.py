"""``fairsets example --out DIR``: the shipped recipes and their files, written out so that a
pip-installed fairsets can build the example (issue 26, newcomer friction 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_helpers import assert_one_line_error, run_cli
from fairsets.pipeline.recipes import shipped_files, shipped_recipes_dir

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.usefixtures("no_egress")


def test_every_recipe_and_the_files_it_names_ship() -> None:
    names = {p.name for p in shipped_files()}
    assert shipped_recipes_dir() == ROOT / "builders"  # from a checkout: the checkout's folder
    assert {"example.toml", "example-audit.toml", "indicfairface.toml"} <= names
    assert {"example.py", "example_audit.py", "india_states.csv"} <= names  # hooks, states table


@pytest.mark.timeout(60)
def test_it_writes_the_recipes_and_says_how_to_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "new" / "recipes"
    code, stdout, err = run_cli(["example", "--out", out], capsys)
    assert code == 0, err
    for path in shipped_files():
        assert (out / path.name).read_bytes() == path.read_bytes(), path.name
        assert f"wrote {out / path.name}" in stdout
    assert f"fairsets build {out / 'example.toml'} --out example-out" in stdout
    code, _, err = run_cli(["validate", out / "example.toml"], capsys)  # its hook lies beside it
    assert code == 0, err
    code, stdout, err = run_cli(["example", "--out", out], capsys)  # again: nothing to do
    assert code == 0, err
    assert "wrote" not in stdout and f"unchanged {out / 'example.toml'}" in stdout


@pytest.mark.timeout(60)
def test_a_changed_file_is_kept_unless_forced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "example.toml").write_text("my own recipe\n")
    code, _, err = run_cli(["example", "--out", tmp_path], capsys)
    assert_one_line_error(code, err, "example.toml", "not the shipped version", "--force")
    assert (tmp_path / "example.toml").read_text() == "my own recipe\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["example.toml"]  # nothing else written
    code, _, err = run_cli(["example", "--out", tmp_path, "--force"], capsys)
    assert code == 0, err
    assert (tmp_path / "example.toml").read_bytes() == (ROOT / "builders" / "example.toml").read_bytes()


@pytest.mark.timeout(60)
def test_a_link_is_replaced_never_written_through(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "example.py").symlink_to(victim)
    code, _, err = run_cli(["example", "--out", out], capsys)
    assert_one_line_error(code, err, "example.py", "--force")
    code, _, err = run_cli(["example", "--out", out, "--force"], capsys)
    assert code == 0, err
    assert victim.read_text() == "keep\n"
    assert not (out / "example.py").is_symlink()
    assert (out / "example.py").read_bytes() == (ROOT / "builders" / "example.py").read_bytes()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("make", "needles"),
    [
        (lambda p: p.write_text("x"), ("not a folder",)),
        (lambda p: (p / "indicfairface.toml").mkdir(parents=True), ("indicfairface.toml", "is a folder")),
    ],
    ids=["out-is-a-file", "a-folder-in-the-way"],
)
def test_what_cannot_be_written_is_one_line(
    make, needles: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    make(out)
    for args in (["example", "--out", out], ["example", "--out", out, "--force"]):
        code, _, err = run_cli(args, capsys)
        assert_one_line_error(code, err, str(out), *needles)


@pytest.mark.timeout(60)
def test_a_path_with_markup_is_printed_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "[bold red]x[/]"
    code, stdout, err = run_cli(["example", "--out", out], capsys)
    assert code == 0, err
    assert f"wrote {out / 'example.toml'}" in stdout
    (out / "example.toml").write_text("changed\n")
    code, _, err = run_cli(["example", "--out", out], capsys)
    assert_one_line_error(code, err, str(out))
