"""The README opens with exactly two commands, and CI runs the second one verbatim."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("```bash", 1)[1].split("```", 1)[0]
    return [line for line in block.strip().splitlines() if line.strip()]


def test_readme_opens_with_two_commands() -> None:
    cmds = readme_commands()
    assert len(cmds) == 2
    assert "fairsets build builders/example.toml" in cmds[0]
    assert "pytest" in cmds[1]


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in [line.strip() for line in ci]
