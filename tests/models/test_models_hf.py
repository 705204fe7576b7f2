"""The transformers adapter, on tiny models saved locally (no hub)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from models_helpers import require, tiny_tower
from PIL import Image

from fairsets.models import ModelUnavailable, load_vlm
from fairsets.models.hf import split_revision

require("transformers")


def _images() -> list[Image.Image]:
    return [Image.new("RGB", (50, 40), "red"), Image.new("L", (20, 90), 128), Image.new("RGBA", (32, 32))]


def test_weights_from_dir(tiny_clip_dir: Path) -> None:
    vlm = load_vlm(f"hf:{tiny_clip_dir}")
    assert (vlm.family, vlm.name, vlm.pretrained, vlm.embed_dim) == ("hf", str(tiny_clip_dir), "", 16)
    assert vlm.model_id == f"hf:{tiny_clip_dir}"
    images = vlm.embed_images(_images())
    texts = vlm.embed_texts(["a photo of a cat", "b"])
    assert images.shape == (3, 16) and texts.shape == (2, 16)
    assert images.dtype == np.float32 and texts.dtype == np.float32
    assert np.isfinite(images).all() and np.isfinite(texts).all()
    assert tuple(vlm.preprocess(_images()[0]).shape) == (3, 32, 32)
    prov = vlm.provenance()
    assert prov["weights"] == str(tiny_clip_dir) and prov["package"].startswith("transformers ")


def test_matches_transformers_directly(tiny_clip_dir: Path) -> None:
    import torch
    from transformers import CLIPModel, CLIPProcessor

    vlm = load_vlm(f"hf:{tiny_clip_dir}")
    model = CLIPModel.from_pretrained(tiny_clip_dir).eval()
    processor = CLIPProcessor.from_pretrained(tiny_clip_dir)
    texts = ["a photo of a cat", "a dog"]
    with torch.inference_mode():
        text_inputs = processor(text=texts, padding=True, return_tensors="pt")
        ref_text = model.get_text_features(**text_inputs)
        ref_image = model.get_image_features(**processor(images=_images()[:1], return_tensors="pt"))
    ref_text = getattr(ref_text, "pooler_output", ref_text)
    ref_image = getattr(ref_image, "pooler_output", ref_image)
    np.testing.assert_allclose(vlm.embed_texts(texts), ref_text.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(vlm.embed_images(_images()[:1]), ref_image.numpy(), rtol=1e-5, atol=1e-6)


def test_random_weights(tiny_clip_dir: Path) -> None:
    import torch

    before = torch.get_rng_state()
    vlm = load_vlm(f"hf:{tiny_clip_dir}", "none")
    assert torch.equal(torch.get_rng_state(), before)
    assert vlm.pretrained == "none" and vlm.model_id == f"hf:{tiny_clip_dir}:none"
    assert vlm.provenance()["weights"] == "random"
    images, texts = vlm.embed_images(_images()), vlm.embed_texts(["a", "b"])
    assert images.shape == (3, 16) and texts.shape == (2, 16)
    again = load_vlm(f"hf:{tiny_clip_dir}", "None")
    np.testing.assert_array_equal(again.embed_images(_images()), images)
    trained = load_vlm(f"hf:{tiny_clip_dir}")
    assert not np.allclose(trained.embed_texts(["a", "b"]), texts)
    assert trained.slug != vlm.slug


def test_relative_dir_is_made_absolute(tiny_clip_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tiny_clip_dir.parent)
    vlm = load_vlm(f"hf:{tiny_clip_dir.name}")
    assert vlm.name == str(tiny_clip_dir.resolve())


def test_siglip_pads_to_max_length(tiny_clip_dir: Path, tmp_path: Path) -> None:
    """SigLIP's text tower expects sequences padded to the full length (here a CLIP tokenizer)."""
    import torch
    from transformers import CLIPTokenizer, SiglipConfig, SiglipImageProcessor, SiglipModel

    tokenizer = CLIPTokenizer.from_pretrained(tiny_clip_dir)
    n = len(tokenizer)
    config = SiglipConfig(
        text_config=tiny_tower(
            vocab_size=n,
            max_position_embeddings=16,
            pad_token_id=n - 1,
            bos_token_id=n - 2,
            eos_token_id=n - 1,
        ),
        vision_config=tiny_tower(image_size=32, patch_size=8),
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(2)
        SiglipModel(config).save_pretrained(tmp_path)
    SiglipImageProcessor(size={"height": 32, "width": 32}).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)  # no processor: tokenizer and image processor load separately
    vlm = load_vlm(f"hf:{tmp_path}")
    assert vlm.tokenize(["a photo of a cat", "b"])["input_ids"].shape == (2, 16)
    assert vlm.embed_texts(["a photo of a cat", "b"]).shape == (2, 32)
    assert vlm.embed_images(_images()).shape == (3, 32)


def test_missing_hub_id_offline(no_egress: Any) -> None:
    for pretrained in (None, "none"):
        with pytest.raises(ModelUnavailable) as info:
            load_vlm("hf:fairsets-test/no-such-model@v1", pretrained)
        msg = str(info.value)
        assert "fairsets-test/no-such-model@v1" in msg
        assert "hf download fairsets-test/no-such-model --local-dir DIR --revision v1" in msg
    no_egress.take()


def test_missing_dir() -> None:
    with pytest.raises(ModelUnavailable, match="does not exist"):
        load_vlm("hf:/nonexistent/fairsets/model")


def test_pretrained_must_be_empty_or_none(tiny_clip_dir: Path) -> None:
    with pytest.raises(ValueError, match="takes its weights from the id or directory"):
        load_vlm(f"hf:{tiny_clip_dir}", "openai")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("org/repo", ("org/repo", None)),
        ("org/repo@main", ("org/repo", "main")),
        ("org/repo@", ("org/repo@", None)),
        ("repo", ("repo", None)),
    ],
)
def test_split_revision(name: str, expected: tuple[str, str | None]) -> None:
    assert split_revision(name) == expected
