"""Fine-tuning the encoder of an attribute head end to end (``fairsets annotate train --finetune``).

The paper fine-tunes SigLIP on the consensus labels; this does the same for the encoders whose
weights fit in one file that ``pretrained`` loads again: ``torchvision:*`` and ``open_clip``
models (an ``hf:`` model: train the linear head instead).

The model is ``softmax(W · normalise(encoder(crop)) + b)``. ``W, b`` start from the logistic head
fitted on the frozen embeddings (``fairsets.annotate.heads.train.fit_logistic``), so epoch 0 is that
head. Each epoch shuffles the training crops (seeded), and AdamW updates the encoder (at
``lr``) and ``W, b`` (at ``head_lr``) on the cross-entropy. After every epoch the validation
accuracy is measured; the best epoch (ties: the earlier, epoch 0 included) is kept. Its encoder
weights are written beside the head (``head.encoder.pt``, a state dict; the head's
``pretrained``) and loaded again through :func:`fairsets.models.load_vlm`, so the head's test
metrics are those of the saved files.

The labelled training and validation crops are held in memory as uint8 arrays (about 150 KB for
a 224-px crop); a GPU (``--device cuda``) is advised beyond a few thousand crops.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .embed import CropSource, iter_crops
from .labels import LabelRow

if TYPE_CHECKING:
    from fairsets.models import VLM

__all__ = ["FINETUNE_FAMILIES", "FinetuneParams", "Finetuned", "finetune_encoder"]

#: Families whose fine-tuned weights save as one ``pretrained`` file.
FINETUNE_FAMILIES = ("torchvision", "open_clip")


@dataclass(frozen=True)
class FinetuneParams:
    """Fine-tuning settings (see the module docstring)."""

    epochs: int = 3
    lr: float = 1e-5
    head_lr: float = 1e-3
    weight_decay: float = 1e-4
    batch_size: int = 32

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError(
                f"fine-tuning needs epochs >= 1 and batch >= 1, got {self.epochs} and {self.batch_size}"
            )
        if not (self.lr > 0 and self.head_lr > 0 and self.weight_decay >= 0):
            raise ValueError(
                f"fine-tuning needs lr > 0 and head_lr > 0, got {self.lr:g} and {self.head_lr:g}"
            )


@dataclass
class Finetuned:
    """A fine-tuned encoder (loaded again from its saved weights) and its linear head."""

    encoder: VLM
    coef: np.ndarray  # (C, D), on L2-normalised embeddings
    intercept: np.ndarray  # (C,)
    weights: Path
    record: dict[str, Any] = field(default_factory=dict)


def _module(vlm: VLM) -> Any:
    model = getattr(vlm, "model", None)
    if vlm.family not in FINETUNE_FAMILIES or model is None:
        raise ValueError(
            f"--finetune supports {' and '.join(FINETUNE_FAMILIES)} encoders (weights saved as one file), "
            f"not {vlm.family}:{vlm.name}; train the linear head without --finetune"
        )
    return model


def _batches(vlm: VLM, crops: Sequence[np.ndarray]) -> Any:
    import torch
    from PIL import Image

    return torch.stack([vlm.preprocess(Image.fromarray(c)) for c in crops]).to(vlm.device)


def finetune_encoder(
    vlm: VLM,
    rows: Sequence[LabelRow],
    parts: Sequence[str],
    y: np.ndarray,
    start: tuple[np.ndarray, np.ndarray],
    source: CropSource,
    out: Path,
    params: FinetuneParams,
    *,
    seed: int = 0,
) -> Finetuned:
    """Fine-tune ``vlm`` on the training crops, choose the epoch on validation, save and reload it.

    Args:
        vlm: The encoder (changed in place; the returned one is loaded from the saved weights).
        rows, parts, y: The usable labelled rows, their part and class index.
        start: The logistic head fitted on the frozen embeddings (``coef (C, D)``, ``intercept (C,)``),
            where ``W, b`` start.
        source: Where the crops are read.
        out: The head's path; the weights go to ``{out stem}.encoder.pt`` beside it.
        params: Epochs, learning rates, batch size.
        seed: Seed of the shuffling and of any dropout.

    Raises:
        ValueError: An encoder family that cannot be fine-tuned, or too few training crops.
    """
    import torch
    import torch.nn.functional as F

    from fairsets.core.atomic import atomic_path
    from fairsets.models import load_vlm

    model = _module(vlm)
    coef, intercept = start
    n_classes = coef.shape[0]
    wanted = [r for r, p in zip(rows, parts, strict=True) if p in ("train", "val")]
    crops = {row.item: c for row, c, _ in iter_crops(wanted, source) if c is not None}
    index = {r.item: i for i, r in enumerate(rows)}
    train = [r.item for r, p in zip(rows, parts, strict=True) if p == "train" and r.item in crops]
    val = [r.item for r, p in zip(rows, parts, strict=True) if p == "val" and r.item in crops]
    if len(train) < 2:
        raise ValueError(f"fine-tuning needs at least 2 training crops, got {len(train)}")

    linear = torch.nn.Linear(coef.shape[1], n_classes).to(vlm.device)
    with torch.no_grad():
        linear.weight.copy_(torch.as_tensor(coef, dtype=torch.float32))
        linear.bias.copy_(torch.as_tensor(intercept, dtype=torch.float32))
    optimiser = torch.optim.AdamW(
        [
            {"params": [p for p in model.parameters() if p.requires_grad], "lr": params.lr},
            {"params": linear.parameters(), "lr": params.head_lr},
        ],
        weight_decay=params.weight_decay,
    )

    def logits(items: Sequence[str]) -> Any:
        feats = vlm.image_encoder(_batches(vlm, [crops[i] for i in items]))
        return linear(F.normalize(feats.float(), dim=-1))

    def val_accuracy() -> float:
        if not val:
            return 0.0
        model.eval()
        right = 0
        with torch.no_grad():
            for i in range(0, len(val), params.batch_size):
                chunk = val[i : i + params.batch_size]
                pred = logits(chunk).argmax(dim=1).cpu().numpy()
                right += int(np.sum(pred == y[[index[v] for v in chunk]]))
        return right / len(val)

    def snapshot() -> tuple[dict[str, Any], dict[str, Any]]:
        return (
            {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()},
            {k: v.detach().to("cpu", copy=True) for k, v in linear.state_dict().items()},
        )

    rng = np.random.default_rng(seed)
    history = [{"epoch": 0, "train_loss": None, "val_accuracy": val_accuracy()}]
    best, best_epoch = snapshot(), 0
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for epoch in range(1, params.epochs + 1):
            model.train()
            order = [train[i] for i in rng.permutation(len(train))]
            losses = []
            for i in range(0, len(order), params.batch_size):
                chunk = order[i : i + params.batch_size]
                if len(chunk) < 2:  # batch norm cannot train on a single crop
                    continue
                target = torch.as_tensor(y[[index[c] for c in chunk]], device=vlm.device)
                loss = F.cross_entropy(logits(chunk), target)
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                losses.append(float(loss.detach()))
            acc = val_accuracy()
            history.append(
                {
                    "epoch": epoch,
                    "train_loss": float(np.mean(losses)) if losses else None,
                    "val_accuracy": acc,
                }
            )
            if not val or acc > history[best_epoch]["val_accuracy"]:
                best, best_epoch = snapshot(), epoch
    model.load_state_dict(best[0])
    linear.load_state_dict(best[1])
    model.eval()

    weights = out.with_suffix(".encoder.pt")
    with atomic_path(weights) as tmp:
        torch.save(best[0], tmp)
    tuned = load_vlm(f"{vlm.family}:{vlm.name}", str(weights), device=vlm.device)
    return Finetuned(
        encoder=tuned,
        coef=linear.weight.detach().cpu().double().numpy(),
        intercept=linear.bias.detach().cpu().double().numpy(),
        weights=weights,
        record={
            "epochs": params.epochs,
            "lr": params.lr,
            "head_lr": params.head_lr,
            "weight_decay": params.weight_decay,
            "batch_size": params.batch_size,
            "history": history,
            "best_epoch": best_epoch,
            "weights": weights.name,
            "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
            "base_encoder": vlm.provenance(),
        },
    )
