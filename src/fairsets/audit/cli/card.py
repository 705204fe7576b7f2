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


@card_app.command("lint")
def card_lint_cmd(
    folder: Annotated[
        Path,
        typer.Argument(
            help="A built dataset folder, or an annotation folder (its prepared folder is linted: "
            "fairsets publish ANN --dry-run prepares it)."
        ),
    ],
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 when anything is listed (for CI and release scripts).")
    ] = False,
) -> None:
    """List every card section still empty or a placeholder and every missing required
    Responsible-AI property of croissant.json, one line each."""
    from fairsets.annotate.layout import KIND
    from fairsets.annotate.publish import PUBLISHED_KIND, folder_kind, prepared_dir
    from fairsets.publish.card.lint import lint_folder

    if not folder.is_dir():
        die(f"{folder}: no such folder; give a built dataset folder or an annotation folder")
    kind = folder_kind(folder)
    where = "[publish.rai]"
    if kind == KIND:
        target = prepared_dir(folder)
        if not (target / "README.md").is_file():
            die(
                f"{folder}: not prepared yet; run fairsets publish {folder} --repo-id ORG/NAME --dry-run "
                "first"
            )
        folder, where = target, "the --rai file's"
    elif kind == PUBLISHED_KIND:
        where = "the --rai file's"
    findings = lint_folder(folder, where=where)
    for line in findings:
        typer.echo(line)
    if not findings:
        typer.echo(f"{folder}: the card and croissant.json lack nothing")
    if strict and findings:
        raise typer.Exit(1)
