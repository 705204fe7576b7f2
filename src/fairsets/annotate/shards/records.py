"""What a shard reader yields: the shard's reference, one record per sample, and their checks.

Shared by the tar reader (:mod:`.tar`) and the listing reader (:mod:`.listing`): a sample's key,
caption and JSON sidecar are checked the same way whichever kind of shard they come from.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from fairsets.annotate.layout import AnnotationError
from fairsets.core.keys import unsafe_key_chars

__all__ = [
    "KINDS",
    "MAX_CAPTION_BYTES",
    "MAX_KEY_CHARS",
    "MAX_SIDECAR_BYTES",
    "Record",
    "RecordStream",
    "ShardInputError",
    "ShardRef",
]

#: Kinds of shard: an img2dataset / WebDataset tar, or a Parquet/CSV/JSONL listing of local images.
KINDS = ("tar", "listing")
#: A caption longer than this (UTF-8 bytes) rejects its sample: no real caption is that long, and
#: clipping it would publish a caption the source never had.
MAX_CAPTION_BYTES = 65_536
#: A JSON sidecar larger than this rejects its sample without being read.
MAX_SIDECAR_BYTES = 1_000_000
#: Keys longer than this (characters) are refused.
MAX_KEY_CHARS = 1_000


class ShardInputError(AnnotationError):
    """The shards asked for cannot be used; the one-line message says what to change."""


@dataclass(frozen=True)
class ShardRef:
    """One input shard of an annotation run.

    Attributes:
        name: safe file stem naming the shard's outputs (``ANN/images/{name}.parquet``), unique
            within one :func:`~fairsets.annotate.shards.resolve_shards` call and stable for the same
            inputs: ``00012`` for ``shards/00012.tar``; parent folders joined with ``-`` only when
            stems collide; ``full-train-00000`` for a published dataset's
            ``shards/full/train-00000.tar``; ``pics`` for a listing ``pics.parquet``.
        path: absolute path of the tar or of the listing.
        kind: ``"tar"`` or ``"listing"``.
    """

    name: str
    path: str
    kind: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "path": self.path, "kind": self.kind}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ShardRef:
        """The reference :meth:`to_json` wrote; :class:`ShardInputError` if ``d`` is not one."""
        if not isinstance(d, dict) or not all(isinstance(d.get(k), str) for k in ("name", "path", "kind")):
            raise ShardInputError(f"not a shard reference: {d!r}; expected name, path and kind strings")
        if d["kind"] not in KINDS:
            raise ShardInputError(
                f"shard {d['name']!r}: unknown kind {d['kind']!r} (kinds: {', '.join(KINDS)})"
            )
        return cls(name=d["name"], path=d["path"], kind=d["kind"])


@dataclass
class Record:
    """One sample of a shard, in the shard's order.

    Attributes:
        key: the sample key (a tar member name up to the first dot of its base name; a listing's
            ``key`` column or its row number). Characters that are not valid UTF-8 are shown as
            ``\\xNN`` escapes (such a key is rejected).
        data: the stored image bytes, unchanged; None unless ``status == "ok"``.
        caption: ``{key}.txt`` in a tar (else the sidecar's ``caption`` string) / the listing's
            ``caption`` column.
        url: the sidecar's or the listing's ``url``, if it is a string.
        meta: the parsed ``{key}.json`` object / the listing row's other columns.
        status: ``ok``, ``rejected`` (a re-read gives the same) or ``failed`` (an I/O error).
        reason: why the sample is rejected or failed; None when ok.
    """

    key: str
    data: bytes | None
    caption: str | None
    url: str | None
    meta: dict[str, Any]
    status: str
    reason: str | None


class RecordStream:
    """The records of one shard: iterate it (once or again) for :class:`Record` objects.

    Iteration never raises for bad input: a damaged sample becomes a rejected (or failed) record,
    and what goes wrong with the shard as a whole (not a tar, truncated, unreadable listing) is
    appended to :attr:`problems` as one line, after the records that could be read were yielded.
    """

    def __init__(self, ref: ShardRef, produce: Callable[[list[str]], Iterator[Record]]) -> None:
        self.ref = ref
        self.problems: list[str] = []
        self._produce = produce

    def __iter__(self) -> Iterator[Record]:
        self.problems.clear()
        return self._produce(self.problems)


def open_regular(path: str, buffering: int = 1 << 20) -> BinaryIO:
    """``path`` opened for binary reading if it is a regular file; never blocks on a FIFO.

    Raises:
        OSError: missing, unreadable, or not a regular file (the message says which).
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


def rejected(key: str, reason: str, meta: dict[str, Any] | None = None, status: str = "rejected") -> Record:
    return Record(key=key, data=None, caption=None, url=None, meta=meta or {}, status=status, reason=reason)


def shown_key(key: str) -> str:
    """``key`` with bytes that are not UTF-8 (surrogate escapes) written as ``\\xNN``."""
    try:
        key.encode("utf-8")
        return key
    except UnicodeEncodeError:
        return key.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot name a sample, or None: empty, not UTF-8, control or bidi control
    characters, too long."""
    if not key:
        return "empty key"
    if shown_key(key) != key:
        return "key is not valid UTF-8"
    unsafe = unsafe_key_chars(key)
    if unsafe is not None:
        return f"key contains {unsafe}"
    if len(key) > MAX_KEY_CHARS:
        return f"key of {len(key)} characters > {MAX_KEY_CHARS}"
    return None


def caption_problem(caption: str) -> str | None:
    size = len(caption.encode("utf-8", "surrogatepass"))
    return f"caption of {size} bytes > {MAX_CAPTION_BYTES}" if size > MAX_CAPTION_BYTES else None


def decode_caption(data: bytes, member: str) -> str:
    """A ``.txt`` sidecar as text; ``ValueError`` (the reason) if too long or not UTF-8."""
    if len(data) > MAX_CAPTION_BYTES:
        raise ValueError(f"caption {member} of {len(data)} bytes > {MAX_CAPTION_BYTES}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"caption {member} is not valid UTF-8 (byte {exc.start})") from None


def decode_sidecar(data: bytes, member: str) -> dict[str, Any]:
    """A ``.json`` sidecar as a dict; ``ValueError`` (the reason) if it is not a JSON object."""
    if len(data) > MAX_SIDECAR_BYTES:
        raise ValueError(f"sidecar {member} of {len(data)} bytes > {MAX_SIDECAR_BYTES}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"sidecar {member} is not valid UTF-8 (byte {exc.start})") from None
    try:
        meta = jsonable(json.loads(text))  # NaN (img2dataset writes it for missing values) -> None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, huge integers, deep nesting
        why = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise ValueError(f"sidecar {member} is not valid JSON ({why})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"sidecar {member} holds a JSON {type(meta).__name__}, not an object")
    return meta


def jsonable(value: Any) -> Any:
    """``value`` as JSON-friendly data: numbers, text, booleans, None, lists and dicts of them;
    anything else (dates, decimals, bytes) as its text form, NaN and infinities as None."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


@dataclass
class KeyTracker:
    """The keys seen so far in one shard: a key seen again is a duplicate (the later one is rejected)."""

    seen: set[str] = field(default_factory=set)

    def check(self, key: str) -> str | None:
        """Why the sample ``key`` is refused (bad key or a duplicate), or None; records the key."""
        problem = key_problem(key)
        if problem is None and key in self.seen:
            problem = f"duplicate key: {key!r} appeared earlier in the shard"
        self.seen.add(key)
        return problem
