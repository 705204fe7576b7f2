"""Publishing a verified build to the Hugging Face Hub as a dataset repository.

``publish(out_dir, repo_id, ...)`` is what ``fairsets publish DIR --repo-id ORG/NAME`` runs:

1. :func:`validate_repo_id` checks ``ORG/NAME`` against the Hub's naming rules.
2. :func:`upload_plan` runs :func:`~fairsets.publish.manifest.verify_layout` (or the folder check
   the caller passes, e.g. one built on :func:`~fairsets.publish.manifest.verify_files` for
   published annotations) and refuses to go on if it reports anything (a tampered or missing
   file, a stray file not in the manifest, a leftover temporary file, ...). The plan is exactly
   the manifest's ``files`` map plus ``manifest.json``:
   stray files are an error, never silently skipped or uploaded; hidden files and folders
   (``.fairsets/`` work files, the ``.cache/huggingface/`` upload state) are never uploaded.
3. A dry run stops here: it needs neither a token nor ``huggingface_hub``, and calls nothing.
4. A real run resolves the token (:func:`resolve_token`), then calls ``create_repo`` (dataset,
   ``exist_ok=True``), ``create_branch`` for a revision other than ``main``, and uploads the
   planned files with the resumable folder upload of the installed ``huggingface_hub``:
   ``upload_large_folder`` where the client has it (0.25 ≤ huggingface_hub < 2; it keeps its
   progress in ``OUT/.cache/huggingface/``, which the layout check ignores), else
   ``upload_folder`` (huggingface_hub ≥ 2 with ``hf_xet``: streamed, multi-commit, resumed by
   re-running the same command). Only the keyword arguments the method accepts are passed.
   Either way, an upload stopped half-way is resumed by running the same command again: the
   Hub's answers (which LFS objects it holds, which files of the revision are unchanged) keep the
   client from sending those again; a failure's message says so.
5. With ``tag`` (``--tag v2``), a release tag: checked before the upload (a tag that exists is an
   error: it names an earlier release) and created on the commit the upload made, so each release
   is a new revision of the same repository, reachable by its tag
   (:mod:`fairsets.publish.hub_calls`).

The calls are tested with the real client against a Hub on loopback (``tests/hub_server.py``;
``docs/publishing.md`` shows how to try a publish against it).

The token is never logged, never put in an error message, a report or its ``repr``; any text
coming back from the Hub is scrubbed of it before it is shown.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from fairsets.core.atomic import LayoutBusy, layout_lock, sha256_file
from fairsets.publish.hub_calls import (
    MAX_ERROR_CHARS,
    PublishError,
    accepted,
    call,
    check_tag_free,
    create_tag,
    validate_tag,
)
from fairsets.publish.manifest import MANIFEST, verify_layout

__all__ = [
    "IGNORE_PATTERNS",
    "MAX_ERROR_CHARS",
    "PlannedFile",
    "PublishError",
    "PublishReport",
    "format_plan",
    "format_size",
    "publish",
    "resolve_token",
    "upload_plan",
    "validate_repo_id",
    "validate_tag",
]

logger = logging.getLogger(__name__)

REPO_TYPE = "dataset"
DEFAULT_BRANCH = "main"
#: Patterns never uploaded (``fnmatch`` semantics as in huggingface_hub: ``*`` crosses ``/``): every
#: hidden file or folder at any depth, i.e. the ``.fairsets/`` work directory and the upload state
#: that ``upload_large_folder`` keeps in ``.cache/huggingface/``.
IGNORE_PATTERNS: tuple[str, ...] = (".fairsets/*", ".cache/*", ".*", "*/.*")
NO_TOKEN_MESSAGE = "no Hugging Face token: set HF_TOKEN or run `hf auth login`"
HUB_EXTRA_HINT = "pip install 'fairsets[hub]'"

_NAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?", re.ASCII)


@dataclass(frozen=True)
class PlannedFile:
    """One file to upload.

    Attributes:
        path: POSIX path relative to the output directory (and to the repository root).
        bytes: Size on disk.
        sha256: Hex digest of the content.
    """

    path: str
    bytes: int
    sha256: str


@dataclass(frozen=True)
class PublishReport:
    """What :func:`publish` did (or, for a dry run, would do).

    Attributes:
        repo_id: ``ORG/NAME`` of the dataset repository.
        revision: Branch uploaded to (``main`` unless another was asked for).
        private: Whether the repository is created private (an existing one keeps its visibility).
        dry_run: True if nothing was sent.
        files: The upload plan, sorted by path.
        total_bytes: Sum of the planned file sizes.
        url: The repository URL after a real run; None for a dry run.
        tag: The release tag created (or, for a dry run, to be created); None without one.
        commit: The commit id the upload made (or found unchanged), where the client reports it.
    """

    repo_id: str
    revision: str
    private: bool
    dry_run: bool
    files: list[PlannedFile] = field(default_factory=list)
    total_bytes: int = 0
    url: str | None = None
    tag: str | None = None
    commit: str | None = None


def validate_repo_id(repo_id: str) -> str:
    """Check that ``repo_id`` is ``ORG/NAME`` following the Hub's naming rules.

    Each part: 1 to 96 ASCII letters, digits, ``-``, ``_`` or ``.``; starts and ends with a letter
    or digit; no ``--`` or ``..``; the name does not end with ``.git``.

    Args:
        repo_id: Candidate repository id.

    Returns:
        The repository id, stripped of surrounding whitespace.

    Raises:
        PublishError: If the id is malformed; the message says which rule is broken.
    """
    if not isinstance(repo_id, str) or not repo_id.strip():
        raise PublishError("repository id is empty: expected ORG/NAME, e.g. my-org/my-dataset")
    rid = repo_id.strip()
    parts = rid.split("/")
    if len(parts) != 2 or not all(parts):
        raise PublishError(
            f"invalid repository id {rid!r}: expected exactly ORG/NAME, e.g. my-org/my-dataset"
        )
    for label, part in zip(("organisation/user", "dataset name"), parts, strict=True):
        if not _NAME_RE.fullmatch(part):
            raise PublishError(
                f"invalid repository id {rid!r}: the {label} {part!r} must be 1 to 96 characters among "
                "ASCII letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
            )
        if "--" in part or ".." in part:
            raise PublishError(f"invalid repository id {rid!r}: '--' and '..' are not allowed")
    if parts[1].endswith(".git"):
        raise PublishError(f"invalid repository id {rid!r}: the name cannot end with '.git'")
    return rid


def _check_relpath(rel: Any) -> str | None:
    """Return why ``rel`` cannot be uploaded as a repository path, or None if it is fine."""
    if not isinstance(rel, str) or not rel:
        return "not a non-empty string"
    if "\\" in rel or rel.startswith("/"):
        return "not a relative POSIX path"
    parts = PurePosixPath(rel).parts
    if any(p in ("", ".", "..") for p in rel.split("/")):
        return "contains an empty, '.' or '..' component"
    if any(p.startswith(".") for p in parts):
        return "hidden files and folders are never uploaded"
    return None


#: A folder check: the problems found in a folder (empty: it may be uploaded).
Verifier = Callable[[Path], list[str]]


def upload_plan(out_dir: str | os.PathLike[str], *, verify: Verifier = verify_layout) -> list[PlannedFile]:
    """Verify a published layout and list the files to upload.

    Runs ``verify`` (by default :func:`~fairsets.publish.manifest.verify_layout`, the layout of a
    build) first. Any problem it reports is fatal: a stray file (on disk, not hidden, not in the
    manifest) is an error, not silently excluded, because the manifest is the record of what a
    build published.

    Args:
        out_dir: Output directory of a build, or any folder whose ``manifest.json`` lists its
            files (``{"files": {relpath: {"sha256", "bytes"}}}``).
        verify: The folder check; other kinds of folders pass their own (e.g. one built on
            :func:`~fairsets.publish.manifest.verify_files`).

    Returns:
        The files of the manifest's ``files`` map plus ``manifest.json``, sorted by path, with
        their sizes on disk and sha256 (``manifest.json``'s computed here).

    Raises:
        PublishError: Listing every problem found, one per line.
    """
    root = Path(out_dir)
    try:
        published = json.loads((root / MANIFEST).read_text(encoding="utf-8"))["counts"]["published"]
    except (OSError, ValueError, KeyError, TypeError):  # verify_layout below names the problem
        published = None
    if published == {}:
        raise PublishError(
            f"{root}: the build published no samples (no candidate survived: see its README.md and "
            "rejects.parquet); nothing to upload: fix the recipe or its sources and build again"
        )
    problems = sorted(verify(root))
    if problems:
        raise PublishError(
            f"{root}: the layout does not match its manifest ({len(problems)} problem"
            f"{'s' if len(problems) != 1 else ''}); nothing was uploaded:\n"
            + "\n".join(f"  - {p}" for p in problems)
        )
    files = json.loads((root / MANIFEST).read_text(encoding="utf-8"))["files"]
    bad = [f"{rel!r}: {why}" for rel in files if (why := _check_relpath(rel))]
    if bad:
        raise PublishError(
            f"{root / MANIFEST}: unusable paths in 'files':\n" + "\n".join(f"  - {b}" for b in bad)
        )
    plan = [PlannedFile(rel, (root / rel).stat().st_size, entry["sha256"]) for rel, entry in files.items()]
    plan.append(PlannedFile(MANIFEST, (root / MANIFEST).stat().st_size, sha256_file(root / MANIFEST)))
    return sorted(plan, key=lambda f: f.path)


def resolve_token(token: str | None = None) -> str:
    """Find the Hugging Face token: ``token`` > ``HF_TOKEN`` > the login cache (``hf auth login``).

    Args:
        token: An explicit token; blank values are ignored.

    Returns:
        The token. Callers must never log or print it.

    Raises:
        PublishError: If no token is found (the message says how to provide one).
    """
    for candidate in (token, os.environ.get("HF_TOKEN")):
        if candidate and candidate.strip():
            return candidate.strip()
    try:
        from huggingface_hub import get_token
    except ImportError:  # no login cache without huggingface_hub
        get_token = None
    if get_token is not None:
        try:
            cached = get_token()
        except Exception as e:  # e.g. a failed OIDC exchange: report the type only, never its text
            raise PublishError(f"{NO_TOKEN_MESSAGE} (reading the token failed: {type(e).__name__})") from None
        if cached and cached.strip():
            return cached.strip()
    raise PublishError(NO_TOKEN_MESSAGE)


def format_size(n: int) -> str:
    """Human-readable size with binary units: ``512 B``, ``1.5 KiB``, ``2.0 MiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def format_plan(report: PublishReport) -> str:
    """Render a report as a table: a header line, one row per file (path, size, bytes), a total.

    Args:
        report: What :func:`publish` returned.

    Returns:
        Text without a trailing newline.
    """
    target = (
        f"dataset {report.repo_id} (revision {report.revision}, {'private' if report.private else 'public'})"
    )
    if report.tag:
        target += f" as tag {report.tag}"
    n = len(report.files)
    files = f"{n} file{'s' if n != 1 else ''}"
    if report.dry_run:
        head = f"Dry run: would upload {files} ({format_size(report.total_bytes)}) to {target}"
    else:
        head = f"Uploaded {files} ({format_size(report.total_bytes)}) to {target}"
        if report.url:
            head += f": {report.url}"
    total_label = f"total ({files})"
    width = max([len("path"), len(total_label)] + [len(f.path) for f in report.files])
    sizes = [format_size(f.bytes) for f in report.files] + [format_size(report.total_bytes)]
    swidth = max(len("size"), *map(len, sizes))
    bwidth = max(len("bytes"), len(str(report.total_bytes)))
    rows = [head, f"  {'path':<{width}}  {'size':>{swidth}}  {'bytes':>{bwidth}}"]
    rows += [
        f"  {f.path:<{width}}  {s:>{swidth}}  {f.bytes:>{bwidth}}"
        for f, s in zip(report.files, sizes[:-1], strict=True)
    ]
    rows.append(f"  {total_label:<{width}}  {sizes[-1]:>{swidth}}  {report.total_bytes:>{bwidth}}")
    return "\n".join(rows)


def _upload_method(api: Any) -> str:
    """``upload_large_folder`` if the client has it (looked up on the class), else ``upload_folder``."""
    return (
        "upload_large_folder"
        if callable(getattr(type(api), "upload_large_folder", None))
        else "upload_folder"
    )


def _make_api(token: str) -> Any:
    try:
        from huggingface_hub import HfApi
    except ImportError:
        raise PublishError(f"publishing to the Hub needs huggingface_hub: {HUB_EXTRA_HINT}") from None
    return HfApi(token=token)


def _repo_url(created: Any, repo_id: str, revision: str) -> str:
    url = (
        str(created) if isinstance(created, str) and created else f"https://huggingface.co/datasets/{repo_id}"
    )
    return url if revision == DEFAULT_BRANCH else f"{url.rstrip('/')}/tree/{quote(revision, safe='')}"


def publish(
    out_dir: str | os.PathLike[str],
    repo_id: str,
    *,
    private: bool = False,
    revision: str | None = None,
    dry_run: bool = False,
    token: str | None = None,
    api: Any = None,
    commit_message: str | None = None,
    num_workers: int | None = None,
    verify: Verifier = verify_layout,
    tag: str | None = None,
) -> PublishReport:
    """Verify a build and upload it to a Hugging Face dataset repository (or only plan it).

    Args:
        out_dir: Output directory of a build (see :mod:`fairsets.publish`).
        repo_id: ``ORG/NAME`` of the dataset repository (created if missing).
        private: Create the repository private (an existing repository keeps its visibility).
        revision: Branch to upload to; created from ``main`` if missing. Default ``main``.
            ``refs/pr/N`` uploads to an existing pull request (no branch is created).
        dry_run: Only validate and plan: no token needed, no call made.
        token: Explicit token; default ``HF_TOKEN``, then the login cache.
        api: A client with ``HfApi``'s methods (tests pass a stand-in); default
            ``huggingface_hub.HfApi(token=...)``. A given client is used as configured.
        commit_message: Commit title, where the upload method accepts one
            (``upload_folder`` does, ``upload_large_folder`` does not).
        num_workers: Upload workers, where the upload method accepts them (``upload_large_folder``).
        verify: The folder check run before anything is planned (see :func:`upload_plan`).
        tag: A release tag for the commit the upload makes (see the module docstring); it must not
            exist yet in the repository.

    Returns:
        The report; :func:`format_plan` renders it.

    Raises:
        PublishError: Invalid repository id, revision or tag, an existing tag, a layout that does
            not match its manifest, no token, missing huggingface_hub, or a failed Hub call
            (message without the token).
    """
    rid = validate_repo_id(repo_id)
    branch = DEFAULT_BRANCH if revision is None else revision.strip()
    if not branch or any(c.isspace() for c in branch) or ".." in branch:
        raise PublishError(f"invalid revision {revision!r}: expected a branch name such as 'main' or 'v1'")
    release = None if tag is None else validate_tag(tag)
    root = Path(out_dir)
    try:  # no build may rewrite the layout between its check and the end of its upload
        with layout_lock(root, optional=True):
            return _publish(
                root,
                rid,
                branch,
                revision,
                private,
                dry_run,
                token,
                api,
                commit_message,
                num_workers,
                verify,
                release,
            )
    except LayoutBusy as exc:
        raise PublishError(str(exc)) from None


def _publish(
    root: Path,
    rid: str,
    branch: str,
    revision: str | None,
    private: bool,
    dry_run: bool,
    token: str | None,
    api: Any,
    commit_message: str | None,
    num_workers: int | None,
    verify: Verifier,
    tag: str | None,
) -> PublishReport:
    files = upload_plan(root, verify=verify)
    total = sum(f.bytes for f in files)
    report = PublishReport(rid, branch, bool(private), bool(dry_run), files, total, None, tag)
    if dry_run:
        logger.info(
            "dry run: %d files (%s) would be uploaded to dataset %s@%s",
            len(files),
            format_size(total),
            rid,
            branch,
        )
        return report

    secret = resolve_token(token)
    client = api if api is not None else _make_api(secret)
    logger.info("creating dataset repository %s if missing (private=%s)", rid, bool(private))
    created = call(
        client, "create_repo", secret, repo_id=rid, repo_type=REPO_TYPE, private=bool(private), exist_ok=True
    )
    if branch != DEFAULT_BRANCH and not branch.startswith("refs/pr/"):
        logger.info("creating branch %s of %s if missing", branch, rid)
        call(client, "create_branch", secret, repo_id=rid, repo_type=REPO_TYPE, branch=branch, exist_ok=True)
    if tag is not None:
        check_tag_free(client, rid, tag, secret)

    name = _upload_method(client)
    method = getattr(client, name)
    message = commit_message or f"Upload {len(files)} files ({format_size(total)}) with fairsets publish"
    kwargs = accepted(
        method,
        {
            "repo_id": rid,
            "folder_path": str(root),
            "repo_type": REPO_TYPE,
            "revision": revision if revision is None else branch,
            "allow_patterns": [glob.escape(f.path) for f in files],
            "ignore_patterns": list(IGNORE_PATTERNS),
            "commit_message": message,
            "num_workers": num_workers,
            "print_report": False,  # upload_large_folder prints to stdout; we log instead
        },
    )
    if kwargs.get("num_workers") is None:
        kwargs.pop("num_workers", None)
    logger.info("uploading %d files (%s) to %s@%s with %s", len(files), format_size(total), rid, branch, name)
    resume = "; run the same command again to resume (what reached the Hub is not sent again)"
    done = call(client, name, secret, hint=resume, **kwargs)
    oid = getattr(done, "oid", None)
    commit = oid if isinstance(oid, str) and oid else None
    if tag is not None:
        manifest = next(f.sha256 for f in files if f.path == MANIFEST)
        note = f"fairsets publish: {len(files)} files, manifest.json sha256 {manifest}"
        create_tag(client, rid, tag, commit or branch, note, secret)
    url = _repo_url(created, rid, branch)
    logger.info("published %s", url)
    return PublishReport(rid, branch, bool(private), False, files, total, url, tag, commit)
