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
) -> None:
    """Verify the layout against manifest.json, then upload it to the Hugging Face Hub.

    An annotation folder (fairsets annotate persons --out ANN) is first prepared in
    ANN/.fairsets/publish/: its tables with the attributes joined, a gated card and a manifest;
    never the images. The token comes from HF_TOKEN or the login cache (hf auth login) and is
    never printed.
    """
    from fairsets.annotate.layout import KIND
    from fairsets.annotate.publish import PUBLISHED_KIND, folder_kind
    from fairsets.publish.hub import PublishError, format_plan, publish

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
                )
            except AnnotationError as exc:
                die(exc)
        else:
            if license is not None:
                die(
                    f"{out}: --license is for annotation folders; a built dataset's licences are its "
                    "images' (see its ATTRIBUTION.md): run again without --license"
                )
            report = publish(out, repo_id, private=private, revision=revision, dry_run=dry_run, tag=tag)
    except PublishError as exc:
        die(exc)
    typer.echo(format_plan(report))
