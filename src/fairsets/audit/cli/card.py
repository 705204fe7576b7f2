"""``fairsets card update``: add an audit's tables to a dataset card.

:mod:`fairsets.cli` adds :data:`card_app` as the ``card`` group.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fairsets._cli_util import die

card_app = typer.Typer(help="Dataset card maintenance.", no_args_is_help=True)


@card_app.command("update")
def card_update_cmd(
    dataset: Annotated[
        Path,
        typer.Argument(
            help="A published dataset folder, or an annotation folder (fairsets annotate persons --out) "
            "for a persons audit."
        ),
    ],
    audit: Annotated[
        Path,
        typer.Option(
            "--audit",
            help="An audit folder (fairsets audit vlm --out; fairsets audit persons --out for an "
            "annotation folder).",
        ),
    ],
) -> None:
    """Add an audit's tables to a card's bias section: a VLM audit to a published face dataset
    (manifest.json updated), a persons audit to an annotation folder's card (kept for fairsets
    publish; a prepared card is updated in place)."""
    from fairsets.audit.card import update_card

    try:
        path = update_card(dataset, audit)
    except (OSError, ValueError) as exc:
        die(exc)
    typer.echo(f"updated {path}")
