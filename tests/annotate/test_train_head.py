"""Head files and training maths: folded standardisation, split by image, checked files, fine-tuning."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from train_data import png, write_labels

from cli_helpers import run_cli
from fairsets.annotate.heads.labels import LabelRow
from fairsets.annotate.heads.store import Head, evaluate, load_head, write_head
from fairsets.annotate.heads.train import fit_logistic, split_parts


def _blobs(n_classes: int, n: int = 60, d: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 1, (n_classes, d))
    y = np.arange(n) % n_classes
    return centres[y] + rng.normal(0, 0.8, (n, d)) + 3, y


@pytest.mark.parametrize("n_classes", [2, 3])
def test_the_saved_head_equals_the_sklearn_pipeline(n_classes: int) -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import Normalizer, StandardScaler

    x, y = _blobs(n_classes)
    xv, yv = _blobs(n_classes, n=30, seed=1)
    coef, intercept, record = fit_logistic(x, y, xv, yv, n_classes, C_grid=(0.1, 1.0))
    assert record["C"] in (0.1, 1.0) and len(record["grid"]) == 2 and record["refit_on"] == "train+val"
    head = Head(
        "gender", [f"c{i}" for i in range(n_classes)], "torchvision:mobilenet_v2", "none", coef, intercept
    )
    pipe = make_pipeline(
        Normalizer(), StandardScaler(), LogisticRegression(C=record["C"], max_iter=5000, random_state=0)
    )
    pipe.fit(np.vstack([x, xv]), np.concatenate([y, yv]))
    xt, _ = _blobs(n_classes, n=20, seed=2)
    np.testing.assert_allclose(head.predict_proba(xt), pipe.predict_proba(xt), atol=1e-6)
    assert head.predict_proba(xt * 5.0) == pytest.approx(head.predict_proba(xt))  # normalised first


def test_split_is_by_image_stratified_and_seeded() -> None:
    rows = [
        LabelRow("s", f"img{i:03d}", b, "a" if i < 60 else "b", None, i * 3 + b)
        for i in range(80)
        for b in range(1 + i % 3)
    ]
    parts = split_parts(rows, (0.6, 0.2, 0.2), seed=4)
    assert parts == split_parts(rows, (0.6, 0.2, 0.2), seed=4) != split_parts(rows, (0.6, 0.2, 0.2), seed=5)
    by_image: dict[str, set[str]] = {}
    for row, part in zip(rows, parts, strict=True):
        by_image.setdefault(row.key, set()).add(part)
    assert all(len(p) == 1 for p in by_image.values())
    images = {k: next(iter(p)) for k, p in by_image.items()}
    for label, n in (("a", 60), ("b", 20)):
        mine = [p for k, p in images.items() if (int(k[3:]) < 60) == (label == "a")]
        assert (mine.count("test"), mine.count("val"), mine.count("train")) == (
            n // 5,
            n // 5,
            n - 2 * (n // 5),
        )


def test_a_head_file_is_checked(tmp_path: Path) -> None:
    x, y = _blobs(2)
    coef, intercept, _ = fit_logistic(x, y, x[:0], y[:0], 2)
    head = Head(
        "gender", ["female", "male"], "torchvision:mobilenet_v2", "none", coef, intercept, metrics={"n": 0}
    )
    a = write_head(tmp_path / "a.npz", head)
    b = write_head(tmp_path / "b.npz", head)
    assert a.sha256 == b.sha256 and (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    assert a.describe()["sha256"] == a.sha256 and a.pretrained == "none"
    np.testing.assert_array_equal(a.coef, coef)

    tampered = tmp_path / "t.npz"
    with zipfile.ZipFile(tmp_path / "a.npz") as src, zipfile.ZipFile(tampered, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "coef.npy":
                data = data[:-8] + np.float64(1.5).tobytes()
            dst.writestr(info, data)
    with pytest.raises(ValueError, match="corrupt or modified"):
        load_head(tampered)
    (tmp_path / "junk.npz").write_bytes(b"PK\x03\x04 junk")
    with pytest.raises(ValueError, match="not a fairsets attribute head"):
        load_head(tmp_path / "junk.npz")
    np.savez(tmp_path / "other.npz", coef=coef)
    with pytest.raises(ValueError, match="not a fairsets attribute head"):
        load_head(tmp_path / "other.npz")
    with pytest.raises(FileNotFoundError, match="annotate train"):
        load_head(tmp_path / "missing.npz")
    with pytest.raises(ValueError, match="takes \\(n, 8\\) embeddings"):
        a.predict_proba(np.zeros((2, 7)))


def test_evaluate_handles_a_class_never_predicted() -> None:
    m = evaluate(["a", "b", "c"], ["a", "b", "c", "c"], ["a", "b", "b", "b"])
    assert m["confusion"] == [[1, 0, 0], [0, 1, 0], [0, 2, 0]]
    assert m["per_class"]["c"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 2}
    assert m["accuracy"] == 0.5 and m["kappa"] == pytest.approx(1 / 3)
    assert evaluate(["a", "b"], ["a", "a"], ["a", "a"])["kappa"] is None  # one class everywhere


@pytest.mark.slow
def test_finetune_trains_saves_and_reloads_the_encoder(
    tmp_path: Path, shard_writer: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    from fairsets.models import load_vlm

    rng = np.random.default_rng(0)
    samples, rows = [], []
    for i in range(12):
        colour = np.array([220, 40, 40] if i % 2 else [40, 40, 220])
        img = np.clip(colour + rng.integers(-30, 30, (40, 40, 3)), 0, 255).astype(np.uint8)
        samples.append((f"k{i:02d}", {"png": png(img)}))
        rows.append({"shard": "s", "key": f"k{i:02d}", "label": "red" if i % 2 else "blue"})
    shard_writer(tmp_path / "s.tar", samples)
    labels = write_labels(tmp_path / "labels.csv", rows)
    out = tmp_path / "head.npz"
    code, _, err = run_cli(
        ["annotate", "train", labels, "--encoder", "torchvision:mobilenet_v3_small", "--pretrained", "none",
         "--shards", tmp_path / "s.tar", "--out", out, "--split", "0.66,0,0.34", "--finetune",
         "--epochs", "1", "--batch", "4", "--lr", "1e-3"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    head = load_head(out)
    fit = head.training["fit"]
    assert head.training["method"] == "finetune" and fit["best_epoch"] == 1 and len(fit["history"]) == 2
    weights = tmp_path / "head.encoder.pt"
    assert Path(head.pretrained or "") == weights.resolve() and fit["weights"] == "head.encoder.pt"
    tuned = torch.load(weights, weights_only=True)
    start = load_vlm("torchvision:mobilenet_v3_small", "none").model.state_dict()
    assert any(not torch.equal(tuned[k], start[k]) for k in start if k.endswith("weight"))
    # The reported predictions are those of the saved encoder and head.
    encoder = load_vlm(head.encoder, head.pretrained)
    from fairsets.annotate.heads.embed import embed_crops
    from fairsets.annotate.images import decode

    data = dict(samples)
    items = head.metrics["test_items"]
    emb = embed_crops(encoder, [decode(data[it["key"]]["png"]) for it in items])
    assert head.predict(emb) == [it["predicted"] for it in items]
    # The head and its encoder weights move together.
    moved = tmp_path / "moved"
    moved.mkdir()
    for f in (out, weights):
        f.rename(moved / f.name)
    assert Path(load_head(moved / "head.npz").pretrained or "") == (moved / "head.encoder.pt").resolve()


def test_finetune_refuses_a_family_whose_weights_do_not_save_as_one_file(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from fairsets.annotate.heads.embed import CropSource
    from fairsets.annotate.heads.finetune import FinetuneParams, finetune_encoder

    hf = SimpleNamespace(family="hf", name="google/siglip-base-patch16-224", model=object())
    start = (np.zeros((2, 4)), np.zeros(2))
    with pytest.raises(ValueError, match="--finetune supports torchvision and open_clip"):
        finetune_encoder(hf, [], [], np.zeros(0), start, CropSource({}), tmp_path / "h.npz", FinetuneParams())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="epochs >= 1"):
        FinetuneParams(epochs=0)
