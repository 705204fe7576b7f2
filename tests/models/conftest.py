"""Fixtures for the model-adapter tests: models built locally, never downloaded.

* ``vitb32``: open_clip ViT-B-32 with random weights (``pretrained="none"``), built once.
* ``tiny_clip_dir``: a tiny transformers CLIP (model, image processor and tokenizer) saved with
  ``save_pretrained``. No tokenizer files ship offline, so its ``vocab.json``/``merges.txt`` are
  built from open_clip's bundled BPE merges, exactly as open_clip's ``SimpleTokenizer`` builds its
  encoder (truncated to a few hundred merges to keep the vocabulary small).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from models_helpers import require, tiny_tower, write_clip_vocab


@pytest.fixture(scope="session")
def vitb32() -> Any:
    """open_clip ViT-B-32 with random (seeded) weights."""
    require("open_clip")
    from fairsets.models import load_vlm

    return load_vlm("ViT-B-32", "none")


@pytest.fixture(scope="session")
def tiny_clip_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny transformers CLIP saved with its processor (32 px images, 16-d embeddings)."""
    require("transformers")
    from fairsets.models import ensure_torchvision

    ensure_torchvision()
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, CLIPTokenizer

    out = tmp_path_factory.mktemp("tiny-clip")
    vocab_file, merges_file, size = write_clip_vocab(out)
    tokenizer = CLIPTokenizer(str(vocab_file), str(merges_file))
    assert len(tokenizer) == size
    ids = dict(bos_token_id=size - 2, eos_token_id=size - 1, pad_token_id=size - 1)
    config = CLIPConfig(
        text_config=tiny_tower(vocab_size=size, max_position_embeddings=77, **ids),
        vision_config=tiny_tower(image_size=32, patch_size=8),
        projection_dim=16,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        CLIPModel(config).save_pretrained(out)
    image_processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(out)
    return out
