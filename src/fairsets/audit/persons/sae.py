"""A TopK sparse autoencoder over caption embeddings: the theme dictionary of the person audit.

The LAION person-centric study finds recurring themes in ~200 million person captions by training a
sparse autoencoder (SAE) on their sentence embeddings and reading each latent as a theme;
:mod:`.themes` then measures how strongly each perceived identity goes with each theme (PMI).

The model (TopK SAE, as in Gao et al. 2024, "Scaling and evaluating sparse autoencoders")::

    z      = (x - b_dec) @ W_enc + b_enc               # (latents,) pre-activations
    a      = ReLU(TopK_k(z))                           # keep the k largest, zero the rest
    x_hat  = a @ W_dec + b_dec                         # W_dec rows are unit-norm directions

trained with Adam on the mean squared reconstruction error. ``b_dec`` starts at the mean of the
training rows, ``W_dec`` at random unit rows and ``W_enc`` at ``W_dec.T``; after every step the
decoder rows are renormalised to unit length (so a latent's activation is its contribution's size).
At most ``k`` latents are active per row (fewer when some of the top k are ≤ 0), so L0 ≤ k.

Metrics (:attr:`SAEResult.metrics`), all with the counts behind them:

* ``fvu``: fraction of variance unexplained on held-out rows (a seeded ``holdout`` share, never
  trained on): ``Σ‖x - x_hat‖² / Σ‖x - mean(x)‖²`` — 0 is perfect, 1 is no better than the mean;
* ``l0``: mean number of active (> 0) latents per row over all rows;
* ``dead_latents``: latents active on no row of the data (train and held-out).

Determinism and resumption. Training runs in a fixed number of ``steps``; the batch of step ``s``
is drawn by ``numpy.random.default_rng([seed, s])`` from the training rows, so it does not depend
on whether the run was interrupted. With ``checkpoint_dir``, the full state (weights, Adam moments,
step) is written atomically to ``sae-checkpoint.pt`` every ``checkpoint_every`` steps and at the
end; a later call with ``resume=True`` continues from it. Torch runs on one CPU thread while
training, so a killed-and-resumed run ends with the same weights, bit for bit, as one that was
never interrupted. A checkpoint records a fingerprint of the data and the settings; resuming with
different ones is refused with a one-line error rather than silently mixing two runs.

Torch is imported only inside the functions that train; :meth:`SAEResult.encode` is numpy only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fairsets.models.threads import one_torch_thread

__all__ = ["CHECKPOINT_NAME", "SAEResult", "SparseActivations", "train_sae"]

CHECKPOINT_NAME = "sae-checkpoint.pt"


@dataclass
class SparseActivations:
    """TopK activations in fixed-width form: row ``i`` has ``values[i, j]`` on latent
    ``indices[i, j]``; entries with value 0 are inactive.

    Attributes:
        indices: ``(n, k)`` int64 latent ids.
        values: ``(n, k)`` float32 activations (≥ 0).
        n_latents: dictionary size.
    """

    indices: np.ndarray
    values: np.ndarray
    n_latents: int

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.indices.shape[0]), int(self.n_latents))

    def active_pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(rows, latents, values)`` of the active (> 0) entries."""
        mask = self.values > 0
        rows = np.broadcast_to(np.arange(self.indices.shape[0])[:, None], self.indices.shape)[mask]
        return rows.astype(np.int64), self.indices[mask].astype(np.int64), self.values[mask]

    def toarray(self) -> np.ndarray:
        """Dense ``(n, n_latents)`` float32 matrix."""
        out = np.zeros(self.shape, dtype=np.float32)
        rows, cols, vals = self.active_pairs()
        out[rows, cols] = vals
        return out


@dataclass
class SAEResult:
    """A trained TopK SAE: weights (numpy float32), settings and metrics.

    Attributes:
        w_enc: ``(d, latents)``.  b_enc: ``(latents,)``.  w_dec: ``(latents, d)``, unit rows.
        b_dec: ``(d,)``.
        k: active latents per row.
        steps: optimisation steps taken.
        metrics: ``fvu``, ``l0``, ``dead_latents`` and their counts (JSON-ready).
        settings: the training settings (JSON-ready).
        heldout: row positions (ascending) held out of training, on which ``fvu`` is measured.
    """

    w_enc: np.ndarray
    b_enc: np.ndarray
    w_dec: np.ndarray
    b_dec: np.ndarray
    k: int
    steps: int
    metrics: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    heldout: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def latents(self) -> int:
        return int(self.w_dec.shape[0])

    def encode(self, embeddings: np.ndarray, *, chunk: int = 65536) -> SparseActivations:
        """TopK activations of ``embeddings`` (``(n, d)``), computed in chunks of ``chunk`` rows."""
        x = _check_matrix(embeddings, self.w_dec.shape[1])
        n = x.shape[0]
        idx = np.zeros((n, self.k), dtype=np.int64)
        val = np.zeros((n, self.k), dtype=np.float32)
        for start in range(0, n, chunk):
            pre = (x[start : start + chunk] - self.b_dec) @ self.w_enc + self.b_enc
            top = np.argpartition(-pre, self.k - 1, axis=1)[:, : self.k]
            v = np.take_along_axis(pre, top, axis=1)
            order = np.argsort(-v, axis=1, kind="stable")
            idx[start : start + chunk] = np.take_along_axis(top, order, axis=1)
            val[start : start + chunk] = np.maximum(np.take_along_axis(v, order, axis=1), 0.0)
        return SparseActivations(idx, val, self.latents)

    def decode(self, acts: SparseActivations) -> np.ndarray:
        """Reconstructions ``a @ W_dec + b_dec`` of ``acts``."""
        out = np.einsum("nk,nkd->nd", acts.values, self.w_dec[acts.indices]) + self.b_dec
        return out.astype(np.float32)


def _check_matrix(embeddings: Any, d: int | None = None) -> np.ndarray:
    x = np.asarray(embeddings, dtype=np.float32)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"embeddings must be a non-empty (n, d) matrix, got shape {x.shape}")
    if d is not None and x.shape[1] != d:
        raise ValueError(f"embeddings have {x.shape[1]} dimensions; this SAE was trained on {d}")
    if not np.isfinite(x).all():
        raise ValueError("embeddings contain NaN or infinite values; drop or re-embed those rows")
    return x


def _fvu(x: np.ndarray, x_hat: np.ndarray) -> float | None:
    total = float(((x - x.mean(axis=0)) ** 2).sum())
    if total <= 0:
        return None
    return float(((x - x_hat) ** 2).sum()) / total


def _fingerprint(x: np.ndarray, settings: dict[str, Any]) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(settings, sort_keys=True).encode())
    h.update(str(x.shape).encode())
    h.update(np.ascontiguousarray(x).tobytes())
    return h.hexdigest()


def train_sae(
    embeddings: np.ndarray,
    *,
    latents: int,
    k: int,
    steps: int,
    lr: float = 1e-3,
    batch: int = 256,
    seed: int = 0,
    holdout: float = 0.1,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int = 100,
    resume: bool = True,
    on_step: Callable[[int, float], None] | None = None,
) -> SAEResult:
    """Train a TopK SAE on ``embeddings`` and measure it (see the module docstring).

    Args:
        embeddings: ``(n, d)`` float32 rows (n ≥ 2).
        latents: dictionary size (the study uses a dictionary several times wider than ``d``).
        k: active latents per row (``1 ≤ k ≤ latents``).
        steps: optimisation steps (each on ``batch`` rows drawn with replacement).
        lr: Adam learning rate.
        batch: rows per step.
        seed: seeds the held-out split, the initialisation and every batch.
        holdout: share of rows held out for ``fvu`` (at least one row; 0 < holdout < 1).
        checkpoint_dir: where ``sae-checkpoint.pt`` is written every ``checkpoint_every`` steps.
        checkpoint_every: steps between checkpoints.
        resume: continue from the checkpoint in ``checkpoint_dir`` when there is one.
        on_step: called after each step with ``(step, batch loss)`` (e.g. a progress bar).

    Raises:
        ValueError: bad shapes or settings, or a checkpoint made from other data or settings.
    """
    import torch

    from fairsets.core.atomic import atomic_path

    x = _check_matrix(embeddings)
    n, d = x.shape
    if n < 2:
        raise ValueError("train_sae needs at least 2 rows (one to train on, one to hold out)")
    if latents < 1 or not 1 <= k <= latents:
        raise ValueError(f"need latents ≥ 1 and 1 ≤ k ≤ latents, got latents={latents}, k={k}")
    if steps < 0 or batch < 1 or checkpoint_every < 1 or not lr > 0:
        raise ValueError("need steps ≥ 0, batch ≥ 1, checkpoint_every ≥ 1 and lr > 0")
    if not 0 < holdout < 1:
        raise ValueError(f"holdout must be between 0 and 1, got {holdout}")

    settings = {"latents": latents, "k": k, "lr": lr, "batch": batch, "seed": seed, "holdout": holdout}
    perm = np.random.default_rng([seed, 0x5AE]).permutation(n)
    n_held = min(n - 1, max(1, round(n * holdout)))
    held, train = np.sort(perm[:n_held]), np.sort(perm[n_held:])
    x_train = x[train]

    ckpt = Path(checkpoint_dir) / CHECKPOINT_NAME if checkpoint_dir is not None else None
    finger = _fingerprint(x, settings) if ckpt is not None else ""

    with one_torch_thread():
        gen = torch.Generator().manual_seed(seed)
        w_dec = torch.randn(latents, d, generator=gen, dtype=torch.float32)
        w_dec /= w_dec.norm(dim=1, keepdim=True).clamp_min(1e-12)
        params = {
            "w_enc": torch.nn.Parameter(w_dec.T.clone().contiguous()),
            "b_enc": torch.nn.Parameter(torch.zeros(latents)),
            "w_dec": torch.nn.Parameter(w_dec),
            "b_dec": torch.nn.Parameter(torch.from_numpy(x_train.mean(axis=0).astype(np.float32))),
        }
        opt = torch.optim.Adam(list(params.values()), lr=lr)
        start = 0
        if ckpt is not None and resume and ckpt.exists():
            state = torch.load(ckpt, map_location="cpu", weights_only=False)
            if state.get("fingerprint") != finger:
                raise ValueError(
                    f"{ckpt} was written for other data or settings; remove it or pass resume=False"
                )
            with torch.no_grad():
                for name, p in params.items():
                    p.copy_(state["params"][name])
            opt.load_state_dict(state["optimizer"])
            start = int(state["step"])
        start = min(start, steps)

        def save(step: int) -> None:
            assert ckpt is not None
            state = {
                "fingerprint": finger,
                "step": step,
                "params": {name: p.detach().clone() for name, p in params.items()},
                "optimizer": opt.state_dict(),
            }
            with atomic_path(ckpt) as tmp:
                torch.save(state, tmp)

        xt = torch.from_numpy(x_train)
        for step in range(start, steps):
            rows = np.random.default_rng([seed, step + 1]).integers(0, len(train), size=batch)
            xb = xt[torch.from_numpy(rows)]
            pre = (xb - params["b_dec"]) @ params["w_enc"] + params["b_enc"]
            top = torch.topk(pre, k, dim=1)
            acts = torch.zeros_like(pre).scatter(1, top.indices, torch.relu(top.values))
            x_hat = acts @ params["w_dec"] + params["b_dec"]
            loss = ((x_hat - xb) ** 2).sum(dim=1).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            with torch.no_grad():
                w = params["w_dec"]
                w /= w.norm(dim=1, keepdim=True).clamp_min(1e-12)
            if on_step is not None:
                on_step(step + 1, float(loss.detach()))
            if ckpt is not None and ((step + 1) % checkpoint_every == 0 or step + 1 == steps):
                save(step + 1)
        if ckpt is not None and start == steps and not ckpt.exists():
            save(steps)
        weights = {name: p.detach().numpy().astype(np.float32).copy() for name, p in params.items()}

    result = SAEResult(
        w_enc=weights["w_enc"],
        b_enc=weights["b_enc"],
        w_dec=weights["w_dec"],
        b_dec=weights["b_dec"],
        k=k,
        steps=steps,
        settings={**settings, "steps": steps, "d": d},
        heldout=held.astype(np.int64),
    )
    acts = result.encode(x)
    active_rows = (acts.values > 0).sum(axis=1)
    _, cols, _ = acts.active_pairs()
    used = np.bincount(cols, minlength=latents) > 0
    x_held = x[held]
    result.metrics = {
        "fvu": _fvu(x_held, result.decode(SparseActivations(acts.indices[held], acts.values[held], latents))),
        "l0": float(active_rows.mean()),
        "dead_latents": int((~used).sum()),
        "latents": latents,
        "k": k,
        "n_rows": int(n),
        "n_train": len(train),
        "n_heldout": int(n_held),
        "definitions": {
            "fvu": "held-out sum of squared reconstruction errors / sum of squared deviations from "
            "the held-out mean",
            "l0": "mean number of latents with activation > 0 per row, over all rows",
            "dead_latents": "latents with activation > 0 on no row of the data",
        },
    }
    return result
