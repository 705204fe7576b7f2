"""What a build leaves in its output folder, shared by the build and its publish stage.

The work folder's name (``OUT/.fairsets/``, never published), the result and the error of a
build, and the sweep of shard and metadata files that an earlier build published and this one
no longer does (:func:`remove_stale`).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fairsets.core.errors import SaysTheFix

__all__ = ["SPLITS", "WORKDIR", "BuildError", "BuildResult", "remove_stale"]

WORKDIR = ".fairsets"
SPLITS = ("train", "test")


class BuildError(SaysTheFix, RuntimeError):
    """The build cannot go on (bad input, a failed task, a locked output folder).

    ``str(error)`` speaks to Python callers (``force=True``); ``error.cli`` says the same to a
    command-line user (``--force``, ``--out``).
    """

    def __init__(self, message: str, *, cli: str | None = None) -> None:
        super().__init__(message)
        self.cli = cli or message


@dataclass
class BuildResult:
    out: Path
    summary: dict[str, Any]
    manifest: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


#: What an earlier build published under shards/ and metadata/ (shard_name, metadata_name): only
#: files named so are ever removed as stale; anything else there is the user's (``--force``).
_OURS = re.compile(r"^(shards/[\w-]+/[\w-]+-\d{5,}\.tar|metadata/[\w-]+/[\w-]+\.parquet)$")


def remove_stale(out: Path, keep: set[str]) -> list[str]:
    """Delete shard/metadata files from earlier runs that this build no longer publishes.

    Only files named like a fairsets shard or metadata table (and not symlinks) are removed: a
    folder built into with ``--force`` may hold the user's own ``metadata/`` or ``shards/`` files,
    which stay (and ``publish`` then reports them as not in the manifest)."""
    removed = []
    for sub in ("shards", "metadata"):
        root = out / sub
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*")):
            rel = p.relative_to(out).as_posix()
            if p.is_file() and not p.is_symlink() and rel not in keep and _OURS.match(rel):
                p.unlink()
                removed.append(rel)
        for d in [*sorted((p for p in root.rglob("*") if p.is_dir()), reverse=True), root]:
            if not any(d.iterdir()):  # the root too: a build that publishes nothing leaves no shards/
                shutil.rmtree(d)
    return removed
