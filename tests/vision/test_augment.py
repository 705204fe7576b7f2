"""Tests for fairsets.vision.augment (deterministic, recorded augmentation)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("cv2")
pytest.importorskip("albumentations")

from fairsets.vision.augment import augment, derive_seed


@pytest.fixture(scope="module")
def image() -> np.ndarray:
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, size=(48, 40, 3), dtype=np.uint8)
    img[10:20, 5:15] = (200, 60, 30)  # a coloured patch so hue changes show
    return img


@pytest.mark.parametrize("kind", ["mild", "colour"])
def test_deterministic(image: np.ndarray, kind: str) -> None:
    a, ra = augment(image, kind, seed=11)
    b, rb = augment(image.copy(), kind, seed=11)
    c, _ = augment(image, kind, seed=12)
    assert a.tobytes() == b.tobytes() and ra == rb
    assert a.tobytes() != c.tobytes()


def test_deterministic_across_processes(image: np.ndarray) -> None:
    out, _ = augment(image, "mild", derive_seed(5, "mild", "k", 1))
    code = (
        "import numpy as np, hashlib; from fairsets.vision.augment import augment, derive_seed\n"
        "img = np.random.default_rng(0).integers(0, 256, size=(48, 40, 3), dtype=np.uint8)\n"
        "img[10:20, 5:15] = (200, 60, 30)\n"
        "out, _ = augment(img, 'mild', derive_seed(5, 'mild', 'k', 1))\n"
        "print(hashlib.sha256(out.tobytes()).hexdigest())"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == hashlib.sha256(out.tobytes()).hexdigest()


@pytest.mark.parametrize("kind", ["mild", "colour"])
def test_shape_dtype_and_input_untouched(image: np.ndarray, kind: str) -> None:
    before = image.copy()
    out, _ = augment(image, kind, seed=3)
    assert out.shape == image.shape and out.dtype == np.uint8
    assert np.array_equal(image, before)
    assert not np.array_equal(out, image)


@pytest.mark.parametrize("kind", ["mild", "colour"])
def test_record_is_json_and_lists_applied(image: np.ndarray, kind: str) -> None:
    names = set()
    for seed in range(8):
        _, rec = augment(image, kind, seed=seed)
        assert rec["kind"] == kind and rec["seed"] == seed and rec["size"] == [48, 40]
        assert json.loads(json.dumps(rec)) == rec
        names.update(t["name"] for t in rec["transforms"])
        for t in rec["transforms"]:
            assert isinstance(t["params"], dict)
    if kind == "mild":
        assert names == {"HorizontalFlip", "Rotate", "HueSaturationValue", "RandomResizedCrop"}
    else:
        assert names == {"HueSaturationValue", "RandomBrightnessContrast"}


def test_mild_params_within_bounds(image: np.ndarray) -> None:
    for seed in range(10):
        _, rec = augment(image, "mild", seed=seed)
        for t in rec["transforms"]:
            if t["name"] == "Rotate":
                assert abs(t["params"]["angle"]) <= 10.0 + 1e-6
            if t["name"] == "HueSaturationValue":
                assert abs(t["params"]["hue_shift"]) <= 8 and t["params"]["sat_shift"] == 0


def test_colour_keeps_geometry() -> None:
    img = np.full((32, 32, 3), 20, dtype=np.uint8)
    img[8:24, 8:24] = (180, 120, 90)  # a square with sharp edges
    img[3, 27] = (255, 255, 255)  # a single bright pixel
    for seed in range(5):
        out, rec = augment(img, "colour", seed=seed)
        gray = out.astype(int).sum(axis=2)
        assert np.unravel_index(np.argmax(gray), gray.shape) == (3, 27)
        thr = (gray[16, 16] + gray[0, 0]) / 2
        assert np.array_equal(gray[:, :] > thr, img.astype(int).sum(axis=2) > (20 * 3 + 390) / 2)
        assert {t["name"] for t in rec["transforms"]} <= {"HueSaturationValue", "RandomBrightnessContrast"}


def test_errors(image: np.ndarray) -> None:
    with pytest.raises(ValueError, match="sepia"):
        augment(image, "sepia", seed=0)
    with pytest.raises(ValueError, match="uint8"):
        augment(image.astype(np.float32), "mild", seed=0)
    with pytest.raises(ValueError, match="seed"):
        augment(image, "mild", seed=-1)


def test_derive_seed() -> None:
    assert derive_seed(1, "x") == derive_seed(1, "x")
    assert derive_seed(1, "x") != derive_seed(1, "y")
    assert 0 <= derive_seed("anything") < 2**32
