"""Publishing an annotation folder: ``fairsets publish ANN --repo-id ORG/NAME``.

:func:`prepare` turns ``ANN`` into a folder that can be uploaded as a Hugging Face dataset,
``ANN/.fairsets/publish/``::

    data/boxes/{shard}.parquet    the box rows (layout.BOX_SCHEMA) with every attribute's
                                  perceived_{attr} and p_{attr}_{class} columns joined on
                                  (shard, key, box_id); null for dropped boxes
    data/images/{shard}.parquet   the image rows (layout.IMAGE_SCHEMA)
    README.md                     the dataset card (:mod:`fairsets.annotate.publish.card`)
    manifest.json                 every file with its sha256 and bytes, the inputs (file names
                                  only), the detector, the heads, the thresholds, the counts

It never holds the images (they belong to the owners of the original shards; the card says how
to get them from the ``url`` column) nor anything of the working folder, and no absolute local
path: the inputs are named by file name, and the directories of any absolute path in a reason,
a problem or a model description are cut off.

The tables are read with DuckDB over the Parquet files, one shard at a time, and written in
batches (never a whole table in memory; :mod:`fairsets.annotate.publish.tables`); the bytes depend
only on the inputs. Every file is written atomically, a shard's completion
marker (``layout.marker_path(ANN, "publish", shard)``) last, and ``manifest.json`` after
everything: an interrupted run, run again, reuses the finished shards and ends with the same
bytes. A prepared folder whose files no longer match its manifest (edited after it was prepared)
is refused, never silently uploaded nor overwritten.

**Audit sections.** ``fairsets card update ANN --audit DIR`` (:mod:`fairsets.audit.persons.card`)
stores the Markdown block of an audit in the working folder, ``ANN/.fairsets/card/{id}.md``
(:func:`write_card_block`), so that it survives re-preparation: :func:`prepare` renders every
stored block, in file-name order, into the card's ``## Bias, risks and limitations`` section.
When the folder is already prepared, :func:`refresh_prepared_card` renders the card again from the
prepared manifest and the stored blocks and updates the manifest's ``README.md`` entry, so
:func:`verify_prepared` still passes and the bytes are those a new :func:`prepare` writes. A block
file is checked when read: one audit block between its two markers, nothing a card may not hold.

:func:`publish_annotations` prepares, then uploads with :func:`fairsets.publish.hub.publish`
(the same plan, verification, token handling and dry run as a built dataset).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairsets.annotate import layout
from fairsets.annotate.layout import AnnotationError
from fairsets.annotate.publish.tables import FORMAT_VERSION, prepare_shard, scrub_paths, table_counts
from fairsets.annotate.publish.votes import release_votes
from fairsets.core.atomic import LayoutBusy, atomic_write_text, layout_lock, remove_temps
from fairsets.core.progress import Progress
from fairsets.core.version import __version__, package_versions
from fairsets.publish.hub import PublishError, PublishReport, publish, validate_repo_id
from fairsets.publish.manifest import MANIFEST, file_entries, verify_files, write_manifest

__all__ = [
    "DEFAULT_LICENSE",
    "PUBLISHED_KIND",
    "Prepared",
    "card_blocks_dir",
    "folder_kind",
    "is_annotation_folder",
    "prepare",
    "prepared_dir",
    "publish_annotations",
    "read_card_blocks",
    "refresh_prepared_card",
    "scrub_paths",
    "verify_prepared",
    "write_card_block",
]

# the name of the module before the stages had packages: a log line reads as it always did
logger = logging.getLogger("fairsets.annotate.publish")

#: ``manifest.json``'s ``kind`` in a prepared folder (not :data:`layout.KIND`: it is no ``ANN``).
PUBLISHED_KIND = "fairsets.person_annotations.published"
#: The licence of the annotations when none is given: attribution, any use (a Hub licence id).
DEFAULT_LICENSE = "cc-by-4.0"
PUBLISH_DIR = "publish"
CARD_DIR = "card"
_BLOCK_MARK = re.compile(r"<!-- fairsets:audit:(?P<id>\S+) (?P<which>start|end) -->")
_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff", ".tar", ".npz")


def folder_kind(path: str | os.PathLike[str]) -> str | None:
    """``path/manifest.json``'s ``kind`` (None if there is none or it is unreadable)."""
    try:
        manifest = json.loads((Path(path) / layout.MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    kind = manifest.get("kind") if isinstance(manifest, dict) else None
    return kind if isinstance(kind, str) else None


def is_annotation_folder(path: str | os.PathLike[str]) -> bool:
    """True if ``path/manifest.json`` is a person-annotation manifest (``kind`` is :data:`layout.KIND`)."""
    return folder_kind(path) == layout.KIND


def prepared_dir(ann: str | os.PathLike[str]) -> Path:
    """Where :func:`prepare` writes the publishable folder: ``ANN/.fairsets/publish``."""
    return Path(ann) / layout.WORKDIR / PUBLISH_DIR


def card_blocks_dir(ann: str | os.PathLike[str]) -> Path:
    """Where ``fairsets card update`` stores audit blocks for the card: ``ANN/.fairsets/card``."""
    return Path(ann) / layout.WORKDIR / CARD_DIR


def _block_file(block_id: str) -> str:
    """The file name of block ``block_id``: ASCII letters, digits, ``._-`` kept, the rest %-encoded."""
    out = []
    for ch in block_id:
        if (ch.isascii() and ch.isalnum()) or ch in "._-":
            out.append(ch)
        else:
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8")))
    name = "".join(out)
    return ("%2E" + name[1:] if name.startswith(".") else name) + ".md"


def _block_problem(text: str) -> tuple[str | None, str | None]:
    """``(block id, None)`` for one audit block between its markers, else ``(None, the problem)``."""
    lines = text.strip("\n").split("\n")
    first = _BLOCK_MARK.fullmatch(lines[0].strip())
    if first is None or first.group("which") != "start":
        return None, "does not start with an audit start marker"
    ident = first.group("id")
    if lines[-1].strip() != f"<!-- fairsets:audit:{ident} end -->" or len(lines) < 2:
        return None, f"does not end with the end marker of {ident!r}"
    if any(_BLOCK_MARK.search(line) for line in lines[1:-1]):
        return None, "holds another audit marker inside the block"
    for bad in ("{{", "}}", "{%", "%}", "{#", "#}"):
        if bad in text:
            return None, f"holds template syntax {bad!r}"
    if "None" in text.split():
        return None, "shows 'None' (a value is missing)"
    return ident, None


def write_card_block(ann: str | os.PathLike[str], block_id: str, block: str) -> Path:
    """Store (atomically) the audit block ``block`` under ``block_id`` for the card of ``ann``.

    The block must be one audit block whose markers carry ``block_id``; the same id replaces the
    block stored before. Returns the file's path.

    Raises:
        ValueError: the block is not such a block.
    """
    ident, problem = _block_problem(block)
    if problem is None and ident != block_id:
        problem = f"carries the markers of {ident!r}, not {block_id!r}"
    if problem is not None:
        raise ValueError(f"audit block {block_id!r} {problem}")
    path = card_blocks_dir(ann) / _block_file(block_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(path, block.strip("\n") + "\n")


def read_card_blocks(ann: str | os.PathLike[str]) -> list[str]:
    """The stored audit blocks of ``ann``, in file-name order (none: an empty list).

    Raises:
        AnnotationError: a block file is unreadable or not one audit block (the message names it).
    """
    folder = card_blocks_dir(ann)
    if not folder.is_dir():
        return []
    blocks = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or path.suffix != ".md" or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise AnnotationError(
                f"{path}: unreadable ({e}); delete it and run fairsets card update again"
            ) from None
        ident, problem = _block_problem(text)
        if problem is None and path.name != _block_file(ident or ""):
            problem = f"is the block of {ident!r}, which is stored as {_block_file(ident or '')}"
        if problem is not None:
            raise AnnotationError(
                f"{path}: {problem}, so it cannot go into the card; delete it and run fairsets card "
                "update again"
            )
        blocks.append(text.strip("\n"))
    return blocks


def _changed(out: Path, problems: list[str]) -> AnnotationError:
    problems = sorted(problems)
    more = f" and {len(problems) - 1} more" if len(problems) > 1 else ""
    return AnnotationError(
        f"{out}: the prepared files were changed after they were prepared ({problems[0]}{more}); "
        f"nothing was uploaded: delete {out} and run the command again"
    )


def refresh_prepared_card(ann: str | os.PathLike[str]) -> Path | None:
    """Render the card of ``ann``'s prepared folder again with the stored audit blocks.

    The card comes from the prepared manifest (as :func:`prepare` wrote it) and
    :func:`read_card_blocks`; ``README.md`` is written atomically, then the manifest's entry for it.
    Returns the card's path, or None when ``ann`` has no prepared folder.

    Raises:
        AnnotationError: the prepared folder was changed after it was prepared (nothing is
            written), a stored block is unusable, or the card cannot be rendered.
    """
    out = prepared_dir(ann)
    if not (out / MANIFEST).is_file():
        return None
    problems = verify_prepared(out)
    if problems:
        raise _changed(out, problems)
    from fairsets.annotate.publish.card import render_card

    manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    try:
        card = render_card(
            {k: v for k, v in manifest.items() if k != "files"}, out_dir=out, audits=read_card_blocks(ann)
        )
    except AnnotationError:
        raise
    except ValueError as e:
        raise AnnotationError(
            f"{out}: the dataset card cannot be written ({' '.join(str(e).split())})"
        ) from None
    readme = out / "README.md"
    if readme.read_text(encoding="utf-8") != card:
        atomic_write_text(readme, card)
    entry = file_entries(out, ["README.md"])
    if manifest["files"].get("README.md") != entry["README.md"]:
        manifest["files"].update(entry)
        write_manifest(out / MANIFEST, manifest)
    return readme


@dataclass(frozen=True)
class Prepared:
    """A prepared folder.

    Attributes:
        folder: ``ANN/.fairsets/publish``.
        manifest: Its manifest (as written).
        reused: Shards whose tables were already prepared and were kept as they were.
    """

    folder: Path
    manifest: dict[str, Any]
    reused: list[str]


def verify_prepared(folder: str | os.PathLike[str]) -> list[str]:
    """The problems of a prepared folder (empty: it may be uploaded).

    Every file must match the manifest (:func:`fairsets.publish.manifest.verify_files`), the
    manifest must be a prepared-annotations manifest listing at least one box table, and nothing
    listed may be an image or a shard.
    """
    root = Path(folder)
    problems = verify_files(root, required=("README.md",))
    try:
        manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return problems  # verify_files named it
    if not isinstance(manifest, dict) or manifest.get("kind") != PUBLISHED_KIND:
        problems.append(f"{MANIFEST}: not a prepared person-annotation manifest (kind {PUBLISHED_KIND!r})")
        return problems
    files = manifest.get("files") if isinstance(manifest.get("files"), dict) else {}
    if not any(rel.startswith("data/boxes/") for rel in files):
        problems.append("data/boxes/: no box table listed")
    for rel in files:
        if rel.lower().endswith(_IMAGE_SUFFIXES):
            problems.append(f"{rel}: images and shards are never published")
    return problems


def _attributes(manifest: Mapping[str, Any]) -> dict[str, list[str]]:
    """``{attr: classes}`` of the attributes the folder was classified for (sorted by name)."""
    out: dict[str, list[str]] = {}
    for attr, entry in sorted((manifest.get("attributes") or {}).items()):
        layout.check_attribute(attr)
        classes = ((entry or {}).get("head") or {}).get("classes")
        if not isinstance(classes, list) or not classes or not all(isinstance(c, str) for c in classes):
            raise AnnotationError(
                f"manifest.json: attributes.{attr}.head.classes is missing; run fairsets annotate classify "
                f"for {attr} again"
            )
        out[attr] = classes
    return out


def _release_manifest(
    source: Mapping[str, Any], attrs: dict[str, list[str]], license: str, repo_id: str
) -> dict:
    """What the published manifest says besides its files: no absolute path, nothing of the work folder."""
    inputs = []
    for ref in source.get("inputs") or []:
        path = str((ref or {}).get("path") or "")
        inputs.append({"name": ref.get("name"), "kind": ref.get("kind"), "file": Path(path).name or None})
    heads = {}
    for attr in attrs:
        entry = source["attributes"][attr]
        heads[attr] = scrub_paths(
            {k: entry[k] for k in ("head", "head_sha256", "verification") if entry.get(k) is not None}
        )
        head = heads[attr].get("head") or {}
        if isinstance(head.get("pretrained"), str):  # a local weights file: its name only
            head["pretrained"] = Path(head["pretrained"]).name or head["pretrained"]
    return {
        "kind": PUBLISHED_KIND,
        "format_version": FORMAT_VERSION,
        "fairsets_version": __version__,
        "repo_id": repo_id,
        "license": license,
        "inputs": inputs,
        "originals": scrub_paths(source.get("originals") or {}),
        "detector": scrub_paths(source.get("detector") or {}),
        "params": scrub_paths(source.get("params") or {}),
        "attributes": heads,
        "shards": scrub_paths(source.get("shards") or {}),
        "annotation_versions": scrub_paths(source.get("versions") or {}),
        "votes": release_votes(source),  # the chat-model votes: models, question, rule, agreement
        "versions": package_versions(["fairsets", "duckdb", "pyarrow"]),
    }


def prepare(
    ann: str | os.PathLike[str],
    *,
    repo_id: str,
    license: str = DEFAULT_LICENSE,
    progress: Progress | None = None,
    rai: Any = None,
) -> Prepared:
    """Write (or bring up to date) the publishable folder of ``ann`` (see the module docstring).

    Args:
        ann: An annotation folder (``fairsets annotate persons --out ANN``).
        repo_id: ``ORG/NAME`` the card's loading snippets name.
        license: The annotations' licence, a Hugging Face licence id (default
            :data:`DEFAULT_LICENSE`); recorded in the card and the manifest.
        progress: Shows shards and boxes per second (default: none).
        rai: The person-written facts (:class:`fairsets.publish.rai_text.RaiText`, ``--rai``), kept in
            the manifest as ``rai_text``; the card and ``croissant.json`` show them.

    Returns:
        The prepared folder, its manifest and the shards kept from an earlier run.

    Raises:
        AnnotationError: not an annotation folder, a missing or unreadable table (the message says
            which command writes it), an unknown licence, or a prepared folder that was changed
            after it was prepared.
    """
    import duckdb

    from fairsets.annotate.publish.card import HF_LICENSES, render_card

    ann = Path(ann).resolve()
    source = layout.read_manifest(ann)
    if license not in HF_LICENSES or license in ("other", "unknown"):
        raise AnnotationError(
            f"--license {license!r} is not a Hugging Face licence id; use e.g. {DEFAULT_LICENSE}"
        )
    shards = sorted((source.get("shards") or {}).keys())
    if not shards:
        raise AnnotationError(f"{ann}: no shard was annotated; run fairsets annotate persons first")
    attrs = _attributes(source)
    blocks = read_card_blocks(ann)  # a bad block file stops before any work
    out = prepared_dir(ann)
    if (out / MANIFEST).exists():
        problems = verify_prepared(out)
        if problems:
            raise _changed(out, problems)
        (out / MANIFEST).unlink()  # the manifest is the completion marker: written again last
    out.mkdir(parents=True, exist_ok=True)
    remove_temps(out)

    con = duckdb.connect()
    files: dict[str, dict] = {}
    reused = []
    try:
        with (progress or Progress(False)).stage(
            "preparing shards", len(shards), rates=("boxes",)
        ) as advance:
            for shard in shards:
                entries, kept = prepare_shard(con, ann, out, shard, attrs)
                files.update(entries)
                if kept:
                    reused.append(shard)
                logger.debug("shard %s: %s", shard, "already prepared" if kept else "prepared")
                advance(1, boxes=int(entries[f"data/boxes/{shard}.parquet"].get("rows") or 0))
        for stale in sorted((out / "data").rglob("*")):
            if stale.is_file() and stale.relative_to(out).as_posix() not in files:
                stale.unlink()
        box_files = sorted(r for r in files if r.startswith("data/boxes/"))
        image_files = sorted(r for r in files if r.startswith("data/images/"))
        counts = table_counts(con, out, box_files, image_files, attrs)
    except duckdb.Error as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise AnnotationError(
            f"{ann}: a table cannot be read ({first}); run fairsets annotate persons again"
        ) from None
    finally:
        con.close()

    manifest = {**_release_manifest(source, attrs, license, repo_id), "counts": counts}
    manifest["rai_text"] = rai.model_dump(exclude_none=True) if rai is not None else {}
    try:
        card = render_card(manifest, out_dir=out, audits=blocks)
    except ValueError as e:  # a value the card must show is missing from the annotation manifest
        raise AnnotationError(
            f"{ann}: the dataset card cannot be written ({' '.join(str(e).split())}); run the annotate "
            "command that records it again"
        ) from None
    atomic_write_text(out / "README.md", card)
    manifest["files"] = {
        **{rel: {"sha256": e["sha256"], "bytes": e["bytes"]} for rel, e in sorted(files.items())},
        **file_entries(out, ["README.md"]),
    }
    from fairsets.annotate.publish.croissant import CROISSANT, write_annotation_croissant

    write_annotation_croissant(out, manifest)
    manifest["files"] = dict(sorted({**manifest["files"], **file_entries(out, [CROISSANT])}.items()))
    write_manifest(out / MANIFEST, manifest)
    return Prepared(out, manifest, reused)


def publish_annotations(
    ann: str | os.PathLike[str],
    repo_id: str,
    *,
    license: str = DEFAULT_LICENSE,
    private: bool = False,
    revision: str | None = None,
    dry_run: bool = False,
    token: str | None = None,
    api: Any = None,
    num_workers: int | None = None,
    progress: Progress | None = None,
    tag: str | None = None,
    rai: Any = None,
    lint: Any = None,
) -> PublishReport:
    """Prepare ``ann`` and upload the prepared folder (or, with ``dry_run``, only list it).

    Args:
        ann: An annotation folder.
        repo_id: ``ORG/NAME`` of the Hub dataset repository.
        license: The annotations' licence (Hugging Face id), see :func:`prepare`.
        private, revision, dry_run, token, api, num_workers, tag: as in
            :func:`fairsets.publish.hub.publish`.
        progress: Shows the preparation (see :func:`prepare`).
        rai: The person-written facts, see :func:`prepare`.
        lint: Called with the prepared folder before anything is uploaded (``fairsets publish``
            refuses a card with placeholders there); it raises to stop the upload.

    Returns:
        The report of :func:`fairsets.publish.hub.publish` (its files are the prepared folder's).

    Raises:
        AnnotationError: the folder cannot be prepared (see :func:`prepare`).
        PublishError: an invalid repository id, another command holding the folder, no token, or a
            failed Hub call (never with the token in the message).
    """
    rid = validate_repo_id(repo_id)
    try:  # two publishes of one folder never interleave (the upload locks the prepared folder too)
        with layout_lock(ann, optional=True):
            prepared = prepare(ann, repo_id=rid, license=license, progress=progress, rai=rai)
            if lint is not None:
                lint(prepared.folder)
            return publish(
                prepared.folder,
                rid,
                private=private,
                revision=revision,
                dry_run=dry_run,
                token=token,
                api=api,
                num_workers=num_workers,
                verify=verify_prepared,
                tag=tag,
            )
    except LayoutBusy as exc:
        raise PublishError(str(exc)) from None
