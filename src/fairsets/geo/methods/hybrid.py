"""``hybrid``: a cheap method first, the LLM only where the cheap method is unsure (the paper's
resource-constrained variant, "NER Tagger + Mixtral", made cheaper by a confidence).

``first`` is ``offline`` (the default), ``ner`` (the paper) or ``string``; ``first_options``
holds its options and ``llm`` the LLM method's (base URL, model, …; see
:mod:`fairsets.geo.methods.llm`). Which captions go to the LLM:

* a first method with a **confidence** (``offline``): those whose confidence is below
  ``llm_below`` (0.8 by default) — the unsure country answers *and* the unsure "no country"
  answers. Confident answers are kept, including a confident "no country" (a caption with no
  place-like word at all), so the LLM's cost scales with the share offline is unsure of, not with
  the share that names no country;
* a first method **without** one (``ner``, ``string``): the captions it leaves without a country
  (the paper's rule).

``llm_below=0`` sends nothing (offline alone); ``llm_below=1`` sends every caption offline is
not certain of. ``min_confidence`` is passed to the first method (its own threshold between a
country and "no country"). The LLM's answer replaces the first one; it has no confidence
(``confidence=None``, evidence ``"llm"``). A caption the LLM fails on keeps the first method's
answer, with the LLM's error recorded. :meth:`HybridMethod.provenance` reports ``sent_to_llm``,
the captions seen and ``share_sent_to_llm``; the CLI prints the share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .base import GEO_METHODS, GeoMethod, Prediction, get_method, takes_option

__all__ = ["HybridMethod"]

#: Evidence of a caption the LLM decided.
LLM_EVIDENCE = "llm"


@GEO_METHODS.register("hybrid")
class HybridMethod(GeoMethod):
    """``first`` then ``llm`` on the captions ``first`` is unsure of (or left as "no country")."""

    name = "hybrid"

    def __init__(
        self,
        *,
        first: str = "offline",
        first_options: dict[str, Any] | None = None,
        llm: dict[str, Any] | None = None,
        llm_below: float = 0.8,
        min_confidence: float | None = None,
        **options: Any,
    ) -> None:
        if first in ("hybrid", "llm"):
            raise ValueError(
                f"hybrid: first must be a method without an LLM (offline, ner, string), not {first!r}"
            )
        first_options = dict(first_options or {})
        if min_confidence is not None:  # the first method's operating threshold
            if not takes_option(first, "min_confidence"):
                raise ValueError(
                    f"hybrid: min_confidence needs a first method with a confidence, not {first!r}"
                )
            first_options["min_confidence"] = min_confidence
        if isinstance(llm_below, bool) or not isinstance(llm_below, int | float):
            raise ValueError(f"hybrid: llm_below must be a number between 0 and 1, not {llm_below!r}")
        if math.isnan(llm_below) or not 0.0 <= llm_below <= 1.0:
            raise ValueError(f"hybrid: llm_below must be between 0 and 1, not {llm_below!r}")
        super().__init__(
            first=first,
            first_options=first_options,
            llm=dict(llm or {}),
            llm_below=float(llm_below),
            **options,
        )
        self.llm_below = float(llm_below)
        self.first = get_method(first, **first_options)
        try:
            self.llm = get_method("llm", **(llm or {}))
        except BaseException:
            self.first.close()
            raise
        self.sent_to_llm = 0
        self.captions_seen = 0

    def _send(self, p: Prediction) -> bool:
        if p.confidence is not None:
            return p.confidence < self.llm_below
        return p.country is None and p.error is None  # no confidence: the paper's rule

    def predict_detailed(self, captions: Sequence[str]) -> list[Prediction]:
        out = list(self.first.predict_detailed(captions))
        todo = [i for i, p in enumerate(out) if self._send(p)]
        self.captions_seen += len(captions)
        if todo:
            answers, errors = self.llm.predict_with_errors([captions[i] for i in todo])
            self.sent_to_llm += len(todo)
            for i, a, e in zip(todo, answers, errors, strict=True):
                if e is None:
                    out[i] = Prediction(a, None, LLM_EVIDENCE, a, None, None)
                else:  # the first method's answer stands; the failure is recorded
                    out[i] = replace(out[i], error=f"llm: {e}")
        return out

    def predict(self, captions: Sequence[str]) -> list[str | None]:
        return [p.country for p in self.predict_detailed(captions)]

    def predict_with_errors(self, captions: Sequence[str]) -> tuple[list[str | None], list[str | None]]:
        preds = self.predict_detailed(captions)
        return [p.country for p in preds], [p.error for p in preds]

    def spec(self) -> dict[str, Any]:
        llm = {k: v for k, v in self.llm.spec().items() if k != "method"}
        return {
            "method": self.name,
            "first": self.options["first"],
            "first_options": self.options["first_options"],
            "llm": llm,
            "llm_below": self.llm_below,
        }

    def share_sent(self) -> float:
        """The share of the captions seen so far that went to the LLM (0 before any)."""
        return self.sent_to_llm / self.captions_seen if self.captions_seen else 0.0

    def provenance(self) -> dict[str, Any]:
        return {
            "method": self.name,
            "first": self.first.provenance(),
            "llm": self.llm.provenance(),
            "llm_below": self.llm_below,
            "captions": self.captions_seen,
            "sent_to_llm": self.sent_to_llm,
            "share_sent_to_llm": self.share_sent(),
        }

    def close(self) -> None:
        try:
            self.first.close()
        finally:
            self.llm.close()
