"""The adapter contract every vision-language model family implements.

A family subclasses :class:`VLM`, sets the attributes in its loader and implements
:meth:`VLM.tokenize`; :meth:`VLM.embed_images` and :meth:`VLM.embed_texts` are shared. This module
imports neither torch nor the model packages.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from fairsets.core.errors import SaysTheFix

if TYPE_CHECKING:
    import numpy as np
    from PIL import Image

__all__ = ["SEED", "VLM", "ModelUnavailable", "check_device", "is_random", "package_version", "seeded"]

#: The seed of random ("none") weights: two loads give the same model.
SEED = 0


class ModelUnavailable(SaysTheFix, RuntimeError):
    """A model cannot be loaded here: its weights, package or tokenizer are missing.

    The message says what is missing and how to provide it (e.g. download the weights on a
    networked machine and pass their local path).
    """

    #: True when the cause is a local file (not the hub), so offline mode is not the reason.
    local: bool = False


def is_random(pretrained: str | None) -> bool:
    """Whether ``pretrained`` asks for the architecture with random (seeded) weights."""
    return (pretrained or "").strip().lower() == "none"


@contextlib.contextmanager
def seeded(seed: int = SEED) -> Iterator[None]:
    """Seed torch's CPU generator for the block and restore the global RNG state afterwards.

    Models are initialised on the CPU (and moved afterwards), so this makes random weights
    reproducible without touching any global RNG state the caller sees.
    """
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        yield


def package_version(dist: str) -> str:
    """``"<dist> <version>"`` of an installed distribution, ``"<dist> (not installed)"`` otherwise."""
    from fairsets.core.version import package_versions

    version = package_versions([dist])[dist]
    return f"{dist} {version}" if version is not None else f"{dist} (not installed)"


def check_device(device: str) -> str:
    """Validate a torch device string and check that it exists here.

    Args:
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``, …

    Returns:
        The device string, stripped.

    Raises:
        ValueError: The string is not a device, or the device is not available on this machine.
    """
    import torch

    device = device.strip()
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError) as e:
        raise ValueError(f"not a torch device: {device!r} (use cpu, cuda, cuda:N or mps)") from e
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device {device!r} was requested but CUDA is not available here "
                f"(torch {torch.__version__}, built with CUDA {torch.version.cuda}); use device='cpu'"
            )
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise ValueError(f"device {device!r} was requested but only {count} CUDA device(s) exist")
    elif dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ValueError(f"device {device!r} was requested but MPS is not available here; use 'cpu'")
    return device


class VLM(ABC):
    """A loaded vision-language model that embeds images and texts into one space.

    Attributes:
        family: Registry name of the model family (``"open_clip"``, ``"hf"``).
        name: The model name, without the family prefix (local paths are made absolute).
        pretrained: ``"none"`` (random weights), an open_clip tag, a local path, or ``""`` for the
            weights that come with the name (hf ids and directories, open_clip ``hf-hub:`` repos).
        device: The torch device the model lives on.
        embed_dim: Width of the embeddings.
        image_encoder: Torch callable: a preprocessed pixel batch → features.
        text_encoder: Torch callable: a token batch (from :meth:`tokenize`) → features.
        preprocess: ``PIL.Image`` → tensor ``(C, H, W)``.
    """

    family: str
    name: str
    pretrained: str
    device: str
    embed_dim: int
    image_encoder: Callable[[Any], Any]
    text_encoder: Callable[[Any], Any]
    preprocess: Callable[[Any], Any]

    #: The distribution whose version :meth:`provenance` reports.
    package: str = ""

    @property
    def model_id(self) -> str:
        """Stable, human-readable id: ``family:name:pretrained`` (``family:name`` when pretrained is "")."""
        base = f"{self.family}:{self.name}"
        return f"{base}:{self.pretrained}" if self.pretrained else base

    @property
    def slug(self) -> str:
        """Filesystem-safe form of :attr:`model_id`, unique through a hash of it.

        Only ``[A-Za-z0-9._-]``, e.g. ``open_clip-ViT-B-32-none-1a2b3c4d``.
        """
        digest = hashlib.sha256(self.model_id.encode("utf-8")).hexdigest()[:8]
        readable = re.sub(r"[^A-Za-z0-9._-]+", "-", self.model_id).strip("-.")
        readable = re.sub(r"-{2,}", "-", readable)[:80].rstrip("-.")
        return f"{readable}-{digest}" if readable else digest

    @abstractmethod
    def tokenize(self, texts: Sequence[str]) -> Any:
        """Turn texts into the token batch :attr:`text_encoder` takes (on :attr:`device`)."""

    def image_batch(self, images: Sequence[Image.Image]) -> Any:
        """Turn RGB images into the batch :attr:`image_encoder` takes (on :attr:`device`)."""
        import torch

        return torch.stack([self.preprocess(im) for im in images]).to(self.device)

    def embed_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        """Embed images in one forward pass (the caller batches).

        Args:
            images: PIL images of any size and mode (converted to RGB).

        Returns:
            ``(n, embed_dim)`` float32, not L2-normalised.
        """
        import numpy as np
        import torch

        if len(images) == 0:
            return np.zeros((0, self.embed_dim), dtype=np.float32)
        rgb = [im if im.mode == "RGB" else im.convert("RGB") for im in images]
        with torch.inference_mode():
            feats = self.image_encoder(self.image_batch(rgb))
        return _to_numpy(feats)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts in one forward pass (the caller batches).

        Args:
            texts: The texts.

        Returns:
            ``(n, embed_dim)`` float32, not L2-normalised.
        """
        import numpy as np
        import torch

        if isinstance(texts, str):
            raise TypeError("embed_texts takes a sequence of strings, not one string")
        if len(texts) == 0:
            return np.zeros((0, self.embed_dim), dtype=np.float32)
        with torch.inference_mode():
            feats = self.text_encoder(self.tokenize(list(texts)))
        return _to_numpy(feats)

    def weights(self) -> str:
        """Where the weights came from: ``"random"``, a local path or a tag/hub id."""
        if is_random(self.pretrained):
            return "random"
        return self.pretrained or self.name

    def provenance(self) -> dict[str, Any]:
        """What produced the embeddings, for manifests and cards."""
        return {
            "family": self.family,
            "model": self.name,
            "pretrained": self.pretrained,
            "model_id": self.model_id,
            "embed_dim": self.embed_dim,
            "package": package_version(self.package) if self.package else "",
            "weights": self.weights(),
        }

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.model_id} on {self.device}, dim {self.embed_dim}>"


def _to_numpy(feats: Any) -> np.ndarray:
    import numpy as np

    return np.ascontiguousarray(feats.detach().float().cpu().numpy(), dtype=np.float32)
