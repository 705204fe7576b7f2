"""Bounded reads of local files named by data (listings, folders, caption tables).

A listing is untrusted input: a row may name a FIFO (reading it blocks forever), a device
(``/dev/zero`` never ends), a socket, a directory, a symlink to any of those, or a file far
larger than any image. :func:`read_local_file` reads only regular files, at most ``max_bytes``:

1. ``os.stat`` (symlinks followed) must show a regular file no larger than ``max_bytes``;
2. the resolved path (``os.path.realpath``) is checked again with ``lstat`` (it must be the same
   regular file, not a link swapped in meanwhile);
3. it is opened with ``O_NONBLOCK`` (a FIFO swapped in after the checks cannot block the open),
   ``fstat`` of the open descriptor must again show that regular file, the flag is cleared, and
   at most ``max_bytes + 1`` bytes are read (a file that grew is refused, never read whole).

A file that can never be an image here raises :class:`LocalFileRefused` (the caller records a
final rejection): not a regular file, too large, or a path no re-read can open (longer than the
system allows, a symbolic link loop). A file that could not be read this time (missing,
permission, I/O error) raises ``OSError`` (a retriable failure).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["DEFAULT_MAX_BYTES", "LocalFileRefused", "read_local_file"]

DEFAULT_MAX_BYTES = 20_000_000
"""The byte cap of an encoded image (the ``decode`` step's default ``max_bytes``)."""

_CHUNK = 1 << 20
#: errno values of a path that fails the same way on every try: a final refusal, not a failure.
_FINAL_ERRORS = {errno.ENAMETOOLONG: "path too long", errno.ELOOP: "symbolic link loop"}


class LocalFileRefused(ValueError):
    """A local file that is not a regular file or is larger than allowed; ``str()`` is the reason."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "of an unknown type"


def _check(st: os.stat_result, max_bytes: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise LocalFileRefused(f"not a regular file: it is {_kind(st.st_mode)}")
    if st.st_size > max_bytes:
        raise LocalFileRefused(f"too many bytes: {st.st_size} > {max_bytes}")


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def read_local_file(path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The bytes of the regular file ``path``, if it holds at most ``max_bytes`` (see module doc).

    Raises:
        LocalFileRefused: not a regular file (FIFO, device, socket, directory), too large, or a
            path no re-read can open (too long, a symbolic link loop).
        OSError: the file is missing or unreadable, or changed between the checks.
    """
    if max_bytes < 0:
        raise ValueError(f"max_bytes must be >= 0, not {max_bytes}")
    name = os.fspath(path)
    try:
        first = os.stat(name)  # follows symlinks
    except OSError as exc:
        if exc.errno in _FINAL_ERRORS:
            raise LocalFileRefused(_FINAL_ERRORS[exc.errno]) from exc
        raise
    _check(first, max_bytes)
    real = os.path.realpath(name)
    resolved = os.lstat(real)  # the resolved path itself must be the regular file
    _check(resolved, max_bytes)
    if not _same(first, resolved):
        raise OSError(f"{Path(name).name} changed while it was being checked; try again")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    flags |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(real, flags)
    try:
        opened = os.fstat(fd)
        _check(opened, max_bytes)
        if not _same(opened, resolved):
            raise OSError(f"{Path(name).name} changed while it was being opened; try again")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        parts: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(_CHUNK, left))
            if not chunk:
                break
            parts.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(parts)
    if len(data) > max_bytes:
        raise LocalFileRefused(f"too many bytes: more than {max_bytes} (the file grew while read)")
    return data
