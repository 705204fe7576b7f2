"""``fairsets annotate compare`` (being written)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
