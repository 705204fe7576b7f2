"""``hybrid``: a cheap method first, the LLM only where it finds nothing (the paper's
resource-constrained variant, "NER Tagger + Mixtral").

``first`` is ``ner`` (the paper) or ``offline``; ``llm`` holds the LLM method's options
(base URL, model, …; see :mod:`fairsets.geo.methods.llm`). Only captions the first method
leaves without a country are sent to the LLM, so the LLM's cost scales with the
underspecified share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import GEO_METHODS, GeoMethod, get_method

__all__ = ["HybridMethod"]


@GEO_METHODS.register("hybrid")
class HybridMethod(GeoMethod):
    """``first`` then ``llm`` on the captions ``first`` left as "no country"."""

    name = "hybrid"

    def __init__(
        self,
        *,
        first: str = "ner",
        first_options: dict[str, Any] | None = None,
        llm: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        if first in ("hybrid", "llm"):
            raise ValueError(
                f"hybrid: first must be a method without an LLM (ner, offline, string), not {first!r}"
            )
        super().__init__(first=first, first_options=dict(first_options or {}), llm=dict(llm or {}), **options)
        self.first = get_method(first, **(first_options or {}))
        self.llm = get_method("llm", **(llm or {}))
        self.sent_to_llm = 0

    def predict(self, captions: Sequence[str]) -> list[str | None]:
        return self.predict_with_errors(captions)[0]

    def predict_with_errors(self, captions: Sequence[str]) -> tuple[list[str | None], list[str | None]]:
        preds, errors = self.first.predict_with_errors(captions)
        preds, errors = list(preds), list(errors)
        todo = [i for i, p in enumerate(preds) if p is None and errors[i] is None]
        if todo:
            more, more_err = self.llm.predict_with_errors([captions[i] for i in todo])
            for i, p, e in zip(todo, more, more_err, strict=True):
                preds[i], errors[i] = p, e
            self.sent_to_llm += len(todo)
        return preds, errors

    def spec(self) -> dict[str, Any]:
        llm = {k: v for k, v in self.llm.spec().items() if k != "method"}
        return {
            "method": self.name,
            "first": self.options["first"],
            "first_options": self.options["first_options"],
            "llm": llm,
        }

    def provenance(self) -> dict[str, Any]:
        return {
            "method": self.name,
            "first": self.first.provenance(),
            "llm": self.llm.provenance(),
            "sent_to_llm": self.sent_to_llm,
        }

    def close(self) -> None:
        self.first.close()
        self.llm.close()
