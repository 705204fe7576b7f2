"""open_clip models (family ``open_clip``, the default).

Names are open_clip architectures (``ViT-B-32``, see ``open_clip.list_models()``) with
``pretrained`` a tag (``laion2b_s34b_b79k``, see ``open_clip.list_pretrained_tags_by_model``), a
local weights file or ``"none"``; or ``hf-hub:org/repo`` / ``local-dir:/path``, which carry their
own weights (``pretrained`` empty, or ``"none"`` for random weights of that architecture).

Named ``openclip`` so that it does not shadow the ``open_clip`` package.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from fairsets.core.registry import MODELS

from .base import VLM, ModelUnavailable, check_device, is_random, seeded
from .compat import ensure_torchvision

__all__ = ["OpenClipVLM"]

_SCHEMAS = ("hf-hub:", "local-dir:")

_HOW_TO_PROVIDE = (
    "download them on a networked machine (`hf download {repo} --local-dir DIR`) and pass the weights "
    "file with --pretrained DIR/open_clip_model.safetensors (or the .bin file the repo has), or "
    "pre-populate the Hugging Face cache (HF_HOME) there, copy it here and set HF_HOME"
)


def _import_open_clip() -> Any:
    ensure_torchvision()
    try:
        import open_clip
    except ImportError as e:
        raise ModelUnavailable(
            f"the open_clip family needs the open_clip_torch package ({e}); pip install open_clip_torch"
        ) from e
    return open_clip


def _unknown_name(open_clip: Any, name: str) -> ValueError:
    known = open_clip.list_models()
    lower = {m.lower(): m for m in known}
    close = [lower[m] for m in difflib.get_close_matches(name.lower(), list(lower), n=5, cutoff=0.5)]
    close += [m for m in difflib.get_close_matches(name, known, n=5, cutoff=0.5) if m not in close]
    close = close[:5]
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return ValueError(
        f"unknown open_clip model {name!r}{hint} (open_clip.list_models() has {len(known)} names; "
        "hub repos are written hf-hub:org/repo, Hugging Face transformers models hf:org/repo)"
    )


def _looks_like_path(value: str) -> bool:
    return (
        os.sep in value
        or "/" in value
        or value.startswith(("~", "."))
        or value.endswith((".pt", ".pth", ".bin", ".safetensors", ".ckpt"))
    )


@MODELS.register("open_clip")
class OpenClipVLM(VLM):
    """An open_clip model: ``model.encode_image`` / ``model.encode_text`` with normalize=False."""

    family = "open_clip"
    package = "open_clip_torch"
    requires: ClassVar[tuple[tuple[str, str], ...]] = (("open_clip", "vlm"),)  # (module, extra)

    def __init__(
        self, *, name: str, pretrained: str, device: str, model: Any, preprocess: Any, tokenizer: Any
    ) -> None:
        self.name = name
        self.pretrained = pretrained
        self.device = device
        self.model = model
        self.preprocess = preprocess
        self.tokenizer = tokenizer
        self.image_encoder = functools.partial(model.encode_image, normalize=False)
        self.text_encoder = functools.partial(model.encode_text, normalize=False)
        self.embed_dim = self._find_embed_dim()

    def _find_embed_dim(self) -> int:
        dim = getattr(getattr(self.model, "visual", None), "output_dim", None)
        if isinstance(dim, int):
            return dim
        import torch

        with torch.inference_mode():
            return int(self.text_encoder(self.tokenize([""])).shape[-1])

    def tokenize(self, texts: Sequence[str]) -> Any:
        """Token ids ``(n, context_length)`` on the model's device."""
        return self.tokenizer(list(texts)).to(self.device)

    @classmethod
    def load(cls, name: str, pretrained: str | None = None, *, device: str = "cpu") -> OpenClipVLM:
        """Build an open_clip model.

        Args:
            name: An open_clip architecture, ``hf-hub:org/repo`` or ``local-dir:/path``.
            pretrained: A tag, a weights file, ``"none"`` (random, seeded weights), or ``None``/``""``
                (only for ``hf-hub:``/``local-dir:`` names, which bring their weights).
            device: Torch device.

        Returns:
            The model, in eval mode.

        Raises:
            ValueError: Unknown architecture or tag, or a missing ``pretrained`` for an architecture.
            ModelUnavailable: Weights or tokenizer are not available here (e.g. offline).
        """
        name = name.strip()
        if not name:
            raise ValueError("empty open_clip model name")
        pretrained = (pretrained or "").strip()
        device = check_device(device)
        open_clip = _import_open_clip()

        schema = next((s for s in _SCHEMAS if name.startswith(s)), None)
        kwargs: dict[str, Any] = {}
        if schema is not None:
            if pretrained and not is_random(pretrained):
                raise ValueError(
                    f"open_clip {name!r} brings its own weights: leave pretrained empty, or 'none' for "
                    f"random weights (got {pretrained!r})"
                )
            if schema == "local-dir:":
                path = Path(name[len(schema) :]).expanduser()
                if not path.is_dir():
                    raise ModelUnavailable(f"open_clip local-dir {str(path)!r} is not a directory")
                name = f"{schema}{path.resolve()}"
                weights = [p for e in ("*.safetensors", "*.bin", "*.pt", "*.pth") for p in path.glob(e)]
                if not is_random(pretrained) and not weights:
                    raise ModelUnavailable(f"open_clip {name!r}: no weights file in {str(path)!r}")
            elif not is_random(pretrained):
                _check_hub_weights(name[len(schema) :])
            arch_name = name
        else:
            if name not in open_clip.list_models():
                raise _unknown_name(open_clip, name)
            arch_name = name
            if not pretrained:
                tags = open_clip.list_pretrained_tags_by_model(name)
                raise ValueError(
                    f"open_clip {name!r} needs pretrained weights: a tag "
                    f"({', '.join(tags) or 'none known'}), a local weights file, or 'none' for random weights"
                )
            if not is_random(pretrained):
                pretrained, kwargs = _resolve_weights(open_clip, name, pretrained)

        if is_random(pretrained):
            pretrained = "none"
            # No tower may fetch base weights (timm / Hugging Face) either.
            kwargs.update(pretrained=None, load_weights=False, pretrained_image=False, pretrained_text=False)

        tokenizer = _tokenizer(open_clip, arch_name)
        try:
            with seeded(), _quiet_random_init(pretrained == "none"):
                model, _, preprocess = open_clip.create_model_and_transforms(
                    arch_name, device=device, **kwargs
                )
        except (OSError, ImportError) as e:
            raise ModelUnavailable(_unavailable(name, pretrained, e)) from e
        except RuntimeError as e:
            if schema == "hf-hub:" or _is_download_error(e):
                raise ModelUnavailable(_unavailable(name, pretrained, e)) from e
            if Path(pretrained).is_file():
                raise _bad_weights_file(name, pretrained, e) from e
            raise
        except Exception as e:  # a corrupt or foreign weights file: pickle, zip, key errors, ...
            if Path(pretrained).is_file():
                raise _bad_weights_file(name, pretrained, e) from e
            raise
        model.eval()
        return cls(
            name=name,
            pretrained=pretrained,
            device=device,
            model=model,
            preprocess=preprocess,
            tokenizer=tokenizer,
        )


def _resolve_weights(open_clip: Any, name: str, pretrained: str) -> tuple[str, dict[str, Any]]:
    """Check a tag or file before building the model; returns (pretrained, create kwargs)."""
    from open_clip.pretrained import download_pretrained, get_pretrained_cfg

    cfg = get_pretrained_cfg(name, pretrained)
    if cfg:
        tag = pretrained.lower().replace("-", "_")
        try:  # a cache hit costs nothing; open_clip resolves it again from the cache
            download_pretrained(cfg)
        except Exception as e:  # huggingface_hub errors, OSError, urllib errors, EgressBlocked, ...
            repo = (cfg.get("hf_hub") or "ORG/REPO").rstrip("/")
            raise ModelUnavailable(
                f"weights {tag!r} of open_clip {name!r} are not available here ({type(e).__name__}: {e}). "
                f"To provide them, {_HOW_TO_PROVIDE.format(repo=repo)}."
            ) from e
        kwargs: dict[str, Any] = {"pretrained": tag}
        model_cfg = open_clip.get_model_config(name) or {}
        if cfg.get("quick_gelu") and not model_cfg.get("quick_gelu"):
            # e.g. ViT-B-32 + openai: the weights were trained with QuickGELU; without it they give
            # subtly wrong embeddings (open_clip only warns).
            kwargs["force_quick_gelu"] = True
        return tag, kwargs
    path = Path(pretrained).expanduser()
    if path.is_file():
        resolved = str(path.resolve())
        return resolved, {"pretrained": resolved}
    tags = open_clip.list_pretrained_tags_by_model(name)
    what = "no file at" if _looks_like_path(pretrained) else "not a known tag and no file at"
    raise ModelUnavailable(
        f"open_clip {name!r}: pretrained {pretrained!r} is {what} {str(path)!r} "
        f"(tags: {', '.join(tags) or 'none known'}); pass an existing weights file, a tag, or 'none'"
    )


def _check_hub_weights(repo: str) -> None:
    """Fail early when an ``hf-hub:`` repo's weights are missing (open_clip would only warn)."""
    from open_clip.pretrained import download_pretrained_from_hf

    try:
        download_pretrained_from_hf(repo)
    except Exception as e:  # huggingface_hub errors, OSError, EgressBlocked, ...
        raise ModelUnavailable(
            f"weights of open_clip 'hf-hub:{repo}' are not available here ({type(e).__name__}: {e}). "
            f"To provide them, run `hf download {repo} --local-dir DIR` on a networked machine and load "
            "open_clip:local-dir:DIR, or pre-populate the Hugging Face cache (HF_HOME) there and copy it "
            "here."
        ) from e


def _tokenizer(open_clip: Any, name: str) -> Any:
    try:
        return open_clip.get_tokenizer(name)
    except Exception as e:  # the hub (SigLIP, mT5, … use Hugging Face tokenizers), fsspec, ...
        raise ModelUnavailable(
            f"the tokenizer of open_clip {name!r} is not available here ({type(e).__name__}: {e}). It comes "
            "from the Hugging Face hub: run once on a networked machine with the same HF_HOME (or copy "
            "that cache here), then load with HF_HUB_OFFLINE=1."
        ) from e


class _DropRandomInitWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("No pretrained weights loaded")


@contextlib.contextmanager
def _quiet_random_init(active: bool) -> Iterator[None]:
    """Random weights were asked for: open_clip's warning that it initialised randomly says nothing."""
    if not active:
        yield
        return
    root = logging.getLogger()
    flt = _DropRandomInitWarning()
    root.addFilter(flt)
    try:
        yield
    finally:
        root.removeFilter(flt)


def _bad_weights_file(name: str, path: str, e: BaseException) -> ModelUnavailable:
    first = " ".join(str(e).split()).split(". ")[0]  # torch's advice to unpickle unsafely is not given
    first = (first[:160] + "…") if len(first) > 160 else first
    err = ModelUnavailable(
        f"{path}: not usable weights for open_clip {name!r} ({type(e).__name__}: {first}); pass the "
        "weights file made for this architecture, a tag, or 'none' for random weights"
    )
    err.local = True  # about a local file, not the hub
    return err


def _is_download_error(e: BaseException) -> bool:
    text = str(e).lower()
    return any(w in text for w in ("download", "connection", "offline", "hub", "resolve"))


def _unavailable(name: str, pretrained: str, e: BaseException) -> str:
    what = f"open_clip {name!r}" + (f" with pretrained {pretrained!r}" if pretrained else "")
    return (
        f"{what} could not be built here ({type(e).__name__}: {e}); parts of it (config, weights or a "
        "Hugging Face text tower) need the Hugging Face hub. Download them on a networked machine and "
        "pass a local weights file with --pretrained, or pre-populate the Hugging Face cache (HF_HOME)."
    )
