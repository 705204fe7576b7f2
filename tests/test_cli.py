"""The CLI: --help everywhere, one-line reasons and non-zero exit on bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


# ------------------------------------------------------------------------------------ help and flags

#: Boolean options whose negative form means something: the default is on (``--no-identity-mask``
#: turns masking off) or "unset" is a third state (``--race`` / ``--no-race`` / decided by the data).
NEGATABLE = {("audit", "persons", "--identity-mask"), ("audit", "transfer", "--race")}

#: Renders every command's help in one process whose stdout is a pipe and COLUMNS unset (as when a
#: user pipes ``fairsets X --help`` into a pager or a file), each after a marker line.
_HELP_SCRIPT = """
import sys
import typer.main
from fairsets.cli import app

root = typer.main.get_command(app)
for line in sys.stdin.read().splitlines():
    path = line.split()
    print("=== " + line, flush=True)
    try:
        root.main(args=[*path, "--help"], prog_name="fairsets", standalone_mode=False)
    except SystemExit:
        pass
    sys.stdout.flush()
"""


def _command_tree() -> list[tuple[tuple[str, ...], Any]]:
    """Every command and group of ``fairsets`` with its path: [((), root), (("build",), cmd), …]."""
    import typer.main

    found: list[tuple[tuple[str, ...], Any]] = []

    def walk(cmd: Any, path: tuple[str, ...]) -> None:
        found.append((path, cmd))
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return found


def _squash(text: str) -> str:
    return "".join(str(text).split())


def _shown_default(param: Any) -> str | None:
    """The default as the help shows it, for a non-flag option that shows its default."""
    default = param.default
    if not param.show_default or getattr(param, "is_flag", False) or default is None or callable(default):
        return None
    if isinstance(default, list | tuple):
        return ", ".join(str(d) for d in default) or None
    return str(getattr(default, "value", default))


@pytest.fixture(scope="module")
def piped_help() -> dict[tuple[str, ...], str]:
    """{command path: its --help as printed into a pipe with COLUMNS unset}."""
    import os
    import subprocess
    import sys

    paths = [path for path, _ in _command_tree()]
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TERMINAL_WIDTH")}
    proc = subprocess.run(
        [sys.executable, "-c", _HELP_SCRIPT],
        input="\n".join(" ".join(p) for p in paths) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    chunks = proc.stdout.split("=== ")[1:]
    helps = {}
    for chunk in chunks:
        head, _, body = chunk.partition("\n")
        helps[tuple(head.split())] = body
    assert set(helps) == set(paths)
    return helps


def test_no_boolean_option_has_an_unintended_negative_twin() -> None:
    flags = 0
    for path, cmd in _command_tree():
        for param in cmd.params:
            if not getattr(param, "is_flag", False) or getattr(param, "count", False):
                continue
            flags += 1
            twins = [o for o in param.secondary_opts if o.startswith("--")]
            if (*path, param.opts[0]) in NEGATABLE:
                assert twins == [f"--no-{param.opts[0][2:]}"], (path, param.opts)
            else:
                assert not twins, f"fairsets {' '.join(path)} {param.opts[0]} also accepts {twins}"
    assert flags > 30  # the walk saw every command's flags (--quiet, --retry-failed, …)


def test_every_help_fits_80_columns_and_cuts_nothing(
    piped_help: dict[tuple[str, ...], str],
) -> None:
    for path, cmd in _command_tree():
        text = piped_help[path]
        where = f"fairsets {' '.join(path)} --help"
        long = [ln for ln in text.splitlines() if len(ln) > 80]
        assert not long, (where, long)
        squashed = _squash(text)
        for param in cmd.params:
            if param.help and getattr(param, "hidden", False) is False:  # the whole help, never cut with …
                assert _squash(param.help) in squashed, (where, param.name, param.help)
            default = _shown_default(param)
            if default:
                assert _squash(f"default: {default}") in squashed, (where, param.name, default)
            if getattr(param, "is_flag", False):  # a flag takes no value and shows none
                opts = ", ".join(param.opts)
                line = next(ln for ln in text.splitlines() if param.opts[0] in ln)
                assert "<bool>" not in line and "BOOLEAN" not in line, (where, opts, line)
        for name, sub in getattr(cmd, "commands", {}).items():  # a group lists each command's first sentence
            summary = sub.get_short_help_str(limit=10_000)
            assert _squash(summary) in squashed, (where, name, summary)


def test_help_prints_brackets_as_written(piped_help: dict[tuple[str, ...], str]) -> None:
    # Rich markup ate "[kind]" (and would eat "fairsets[geo]") from help texts
    assert _squash("([kind] categories = [...])") in _squash(piped_help[("audit", "transfer")])
    assert _squash("SLERP strength in [0, 1].") in _squash(piped_help[("debias", "fit")])


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from cli_helpers import run_cli
    from fairsets.core.version import __version__

    code, out, err = run_cli(["--version"], capsys)
    assert (code, out, err) == (0, f"fairsets {__version__}\n", "")
    code, out, _ = run_cli(["--version", "steps"], capsys)  # eager: the version, not the command
    assert (code, out) == (0, f"fairsets {__version__}\n")
