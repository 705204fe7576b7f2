"""Atomic file writes and file hashing for the published layout.

Every file of a build is written to a temporary file in the *same directory* as its target, flushed
and fsynced, then moved into place with :func:`os.replace` (atomic on POSIX). A killed build
therefore never leaves a truncated shard or table under its final name; at worst it leaves a hidden
temporary file (``.{name}.tmp-*``), which :func:`is_temp_name` recognises and
:func:`fairsets.publish.manifest.verify_layout` reports.

Temporary names start with a dot and end with a random suffix, so they never match the globs
consumers use (``shards/balanced/train-*.tar``).

API:
    * ``atomic_write_bytes(path, data) -> Path``
    * ``atomic_write_text(path, text, encoding="utf-8") -> Path`` (newlines written as ``\\n``)
    * ``replace_unsynced(path, data) -> Path`` — rename-atomic, no fsync (caches whose reader
      takes a bad entry as a miss)
    * ``atomic_path(path)`` — context manager yielding a temporary ``Path`` to write; renamed onto
      ``path`` when the block exits normally, removed when it raises.
    * ``sha256_file(path) -> str`` (hex digest)
    * ``is_temp_name(name) -> bool``
    * ``remove_temps(root, skip=()) -> list[str]`` — delete what killed writers left under ``root``
    * ``remove_orphan_temps(path) -> list[str]`` — delete the temporaries of ``path`` whose writer is gone
    * ``layout_lock(root, wait=0.0, optional=False)`` — hold a layout's build lock, or raise
      :class:`LayoutBusy`
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import os
import re
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "LayoutBusy",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_text",
    "is_temp_name",
    "layout_lock",
    "remove_orphan_temps",
    "remove_temps",
    "replace_unsynced",
    "sha256_file",
]

_TMP_MARK = ".tmp-"
_CHUNK = 1 << 20


def _temp_for(path: Path) -> Path:
    return path.with_name(f".{path.name}{_TMP_MARK}{os.getpid()}-{secrets.token_hex(4)}")


def is_temp_name(name: str) -> bool:
    """Return True if ``name`` (a file name, not a path) looks like a leftover temporary file."""
    return name.startswith(".") and _TMP_MARK in name


# exactly the names _temp_for makes (a user's own dotfile is never taken for one)
_TEMP_RE = re.compile(r"\..+\.tmp-\d+-[0-9a-f]{8}")


def remove_temps(root: str | os.PathLike[str], skip: tuple[str, ...] = ()) -> list[str]:
    """Delete the temporary files that killed writers left under ``root``; return them (relative).

    A temporary file is only ever renamed by the process that made it, so one seen by a process
    that holds the folder's lock, with no writer of it running, is garbage (a SIGKILL between
    writing and renaming). ``skip`` names top-level folders not to enter. Symlinks are not followed.
    """
    base = Path(root)
    removed = []
    for d, dirs, files in os.walk(base):
        if Path(d) == base:
            dirs[:] = [x for x in dirs if x not in skip]
        for name in files:
            p = Path(d) / name
            if _TEMP_RE.fullmatch(name) and not p.is_symlink():
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
                    removed.append(p.relative_to(base).as_posix())
    return sorted(removed)


def remove_orphan_temps(path: str | os.PathLike[str]) -> list[str]:
    """Delete the temporary files of ``path`` (``.{name}.tmp-{pid}-…`` beside it) whose writing
    process is gone; return their names.

    For a file written into a folder that has no lock (one output file of the user's choosing):
    a temporary file whose pid is alive may still be renamed, so it stays (a reused pid only keeps
    garbage a little longer).
    """
    target = Path(path)
    removed = []
    for p in target.parent.glob(f".{glob.escape(target.name)}{_TMP_MARK}*"):
        m = re.fullmatch(rf"\.{re.escape(target.name)}\.tmp-(\d+)-[0-9a-f]{{8}}", p.name)
        if m is None or p.is_symlink() or _alive(int(m.group(1))):
            continue
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
            removed.append(p.name)
    return sorted(removed)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


class LayoutBusy(RuntimeError):
    """A build (or another writer) holds the layout's lock; the message says what to do."""


@contextlib.contextmanager
def layout_lock(root: str | os.PathLike[str], *, wait: float = 0.0, optional: bool = False) -> Iterator[bool]:
    """Hold ``root/.fairsets/lock`` (the lock a build holds) exclusively for the block.

    So that nothing reads or rewrites a layout while a build publishes it, nor two writers
    interleave. Waits up to ``wait`` seconds, then raises :class:`LayoutBusy`. With ``optional``, a
    folder where the lock cannot be made (read-only) is used without it: yields False then.
    """
    work = Path(root) / ".fairsets"
    try:
        work.mkdir(exist_ok=True)
        fh = open(work / "lock", "a")  # noqa: SIM115 - held for the block
    except OSError:
        if not optional:
            raise
        yield False
        return
    with fh:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LayoutBusy(
                        f"{root}: a build (or another update) is running there; wait for it to end, then "
                        "run this again"
                    ) from None
                time.sleep(0.05)
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some filesystems refuse fsync on directories
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; move it onto ``path`` if the block succeeds.

    The caller writes the complete file at the yielded path (by any means: ``open``, a library
    writer taking a path, ...). On normal exit the file is fsynced, renamed onto ``path`` with
    :func:`os.replace` and the directory is fsynced. If the block raises, the temporary file is
    removed and the exception propagates; an existing file at ``path`` is left untouched.

    Parent directories are created if needed.

    Args:
        path: final destination.

    Yields:
        The temporary path to write.

    Raises:
        FileNotFoundError: if the block exits normally without creating the temporary file.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_for(target)
    try:
        yield tmp
        if not tmp.exists():
            raise FileNotFoundError(f"atomic write of {target}: nothing was written to {tmp}")
        _fsync_file(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    _fsync_dir(target.parent)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Atomically write ``data`` to ``path`` and return the final path."""
    target = Path(path)
    with atomic_path(target) as tmp, open(tmp, "wb") as f:
        f.write(data)
    return target


def replace_unsynced(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to a temporary file beside ``path`` and rename it onto ``path``, without fsync.

    A killed process never leaves a truncated file under ``path`` (the rename is atomic), but after
    a power loss or an OS crash the file may be empty or missing. Only for caches whose reader
    takes an unreadable or missing entry as a miss (asked again), where an fsync per entry would
    cost more than losing the last seconds of entries.
    """
    target = Path(path)
    tmp = _temp_for(target)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> Path:
    """Atomically write ``text`` to ``path`` (no newline translation) and return the final path."""
    return atomic_write_bytes(path, text.encode(encoding))


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Return the hex SHA-256 digest of the file at ``path``, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()
