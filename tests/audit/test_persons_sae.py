"""The TopK sparse autoencoder of the persons theme audit: it recovers planted sparse structure,
its metrics match numpy computations, and training is seeded and resumable bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from fairsets.audit.persons.sae import CHECKPOINT_NAME, SparseActivations, train_sae

D = 24
N_DIRS = 8


def planted(n: int = 1200, seed: int = 0) -> np.ndarray:
    """Rows built from 8 unit directions, two of them (positive weights) per row."""
    rng = np.random.default_rng(seed)
    dirs = rng.normal(size=(N_DIRS, D))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    codes = np.zeros((n, N_DIRS))
    for i in range(n):
        j = rng.choice(N_DIRS, 2, replace=False)
        codes[i, j] = rng.uniform(0.5, 2.0, 2)
    return (codes @ dirs + 0.3).astype(np.float32)


def test_fvu_falls_with_training_and_is_small_on_planted_data() -> None:
    x = planted()
    runs = {s: train_sae(x, latents=16, k=2, steps=s, lr=1e-2, batch=128, seed=1) for s in (0, 20, 400)}
    fvus = [runs[s].metrics["fvu"] for s in (0, 20, 400)]
    assert fvus[0] > fvus[1] > fvus[2]
    assert fvus[0] > 0.5 and fvus[2] < 0.05
    r = runs[400]
    assert r.metrics["l0"] <= 2.0 and r.metrics["l0"] > 1.9
    assert r.metrics["n_train"] + r.metrics["n_heldout"] == len(x) and r.metrics["n_heldout"] == 120
    # decoder directions are unit-norm
    np.testing.assert_allclose(np.linalg.norm(r.w_dec, axis=1), 1.0, atol=1e-5)
    # fvu and l0 recomputed in numpy from the weights with a plain dense TopK
    pre = (x - r.b_dec) @ r.w_enc + r.b_enc
    keep = np.argsort(-pre, axis=1)[:, :2]
    dense = np.zeros_like(pre)
    np.put_along_axis(dense, keep, np.maximum(np.take_along_axis(pre, keep, axis=1), 0), axis=1)
    np.testing.assert_allclose(r.encode(x).toarray(), dense, atol=1e-5)
    h = r.heldout
    assert len(h) == 120 and len(np.unique(h)) == 120
    x_hat = dense[h] @ r.w_dec + r.b_dec
    fvu = ((x[h] - x_hat) ** 2).sum() / ((x[h] - x[h].mean(axis=0)) ** 2).sum()
    assert r.metrics["fvu"] == pytest.approx(fvu, rel=1e-4)
    assert r.metrics["l0"] == pytest.approx((dense > 0).sum(axis=1).mean())


def test_dead_latents_are_latents_never_active() -> None:
    x = planted(400)
    r = train_sae(x, latents=64, k=1, steps=60, lr=1e-2, batch=64, seed=3)
    dense = r.encode(x).toarray()
    never = int(((dense > 0).sum(axis=0) == 0).sum())
    assert r.metrics["dead_latents"] == never
    assert never > 0  # 64 latents, one active per row of 8-direction data: many never fire
    # dead latents planted by hand: a bias of -1e6 keeps a latent off on every row
    r.b_enc[:5] = -1e6
    acts = r.encode(x)
    assert not np.isin(acts.indices[acts.values > 0], np.arange(5)).any()


def test_seeded_runs_are_identical_and_seeds_differ() -> None:
    x = planted(500)
    a = train_sae(x, latents=12, k=2, steps=50, lr=5e-3, batch=32, seed=7)
    b = train_sae(x, latents=12, k=2, steps=50, lr=5e-3, batch=32, seed=7)
    c = train_sae(x, latents=12, k=2, steps=50, lr=5e-3, batch=32, seed=8)
    for name in ("w_enc", "b_enc", "w_dec", "b_dec"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.w_dec, c.w_dec)
    assert a.metrics == b.metrics


class Killed(Exception):
    pass


def test_killed_run_resumes_to_the_same_weights(tmp_path: Path) -> None:
    x = planted(600)
    kw = dict(latents=12, k=2, steps=90, lr=5e-3, batch=32, seed=5, checkpoint_every=20)
    straight = train_sae(x, **kw)

    def kill_at_57(step: int, loss: float) -> None:
        if step == 57:
            raise Killed

    with pytest.raises(Killed):
        train_sae(x, checkpoint_dir=tmp_path, on_step=kill_at_57, **kw)
    ckpt = tmp_path / CHECKPOINT_NAME
    assert ckpt.exists()
    assert [p.name for p in tmp_path.iterdir()] == [CHECKPOINT_NAME]  # no temp file left behind
    seen: list[int] = []
    resumed = train_sae(x, checkpoint_dir=tmp_path, on_step=lambda s, _: seen.append(s), **kw)
    assert seen[0] == 41 and seen[-1] == 90  # continued after the step-40 checkpoint
    for name in ("w_enc", "b_enc", "w_dec", "b_dec"):
        np.testing.assert_array_equal(getattr(resumed, name), getattr(straight, name))
    assert resumed.metrics == straight.metrics
    # a finished checkpoint resumes with no steps; resume=False starts over
    again: list[int] = []
    train_sae(x, checkpoint_dir=tmp_path, on_step=lambda s, _: again.append(s), **kw)
    assert again == []
    fresh: list[int] = []
    train_sae(x, checkpoint_dir=tmp_path, resume=False, on_step=lambda s, _: fresh.append(s), **kw)
    assert fresh[0] == 1


def test_checkpoint_of_other_data_or_settings_is_refused(tmp_path: Path) -> None:
    x = planted(300)
    train_sae(x, latents=8, k=2, steps=5, seed=0, checkpoint_dir=tmp_path, checkpoint_every=5)
    with pytest.raises(ValueError, match="other data or settings"):
        train_sae(x, latents=8, k=3, steps=10, seed=0, checkpoint_dir=tmp_path)
    with pytest.raises(ValueError, match="other data or settings"):
        train_sae(x + 1, latents=8, k=2, steps=10, seed=0, checkpoint_dir=tmp_path)


@pytest.mark.parametrize(
    ("data", "kw", "match"),
    [
        (np.zeros((0, 4), np.float32), {}, "non-empty"),
        (np.full((5, 4), np.nan, np.float32), {}, "NaN"),
        (np.ones((5, 4), np.float32), {"k": 9}, "k ≤ latents"),
        (np.ones((5, 4), np.float32), {"holdout": 1.0}, "holdout"),
    ],
)
def test_bad_input_is_one_clear_error(data: np.ndarray, kw: dict, match: str) -> None:
    args = {"latents": 8, "k": 2, "steps": 1, **kw}
    with pytest.raises(ValueError, match=match):
        train_sae(data, **args)


def test_encode_checks_dimensions_and_decodes() -> None:
    x = planted(200)
    r = train_sae(x, latents=8, k=2, steps=30, lr=1e-2, batch=64, seed=0)
    with pytest.raises(ValueError, match="trained on 24"):
        r.encode(np.ones((3, 5), np.float32))
    acts = r.encode(x[:10])
    assert isinstance(acts, SparseActivations) and acts.shape == (10, 8)
    np.testing.assert_allclose(r.decode(acts), acts.toarray() @ r.w_dec + r.b_dec, atol=1e-5)
