"""Hugging Face dataset card (``README.md``) rendered from a build summary with Jinja2.

The template is ``cards/face_dataset.md.j2``; it is looked up in the repository checkout
(``<repo>/cards/``) and then as package data (``fairsets/_cards/``), see
:func:`fairsets.publish.attribution.find_data_file`. The YAML header is built here (not in the
template) with PyYAML so that it is always valid YAML, then checked offline by
:func:`check_card`; the Markdown body comes from the template.

The summary (produced by the build) is a dict::

    {
      "name": "fairface-states",              # dataset id (slug), used in Croissant and snippets
      "pretty_name": "FairFace States",
      "description": "One paragraph.",
      "repo_id": "org/fairface-states",       # optional: Hub repo id for the load snippet
      "license": ["CC-BY-SA-4.0", "CC0-1.0"], # SPDX ids present among published images
      "groups": ["state", "gender"],          # group attributes that define a cell
      "quota": 50, "seed": 0,
      "variants": {variant: {split: {"num_samples": int, "shards": [relpath, ...],
                                     "metadata": relpath}}},
      "default_variant": "balanced",
      "steps": [{"name": "detect", "params": {...}, "rejected": int, "failed": int}],
      "candidates": int, "accepted": int, "duplicates": {"exact": int, "near": int},
      "cells": [{"cell": {attr: value}, "available": int, "identities": int,
                 "variants": {variant: {"train": int, "test": int, "real": int, "augmented": int}},
                 "notes": [str, ...]}],
      "warnings": [str, ...],
      "sources": {source_name: count}, "licenses": {spdx: count},   # counts of source images
      "license_files": {spdx: count},   # optional: published files incl. augmented copies
      "versions": {package: version}, "recipe": {...},
      # optional: "task_categories", "tags", "contact", "citation", "notes" (str or list, shown
      # under the description), "biases", "limitations" (lists of extra bullet points)
    }

Everything but ``name``, ``license`` and ``variants`` is optional (missing sections say so).

API:
    * ``card_header(summary) -> dict`` — the YAML header as a dict (ordered keys).
    * ``render_card(summary, template=None, *, out_dir=None) -> str`` — full card text;
      raises ``ValueError`` listing the problems found by :func:`check_card`.
    * ``write_card(path, summary, template=None) -> dict`` — atomic write (``out_dir`` is the
      parent of ``path``, so ``configs`` globs are checked against the shards on disk).
    * ``check_card(text, out_dir=None) -> list[str]`` — offline checks: parses with
      ``huggingface_hub.DatasetCard``, round-trips ``DatasetCardData``, checks ``license``
      against :data:`HF_LICENSES`, ``size_categories`` and ``task_categories`` against the Hub's
      allowed values, the ``configs`` structure (one ``default``), and with ``out_dir`` that
      every ``data_files`` glob matches at least one file.
    * ``size_category(n) -> str``, ``hf_license(spdx_ids) -> dict``.
    * ``load_snippets(summary) -> [(intro, code)]`` — the "How to load" snippets, written from the
      splits and shards in ``summary["variants"]`` (never a split that was not written).
    * ``md_text(value) -> Md``, ``md_code(value) -> Md``, ``dump_header(header) -> str``.

Escaping: everything that came from data (group values, titles, notes, warnings, source and
package names, parameters) is data. The template's ``{{ value }}`` is escaped by
:func:`md_text` (one line, ``&<>`` as entities, Markdown punctuation backslash-escaped) unless
the value is :class:`Md`, Markdown written here (tables, code spans, snippets); JSON in code is
written with ``\\u003c``-style escapes; the YAML header with PyYAML, a ``<`` that could open a
tag as ``\\u003c``. So no HTML, link, heading or table column can come from data.

``huggingface_hub`` has no offline validator: ``DatasetCard.validate()`` posts the card to the
Hub's ``/api/validate-yaml`` endpoint, so the allowed lists are embedded in :mod:`.hub_values`
(copied from the Hub documentation: repositories-licenses and the dataset-card metadata spec)
and should be refreshed if the Hub adds values.

Modules, one idea each: :mod:`.hub_values` (what the Hub allows), :mod:`.markdown` (escaping and
Markdown building blocks), :mod:`.header` (the YAML header), :mod:`.check` (:func:`check_card`),
:mod:`.snippets` (the loading snippets), :mod:`.body` (the template context) and :mod:`.render`
(:func:`render_card`, :func:`write_card`).
"""

from __future__ import annotations

from .body import VARIANT_DOCS as VARIANT_DOCS
from .check import check_card
from .header import card_header
from .header import dump_header as dump_header
from .hub_values import DEFAULT_TAGS as DEFAULT_TAGS
from .hub_values import DEFAULT_TASKS as DEFAULT_TASKS
from .hub_values import HF_LICENSES, SIZE_CATEGORIES, TASK_CATEGORIES, hf_license, size_category
from .hub_values import MIXED_LICENSE_NAME as MIXED_LICENSE_NAME
from .markdown import Md as Md
from .markdown import md_code as md_code
from .markdown import md_text as md_text
from .render import TEMPLATE_NAME as TEMPLATE_NAME
from .render import render_card, write_card
from .render import render_empty_card as render_empty_card
from .snippets import load_snippets as load_snippets

__all__ = [
    "HF_LICENSES",
    "SIZE_CATEGORIES",
    "TASK_CATEGORIES",
    "card_header",
    "check_card",
    "hf_license",
    "render_card",
    "size_category",
    "write_card",
]
