"""The caption → country method contract and its registry.

A method maps a batch of captions to ISO 3166-1 alpha-3 codes, or ``None`` for "no country"::

    method = get_method("offline")
    method.predict(["Happy boys at Copacabana Beach", "Kitchen and dining space"])
    # ['BRA', None]

Adding a method: a :class:`GeoMethod` subclass in its own module, decorated with
``@GEO_METHODS.register("name")``, one import line in ``fairsets/geo/methods/__init__.py``, and
its test. Constructors take keyword options only (JSON-friendly values), so a method can be
rebuilt from ``{"method": name, **options}`` inside pipeline tasks on any executor.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fairsets.core.registry import Registry

__all__ = [
    "GEO_METHODS",
    "GeoMethod",
    "Prediction",
    "get_method",
    "method_from_spec",
    "method_options",
    "takes_option",
]

GEO_METHODS: Registry[type[GeoMethod]] = Registry("geo method")


@dataclass(frozen=True, slots=True)
class Prediction:
    """One caption's answer with what decided it.

    ``country``: the answer at the method's operating point (ISO alpha-3, ``None`` = no country).
    ``confidence``: the probability that the answer is right — for a country, that the caption
    places the image there; for ``None``, that it names no country — or ``None`` where the
    method has no calibrated confidence (``string``, ``ner``, ``llm``).
    ``evidence``: the words that decided, ``"; "``-separated ("Paris TX 75460: postcode").
    ``candidate`` / ``score``: the best country *before* the operating threshold and its
    probability (equal to ``country`` / ``confidence`` when it was kept); precision–recall
    curves sweep a threshold over ``score``.
    ``error``: why the method failed on this caption (a remote model), else ``None``.
    """

    country: str | None
    confidence: float | None = None
    evidence: str = ""
    candidate: str | None = None
    score: float | None = None
    error: str | None = None


class GeoMethod(ABC):
    """Maps captions to countries. Subclasses set ``name`` and implement :meth:`predict`."""

    name: str = "method"

    def __init__(self, **options: Any) -> None:
        self.options = dict(options)

    @abstractmethod
    def predict(self, captions: Sequence[str]) -> list[str | None]:
        """One ISO alpha-3 code (or ``None``) per caption, in order."""

    def predict_with_errors(self, captions: Sequence[str]) -> tuple[list[str | None], list[str | None]]:
        """Predictions plus one error reason (or ``None``) per caption.

        Methods that can fail per caption (a remote model) override this; for the others a
        caption either names a country or not, and there is nothing to report.
        """
        return self.predict(captions), [None] * len(captions)

    def predict_detailed(self, captions: Sequence[str]) -> list[Prediction]:
        """One :class:`Prediction` per caption. Methods with a confidence override this."""
        preds, errors = self.predict_with_errors(captions)
        return [Prediction(p, None, "", p, None, e) for p, e in zip(preds, errors, strict=True)]

    def spec(self) -> dict[str, Any]:
        """``{"method": name, **options}``: enough to rebuild this method in another process."""
        return {"method": self.name, **self.options}

    def provenance(self) -> dict[str, Any]:
        """What made the predictions (method, options, data and package versions); no secrets."""
        return {"method": self.name, "options": dict(self.options)}

    def close(self) -> None:  # noqa: B027 - optional hook, most methods hold nothing to release
        """Release clients, pools and models."""

    def __enter__(self) -> GeoMethod:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def get_method(name: str, **options: Any) -> GeoMethod:
    """Build the registered method ``name`` with keyword ``options``."""
    cls = GEO_METHODS.get(name)
    return cls(**options)


def method_from_spec(spec: dict[str, Any]) -> GeoMethod:
    """Rebuild a method from :meth:`GeoMethod.spec`."""
    spec = dict(spec)
    return get_method(spec.pop("method"), **spec)


def method_options(cls: type) -> tuple[dict[str, inspect.Parameter], bool]:
    """A method class's keyword options and whether it also takes free ``**options``."""
    params = dict(inspect.signature(cls.__init__).parameters)
    params.pop("self", None)
    free = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    named = {
        k: p
        for k, p in params.items()
        if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    }
    return named, free


def takes_option(name: str, option: str) -> bool:
    """Whether the registered method ``name`` names ``option`` in its constructor, without building it."""
    return option in method_options(GEO_METHODS.get(name))[0]
