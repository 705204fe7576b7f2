"""The sentiment scorers of the persons audit (:mod:`.sentiment`): VADER and a Hugging Face
negative/neutral/positive text classifier, behind one small protocol.

* :class:`VaderScorer` — VADER's compound score in [−1, 1]; ``NEG`` when compound ≤ −0.05, ``POS``
  when ≥ 0.05, else ``NEU`` (the thresholds VADER's authors recommend). Pure Python; ``workers``
  > 1 scores a batch in that many processes, with the same scores.
* :class:`TransformerScorer` — P(positive) − P(negative) of the classifier and its most probable
  class (e.g. a pysentimiento model).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["LABELS", "VADER_THRESHOLD", "SentimentScorer", "TransformerScorer", "VaderScorer"]

#: The labels a scorer gives a text.
LABELS = ("NEG", "NEU", "POS")
#: VADER's recommended cut-off: compound ≤ −0.05 is negative, ≥ 0.05 positive.
VADER_THRESHOLD = 0.05
#: Label names of common sentiment classifiers, lower-cased, mapped to ours.
_LABEL_NAMES = {
    "neg": "NEG",
    "negative": "NEG",
    "neu": "NEU",
    "neutral": "NEU",
    "pos": "POS",
    "positive": "POS",
}


@runtime_checkable
class SentimentScorer(Protocol):
    """What :func:`sentiment` needs of a scorer.

    ``name`` is written into the result (``"vader"`` or the model's id), ``kind`` says what the
    value is (``"vader"``: compound score; ``"transformer"``: P(positive) − P(negative)).
    ``score(texts)`` returns one ``(value, label)`` per text, in order, the value a float in
    [−1, 1] and the label one of ``NEG``, ``NEU``, ``POS``.
    """

    name: str
    kind: str

    def score(self, texts: Sequence[str]) -> list[tuple[float, str]]: ...


#: The analyzer of a VADER worker process (set by :func:`_vader_worker_init`).
_WORKER_ANALYZER: Any = None


def _vader_worker_init() -> None:
    global _WORKER_ANALYZER
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    _WORKER_ANALYZER = SentimentIntensityAnalyzer()


def _vader_compounds(texts: list[str]) -> list[float]:
    """Compound scores in a worker process."""
    return [float(_WORKER_ANALYZER.polarity_scores(t)["compound"]) for t in texts]


def _vader_label(value: float) -> str:
    return "NEG" if value <= -VADER_THRESHOLD else "POS" if value >= VADER_THRESHOLD else "NEU"


class VaderScorer:
    """VADER's compound score; ``NEG`` at ≤ −0.05, ``POS`` at ≥ 0.05, else ``NEU``.

    VADER is pure Python (some 7–14 thousand short captions a second on one core, fewer for long ones);
    ``workers`` > 1 scores each batch in that many worker processes (started on first use, with
    ``spawn``; :meth:`close` or the end of a ``with`` block stops them). The scores do not depend
    on ``workers``.

    Args:
        workers: processes scoring in parallel (1: in this process).

    Raises:
        MissingDependency: ``vaderSentiment`` is not installed (``pip install 'fairsets[persons-audit]'``).
        ValueError: ``workers`` is not a positive integer.
    """

    name = "vader"
    kind = "vader"

    def __init__(self, *, workers: int = 1) -> None:
        from fairsets.core.step import check_requires

        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise ValueError(f"workers must be a positive integer; got {workers!r}")
        check_requires("the VADER sentiment scorer", (("vaderSentiment", "persons-audit"),))
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

        self.workers = workers
        self._analyzer = SentimentIntensityAnalyzer()
        self._pool: Any = None

    def score(self, texts: Sequence[str]) -> list[tuple[float, str]]:
        texts = list(texts)
        if self.workers > 1 and len(texts) >= 4 * self.workers:
            values = self._parallel(texts)
        else:
            values = [float(self._analyzer.polarity_scores(t)["compound"]) for t in texts]
        return [(v, _vader_label(v)) for v in values]

    def _parallel(self, texts: list[str]) -> list[float]:
        if self._pool is None:
            import multiprocessing
            import weakref
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context("spawn"), initializer=_vader_worker_init
            )
            weakref.finalize(self, self._pool.shutdown, wait=False, cancel_futures=True)
        size = math.ceil(len(texts) / (4 * self.workers))
        chunks = [texts[i : i + size] for i in range(0, len(texts), size)]
        return [v for part in self._pool.map(_vader_compounds, chunks) for v in part]

    def close(self) -> None:
        """Stop the worker processes (a later :meth:`score` starts new ones)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> VaderScorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _label_map(id2label: dict[Any, str]) -> dict[str, str]:
    """The model's label names → ``NEG``/``NEU``/``POS`` (case-insensitive), or a clear error."""
    names = [str(v) for _, v in sorted(id2label.items(), key=lambda kv: int(kv[0]))]
    mapping = {n: _LABEL_NAMES[n.strip().lower()] for n in names if n.strip().lower() in _LABEL_NAMES}
    if sorted(mapping.values()) != sorted(LABELS) or len(names) != len(LABELS):
        raise ValueError(
            f"the sentiment model's labels {names} are not negative/neutral/positive; use a model whose "
            "labels are NEG/NEU/POS or negative/neutral/positive (e.g. a pysentimiento model)"
        )
    return mapping


class TransformerScorer:
    """A Hugging Face negative/neutral/positive text classifier (e.g. a pysentimiento model).

    The value of a text is P(positive) − P(negative) and its label the most probable class (texts
    longer than the model's limit are truncated). Labels are read from the model's ``id2label``,
    case-insensitively: ``NEG``/``NEU``/``POS`` or ``negative``/``neutral``/``positive``.

    Args:
        model: a local model folder or a hub id (loaded offline when the hub cannot be reached).
        device: torch device (``"cpu"``, ``"cuda"``, ``"cuda:1"``).
        batch_size: texts per forward pass.

    Raises:
        MissingDependency: transformers or torch is not installed.
        ModelUnavailable: the model cannot be loaded here (the message says how to provide it).
        ValueError: the model's labels are not negative/neutral/positive (the message lists them).
    """

    kind = "transformer"

    def __init__(self, model: str, *, device: str = "cpu", batch_size: int = 64) -> None:
        from fairsets.core.step import check_requires
        from fairsets.models import ModelUnavailable, ensure_torchvision
        from fairsets.models.hub import hub_access

        if not isinstance(model, str) or not model.strip():
            raise ValueError("the sentiment model must be a local folder or a hub id")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer; got {batch_size!r}")
        check_requires("the transformer sentiment scorer", (("torch", "vlm"), ("transformers", "vlm")))
        source = model.strip()
        local = Path(source).expanduser()
        #: A hub id as given; a local folder by its name only (results never hold a local path).
        self.name = local.name if local.is_dir() else source
        self.batch_size = batch_size
        ensure_torchvision()
        from transformers import pipeline

        with hub_access() as offline:
            try:
                self._pipe = pipeline(
                    "text-classification",
                    model=str(local) if local.is_dir() else source,
                    top_k=None,
                    device=device,
                )
            except Exception as e:  # any loader failure is "model unavailable"
                why = f"{offline}, so only local or cached models load; " if offline else ""
                raise ModelUnavailable(
                    f"cannot load sentiment model {source!r} ({why}{type(e).__name__}: {e}); pass a "
                    "local model folder or a hub id this machine can download"
                ) from e
        self._labels = _label_map(dict(self._pipe.model.config.id2label))

    def score(self, texts: Sequence[str]) -> list[tuple[float, str]]:
        texts = list(texts)
        if not texts:
            return []
        results = self._pipe(texts, batch_size=self.batch_size, truncation=True)
        out = []
        for scores in results:
            probs = {self._labels[s["label"]]: float(s["score"]) for s in scores}
            label = max(LABELS, key=lambda k: (probs[k], -LABELS.index(k)))
            out.append((probs["POS"] - probs["NEG"], label))
        return out
