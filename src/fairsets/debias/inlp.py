"""Iterative Nullspace Projection (INLP), multi-class (IndicFairFace §4.4, appendix §10.2-10.4).

INLP repeatedly trains a linear classifier to predict the protected attribute (e.g. one of 36 Indian
states) from the embeddings, and removes the directions it uses: the embeddings are projected onto
the nullspace of everything removed so far (eq. 4-7). It stops when a fresh classifier does no
better than chance on a held-out part, when a classifier brings no new direction, when the removed
subspace fills the whole space, or after ``max_iter`` rounds.

Differences from the published (two-class) script, all deliberate:

* **Multi-class.** Each round trains a multinomial :class:`~sklearn.linear_model.LogisticRegression`
  and removes the span of its weight rows. For more than two classes the rows are centred first
  (their mean subtracted): softmax is invariant to adding one vector to every row, so the decision
  depends only on the differences ``w_c - w_c'``, whose span has rank at most ``C - 1``.
* **One orthogonal projection.** The removed directions of all rounds are orthonormalised together
  (``Q``, rows of :attr:`InlpResult.directions`) and ``P = I - Q^T Q`` projects onto the
  intersection of their nullspaces, as in Ravfogel et al. (2020). Each round's classifier is
  trained on ``X P`` (eq. 6), so its weights already lie (numerically) in the range of ``P`` and the
  product of eq. 7 and ``P`` coincide; ``P`` stays exact when they do not.
* **Held-out stopping, then a refit on all rows.** Accuracy is measured on a stratified dev part
  split once (seeded), and "chance" is the share of the majority class in that part, not 0.5. That
  loop only chooses the number of rounds ``k``; the returned projection comes from ``k`` rounds
  refitted on all rows (``refit=True``, the default; see :func:`fit_inlp` for why).
* **Cosine geometry.** Classifiers are fitted on L2-normalised rows (CLIP compares embeddings by
  cosine similarity); ``P`` is linear and applies to raw vectors as well.

sklearn is imported lazily, so ``import fairsets.debias`` stays light.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["InlpResult", "fit_inlp"]

#: Singular values (of unit-norm candidate rows) below this are not new directions.
_SVD_TOL = 1e-10
#: lbfgs iterations per classifier.
_LR_MAX_ITER = 2000


@dataclass
class InlpResult:
    """What :func:`fit_inlp` found.

    Attributes:
        projection: ``(d, d)`` float64 ``P = I - Q Q^T``, ``Q`` an orthonormal basis (columns) of all
            removed directions. Debiased embeddings are ``X @ P`` (``P`` is symmetric). With
            ``refit=True`` it comes from the refit on all rows.
        directions: ``(r, d)`` float64 orthonormal rows spanning the removed subspace.
        accuracies: held-out accuracy of the classifier of each selection round whose directions
            were removed, measured before its projection (``len(accuracies) == iterations``).
        final_accuracy: held-out accuracy of a classifier trained after the last projection of the
            selection loop (the one that stopped it, when it stopped on accuracy).
        chance: majority-class share of the held-out labels.
        iterations: number of projection rounds (classifiers whose directions were removed).
    """

    projection: np.ndarray
    directions: np.ndarray
    accuracies: list[float] = field(default_factory=list)
    final_accuracy: float = float("nan")
    chance: float = float("nan")
    iterations: int = 0

    @property
    def rank(self) -> int:
        """Dimension of the removed subspace."""
        return int(self.directions.shape[0])


def check_inputs(X: Any, y: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate a labelled embedding matrix.

    Args:
        X: ``(n, d)`` real-valued embeddings.
        y: ``n`` labels (any hashable, sortable values: strings, ints, ...).

    Returns:
        ``(X as float64, integer codes (n,), classes (sorted unique labels))``.

    Raises:
        ValueError: if ``X`` is not 2-D, not real-valued or not finite, if the lengths differ, if
            there are fewer than two classes.
    """
    x = np.asarray(X)
    if x.ndim != 2:
        raise ValueError(f"X must be a 2-D (n, d) array of embeddings, got shape {x.shape}")
    if x.dtype.kind not in "fiub":
        raise ValueError(f"X must hold real numbers, got dtype {x.dtype}")
    if x.shape[1] == 0:
        raise ValueError("X has zero columns (d == 0)")
    x = x.astype(np.float64)
    if not np.isfinite(x).all():
        bad = int((~np.isfinite(x)).any(axis=1).sum())
        raise ValueError(f"X holds non-finite values (NaN or inf) in {bad} row(s)")
    labels = np.asarray(list(y) if not isinstance(y, np.ndarray) else y)
    if labels.ndim != 1:
        raise ValueError(f"y must be 1-D (one label per row), got shape {labels.shape}")
    if labels.shape[0] != x.shape[0]:
        raise ValueError(f"X has {x.shape[0]} rows but y has {labels.shape[0]} labels")
    try:
        classes, codes = np.unique(labels, return_inverse=True)
    except TypeError as e:
        raise ValueError(f"labels in y cannot be compared with each other: {e}") from e
    if classes.shape[0] < 2:
        raise ValueError(f"need at least 2 classes in y, got {classes.shape[0]}: {classes.tolist()}")
    return x, codes.astype(np.int64).reshape(-1), classes


def normalise_rows(x: np.ndarray) -> np.ndarray:
    """Return ``x`` with each row scaled to unit L2 norm (zero rows stay zero)."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


def _dev_split(codes: np.ndarray, dev_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices ``(train, dev)``: stratified when possible, else random, else everything for both."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(codes.shape[0])
    counts = np.bincount(codes)
    counts = counts[counts > 0]
    tr: np.ndarray | None = None
    dv: np.ndarray | None = None
    if counts.min() >= 2:
        try:
            tr, dv = train_test_split(idx, test_size=dev_fraction, random_state=seed, stratify=codes)
        except ValueError:  # dev or train part smaller than the number of classes
            tr = dv = None
    if tr is None:
        try:
            tr, dv = train_test_split(idx, test_size=dev_fraction, random_state=seed, stratify=None)
        except ValueError:
            tr = dv = None
    if tr is None or dv is None or len(dv) == 0 or np.unique(codes[tr]).shape[0] < 2:
        warnings.warn(
            f"INLP: {codes.shape[0]} samples are too few for a held-out part with dev_fraction="
            f"{dev_fraction}; classifiers are trained and evaluated on all samples",
            RuntimeWarning,
            stacklevel=3,
        )
        return idx, idx
    return np.sort(tr), np.sort(dv)


def _new_directions(basis: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Orthonormal rows spanning ``weights`` outside ``span(basis)`` (possibly zero rows)."""
    w = np.asarray(weights, dtype=np.float64)
    if w.shape[0] > 1:
        w = w - w.mean(axis=0, keepdims=True)
    norms = np.linalg.norm(w, axis=1)
    w = w[norms > 0] / norms[norms > 0, None]
    if w.shape[0] == 0:
        return np.zeros((0, basis.shape[1]))
    if basis.shape[0]:
        for _ in range(2):  # re-orthogonalise once more for numerical safety
            w = w - (w @ basis.T) @ basis
    _, s, vt = np.linalg.svd(w, full_matrices=False)
    return vt[s > _SVD_TOL]


def fit_inlp(
    X: np.ndarray,
    y: Sequence[Any],
    *,
    max_iter: int = 50,
    tol: float = 0.02,
    dev_fraction: float = 0.2,
    seed: int = 0,
    C: float = 1.0,
    progress: bool = False,
    refit: bool = True,
) -> InlpResult:
    """Fit INLP: the projection removing every linear direction that predicts ``y``.

    Two stages (the second unless ``refit=False``):

    1. **Selection** (the paper's loop, eq. 6-7): each round trains a classifier on the projected
       train part, measures its accuracy on the held-out dev part and stops once it is at most
       ``chance + tol`` (or no new direction, or rank ``d``, or ``max_iter`` rounds); otherwise its
       weight rows join the removed set. This fixes the number of rounds ``k``.
    2. **Refit**: the same ``k`` rounds again on *all* rows (train and dev part), and the directions
       of these classifiers make the returned projection, like refitting a model on all data once
       early stopping has chosen its size. Why: a round cleans the very rows its classifier was
       trained on best, so after stage 1 the train part is (in-sample) clean but the dev rows keep
       the part of the signal that the train-part estimate missed (its estimation error, of order
       ``sqrt(d / n)``); a probe trained on the whole debiased fit set then still learns the
       attribute from them. Refitting on all rows leaves no row of the fit set uncleaned.

    Args:
        X: ``(n, d)`` embeddings (fitted on their L2-normalised rows).
        y: ``n`` labels of the protected attribute, two classes or more.
        max_iter: most projection rounds.
        tol: stop once held-out accuracy is at most ``chance + tol``.
        dev_fraction: share of the samples held out (stratified, split once with ``seed``) to
            measure accuracy. With a class of one sample the split is not stratified; with too few
            samples for any split the classifiers are evaluated on their training data (a
            ``RuntimeWarning`` says so, and there is nothing to refit).
        seed: seeds the split and the classifiers (deterministic for the same inputs).
        C: inverse L2 regularisation strength of the logistic regressions.
        progress: show a progress bar (rich, on stderr).
        refit: run stage 2 (default). False returns the stage-1 projection, fitted on the train
            part only, as in the published script.

    Returns:
        An :class:`InlpResult`: ``projection``/``directions`` of the returned projection;
        ``accuracies``, ``final_accuracy``, ``chance`` and ``iterations`` from stage 1 (held-out).

    Raises:
        ValueError: on invalid inputs (see :func:`check_inputs`) or parameters.
    """
    x, codes, _classes = check_inputs(X, y)
    if max_iter < 0:
        raise ValueError(f"max_iter must be >= 0, got {max_iter}")
    if not 0.0 < dev_fraction < 1.0:
        raise ValueError(f"dev_fraction must be in (0, 1), got {dev_fraction}")
    if not (np.isfinite(tol) and tol >= 0):
        raise ValueError(f"tol must be a finite number >= 0, got {tol}")
    if not (np.isfinite(C) and C > 0):
        raise ValueError(f"C must be a positive number, got {C}")

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    xn = normalise_rows(x)
    d = x.shape[1]
    tr, dv = _dev_split(codes, dev_fraction, seed)
    x_tr, y_tr, x_dv, y_dv = xn[tr], codes[tr], xn[dv], codes[dv]
    chance = float(np.bincount(y_dv).max() / y_dv.shape[0])

    def train(xs: np.ndarray, ys: np.ndarray, proj: np.ndarray) -> Any:
        clf = LogisticRegression(C=C, solver="lbfgs", max_iter=_LR_MAX_ITER, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf.fit(xs @ proj, ys)
        return clf

    def held_out(proj: np.ndarray) -> tuple[float, np.ndarray]:
        clf = train(x_tr, y_tr, proj)
        acc = float(np.mean(clf.predict(x_dv @ proj) == y_dv))
        return acc, np.asarray(clf.coef_, dtype=np.float64)

    bar: Any = None
    if progress:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(
            TextColumn("{task.description}", style="bold", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
        )
        bar.start()
    try:
        # Stage 1: selection on the train part, held-out accuracy on the dev part.
        task = bar.add_task(f"INLP (chance {chance:.3f})", total=max_iter) if bar is not None else None
        basis = np.zeros((0, d))
        proj = np.eye(d)
        accuracies: list[float] = []
        final: float | None = None
        for _ in range(max_iter):
            acc, coef = held_out(proj)
            new = np.zeros((0, d)) if acc <= chance + tol else _new_directions(basis, coef)
            if new.shape[0] == 0:
                final = acc
                break
            accuracies.append(acc)
            basis = np.vstack([basis, new])[:d]
            proj = np.eye(d) - basis.T @ basis
            if bar is not None:
                desc = f"INLP acc {acc:.3f} (chance {chance:.3f}) rank {len(basis)}"
                bar.update(task, advance=1, description=desc)
            if basis.shape[0] >= d:
                break
        if final is None:
            final, _ = held_out(proj)
        rounds = len(accuracies)

        # Stage 2: the same number of rounds on all rows.
        if refit and rounds and len(tr) < codes.shape[0]:
            task = bar.add_task("INLP refit on all rows", total=rounds) if bar is not None else None
            basis = np.zeros((0, d))
            proj = np.eye(d)
            for _ in range(rounds):
                new = _new_directions(basis, np.asarray(train(xn, codes, proj).coef_, dtype=np.float64))
                if new.shape[0] == 0:
                    break
                basis = np.vstack([basis, new])[:d]
                proj = np.eye(d) - basis.T @ basis
                if bar is not None:
                    bar.update(task, advance=1)
                if basis.shape[0] >= d:
                    break
    finally:
        if bar is not None:
            bar.stop()
    return InlpResult(
        projection=proj,
        directions=basis,
        accuracies=accuracies,
        final_accuracy=float(final),
        chance=chance,
        iterations=rounds,
    )
