"""Every `fairsets …` command shown in the README and docs/ names a real command and real options.

Docs drift when a command or an option is renamed; a user copying a command then gets an error
instead of the result. Each bash block line that starts with ``fairsets`` (continuation lines
joined, comments dropped) is resolved through the real Click command tree.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer

from fairsets.cli import app

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _commands(path: Path) -> list[tuple[int, str]]:
    out = []
    for block in re.finditer(r"```(?:bash|sh|console)\n(.*?)```", path.read_text(), re.S):
        start = path.read_text()[: block.start()].count("\n") + 2
        lines = block.group(1).splitlines()
        i = 0
        while i < len(lines):
            line, first = lines[i].strip(), i
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1] + " " + lines[i].strip()
            i += 1
            line = line.removeprefix("$ ")
            if line.startswith("fairsets "):
                out.append((start + first, line))
    return out


CASES = [(p, n, c) for p in DOCS for n, c in _commands(p)]


def _resolve(tokens: list[str]) -> tuple[Any, list[str]]:
    # duck-typed: typer may ship its own copy of Click, whose classes are not click's
    cmd: Any = typer.main.get_command(app)
    rest = tokens[1:]
    while hasattr(cmd, "list_commands") and rest and not rest[0].startswith("-"):
        sub = cmd.get_command(cmd.context_class(cmd), rest[0])
        if sub is None:
            raise AssertionError(f"no command {rest[0]!r} under {cmd.name!r}")
        cmd, rest = sub, rest[1:]
    return cmd, rest


def test_the_docs_show_commands() -> None:
    assert len(CASES) > 40
    assert any("annotate vote" in c for _, _, c in CASES)


@pytest.mark.parametrize(("path", "line", "command"), CASES, ids=[f"{p.name}:{n}" for p, n, _ in CASES])
def test_doc_command_exists_with_its_options(path: Path, line: int, command: str) -> None:
    text = command.split(" #", 1)[0]
    text = re.split(r"\s(?:\||&&|;|>|2>)\s", text)[0]  # the fairsets part of a pipeline
    tokens = shlex.split(text)
    cmd, rest = _resolve(tokens)
    known = {opt for p in cmd.params for opt in (*p.opts, *p.secondary_opts)}
    for tok in rest:
        tok = tok.lstrip("[")  # usage lines: [--workers N]
        if tok.startswith("--"):
            name = tok.split("=", 1)[0].rstrip("]")
            assert name in known, f"{path.name}:{line}: {' '.join(tokens[:3])} has no option {name}"
