"""Utility check: zero-shot accuracy and recall@k, before vs after a debias transform."""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image
from typer.testing import CliRunner

from fairsets.audit.utility import evaluate_utility, iter_labelled, zero_shot_metrics
from fairsets.cli import app
from fairsets.debias.transform import fit_transform


def _reference(images, labels, texts, k):
    """Loops over plain Python lists, written apart from the implementation."""

    def cos(a, b):
        return sum(x * y for x, y in zip(a, b, strict=True)) / (
            sum(x * x for x in a) ** 0.5 * sum(y * y for y in b) ** 0.5
        )

    sims = [[cos(list(v), list(t)) for t in texts] for v in images]
    acc = sum(
        1 for s, y in zip(sims, labels, strict=True) if max(range(len(s)), key=lambda c: (s[c], -c)) == y
    )
    recalls = []
    for c in sorted(set(labels)):
        order = sorted(range(len(images)), key=lambda i: (-sims[i][c], i))[:k]
        rel = labels.count(c)
        recalls.append(sum(1 for i in order if labels[i] == c) / min(k, rel))
    return acc / len(images), sum(recalls) / len(recalls)


def test_metrics_match_an_independent_computation():
    rng = np.random.default_rng(3)
    texts = rng.normal(size=(4, 6))
    labels = [int(x) for x in rng.integers(0, 4, size=40)]
    images = texts[labels] + rng.normal(scale=1.2, size=(40, 6))
    got = zero_shot_metrics(images, labels, texts, ks=(1, 5, 50))
    for k in (1, 5, 50):
        acc, rec = _reference(images.tolist(), labels, texts.tolist(), min(k, 40))
        assert got["accuracy"] == pytest.approx(acc)
        assert got[f"recall@{k}"] == pytest.approx(rec)


def test_perfect_and_useless_embeddings():
    texts = np.eye(3)
    labels = [0, 0, 1, 1, 2, 2]
    perfect = zero_shot_metrics(texts[labels] * 5, labels, texts, ks=(2,))
    assert perfect == {"accuracy": 1.0, "recall@2": 1.0}
    wrong = zero_shot_metrics(texts[[1, 1, 2, 2, 0, 0]], labels, texts, ks=(2,))
    assert wrong == {"accuracy": 0.0, "recall@2": 0.0}


def _photos():
    from matplotlib.cbook import get_sample_data
    from skimage import data

    def jpg(arr):
        buf = io.BytesIO()
        Image.fromarray(arr).convert("RGB").save(buf, "JPEG")
        return buf.getvalue()

    with get_sample_data("grace_hopper.jpg") as f:
        hopper = f.read()
    return {
        "person": [jpg(data.astronaut()), hopper, jpg(data.camera())],
        "cat": [jpg(data.chelsea()), jpg(data.chelsea()[::-1])],
        "coffee": [jpg(data.coffee())],
    }


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    root = tmp_path_factory.mktemp("labelled")
    folder = root / "folder"
    rows = []
    for label, images in _photos().items():
        (folder / label).mkdir(parents=True)
        for i, blob in enumerate(images):
            (folder / label / f"{i}.jpg").write_bytes(blob)
            rows.append({"label": label, "image": {"bytes": blob, "path": f"{label}{i}.jpg"}})
    (folder / "cat" / "broken.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    pq.write_table(pa.Table.from_pylist(rows), root / "set.parquet")
    return folder, root / "set.parquet"


def test_folder_and_parquet_give_the_same_result(labelled, clip_vlm):
    folder, parquet = labelled
    a = evaluate_utility(clip_vlm, folder, ks=(1, 3))
    b = evaluate_utility(clip_vlm, parquet, ks=(1, 3))
    assert a["classes"] == b["classes"] == ["cat", "coffee", "person"]
    assert a["n_images"] == b["n_images"] == 6
    assert a["original"] == b["original"]
    assert [s["id"] for s in a["skipped"]] == ["cat/broken.jpg"]
    assert "does not decode" in a["skipped"][0]["reason"]


def test_before_and_after_a_transform(labelled, clip_vlm, tmp_path):
    folder, _ = labelled
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, clip_vlm.embed_dim))
    y = ["a"] * 30 + ["b"] * 30
    X[:30] += 3 * rng.normal(size=clip_vlm.embed_dim)
    tr = fit_transform(X, y, method="leace")
    res = evaluate_utility(clip_vlm, folder, transform=tr, ks=(1,))
    assert set(res) >= {"original", "debiased", "drop"}
    for m, v in res["drop"].items():
        assert v == pytest.approx(res["original"][m] - res["debiased"][m])

    tr.save(tmp_path / "t.npz")
    out = tmp_path / "u"
    cmd = ["audit", "utility", str(folder), "--model", "ViT-B-32", "--pretrained", "none"]
    result = CliRunner().invoke(
        app, [*cmd, "--debias", str(tmp_path / "t.npz"), "--k", "1", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "utility.json").read_text())
    assert saved["original"] == res["original"] and saved["debiased"] == res["debiased"]


def test_bad_inputs(tmp_path):
    with pytest.raises(ValueError, match="one sub-folder per class"):
        list(iter_labelled(tmp_path))
    pq.write_table(pa.table({"y": ["a"]}), tmp_path / "x.parquet")
    with pytest.raises(ValueError, match="no column 'label'"):
        list(iter_labelled(tmp_path / "x.parquet"))
    pq.write_table(
        pa.table({"label": ["a", None], "image": ["missing.jpg", "x.jpg"]}), tmp_path / "y.parquet"
    )
    items = list(iter_labelled(tmp_path / "y.parquet"))
    assert "cannot read missing.jpg" in items[0][3] and "no 'label'" in items[1][3]


@pytest.mark.timeout(20)
def test_labelled_files_that_are_not_regular_files_are_skipped_with_a_reason(tmp_path):
    import os

    cls = tmp_path / "set" / "cat"
    cls.mkdir(parents=True)
    (cls / "a.jpg").write_bytes(b"\xff\xd8\xff image")
    os.mkfifo(cls / "pipe.jpg")  # reading it would block forever
    (cls / "zero.jpg").symlink_to("/dev/zero")  # reading it would never end
    items = {ident: (data, err) for ident, _, data, err in iter_labelled(tmp_path / "set")}
    assert items["cat/a.jpg"] == (b"\xff\xd8\xff image", None)
    assert items["cat/pipe.jpg"] == (None, "cannot read cat/pipe.jpg: not a regular file: it is a FIFO")
    assert items["cat/zero.jpg"][1].endswith("not a regular file: it is a character device")
