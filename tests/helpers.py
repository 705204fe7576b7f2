"""Test helpers: candidate images made from photos that ship inside packages, small recipes."""

from __future__ import annotations

import csv
import fcntl
import hashlib
import importlib.util
import io
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

ROOT = Path(__file__).resolve().parents[1]

#: img2dataset goes in apart (``pip install --no-deps``); a test that downloads skips without it.
#: find_spec, not importorskip: importing img2dataset would run its package __init__ (wandb, ray,
#: pandas, torch), and downloads would not go through the light loading users get.
needs_img2dataset = pytest.mark.skipif(
    importlib.util.find_spec("img2dataset") is None,
    reason="img2dataset is not installed: pip install --no-deps img2dataset==1.47.0 (docs/install.md)",
)


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """A folder that ``build(folder)`` fills, built once per test run; this process gets a copy.

    Under pytest-xdist every worker used to build its own; now the first one builds it (under a
    file lock in the run's temporary folder, which the workers share) and each worker copies it
    into its own temporary folder, so tests still never share files across processes.
    """
    base = factory.getbasetemp()
    shared_root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    shared, done = shared_root / f"built-{name}", shared_root / f"built-{name}.done"
    with open(shared_root / f"built-{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.is_file():
            shutil.rmtree(shared, ignore_errors=True)
            shared.mkdir()
            build(shared)
            done.touch()
    mine = factory.mktemp(name)
    shutil.copytree(shared, mine, symlinks=True, dirs_exist_ok=True)
    return mine


def portraits() -> list[np.ndarray]:
    """The two real colour portraits that ship in packages (scikit-image, matplotlib)."""
    from matplotlib import cbook
    from PIL import Image
    from skimage import data

    with cbook.get_sample_data("grace_hopper.jpg") as fh:
        hopper = np.asarray(Image.open(io.BytesIO(fh.read())).convert("RGB"))
    return [data.astronaut(), hopper]


def jpeg(arr: np.ndarray, quality: int = 90) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def write_candidates(folder: Path, n: int, states: tuple[str, ...] = ("Goa", "Assam")) -> Path:
    """``n`` face candidates (shifted/scaled/recoloured portraits), one identity each, plus a listing."""
    folder.mkdir(parents=True, exist_ok=True)
    base = portraits()
    rows = []
    for i in range(n):
        img = base[i % 2]
        h, w = img.shape[:2]
        dy, dx = (i * 7) % 40, (i * 11) % 40
        crop = img[dy : h - 40 + dy, dx : w - 40 + dx]
        tint = np.clip(crop.astype(np.int16) + np.array([(i * 3) % 15, 0, -((i * 5) % 15)]), 0, 255).astype(
            np.uint8
        )
        name = f"img{i:03d}.jpg"
        (folder / name).write_bytes(jpeg(tint))
        rows.append(
            {
                "path": name,
                "state": states[i % len(states)],
                "gender": ("female", "male")[(i // 2) % 2],
                "identity": f"person{i}",
                "license": "CC-BY-4.0",
                "author": f"Author {i}",
                "source_url": f"https://example.org/{name}",
            }
        )
    listing = folder / "candidates.csv"
    with listing.open("w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    return listing


RECIPE = """
name = "t"
seed = 11
groups = ["state", "gender"]
quota = {quota}
variants = ["imbalanced", "balanced", "augmented"]

[source]
type = "local"
path = "{listing}"

[[steps]]
name = "license"

[[steps]]
name = "decode"

[[steps]]
name = "grayscale"

[[steps]]
name = "blur"

[[steps]]
name = "detect_face"

[[steps]]
name = "skin"

[[steps]]
name = "crop"

[executor]
workers = {workers}
task_size = {task_size}
shard_size = {shard_size}
"""


def write_recipe(
    path: Path, listing: Path, *, quota: int = 3, workers: int = 1, task_size: int = 2, shard_size: int = 4
) -> Path:
    path.write_text(
        RECIPE.format(
            listing=listing.as_posix(),
            quota=quota,
            workers=workers,
            task_size=task_size,
            shard_size=shard_size,
        )
    )
    return path


def tree_digest(out: Path) -> dict[str, str]:
    """sha256 of every published file (the work folder excluded)."""
    return {
        p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*"))
        if p.is_file() and ".fairsets" not in p.relative_to(out).parts
    }
