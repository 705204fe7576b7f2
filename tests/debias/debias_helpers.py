"""Helpers for the debias tests: synthetic embeddings with a planted group subspace, probes, metrics."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

D = 64
GROUPS = 6
PER_GROUP = 150
#: Group offsets: +-s along each of three planted directions (an octahedron), one group per vertex.
_VERTICES = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], dtype=float)


@dataclass
class Planted:
    """A stratified 50/50 split of synthetic, L2-normalised embeddings."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    target: np.ndarray  # unit-norm "text" embedding
    concept: np.ndarray  # the shared concept direction c
    subspace: np.ndarray  # (3, d) orthonormal planted group directions


def make_planted(
    seed: int = 0,
    *,
    groups: int = GROUPS,
    per_group: int = PER_GROUP,
    shared: float = 4.0,
    spread: float = 4.0,
    tilt: float = np.pi / 2,
    kappa: float = 0.35,
) -> Planted:
    """Rows ``normalise(shared * c + spread * B[vertex_g] + N(0, I))``.

    ``c`` is a shared concept direction; the planted group directions are ``B = (b1', b2, b3)`` with
    ``b1' = cos(tilt) c + sin(tilt) b1`` (``tilt = pi/2``: orthogonal to ``c``). The target is
    ``t = cos(kappa) c + sin(kappa) (b1 + b2) / sqrt(2)`` plus a little noise, so groups on the
    ``+b1``/``+b2`` side are more similar to it than those on the ``-b1``/``-b2`` side.
    """
    rng = np.random.default_rng(seed)
    c, b1, b2, b3 = np.linalg.qr(rng.standard_normal((D, 4)))[0].T
    B = np.stack([np.cos(tilt) * c + np.sin(tilt) * b1, b2, b3])
    means = shared * c + spread * _VERTICES[:groups] @ B
    y = np.repeat(np.arange(groups), per_group)
    X = means[y] + rng.standard_normal((y.shape[0], D))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    t = np.cos(kappa) * c + np.sin(kappa) * (b1 + b2) / np.sqrt(2) + 0.02 * rng.standard_normal(D)
    t /= np.linalg.norm(t)
    # Stratified 50/50 split, fixed seed.
    split = np.random.default_rng(seed + 1000)
    train = np.zeros(y.shape[0], dtype=bool)
    for g in range(groups):
        idx = np.flatnonzero(y == g)
        train[split.choice(idx, size=idx.shape[0] // 2, replace=False)] = True
    labels = np.array([f"state-{g:02d}" for g in y])  # string labels, as in real use
    return Planted(X[train], labels[train], X[~train], labels[~train], t, c, B)


def probe_accuracy(X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray, y_test: np.ndarray) -> float:
    """Accuracy on the test rows of a fresh logistic-regression probe trained on the train rows."""
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(max_iter=3000).fit(X_train, y_train)
    return float(clf.score(X_test, y_test))


def group_similarity_std(X: np.ndarray, y: np.ndarray, t: np.ndarray) -> float:
    """Std across groups of the mean cosine similarity to ``t`` (the paper's fairness metric)."""
    cos = (X @ t) / np.linalg.norm(X, axis=1) / np.linalg.norm(t)
    return float(np.std([cos[y == g].mean() for g in np.unique(y)]))


def mean_cos(X: np.ndarray, t: np.ndarray) -> float:
    return float(np.mean((X @ t) / np.linalg.norm(X, axis=1) / np.linalg.norm(t)))


def reference_apply(A: np.ndarray, b: np.ndarray, alpha: float, target: np.ndarray | None, beta: float, X):
    """The transform written out with plain numpy, as in the module docstring (float64)."""
    x = np.asarray(X, dtype=np.float64)
    p = x @ A.T + b
    n = np.linalg.norm(x, axis=1, keepdims=True)
    u = x / n
    q = p / np.linalg.norm(p, axis=1, keepdims=True)
    th = np.arccos(np.clip((u * q).sum(1, keepdims=True), -1, 1))
    v = (np.sin((1 - alpha) * th) * u + np.sin(alpha * th) * q) / np.sin(th) * n
    if target is not None:
        v = v + beta * n * target
    return v
