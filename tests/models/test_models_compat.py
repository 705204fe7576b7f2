"""ensure_torchvision: a torchvision whose compiled operators do not load (a build for another torch)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fairsets.models import ModelUnavailable, ensure_torchvision
from fairsets.models.compat import FALLBACK_ENV, nms

torch = pytest.importorskip("torch")

SRC = Path(__file__).resolve().parents[2] / "src"

BOXES = [[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 10, 10]]
SCORES = [0.9, 0.8, 0.7, 0.95]
# Box 3 (0.95) is kept and suppresses its duplicate, box 0 (IoU 1), and box 1 (IoU 81/119 = 0.68 > 0.5);
# box 2 overlaps nothing. At threshold 0.7, box 1 survives.
EXPECTED = {0.5: [3, 2], 0.7: [3, 1, 2]}


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
        **env,
    }
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=120, check=False
    )


# Run first in each subprocess: a plain import, as a user would, which must fail for the test to apply.
PROBE = (
    "try:\n"
    "    import torchvision\n"
    "except RuntimeError as e:\n"
    "    assert 'torchvision::' in str(e), e\n"
    "else:\n"
    "    print('TORCHVISION_OK'); raise SystemExit(0)\n"
)


def _run_broken(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` after a failed plain ``import torchvision``; skip if torchvision imports here."""
    if importlib.util.find_spec("torchvision") is None:
        pytest.skip("torchvision is not installed")
    proc = _python(PROBE + code, **env)
    if "TORCHVISION_OK" in proc.stdout:
        pytest.skip("torchvision imports here: the fallback is not needed")
    return proc


def test_ensure_torchvision_is_idempotent() -> None:
    ensure_torchvision()
    ensure_torchvision()
    pytest.importorskip("open_clip")
    import open_clip

    assert "ViT-B-32" in open_clip.list_models()


@pytest.mark.parametrize("threshold", sorted(EXPECTED))
def test_pure_nms(threshold: float) -> None:
    keep = nms(torch.tensor(BOXES, dtype=torch.float32), torch.tensor(SCORES), threshold)
    assert keep.dtype == torch.int64 and keep.tolist() == EXPECTED[threshold]


def test_pure_nms_empty() -> None:
    assert nms(torch.zeros((0, 4)), torch.zeros((0,)), 0.5).tolist() == []


@pytest.mark.parametrize("threshold", sorted(EXPECTED))
def test_registered_nms_op(threshold: float) -> None:
    pytest.importorskip("torchvision")
    ensure_torchvision()
    keep = torch.ops.torchvision.nms(
        torch.tensor(BOXES, dtype=torch.float32), torch.tensor(SCORES), threshold
    )
    assert keep.tolist() == EXPECTED[threshold]


def test_fallback_is_silent_at_warning_level() -> None:
    """The CPU test environment's torchvision always takes the fallback: no command may warn about it."""
    proc = _run_broken(
        "import logging, warnings\n"
        "warnings.simplefilter('always')\n"
        "logging.basicConfig(level=logging.WARNING, format='%(levelname)s %(name)s|%(message)s')\n"
        "logging.getLogger('fairsets').setLevel(logging.INFO)  # as the CLI sets it\n"
        "from fairsets.models import ensure_torchvision\n"
        "ensure_torchvision()\n"
        "import torchvision.transforms, torchvision.extension as ext\n"
        "print('has_ops', ext._has_ops())\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert "has_ops False" in proc.stdout  # the fallback did run
    assert "torchvision" not in proc.stderr and "compiled operators" not in proc.stderr, proc.stderr


def test_fallback_logs_once_at_debug_in_fresh_process() -> None:
    proc = _run_broken(
        "import logging\n"
        "logging.basicConfig(level=logging.DEBUG, format='%(levelname)s %(name)s|%(message)s')\n"
        "from fairsets.models import ensure_torchvision\n"
        "ensure_torchvision(); ensure_torchvision()\n"
        "import torchvision.transforms, torchvision.extension as ext\n"
        "print('has_ops', ext._has_ops())\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert "has_ops False" in proc.stdout
    lines = [line for line in proc.stderr.splitlines() if "fairsets.models.compat|" in line]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("DEBUG ")
    assert "pure-PyTorch nms" in lines[0] and "roi_align" in lines[0] and "docs/install.md" in lines[0]


def test_fallback_disabled_raises_model_unavailable() -> None:
    proc = _run_broken(
        "import torch\n"
        "from fairsets.models import ModelUnavailable, ensure_torchvision, load_vlm\n"
        "for call in (ensure_torchvision, lambda: load_vlm('ViT-B-32', 'none')):\n"
        "    try:\n"
        "        call()\n"
        "    except ModelUnavailable as e:\n"
        "        print('UNAVAILABLE', e)\n"
        "    else:\n"
        "        print('LOADED')\n"
        "print('torchvision' in __import__('sys').modules, torch.__version__)\n",
        **{FALLBACK_ENV: "0"},
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith("UNAVAILABLE") and lines[1].startswith("UNAVAILABLE"), (
        proc.stdout
    )
    in_modules, version = lines[2].split()
    assert in_modules == "False"  # the half-imported torchvision was dropped
    assert "compiled operators are missing" in lines[0] and f"matching torch {version}" in lines[0]
    assert FALLBACK_ENV in lines[0]


def test_model_unavailable_is_runtime_error() -> None:
    assert issubclass(ModelUnavailable, RuntimeError)
