"""``fairsets geo`` commands: analyze."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the ``fairsets geo`` app."""
