"""The tar writing of :class:`webdataset.TarWriter`, with the standard library only.

``import webdataset`` imports PyTorch whenever it is installed (webdataset's ``pytorch`` shims
and its ``__init__`` import every submodule; importing only ``webdataset.writer`` runs that
``__init__`` too): 1-2 s of CPU and ~300 MB in every process that writes a shard, though writing
a tar file needs none of it. This module writes the same bytes as ``webdataset.TarWriter(fileobj,
user=..., group=..., mode=..., mtime=..., encoder=False)`` (webdataset 1.0.2: a ``tarfile`` stream
opened with mode ``"w|"`` in tarfile's default format, one member ``<key>.<ext>`` per field in
sorted field order); ``tests/publish/test_tarwriter.py`` checks the bytes against webdataset's.
"""

from __future__ import annotations

import io
import tarfile
import time
from typing import IO, Any

__all__ = ["TarWriter"]


class TarWriter:
    """Write samples (``{"__key__": key, ext: bytes, ...}``) as tar members ``key.ext``.

    Only what fairsets uses of webdataset's writer: no encoding (every field must already be
    bytes; ``encoder`` must be ``False``), no compression, fields starting with ``_`` are left out.
    """

    def __init__(
        self,
        fileobj: IO[bytes],
        user: str = "bigdata",
        group: str = "bigdata",
        mode: int = 0o0444,
        mtime: float | None = None,
        encoder: bool = False,
    ) -> None:
        if encoder is not False:
            raise ValueError("TarWriter writes bytes as given: pass encoder=False")
        self.mtime = mtime
        self.tarstream = tarfile.open(fileobj=fileobj, mode="w|")  # noqa: SIM115 - closed by close()
        self.user = user
        self.group = group
        self.mode = mode

    def __enter__(self) -> TarWriter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Write the end-of-archive blocks (the file object stays open)."""
        self.tarstream.close()

    def write(self, obj: dict[str, Any]) -> int:
        """Add one sample; return the number of data bytes written."""
        total = 0
        if "__key__" not in obj:
            raise ValueError("object must contain a __key__")
        for k, v in list(obj.items()):
            if k[0] == "_":
                continue
            if not isinstance(v, (bytes, bytearray, memoryview)):
                raise ValueError(f"{k} doesn't map to a bytes after encoding ({type(v)})")
        key = obj["__key__"]
        for k in sorted(obj.keys()):
            if k[0] == "_":
                continue
            v = obj[k]
            ti = tarfile.TarInfo(key + "." + k)
            ti.size = len(v)
            ti.mtime = self.mtime if self.mtime is not None else time.time()
            ti.mode = self.mode
            ti.uname = self.user
            ti.gname = self.group
            self.tarstream.addfile(ti, io.BytesIO(v))
            total += ti.size
        return total
