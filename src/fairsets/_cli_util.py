"""Small helpers shared by the ``fairsets`` command modules."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

console = Console(stderr=True)


def die(message: str, code: int = 2) -> NoReturn:
    """One line on stderr (rich markup escaped), non-zero exit."""
    first = str(message).strip().splitlines()[0] if str(message).strip() else "unknown error"
    console.print(f"[bold red]error:[/] {escape(first)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)
