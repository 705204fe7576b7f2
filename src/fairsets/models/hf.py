"""Hugging Face transformers models (family ``hf``): CLIP, SigLIP, SigLIP 2, …

The name is a hub id (``openai/clip-vit-base-patch32``, optionally ``@revision``) or a local
directory saved with ``save_pretrained`` (model and processor). Any model whose ``AutoModel``
class has ``get_image_features`` and ``get_text_features`` works. ``pretrained`` is empty (the
weights of the id or directory) or ``"none"`` (its architecture with random, seeded weights).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from fairsets.core.registry import MODELS

from .base import VLM, ModelUnavailable, check_device, is_random, seeded
from .compat import ensure_torchvision
from .hub import hub_errors

if TYPE_CHECKING:
    from PIL import Image

__all__ = ["HFVLM", "split_revision"]

#: Families whose text tower was trained on sequences padded to the full length.
_PAD_TO_MAX = ("siglip",)
_TEXT_INPUTS = ("input_ids", "attention_mask", "position_ids")


def split_revision(name: str) -> tuple[str, str | None]:
    """``"org/repo@rev"`` → ``("org/repo", "rev")``; ``"org/repo"`` → ``("org/repo", None)``."""
    repo, sep, rev = name.rpartition("@")
    if sep and repo and rev:
        return repo, rev
    return name, None


def _looks_like_path(name: str) -> bool:
    return (
        os.path.isabs(name)
        or name.startswith((".", "~"))
        or name.count("/") > 1
        or (os.sep != "/" and os.sep in name)
    )


def _features(out: Any) -> Any:
    """The pooled, projected features from ``get_*_features`` (a tensor or a ModelOutput)."""
    import torch

    if isinstance(out, torch.Tensor):
        return out
    pooled = getattr(out, "pooler_output", None)
    if isinstance(pooled, torch.Tensor):
        return pooled
    if isinstance(out, tuple | list) and len(out) > 1 and isinstance(out[1], torch.Tensor):
        return out[1]  # (last_hidden_state, pooler_output, ...)
    raise TypeError(f"cannot find pooled features in a {type(out).__name__}")


@MODELS.register("hf")
class HFVLM(VLM):
    """A transformers model used through ``get_image_features`` / ``get_text_features``."""

    family = "hf"
    package = "transformers"
    requires: ClassVar[tuple[tuple[str, str], ...]] = (("transformers", "vlm"),)  # (module, extra)

    def __init__(
        self,
        *,
        name: str,
        pretrained: str,
        device: str,
        model: Any,
        tokenizer: Any,
        image_processor: Any,
    ) -> None:
        self.name = name
        self.pretrained = pretrained
        self.device = device
        self.model = model
        self.tokenizer = tokenizer
        self.image_processor = image_processor
        config = model.config
        self.model_type = str(getattr(config, "model_type", ""))
        text_config = getattr(config, "text_config", None)
        limits = [
            n
            for n in (
                getattr(text_config, "max_position_embeddings", None),
                getattr(tokenizer, "model_max_length", None),
            )
            if isinstance(n, int) and 0 < n < 1_000_000
        ]
        self.max_length: int | None = min(limits) if limits else None
        self.pad_to_max = self.model_type.startswith(_PAD_TO_MAX)
        self.image_encoder = self._encode_images
        self.text_encoder = self._encode_texts
        self.preprocess = self._preprocess_one
        import torch

        with torch.inference_mode():
            self.embed_dim = int(self.text_encoder(self.tokenize([""])).shape[-1])

    def _preprocess_one(self, image: Image.Image) -> Any:
        return self.image_processor(images=image.convert("RGB"), return_tensors="pt")["pixel_values"][0]

    def image_batch(self, images: Sequence[Image.Image]) -> Any:
        """The image processor's output for the whole batch (pixel values and any masks)."""
        batch = self.image_processor(images=list(images), return_tensors="pt")
        return {k: v.to(self.device) for k, v in batch.items()}

    def _encode_images(self, batch: Any) -> Any:
        inputs = dict(batch) if isinstance(batch, Mapping) else {"pixel_values": batch}
        inputs["pixel_values"] = inputs["pixel_values"].to(self.device, self.model.dtype)
        return _features(self.model.get_image_features(**inputs))

    def _encode_texts(self, batch: Any) -> Any:
        inputs = dict(batch) if isinstance(batch, Mapping) else {"input_ids": batch}
        return _features(
            self.model.get_text_features(**{k: v for k, v in inputs.items() if k in _TEXT_INPUTS})
        )

    def tokenize(self, texts: Sequence[str]) -> dict[str, Any]:
        """Token ids (and attention mask), padded to the full length for SigLIP."""
        kwargs: dict[str, Any] = {"truncation": True, "return_tensors": "pt"}
        if self.max_length is not None:
            kwargs["max_length"] = self.max_length
        kwargs["padding"] = "max_length" if self.pad_to_max and self.max_length else True
        batch = self.tokenizer(list(texts), **kwargs)
        return {k: v.to(self.device) for k, v in batch.items() if k in _TEXT_INPUTS}

    @classmethod
    def load(cls, name: str, pretrained: str | None = None, *, device: str = "cpu") -> HFVLM:
        """Load a transformers vision-language model and its processor.

        Args:
            name: Hub id (``org/repo`` or ``org/repo@revision``) or local directory.
            pretrained: ``None``/``""`` for the weights of ``name``, ``"none"`` for random weights.
            device: Torch device.

        Returns:
            The model, in eval mode, float32.

        Raises:
            ValueError: A ``pretrained`` other than empty or "none", or not a vision-language model.
            ModelUnavailable: transformers, the model or its processor are not available here.
        """
        name = name.strip()
        if not name:
            raise ValueError("empty hf model name")
        pretrained = (pretrained or "").strip()
        if pretrained and not is_random(pretrained):
            raise ValueError(
                f"the hf family takes its weights from the id or directory: leave pretrained empty or use "
                f"'none' for random weights (got {pretrained!r}); pin a hub revision with hf:ID@REVISION or "
                "point at a local directory with hf:DIR"
            )
        random = is_random(pretrained)
        device = check_device(device)

        local = Path(name).expanduser()
        revision: str | None = None
        if local.is_dir():
            source = name = str(local.resolve())
        elif _looks_like_path(name):
            raise ModelUnavailable(f"hf model directory {str(local)!r} does not exist")
        else:
            source, revision = split_revision(name)

        ensure_torchvision()
        try:
            import torch
            import transformers
        except ImportError as e:
            raise ModelUnavailable(f"the hf family needs transformers ({e}); pip install transformers") from e

        kw: dict[str, Any] = {"revision": revision} if revision else {}
        try:
            if random:
                config = transformers.AutoConfig.from_pretrained(source, **kw)
                with seeded():
                    model = transformers.AutoModel.from_config(config, dtype=torch.float32)
            else:
                model = transformers.AutoModel.from_pretrained(source, dtype=torch.float32, **kw)
            tokenizer, image_processor = _processors(transformers, source, kw)
        except hub_errors() as e:
            raise ModelUnavailable(
                f"hf model {name!r} is not available here ({type(e).__name__}: {e}). Download it on a "
                f"networked machine with `hf download {source} --local-dir DIR"
                + (f" --revision {revision}" if revision else "")
                + "`, copy DIR here and load hf:DIR (or pre-populate the Hugging Face cache, HF_HOME)."
            ) from e
        if not (hasattr(model, "get_image_features") and hasattr(model, "get_text_features")):
            raise ValueError(
                f"hf model {name!r} ({type(model).__name__}) is not a vision-language model: it has no "
                "get_image_features/get_text_features"
            )
        model.to(device).eval()
        return cls(
            name=name,
            pretrained="none" if random else "",
            device=device,
            model=model,
            tokenizer=tokenizer,
            image_processor=image_processor,
        )


def _processors(transformers: Any, source: str, kw: dict[str, Any]) -> tuple[Any, Any]:
    """(tokenizer, image processor) of ``source``: its processor, or the two saved separately."""
    tokenizer = image_processor = None
    try:
        processor = transformers.AutoProcessor.from_pretrained(source, **kw)
    except (OSError, ValueError, KeyError, TypeError):
        processor = None
    if processor is not None:
        tokenizer = getattr(processor, "tokenizer", None)
        image_processor = getattr(processor, "image_processor", None)
    if tokenizer is None:
        tokenizer = transformers.AutoTokenizer.from_pretrained(source, **kw)
    if image_processor is None:
        image_processor = transformers.AutoImageProcessor.from_pretrained(source, **kw)
    return tokenizer, image_processor
