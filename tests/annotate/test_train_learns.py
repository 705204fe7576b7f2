"""``fairsets annotate train`` learns real, learnable labels, and its reported metrics are the truth.

Two labelled sets embedded with the real MobileNetV2 ImageNet weights (``train_data``):

* faces vs non-faces (``skimage.data.lfw_subset``), the set the design was decided on (resizing
  without a centre crop, L2 normalisation + standardisation, the C grid, C chosen by validation
  macro-F1, refit on train + validation);
* photos vs drawings (boxes in real photos vs synthetic drawings), never used to tune anything.

For each, the reported accuracy, κ, per-class scores and confusion matrix must equal a
recomputation with sklearn.metrics from scratch: every test crop read from the tar with
``tarfile``, decoded and cropped, embedded by a freshly loaded encoder without any cache, and
classified by the saved head.
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from train_data import drawings_set, faces_set, mobilenet_weights

from cli_helpers import run_cli
from fairsets.annotate.heads.embed import embed_crops
from fairsets.annotate.heads.labels import read_labels
from fairsets.annotate.heads.store import load_head
from fairsets.annotate.images import crop, decode
from fairsets.models import load_vlm

pytestmark = pytest.mark.slow


def _tar_images(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tf:
        return {
            m.name.rsplit(".", 1)[0]: tf.extractfile(m).read()  # type: ignore[union-attr]
            for m in tf.getmembers()
            if m.name.endswith(".png")
        }


def _recompute(head_path: Path, labels_csv: Path, shard_dir: Path) -> None:
    """Recompute the head's test metrics independently and compare them with the reported ones."""
    from sklearn.metrics import (
        accuracy_score,
        cohen_kappa_score,
        confusion_matrix,
        precision_recall_fscore_support,
    )

    head = load_head(head_path)
    m = head.metrics
    items = m["test_items"]
    boxes = {r.item: r.box for r in read_labels(labels_csv).rows}
    images = {name: _tar_images(shard_dir / f"{name}.tar") for name in {it["shard"] for it in items}}
    crops = []
    for it in items:
        image = decode(images[it["shard"]][it["key"]])
        box = boxes[it["item"]]
        crops.append(image if box is None else crop(image, box))
    encoder = load_vlm(head.encoder, head.pretrained)
    proba = head.predict_proba(embed_crops(encoder, crops, batch_size=7))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-9)
    predicted = [head.classes[i] for i in proba.argmax(axis=1)]
    true = [it["label"] for it in items]
    assert predicted == [it["predicted"] for it in items]
    assert m["n"] == len(items) > 0
    assert m["accuracy"] == pytest.approx(accuracy_score(true, predicted), abs=1e-12)
    assert m["kappa"] == pytest.approx(cohen_kappa_score(true, predicted, labels=head.classes), abs=1e-12)
    assert m["confusion"] == confusion_matrix(true, predicted, labels=head.classes).tolist()
    p, r, f, s = precision_recall_fscore_support(true, predicted, labels=head.classes, zero_division=0)
    for i, cls in enumerate(head.classes):
        got = m["per_class"][cls]
        assert (got["precision"], got["recall"], got["f1"]) == pytest.approx((p[i], r[i], f[i]), abs=1e-12)
        assert got["support"] == s[i]
    assert m["accuracy"] >= 0.9, m["confusion"]


def _train(
    tmp_path: Path, labels: Path, shard_dir: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[Path, str]:
    out = tmp_path / "heads" / "head.npz"
    code, _, err = run_cli(
        [
            "annotate",
            "train",
            labels,
            "--encoder",
            "torchvision:mobilenet_v2",
            "--pretrained",
            mobilenet_weights(),
            "--shards",
            shard_dir / "*.tar",
            "--out",
            out,
            "--attribute",
            "content",
        ],
        capsys,
    )
    assert code == 0, err
    return out, err


def test_faces_vs_non_faces_design_set(
    tmp_path: Path, shard_writer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = faces_set(tmp_path / "shards", shard_writer)
    out, err = _train(tmp_path, labels, tmp_path / "shards", capsys)
    head = load_head(out)
    assert head.classes == ["face", "other"]
    assert head.encoder == "torchvision:mobilenet_v2" and head.dim == 1280
    assert head.training["parts"] == {"train": 140, "val": 30, "test": 30}
    assert "accuracy" in err and (out.parent / "head.confusion.png").stat().st_size > 1000
    _recompute(out, labels, tmp_path / "shards")


def test_photos_vs_drawings_never_tuned_set(
    tmp_path: Path, shard_writer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = drawings_set(tmp_path / "shards", shard_writer)
    out, _ = _train(tmp_path, labels, tmp_path / "shards", capsys)
    head = load_head(out)
    assert head.classes == ["drawing", "photo"]
    # By image: the six boxes of an image are in one part; 2 of 15 images per class are tested.
    assert head.training["images"] == {"train": 22, "val": 4, "test": 4}
    assert head.training["parts"]["test"] == 24
    _recompute(out, labels, tmp_path / "shards")
