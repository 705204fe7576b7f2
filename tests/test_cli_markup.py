"""Data and install hints are printed as text, never as Rich markup.

Rich reads ``[...]`` as markup: a label ``[/]`` raised ``MarkupError`` after a command had written
its outputs (exit 2), ``[bold red]x`` printed ``x``, and ``pip install 'fairsets[persons-audit]'``
printed ``pip install 'fairsets'``. The static sweep keeps every print of fairsets on
:mod:`fairsets.core.console` (or markup off, or escaped); the command runs feed hostile labels and
paths through the commands and find them printed as written. The annotate commands' runs are in
``tests/annotate/test_annotate_markup.py``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from cli_helpers import run_cli
from fairsets.core.console import DataTable, say, show, text, visible

SRC = Path(__file__).resolve().parents[1] / "src" / "fairsets"
#: Where Rich is used directly on purpose: the helpers themselves.
HELPERS = {"core/console.py"}
HOSTILE = ["[/]", "[bold red]x", "[/b]", "pip install 'fairsets[persons-audit]'", "a\\[b]"]


def _text_is_constant(node: ast.expr) -> bool:
    """A literal, or an f-string whose every value is passed through ``escape(...)``."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.JoinedStr):
        return all(
            isinstance(v, ast.Constant)
            or (
                isinstance(v, ast.FormattedValue)
                and isinstance(v.value, ast.Call)
                and getattr(v.value.func, "id", getattr(v.value.func, "attr", "")) == "escape"
            )
            for v in node.values
        )
    return False


def _markup_off(call: ast.Call) -> bool:
    return any(
        k.arg == "markup" and isinstance(k.value, ast.Constant) and k.value.value is False
        for k in call.keywords
    )


def markup_risks(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, what)`` of every place in ``tree`` where Rich could read data as markup."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "rich"
            and any(a.name == "print" for a in node.names)
        ):
            found.append((node.lineno, "rich's print imported"))
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name == "print" and isinstance(func, ast.Attribute):  # console.print, rich.print
            if not _markup_off(node) and not all(_text_is_constant(a) for a in node.args):
                found.append((node.lineno, "Console.print of data with markup on"))
        elif name == "Table":
            found.append((node.lineno, "a rich Table (cells and title are markup): use DataTable"))
        elif name == "from_markup" and not all(_text_is_constant(a) for a in node.args):
            found.append((node.lineno, "Text.from_markup of data"))
        elif name == "TextColumn" and not _markup_off(node):
            fmt = node.args[0] if node.args else None
            if not (isinstance(fmt, ast.Constant) and "{task.description}" not in str(fmt.value)):
                found.append((node.lineno, "a progress column showing data as markup"))
    return sorted(found)


def test_the_sweep_finds_each_way_data_became_markup() -> None:
    """The sweep itself, on the patterns the defects came from (so that it can fail)."""
    code = """
from rich import print
console.print(summary_line(entry, ann), highlight=False, soft_wrap=True)
console.print(f"wrote {path}")
table = Table(title=f"{attr} head")
Text.from_markup(label)
TextColumn("[bold]{task.description}")
console.print(line, markup=False)
console.print(f"[bold red]error:[/] {escape(text)}")
console.print("Aborted!")
"""
    assert [line for line, _ in markup_risks(ast.parse(code))] == [2, 3, 4, 5, 6, 7]


def test_no_module_prints_data_as_markup() -> None:
    """Every print of fairsets goes through fairsets.core.console, or has markup off, or escapes."""
    risks = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel in HELPERS:
            continue
        risks += [f"{rel}:{line}: {what}" for line, what in markup_risks(ast.parse(path.read_text("utf-8")))]
    assert risks == []


def test_the_helpers_print_brackets_and_escape_control_characters(capsys: pytest.CaptureFixture[str]) -> None:
    say(*HOSTILE)
    say("x\x1b[2J\u202eevil\r", err=True, style="bold")
    table = DataTable(title="[/]title")
    table.add_column("[/b]")
    table.add_column("n", justify="right")
    table.add_row("[bold red]x", 3)
    table.add_row(text("[/]", "yellow"), None)
    show(table)
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == " ".join(HOSTILE)
    for needle in ("[/]title", "[/b]", "[bold red]x", "│ [/]"):
        assert needle in out
    assert err == "x\\x1b[2J\\u202eevil\\r\n"
    assert visible("tab\tand\nnewline") == "tab\tand\nnewline"


def test_a_progress_bar_shows_a_hostile_description(capsys: pytest.CaptureFixture[str]) -> None:
    """A progress description names a model id or a path: data, never markup."""
    from fairsets.core.progress import Progress

    with Progress(True).stage("embedding images (/models/[/b]x)", 2, rates=("boxes",)) as advance:
        advance(2, boxes=3)
    assert "embedding images (/models/[/b]x)" in capsys.readouterr().err


def test_geo_profile_prints_a_hostile_output_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "caps.txt"
    src.write_text("Hotel in Nice\nKitchen\n", encoding="utf-8")
    out = tmp_path / "[bold red]x" / "[/b]" / "pred.csv"
    code, _, err = run_cli(["geo", "profile", "-m", "string", src, "--out", out, "-q"], capsys)
    assert code == 0, err
    assert f"wrote {out}" in err.splitlines()


@pytest.mark.slow  # inflect's import alone takes seconds (typeguard instruments it)
def test_audit_persons_without_vader_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without VADER the summary says which extra brings it, whole: ``fairsets[persons-audit]``."""
    from audit.person_tables import ImageSpec, write_person_tables

    monkeypatch.setitem(sys.modules, "vaderSentiment", None)
    monkeypatch.setitem(sys.modules, "vaderSentiment.vaderSentiment", None)
    specs = [
        ImageSpec(boxes=[("female", "white", 0.05)], alt="a [bold red]x day", person_captions=["a person"])
    ]
    ann = write_person_tables(tmp_path / "[/b]ann", specs * 4, shard_size=2)
    out = tmp_path / "[/]out"
    code, _, err = run_cli(["audit", "persons", ann, "--out", out, "--themes", "none"], capsys)
    assert code == 0, err
    assert "pip install 'fairsets[persons-audit]'" in err
    assert f"wrote {out / 'audit.json'}" in err
