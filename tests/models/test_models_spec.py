"""Model specs, ids and slugs, devices, and the light import of ``fairsets.models``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from fairsets.core.registry import MODELS
from fairsets.models import VLM, load_vlm, parse_model_spec

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("ViT-B-32", ("open_clip", "ViT-B-32")),
        ("  ViT-B-32 ", ("open_clip", "ViT-B-32")),
        ("open_clip:ViT-B-32", ("open_clip", "ViT-B-32")),
        ("open_clip:hf-hub:org/repo", ("open_clip", "hf-hub:org/repo")),
        ("hf-hub:org/repo", ("open_clip", "hf-hub:org/repo")),
        ("local-dir:/models/x", ("open_clip", "local-dir:/models/x")),
        ("hf:openai/clip-vit-base-patch32", ("hf", "openai/clip-vit-base-patch32")),
        ("hf:openai/clip-vit-base-patch32@main", ("hf", "openai/clip-vit-base-patch32@main")),
        ("hf:/local/dir", ("hf", "/local/dir")),
    ],
)
def test_parse_model_spec(spec: str, expected: tuple[str, str]) -> None:
    assert parse_model_spec(spec) == expected


@pytest.mark.parametrize("spec", ["", "   ", "hf:", "open_clip:  "])
def test_parse_model_spec_rejects_empty(spec: str) -> None:
    with pytest.raises(ValueError, match=r"empty model spec|names no model"):
        parse_model_spec(spec)


def test_parse_model_spec_unknown_family_lists_known() -> None:
    with pytest.raises(ValueError, match="unknown model family 'timm'") as info:
        parse_model_spec("timm:vit_base")
    assert "hf" in str(info.value) and "open_clip" in str(info.value)


def test_families_are_registered() -> None:
    assert {"open_clip", "hf"} <= set(MODELS.names())
    assert all(hasattr(MODELS.get(name), "load") for name in MODELS.names())


class _Fake(VLM):
    family = "fam"

    def __init__(self, name: str, pretrained: str) -> None:
        self.name, self.pretrained, self.device, self.embed_dim = name, pretrained, "cpu", 4

    def tokenize(self, texts: Sequence[str]) -> Any:
        return list(texts)


def test_model_id_and_slug() -> None:
    vlm = _Fake("ViT-B-32", "none")
    assert vlm.model_id == "fam:ViT-B-32:none"
    assert re.fullmatch(r"fam-ViT-B-32-none-[0-9a-f]{8}", vlm.slug)
    assert _Fake("org/repo", "").model_id == "fam:org/repo"


@pytest.mark.parametrize(
    ("name", "pretrained"),
    [
        ("ViT-B-32", "/home/me/weights/open clip:model.safetensors"),
        ("hf-hub:timm/ViT-B-16-SigLIP", ""),
        ("/data/models/clip@v1", ""),
        ("../relative/..", "none"),
        ("ünïcode/模型", "tag"),
        ("\\windows\\path", "C:\\x.pt"),
    ],
)
def test_slug_is_filesystem_safe(name: str, pretrained: str) -> None:
    slug = _Fake(name, pretrained).slug
    assert re.fullmatch(r"[A-Za-z0-9._-]+", slug), slug
    assert slug not in {".", ".."} and not slug.startswith(("-", "."))


def test_slug_differs_by_pretrained() -> None:
    slugs = {
        _Fake("ViT-B-32", p).slug for p in ("none", "openai", "laion2b_s34b_b79k", "/a/b.pt", "/a-b.pt", "")
    }
    assert len(slugs) == 6


def test_provenance_without_package() -> None:
    prov = _Fake("m", "none").provenance()
    assert prov["weights"] == "random" and prov["model_id"] == "fam:m:none" and prov["embed_dim"] == 4


def test_bad_device() -> None:
    pytest.importorskip("torch")
    with pytest.raises(ValueError, match="not a torch device"):
        load_vlm("ViT-B-32", "none", device="gpu0")


def test_cuda_requested_but_unavailable() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(ValueError, match="CUDA is not available"):
        load_vlm("ViT-B-32", "none", device="cuda:1")


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
        **env,
    }
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=120, check=False
    )


def test_import_does_not_load_torch() -> None:
    proc = _python(
        "import sys, fairsets.models as m; m.parse_model_spec('hf:x'); "
        "heavy = [n for n in ('torch', 'open_clip', 'transformers', 'torchvision') if n in sys.modules]; "
        "print(heavy)"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
