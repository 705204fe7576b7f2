"""``fairsets publish``: upload a built dataset or an annotation folder to the Hugging Face Hub.

The one command that serves two packages' folders, so it stands with the assembly at the top
(:mod:`fairsets.cli` registers it): it tells the folder's kind (:func:`fairsets.annotate.publish.folder_kind`)
and hands an annotation folder to :func:`fairsets.annotate.publish.publish_annotations`, anything
else to :func:`fairsets.publish.hub.publish` (which checks it is a built dataset). Package command
modules never import a package above their own; this module may, as it assembles them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fairsets._cli_util import die, setup_logging


def publish_cmd(
    out: Annotated[
        Path,
        typer.Argument(help="A built dataset folder (fairsets build --out) or an annotation folder (ANN)."),
    ],
    repo_id: Annotated[str, typer.Option("--repo-id", help="Hub dataset repository, ORG/NAME.")],
    private: Annotated[bool, typer.Option("--private", help="Create the repository as private.")] = False,
    revision: Annotated[str | None, typer.Option(help="Branch to upload to (default main).")] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be uploaded; upload nothing.")
    ] = False,
    license: Annotated[
        str | None,
        typer.Option(
            "--license",
            metavar="<id>",
            help="Annotation folders only: the annotations' licence, a Hub licence id (default cc-by-4.0).",
        ),
    ] = None,
    tag: Annotated[
        str | None, typer.Option(help="Tag the uploaded revision as this release, e.g. v1.0 (must be new).")
    ] = None,
    rai: Annotated[
        Path | None,
        typer.Option(
            "--rai",
            metavar="FILE.toml",
            help="Annotation folders only: the person-written Responsible-AI and card facts (use cases, "
            "social impact, maintenance plan, annotators, contact); a build takes them from its "
            "recipe's [publish.rai].",
        ),
    ] = None,
    allow_placeholders: Annotated[
        bool,
        typer.Option(
            "--allow-placeholders",
            help="Upload even if fairsets card lint lists a placeholder or a missing RAI property.",
        ),
    ] = False,
) -> None:
    """Verify the layout against manifest.json, then upload it to the Hugging Face Hub.

    An annotation folder (fairsets annotate persons --out ANN) is first prepared in
    ANN/.fairsets/publish/: its tables with the attributes joined, a gated card and a manifest;
    never the images. The token comes from HF_TOKEN or the login cache (hf auth login) and is
    never printed. Before an upload, fairsets card lint runs: a card with a placeholder section or
    a croissant.json missing a required Responsible-AI property is refused unless
    --allow-placeholders (a dry run lists the findings instead).
    """
    from fairsets.annotate.layout import KIND
    from fairsets.annotate.publish import PUBLISHED_KIND, folder_kind
    from fairsets.publish.card.lint import lint_folder
    from fairsets.publish.hub import PublishError, format_plan, publish

    findings: list[str] = []

    def lint(folder: Path, where: str, fix: str) -> None:
        findings[:] = lint_folder(folder, where=where)
        if findings and not (allow_placeholders or dry_run):
            more = f" and {len(findings) - 1} more" if len(findings) > 1 else ""
            die(
                f"{out}: nothing uploaded, the card is incomplete ({findings[0]}{more}); {fix} "
                f"(fairsets card lint {out} lists all), or pass --allow-placeholders"
            )

    setup_logging(False, False)
    kind = folder_kind(out)
    if kind == PUBLISHED_KIND:
        ann = out.parent.parent if out.parent.name == ".fairsets" else "ANN"
        die(
            f"{out}: a prepared folder is published from its annotation folder, where it is rebuilt and "
            f"checked: run fairsets publish {ann} --repo-id {repo_id}"
        )
    try:
        if kind == KIND:
            from fairsets.annotate.layout import AnnotationError
            from fairsets.annotate.publish import DEFAULT_LICENSE, publish_annotations
            from fairsets.core.progress import Progress
            from fairsets.publish.rai_text import load_rai_text

            try:
                text = load_rai_text(rai) if rai is not None else None
            except ValueError as exc:
                die(f"--rai {exc}")
            try:
                report = publish_annotations(
                    out,
                    repo_id,
                    license=license or DEFAULT_LICENSE,
                    private=private,
                    revision=revision,
                    dry_run=dry_run,
                    progress=Progress(),
                    tag=tag,
                    rai=text,
                    lint=lambda folder: lint(
                        folder, "the --rai file's", "write the facts in a --rai FILE.toml"
                    ),
                )
            except AnnotationError as exc:
                die(exc)
        else:
            if license is not None:
                die(
                    f"{out}: --license is for annotation folders; a built dataset's licences are its "
                    "images' (see its ATTRIBUTION.md): run again without --license"
                )
            if rai is not None:
                die(
                    f"{out}: --rai is for annotation folders; a build takes these facts from its recipe's "
                    "[publish.rai]: fill it, build again, and run without --rai"
                )
            lint(out, "the recipe's [publish.rai]", "fill the recipe's [publish.rai] and build again")
            report = publish(out, repo_id, private=private, revision=revision, dry_run=dry_run, tag=tag)
    except PublishError as exc:
        die(exc)
    typer.echo(format_plan(report))
    if findings and dry_run:  # one line on stderr: the plan on stdout stays as it was
        typer.echo(
            f"note: fairsets card lint {out} lists {len(findings)} finding(s); a real upload is refused "
            "unless --allow-placeholders",
            err=True,
        )
