"""The open_clip adapter, with random weights (no download) and its offline errors."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from models_helpers import require
from PIL import Image

from fairsets.models import ModelUnavailable, load_vlm

require("open_clip")


def _images() -> list[Image.Image]:
    rng = np.random.default_rng(0)
    return [
        Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)),
        Image.fromarray(rng.integers(0, 256, (300, 200), dtype=np.uint8)),
        Image.fromarray(rng.integers(0, 256, (224, 224, 4), dtype=np.uint8)),
    ]


@pytest.fixture(scope="module")
def outputs(vitb32: Any) -> tuple[np.ndarray, np.ndarray]:
    """Embeddings of ``_images()`` and of ["a", "b"] (forward passes are slow on a small CPU)."""
    return vitb32.embed_images(_images()), vitb32.embed_texts(["a", "b"])


def test_embed_images_and_texts(vitb32: Any, outputs: tuple[np.ndarray, np.ndarray]) -> None:
    images, texts = outputs
    assert vitb32.embed_dim == 512
    assert images.shape == (3, 512) and images.dtype == np.float32 and np.isfinite(images).all()
    assert not np.allclose(np.linalg.norm(images, axis=1), 1.0)  # not normalised
    assert texts.shape == (2, 512) and texts.dtype == np.float32 and np.isfinite(texts).all()
    assert not np.array_equal(texts[0], texts[1])
    assert vitb32.embed_images([]).shape == (0, 512)
    assert vitb32.embed_texts([]).shape == (0, 512)
    with pytest.raises(TypeError):
        vitb32.embed_texts("a")


def test_same_input_same_output(vitb32: Any, outputs: tuple[np.ndarray, np.ndarray]) -> None:
    np.testing.assert_array_equal(vitb32.embed_texts(["a", "b"]), outputs[1])


def test_encoders_and_preprocess(vitb32: Any, outputs: tuple[np.ndarray, np.ndarray]) -> None:
    import torch

    pixels = vitb32.preprocess(_images()[1].convert("RGB"))
    assert tuple(pixels.shape) == (3, 224, 224)
    with torch.inference_mode():
        feats = vitb32.image_encoder(pixels[None])
        text = vitb32.text_encoder(vitb32.tokenize(["b"]))
    assert tuple(feats.shape) == (1, 512) and tuple(text.shape) == (1, 512)
    np.testing.assert_allclose(feats.numpy()[0], outputs[0][1], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(text.numpy()[0], outputs[1][1], rtol=1e-4, atol=1e-4)


def test_ids_and_provenance(vitb32: Any) -> None:
    assert (vitb32.family, vitb32.name, vitb32.pretrained, vitb32.device) == (
        "open_clip",
        "ViT-B-32",
        "none",
        "cpu",
    )
    assert vitb32.model_id == "open_clip:ViT-B-32:none"
    assert re.fullmatch(r"open_clip-ViT-B-32-none-[0-9a-f]{8}", vitb32.slug)
    prov = vitb32.provenance()
    assert prov["family"] == "open_clip" and prov["model"] == "ViT-B-32" and prov["pretrained"] == "none"
    assert prov["model_id"] == vitb32.model_id and prov["embed_dim"] == 512 and prov["weights"] == "random"
    assert re.fullmatch(r"open_clip_torch \d+\.\d+.*", prov["package"])
    assert not vitb32.model.training


def test_random_weights_are_seeded_and_leave_global_rng_alone(
    vitb32: Any, outputs: tuple[np.ndarray, np.ndarray]
) -> None:
    import torch

    torch.manual_seed(1234)
    before = torch.get_rng_state()
    again = load_vlm("open_clip:ViT-B-32", "NONE")
    assert torch.equal(torch.get_rng_state(), before)
    assert again.model_id == vitb32.model_id
    np.testing.assert_array_equal(again.embed_images(_images()), outputs[0])


@pytest.mark.slow
def test_weights_from_local_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The offline route: weights downloaded elsewhere, passed as a file (a small architecture)."""
    import torch
    from safetensors.torch import save_file

    source = load_vlm("ViT-S-32-alt", "none")
    with torch.no_grad():
        source.model.text_projection.add_(0.01)  # weights that "none" does not give
    save_file({k: v.contiguous() for k, v in source.model.state_dict().items()}, tmp_path / "w.safetensors")
    monkeypatch.chdir(tmp_path)
    vlm = load_vlm("ViT-S-32-alt", "w.safetensors")
    path = str((tmp_path / "w.safetensors").resolve())
    assert vlm.pretrained == path and vlm.model_id == f"open_clip:ViT-S-32-alt:{path}"
    assert vlm.provenance()["weights"] == path
    np.testing.assert_array_equal(vlm.embed_texts(["a"]), source.embed_texts(["a"]))


def test_pretrained_tag_offline_is_unavailable(no_egress: Any) -> None:
    with pytest.raises(ModelUnavailable) as info:
        load_vlm("ViT-B-32", "openai")
    no_egress.take()  # HF_HUB_OFFLINE=1 should stop any attempt; a blocked one also ends up here
    msg = str(info.value)
    assert "'openai'" in msg and "ViT-B-32" in msg
    assert "--pretrained" in msg and "HF_HOME" in msg


def test_missing_weights_file(tmp_path: Any) -> None:
    path = tmp_path / "nope" / "open_clip_model.safetensors"
    with pytest.raises(ModelUnavailable, match="no file at"):
        load_vlm("ViT-B-32", str(path))


def test_unknown_tag_lists_tags() -> None:
    with pytest.raises(ModelUnavailable, match="laion2b_s34b_b79k"):
        load_vlm("ViT-B-32", "laion9000")


def test_missing_pretrained_lists_tags() -> None:
    with pytest.raises(ValueError, match=r"needs pretrained weights.*laion2b_s34b_b79k"):
        load_vlm("ViT-B-32")


@pytest.mark.parametrize("name", ["ViT-B-31", "vit-b-32", "ViTB32"])
def test_unknown_name_suggests_close_match(name: str) -> None:
    with pytest.raises(ValueError, match="did you mean ViT-B-32"):
        load_vlm(name, "none")


def test_hub_name_takes_no_tag() -> None:
    with pytest.raises(ValueError, match="brings its own weights"):
        load_vlm("hf-hub:timm/ViT-B-16-SigLIP", "webli")


@pytest.mark.parametrize("spec", ["ViT-B-16-SigLIP", "hf-hub:timm/ViT-B-16-SigLIP"])
def test_hub_tokenizer_offline_is_unavailable(spec: str, no_egress: Any) -> None:
    with pytest.raises(ModelUnavailable, match="tokenizer"):
        load_vlm(spec, "none")
    no_egress.take()


def test_hub_weights_offline_are_unavailable(no_egress: Any) -> None:
    with pytest.raises(ModelUnavailable, match=r"hf download timm/ViT-B-16-SigLIP .*local-dir"):
        load_vlm("hf-hub:timm/ViT-B-16-SigLIP")
    no_egress.take()
