"""Samples and their parts: image bytes/pixels, metadata, annotations, provenance, status.

A :class:`Sample` travels through the per-sample steps of a build. Steps read and write its
fields; a filter that rejects it calls :meth:`Sample.reject`, after which later steps skip it
and the task runner records it in the rejects table with the step name and the reason.

Keys are deterministic, unique within a build and contain no dots (WebDataset splits a file
name on the first dot to find the key).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

__all__ = ["KEY_RE", "Sample", "Status", "derive_seed", "make_key", "validate_key"]

KEY_RE = re.compile(r"^[A-Za-z0-9_-]{1,200}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


class Status(str, Enum):
    """Outcome of a sample in the per-sample phase."""

    OK = "ok"
    REJECTED = "rejected"  # a deterministic decision by a step (e.g. "no face"); not retried
    FAILED = "failed"  # a transient or environmental error (unreadable file, timeout); retried


def make_key(source: str, ident: str) -> str:
    """Build a deterministic sample key from a source name and a source-local identifier.

    The key keeps a readable, sanitised stem and appends a short hash of the full identifier, so
    two identifiers that sanitise to the same stem still get different keys.

    >>> make_key("local", "photos/a.b.jpg")
    'local_photos_a_b_jpg_...'  # doctest: +SKIP
    """
    stem = _UNSAFE.sub("_", ident).strip("_")[-48:] or "x"
    digest = hashlib.sha1(f"{source}\x00{ident}".encode()).hexdigest()[:12]
    src = _UNSAFE.sub("_", source).strip("_") or "src"
    return f"{src}_{stem}_{digest}"


def derive_seed(*parts: object) -> int:
    """Derive a stable 32-bit seed from any number of parts.

    The parts are converted with ``str`` and joined with a NUL separator, hashed with SHA-256 and the
    first four bytes read as an unsigned big-endian integer. The value is the same in every process
    and on every platform (unlike Python's ``hash()``, which is salted per process).

    >>> derive_seed(0, "balanced", "Kerala") == derive_seed(0, "balanced", "Kerala")
    True
    """
    text = "\x00".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:4], "big")


def validate_key(key: str) -> str:
    """Return ``key`` if it is a legal sample key, else raise ``ValueError`` naming it."""
    if not KEY_RE.match(key):
        raise ValueError(f"illegal sample key {key!r}: use 1-200 characters of [A-Za-z0-9_-] (no dots)")
    return key


@dataclass
class Sample:
    """One candidate image and everything known about it.

    Attributes:
        key: unique, dot-free key (see :func:`make_key`).
        meta: metadata from the source: group attributes (e.g. ``state``, ``gender``),
            ``identity`` (person id), ``license``, ``author``, ``source_url``, ``source``,
            ``retrieved_at``, ``path`` ... Values must be JSON/Parquet-friendly scalars.
        data: raw encoded bytes, as fetched (None once decoded and no longer needed).
        image: decoded pixels, ``uint8`` RGB array of shape (H, W, 3), once decoded.
        out: the final encoded image (JPEG bytes) that will be published, set by the crop step.
        annotations: step outputs worth keeping (face box, scores, hashes, quality values).
            Values must be JSON/Parquet-friendly (numbers, strings, lists of numbers).
        provenance: per step, the parameters/model ids that produced the annotations.
        status: ``ok`` / ``rejected`` / ``failed``.
        step: the step that rejected or failed the sample.
        reason: a short, human-readable reason (``"no face with confidence >= 0.5"``).
    """

    key: str
    meta: dict[str, Any] = field(default_factory=dict)
    data: bytes | None = None
    image: np.ndarray | None = None
    out: bytes | None = None
    annotations: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    status: Status = Status.OK
    step: str | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def reject(self, step: str, reason: str) -> Sample:
        """Mark the sample as rejected by ``step`` for ``reason`` and return it."""
        self.status, self.step, self.reason = Status.REJECTED, step, reason
        self._drop_pixels()
        return self

    def fail(self, step: str, reason: str) -> Sample:
        """Mark the sample as failed (retriable) in ``step`` for ``reason`` and return it."""
        self.status, self.step, self.reason = Status.FAILED, step, reason
        self._drop_pixels()
        return self

    def _drop_pixels(self) -> None:
        self.data = None
        self.image = None
        self.out = None
