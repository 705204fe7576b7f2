"""``fairsets annotate vote`` (being written)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
