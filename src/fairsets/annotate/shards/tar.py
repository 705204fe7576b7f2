"""Reading img2dataset / WebDataset tars: once, front to back, refusing whatever is not a sample.

A sample is the run of consecutive members that share a key, WebDataset's convention: the member
name up to the first dot of its base name is the key (``00001/abc.jpg`` → ``00001/abc``, extension
``jpg``; a leading ``./`` is dropped), the rest is the extension. The image is the sample's first
``.jpg``, ``.jpeg``, ``.png`` or ``.webp`` member; ``.txt`` is the caption, ``.json`` the metadata;
other extensions are carried along unread. Members that name no sample (no extension, or a base
name starting with a dot) are skipped and counted in one line of ``RecordStream.problems``.

Why not webdataset's own reader: ``webdataset.tariterators`` silently skips members that are not
regular files (a symlink named ``x.jpg`` vanishes without a trace), reads every member whole into
memory whatever its declared size, raises ``ValueError`` out of iteration on a repeated key, and
``import webdataset`` imports PyTorch. Here the standard library's :mod:`tarfile` parses the
headers (GNU, pax and USTAR names), seeking forward over data it does not need (within the read
buffer, so the file is still read once, in order), and every decision is ours:

- a member that is a symbolic or hard link, a device, a FIFO, a directory, a sparse file, has an
  absolute name or a ``..`` component, or declares more bytes than allowed rejects its sample,
  and its data is never read (``TarInfo.size`` is checked first);
- a key seen earlier in the shard (or an extension repeated within one sample) makes the later
  sample a rejected duplicate; keys that are not UTF-8, hold control or bidi control characters or
  are longer than :data:`~.records.MAX_KEY_CHARS` are rejected;
- an unreadable sidecar (not UTF-8, not a JSON object, too large) rejects its sample;
- extended headers (pax, GNU long names) larger than 1 MiB, a header pointing backwards, a header
  that does not parse, a truncated member or a missing end-of-archive marker end the shard: the
  samples read so far are yielded and the problem goes to ``RecordStream.problems``;
- compressed tars (gzip, bzip2, xz, zstd) are refused as a whole: img2dataset writes plain tars,
  and decompressing would let a small file expand without bound.
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from .records import (
    MAX_CAPTION_BYTES,
    MAX_SIDECAR_BYTES,
    KeyTracker,
    Record,
    ShardRef,
    caption_problem,
    decode_caption,
    decode_sidecar,
    open_regular,
    rejected,
    shown_key,
)

__all__ = ["IMAGE_EXTENSIONS", "read_located", "tar_index", "tar_records"]

#: Extensions of a sample's image member, in no order of preference (the first one present wins).
IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp")
_MAX_EXTENDED_HEADER = 1 << 20
_EXTENDED = (
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
)
_COMPRESSED = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd"}


class _BoundedTarInfo(tarfile.TarInfo):
    """A header whose extended (pax / long-name) payload is refused above 1 MiB before being read."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:  # type: ignore[override]
        if self.type in _EXTENDED and not 0 <= self.size <= _MAX_EXTENDED_HEADER:
            raise tarfile.ReadError(f"extended header of {self.size} bytes > {_MAX_EXTENDED_HEADER}")
        return super()._proc_member(tarfile_)  # type: ignore[misc]


def _member_problem(info: tarfile.TarInfo, name: str) -> str | None:
    """Why this member can never be part of a sample, or None for a plain regular file."""
    if not info.isreg() or info.issparse():
        kinds = (
            (info.issym, "a symbolic link"),
            (info.islnk, "a hard link"),
            (info.ischr, "a character device"),
            (info.isblk, "a block device"),
            (info.isfifo, "a FIFO"),
            (info.isdir, "a directory"),
            (info.issparse, "a sparse file"),
        )
        what = next(
            (what for test, what in kinds if test()), f"of tar type {info.type!r}, not a regular file"
        )
        return f"tar member {name} is {what}"
    if name.startswith("/") or ".." in name.split("/"):
        return f"tar member name {name} leaves the archive (absolute or ..)"
    return None


@dataclass
class _Sample:
    key: str
    members: dict[str, bytes | None] = field(default_factory=dict)  # extension -> data (None: unread)
    image_ext: str | None = None
    problem: str | None = None
    status: str = "rejected"
    location: tuple[int, int] | None = None  # (offset, size) of the image member's data


def _split(name: str) -> tuple[str, str] | None:
    """``(key, extension)`` of a member name, or None when it names no sample (no extension)."""
    while name.startswith("./"):
        name = name[2:]
    base = name.rpartition("/")[2]
    dot = base.find(".")
    if dot <= 0 or dot == len(base) - 1:
        return None
    cut = len(name) - len(base) + dot  # the folder part is kept whole, "/" and ".." included
    return name[:cut], name[cut + 1 :]


def _limit(ext: str, max_bytes: int) -> int:
    if ext == "txt":
        return MAX_CAPTION_BYTES
    if ext == "json":
        return MAX_SIDECAR_BYTES
    return max_bytes


def _finish(sample: _Sample, keys: KeyTracker) -> Record:
    key = shown_key(sample.key)
    problem = keys.check(sample.key) or sample.problem
    if problem is not None:
        return rejected(key, problem, status=sample.status if sample.problem == problem else "rejected")
    if sample.image_ext is None:
        found = ", ".join(f".{e}" for e in sample.members) or "nothing"
        return rejected(key, f"no image member (.jpg, .jpeg, .png or .webp); found {found}")
    meta: dict[str, Any] = {}
    caption: str | None = None
    try:
        if sample.members.get("json") is not None:
            meta = decode_sidecar(sample.members["json"] or b"", f"{key}.json")
        if sample.members.get("txt") is not None:
            caption = decode_caption(sample.members["txt"] or b"", f"{key}.txt")
    except ValueError as exc:
        return rejected(key, str(exc), meta)
    if caption is None and isinstance(meta.get("caption"), str) and meta["caption"]:
        caption = meta["caption"]
        if why := caption_problem(caption):
            return rejected(key, f"{key}.json: {why}", meta)
    url = meta.get("url") if isinstance(meta.get("url"), str) else None
    data = sample.members[sample.image_ext]
    return Record(key=key, data=data, caption=caption, url=url, meta=meta, status="ok", reason=None)


def _members(n: int) -> str:
    return f"{n} member" if n == 1 else f"{n} members"


def _tail_problem(f: BinaryIO, offset: int, count: int) -> str | None:
    """Why the archive stopped at ``offset`` (where tarfile found no further header), or None for
    the end-of-archive marker (a zero block)."""
    try:
        f.seek(offset)
        block = f.read(tarfile.BLOCKSIZE)
    except OSError as exc:
        return f"tar unreadable after {_members(count)}: {exc}"
    if len(block) == 0:
        return f"tar ends after {_members(count)} without its end-of-archive marker (truncated?)"
    if len(block) < tarfile.BLOCKSIZE:
        return f"tar truncated after {_members(count)}: a partial header at byte {offset}"
    if block.count(0) != len(block):
        return f"tar unreadable after {_members(count)}: an invalid header at byte {offset}"
    return None


def _open_tar(ref: ShardRef, problems: list[str]) -> tuple[BinaryIO, tarfile.TarFile] | None:
    """The shard's file and its tar reader, or None with the reason in ``problems``."""
    try:
        f = open_regular(ref.path)
    except OSError as exc:
        problems.append(f"cannot open {ref.path}: {exc.strerror or exc}")
        return None
    try:
        head = f.read(8)
    except OSError as exc:
        f.close()
        problems.append(f"cannot read {ref.path}: {exc.strerror or exc}")
        return None
    problem = next(
        (f"is {what}-compressed" for magic, what in _COMPRESSED.items() if head.startswith(magic)), None
    )
    if problem is not None:
        problems.append(f"{ref.path} {problem}, not a plain tar; decompress it first")
    elif not head:
        problems.append(f"{ref.path} is empty (0 bytes), not a tar")
    else:
        f.seek(0)
        try:
            return f, tarfile.open(fileobj=f, mode="r:", tarinfo=_BoundedTarInfo)
        except (tarfile.TarError, OSError, ValueError) as exc:
            problems.append(f"{ref.path} is not a tar file ({exc})")
    f.close()
    return None


def tar_records(ref: ShardRef, problems: list[str], *, max_bytes: int) -> Iterator[Record]:
    """The records of a tar shard (see the module docstring); shard-level problems go to ``problems``."""
    opened = _open_tar(ref, problems)
    if opened is None:
        return
    with opened[0]:
        for record, _ in _walk(*opened, problems, max_bytes=max_bytes, locate=False):
            yield record


def tar_index(ref: ShardRef, *, max_bytes: int) -> dict[str, tuple[int, int]]:
    """``{key: (offset, size)}`` of the image member of every ``ok`` record of the shard.

    One pass over the headers and the sidecars; image data is not read. The records judged are
    those :func:`tar_records` gives (a truncated last image is found out by :func:`read_located`).
    """
    opened = _open_tar(ref, [])
    if opened is None:
        return {}
    with opened[0]:
        return {
            r.key: loc for r, loc in _walk(*opened, [], max_bytes=max_bytes, locate=True) if loc is not None
        }


def read_located(path: str, located: dict[str, tuple[int, int]]) -> dict[str, bytes]:
    """The bytes at each ``(offset, size)`` of ``located``, read in file order; short or unreadable
    ones are left out."""
    found: dict[str, bytes] = {}
    try:
        f = open_regular(path)
    except OSError:
        return found
    with f:
        for key, (offset, size) in sorted(located.items(), key=lambda kv: kv[1][0]):
            try:
                f.seek(offset)
                data = f.read(size)
            except OSError:
                continue
            if len(data) == size:
                found[key] = data
    return found


@dataclass
class _Outside:
    """Members that name no sample: how many, and the first one's name."""

    count: int = 0
    first: str = ""

    def note(self, info: tarfile.TarInfo) -> None:
        if not info.isdir():  # folder entries are normal in tars made with `tar -c folder`
            self.count += 1
            self.first = self.first or shown_key(info.name)

    def report(self, problems: list[str]) -> None:
        if self.count:
            problems.append(
                f"{self.count} tar member(s) name no sample (no extension after the key) and were "
                f"skipped, e.g. {self.first!r}"
            )


def _walk(
    f: BinaryIO, tf: tarfile.TarFile, problems: list[str], *, max_bytes: int, locate: bool
) -> Iterator[tuple[Record, tuple[int, int] | None]]:
    """``(record, location)`` per sample; with ``locate``, image data is not read: the ``ok``
    records carry no data and the location ``(offset, size)`` of their image instead."""
    outside = _Outside()
    try:
        yield from _samples(f, tf, problems, outside, max_bytes=max_bytes, locate=locate)
    finally:
        outside.report(problems)


def _samples(
    f: BinaryIO, tf: tarfile.TarFile, problems: list[str], outside: _Outside, *, max_bytes: int, locate: bool
) -> Iterator[tuple[Record, tuple[int, int] | None]]:
    keys = KeyTracker()
    sample: _Sample | None = None
    count = 0
    last_offset = -1

    def finish(sample: _Sample) -> tuple[Record, tuple[int, int] | None]:
        record = _finish(sample, keys)
        return record, (sample.location if record.status == "ok" else None)

    while True:
        try:
            info = tf.next()
        except (tarfile.TarError, OSError, ValueError, OverflowError) as exc:
            if sample is not None:
                yield finish(sample)
            why = str(exc) or type(exc).__name__
            where = "truncated" if "unexpected end" in why else "unreadable"
            problems.append(f"tar {where} after {_members(count)}: {why}")
            return
        tf.members.clear()  # tarfile keeps every header; one shard may hold millions
        if info is None:
            break
        if info.offset <= last_offset or info.size < 0:
            if sample is not None:
                yield finish(sample)
            problems.append(f"tar unreadable after {_members(count)}: a header points backwards")
            return
        last_offset = info.offset
        count += 1
        split = _split(info.name)
        if split is None:  # a folder entry, or a member outside any sample (no extension)
            outside.note(info)
            continue
        key, ext = split
        ext = ext.lower()
        if sample is None or sample.key != key or ext in sample.members:
            if sample is not None:
                yield finish(sample)
            sample = _Sample(key)
        sample.members[ext] = None
        if sample.problem is not None:
            continue
        problem = _member_problem(info, info.name)
        if problem is None and info.size > _limit(ext, max_bytes):
            problem = f"member {shown_key(info.name)} of {info.size} bytes > {_limit(ext, max_bytes)}"
        if problem is not None:
            sample.problem = problem
            continue
        if ext in IMAGE_EXTENSIONS and sample.image_ext is None:
            sample.image_ext = ext
            sample.location = (info.offset_data, info.size)
            if locate:
                continue
        elif ext not in ("txt", "json"):
            continue
        try:
            f.seek(info.offset_data)
            data = f.read(info.size)
        except OSError as exc:
            sample.problem, sample.status = f"I/O error reading {shown_key(info.name)}: {exc}", "failed"
            continue
        if len(data) < info.size:
            sample.problem = f"member {shown_key(info.name)} truncated: {len(data)} of {info.size} bytes"
            continue
        sample.members[ext] = data
    if sample is not None:
        yield finish(sample)
    tail = _tail_problem(f, tf.offset, count)
    if tail is not None:
        problems.append(tail)
