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
Hub's ``/api/validate-yaml`` endpoint, so the allowed lists below are embedded (copied from the
Hub documentation: repositories-licenses and the dataset-card metadata spec) and should be
refreshed if the Hub adds values.
"""

from __future__ import annotations

import glob
import html
import json
import os
import re
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from fairsets.core.atomic import atomic_write_text, sha256_file
from fairsets.core.datafiles import find_data_file
from fairsets.publish.attribution import license_info, safe_link_url

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

TEMPLATE_NAME = "face_dataset.md.j2"

#: Licence ids accepted by the Hub in card metadata (https://huggingface.co/docs/hub/repositories-licenses).
#: huggingface_hub does not ship this list; keep in sync by hand.
HF_LICENSES: frozenset[str] = frozenset(
    [
        "apache-2.0",
        "mit",
        "openrail",
        "bigscience-openrail-m",
        "creativeml-openrail-m",
        "bigscience-bloom-rail-1.0",
        "bigcode-openrail-m",
        "afl-3.0",
        "artistic-2.0",
        "bsl-1.0",
        "bsd",
        "bsd-2-clause",
        "bsd-3-clause",
        "bsd-3-clause-clear",
        "c-uda",
        "cc",
        "cc0-1.0",
        "cc-by-2.0",
        "cc-by-2.5",
        "cc-by-3.0",
        "cc-by-4.0",
        "cc-by-sa-3.0",
        "cc-by-sa-4.0",
        "cc-by-nc-2.0",
        "cc-by-nc-3.0",
        "cc-by-nc-4.0",
        "cc-by-nd-4.0",
        "cc-by-nc-nd-3.0",
        "cc-by-nc-nd-4.0",
        "cc-by-nc-sa-2.0",
        "cc-by-nc-sa-3.0",
        "cc-by-nc-sa-4.0",
        "cdla-sharing-1.0",
        "cdla-permissive-1.0",
        "cdla-permissive-2.0",
        "wtfpl",
        "ecl-2.0",
        "epl-1.0",
        "epl-2.0",
        "etalab-2.0",
        "eupl-1.1",
        "eupl-1.2",
        "agpl-3.0",
        "gfdl",
        "gpl",
        "gpl-2.0",
        "gpl-3.0",
        "lgpl",
        "lgpl-2.1",
        "lgpl-3.0",
        "isc",
        "h-research",
        "intel-research",
        "lppl-1.3c",
        "ms-pl",
        "apple-ascl",
        "apple-amlr",
        "mpl-2.0",
        "odc-by",
        "odbl",
        "openrail++",
        "osl-3.0",
        "postgresql",
        "ofl-1.1",
        "ncsa",
        "unlicense",
        "zlib",
        "pddl",
        "lgpl-lr",
        "deepfloyd-if-license",
        "fair-noncommercial-research-license",
        "llama2",
        "llama3",
        "llama3.1",
        "llama3.2",
        "llama3.3",
        "llama4",
        "gemma",
        "unknown",
        "other",
    ]
)

#: Allowed ``size_categories`` values (dataset-card metadata spec), smallest first.
SIZE_CATEGORIES: tuple[str, ...] = (
    "n<1K",
    "1K<n<10K",
    "10K<n<100K",
    "100K<n<1M",
    "1M<n<10M",
    "10M<n<100M",
    "100M<n<1B",
    "1B<n<10B",
    "10B<n<100B",
    "100B<n<1T",
    "n>1T",
)

#: The Hub task categories that fit image datasets (subset of the Hub's full list).
TASK_CATEGORIES: frozenset[str] = frozenset(
    [
        "image-classification",
        "zero-shot-image-classification",
        "image-feature-extraction",
        "image-segmentation",
        "object-detection",
        "image-to-text",
        "text-to-image",
        "image-to-image",
        "visual-question-answering",
        "image-text-to-text",
        "unconditional-image-generation",
        "zero-shot-object-detection",
        "depth-estimation",
        "mask-generation",
    ]
)

DEFAULT_TASKS = ("image-classification", "zero-shot-image-classification")
DEFAULT_TAGS = ("fairness", "faces", "webdataset")
MIXED_LICENSE_NAME = "mixed-cc-licenses"
VARIANT_DOCS = {
    "imbalanced": "every accepted image, split by identity (no person appears in both splits).",
    "balanced": "exactly the quota per cell: a seeded choice where a cell has more real images, and "
    "mild augmentations (flip, small rotation, hue jitter, random crop) of the cell's real images where "
    "it has fewer (`augmented_from` names the source image, `augmentation` the transform and its "
    "parameters). A cell with no real image is reported, never filled.",
    "augmented": "twice the quota per cell: `balanced` plus one controlled colour augmentation (hue and "
    "brightness) of each of its images.",
}


def size_category(n: int) -> str:
    """Return the Hub ``size_categories`` value for ``n`` examples."""
    bounds = [10**3, 10**4, 10**5, 10**6, 10**7, 10**8, 10**9, 10**10, 10**11, 10**12]
    for bound, cat in zip(bounds, SIZE_CATEGORIES, strict=False):
        if n < bound:
            return cat
    return SIZE_CATEGORIES[-1]


def hf_license(spdx_ids: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Map the SPDX ids of a build to the card's licence keys.

    One licence with a Hub id → ``{"license": id}``; anything else (several licences, or one
    the Hub does not list, e.g. CC-BY-SA-2.0 or public domain) → ``{"license": "other",
    "license_name": ..., "license_link": "ATTRIBUTION.md"}``.
    """
    ids = sorted(set(spdx_ids))
    if len(ids) == 1:
        info = license_info(ids[0])
        hf = (info or {}).get("hf") or ""
        if hf in HF_LICENSES:
            return {"license": hf}
        return {"license": "other", "license_name": ids[0].lower(), "license_link": "ATTRIBUTION.md"}
    if not ids:
        return {"license": "unknown"}
    return {"license": "other", "license_name": MIXED_LICENSE_NAME, "license_link": "ATTRIBUTION.md"}


def _variant_total(summary: Mapping[str, Any], variant: str) -> int:
    return sum(int(s.get("num_samples") or 0) for s in summary["variants"][variant].values())


def _default_variant(summary: Mapping[str, Any]) -> str:
    variants = summary["variants"]
    default = summary.get("default_variant") or "balanced"
    return default if default in variants else sorted(variants)[0]


def card_header(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Build the card's YAML header (see module docstring)."""
    variants = summary["variants"]
    default = _default_variant(summary)
    # one line: a title, and no value line of the header can then look like the closing "---"
    title = " ".join(_printable(summary.get("pretty_name") or summary["name"]).split())
    header: dict[str, Any] = {"pretty_name": title}
    header.update(hf_license(summary.get("license") or []))
    header["task_categories"] = list(summary.get("task_categories") or DEFAULT_TASKS)
    tags = list(DEFAULT_TAGS) + [t for t in summary.get("tags") or [] if t not in DEFAULT_TAGS]
    header["tags"] = tags
    n = max((_variant_total(summary, v) for v in variants), default=0)
    header["size_categories"] = [size_category(n)]
    configs = []
    for v in [default, *sorted(set(variants) - {default})]:
        cfg: dict[str, Any] = {
            "config_name": v,
            "data_files": [
                {"split": split, "path": f"shards/{v}/{split}-*.tar"} for split in _split_order(variants[v])
            ],
        }
        if v == default:
            cfg["default"] = True
        configs.append(cfg)
    header["configs"] = configs
    return header


_TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")  # where an HTML tag, comment or declaration could start


class _HeaderDumper(yaml.SafeDumper):
    """Writes a string that could hold an HTML tag double-quoted (see :func:`dump_header`)."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = '"' if _TAG_OPEN.search(value) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_HeaderDumper.add_representer(str, _represent_str)


def dump_header(header: Mapping[str, Any]) -> str:
    """The card's YAML header text: PyYAML quotes whatever needs it, and a ``<`` that could open an
    HTML tag (only ever inside a double-quoted string) is written ``\\u003c``, so the values
    round-trip exactly while the card's text holds no tag (``n<1K`` stays as it is)."""
    text = yaml.dump(
        dict(header),
        Dumper=_HeaderDumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=1000,
    )
    return _TAG_OPEN.sub(r"\\u003c", text)


def _split_order(splits: Mapping[str, Any]) -> list[str]:
    known = ["train", "validation", "test"]
    return [s for s in known if s in splits] + sorted(set(splits) - set(known))


# --------------------------------------------------------------------------- checks


def check_card(text: str, out_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Check a card offline; return the problems found (empty: OK). See module docstring."""
    problems: list[str] = []
    try:
        from huggingface_hub import DatasetCard, DatasetCardData
    except ImportError:  # the core install has no huggingface_hub: parse the header with PyYAML
        head = text.split("---", 2)
        if not text.startswith("---") or len(head) < 3:
            return ["the card has no YAML header"]
        try:
            data = yaml.safe_load(head[1]) or {}
        except yaml.YAMLError as e:
            return [f"the card's YAML header does not parse: {e}"]
    else:
        try:
            card = DatasetCard(text)
        except Exception as e:  # huggingface_hub raises ValueError on bad YAML, others on odd content
            return [f"DatasetCard cannot parse the card: {e}"]
        data = card.data.to_dict()
        try:
            again = DatasetCardData(**data).to_dict()
            if again != data:
                problems.append("DatasetCardData does not round-trip the header")
        except Exception as e:
            problems.append(f"DatasetCardData rejects the header: {e}")
    lic = data.get("license")
    for one in lic if isinstance(lic, list) else [lic]:
        if one not in HF_LICENSES:
            problems.append(f"license {one!r} is not a Hugging Face licence id")
    if lic == "other" or (isinstance(lic, list) and "other" in lic):
        for k in ("license_name", "license_link"):
            if not data.get(k):
                problems.append(f"license is 'other' but {k} is missing")
    if data.get("license_name") and not all(c.isalnum() or c in "-." for c in data["license_name"]):
        problems.append(f"license_name {data['license_name']!r} must be lowercase letters, digits, '-', '.'")
    for cat in data.get("size_categories") or []:
        if cat not in SIZE_CATEGORIES:
            problems.append(f"size_categories value {cat!r} is not allowed")
    if not data.get("size_categories"):
        problems.append("size_categories is missing")
    for task in data.get("task_categories") or []:
        if task not in TASK_CATEGORIES:
            problems.append(f"task_categories value {task!r} is not an image task category")
    configs = data.get("configs") or []
    if not configs:
        problems.append("configs is missing")
    names = [c.get("config_name") for c in configs if isinstance(c, dict)]
    if len(names) != len(set(names)) or None in names:
        problems.append(f"config names must be present and unique: {names}")
    defaults = [c.get("config_name") for c in configs if isinstance(c, dict) and c.get("default")]
    if len(configs) > 1 and len(defaults) != 1:
        problems.append(f"exactly one config must be default: {defaults}")
    for c in configs:
        files = c.get("data_files") if isinstance(c, dict) else None
        if not isinstance(files, list) or not files:
            problems.append(f"config {c!r}: data_files must be a non-empty list")
            continue
        for entry in files:
            if not isinstance(entry, dict) or not entry.get("split") or not entry.get("path"):
                problems.append(f"config {c.get('config_name')}: bad data_files entry {entry!r}")
            elif out_dir is not None and not glob.glob(str(Path(out_dir) / entry["path"])):
                problems.append(f"config {c.get('config_name')}: {entry['path']} matches no file")
    return problems


# --------------------------------------------------------------------------- body tables


class Md(str):
    """Markdown written by this module: emitted as is. Every other value is data and is escaped."""


#: Characters that Markdown (CommonMark/GFM) or a table would interpret inside a line of text.
_MD_PUNCT = re.compile(r"([\\`*_\[\]#|~$])")
_BLOCK_START = re.compile(r"^(\d+)([.)])(?=\s|$)")


def _printable(value: Any) -> str:
    """``str(value)`` without control or format characters (bidi overrides, zero-width spaces, NUL);
    whitespace is kept (callers collapse it)."""
    return "".join(c for c in str(value) if c.isspace() or unicodedata.category(c) not in ("Cc", "Cf"))


def md_text(value: Any) -> Md:
    """``value`` as one line of inert Markdown text: whitespace (newlines included) collapsed to single
    spaces, ``&``, ``<`` and ``>`` HTML-escaped, Markdown punctuation (backticks, ``|``, brackets,
    emphasis, ``#``...) backslash-escaped, and a leading list/quote/heading marker neutralised.

    Safe anywhere a line of text goes: a paragraph, a list item, a heading or a table cell.
    """
    text = html.escape(" ".join(_printable(value).split()), quote=False)
    text = _MD_PUNCT.sub(r"\\\1", text)
    text = _BLOCK_START.sub(r"\1\\\2", text)
    if text[:1] in ("-", "+", "="):  # a list marker or a setext underline ("&gt;" is no quote marker)
        text = "\\" + text
    return Md(text)


def _json_inline(value: Any) -> str:
    """JSON for a code span or block: same value, but ``<``, ``>``, ``&``, backticks and ``|`` written as
    ``\\uXXXX`` escapes so that no HTML tag, code fence or table column can be formed."""
    return _escape_json(json.dumps(value, sort_keys=True, ensure_ascii=False), "<>&`|")


def _escape_json(text: str, specials: str, python: bool = False) -> str:
    """Write ``specials`` and every control or format character (bidi overrides, zero-width
    spaces; not the newlines of an indented dump) of JSON/Python literal ``text`` as escapes.

    Such characters only ever occur inside string literals there, where an escape keeps the value.
    """

    def esc(c: str) -> str:
        n = ord(c)
        if n <= 0xFFFF:
            return f"\\u{n:04x}"
        if python:
            return f"\\U{n:08x}"
        n -= 0x10000
        return f"\\u{0xD800 + (n >> 10):04x}\\u{0xDC00 + (n & 0x3FF):04x}"

    return "".join(
        esc(c) if c in specials or (c != "\n" and unicodedata.category(c) in ("Cc", "Cf")) else c
        for c in text
    )


def md_code(value: Any) -> Md:
    """``value`` as an inline code span if it is a plain name (letters, digits, ``_.-``), else as text."""
    text = str(value)
    if re.fullmatch(r"[A-Za-z0-9_.\-]+", text):
        return Md(f"`{text}`")
    return md_text(text)


def _md_cell(value: Any) -> str:
    """A table cell: :class:`Md` as is (structure written here), anything else as escaped text."""
    if isinstance(value, Md):
        return " ".join(value.split())
    return md_text(value)


def _table(head: list[Any], rows: list[list[Any]], align: list[str] | None = None) -> Md:
    align = align or ["---"] * len(head)
    lines = ["| " + " | ".join(_md_cell(h) for h in head) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in rows]
    return Md("\n".join(lines))


def _params(params: Mapping[str, Any] | None) -> Md:
    if not params:
        return Md("")

    def name(k: Any) -> str:
        return str(k) if re.fullmatch(r"[A-Za-z0-9_]+", str(k)) else _json_inline(str(k))

    return Md(", ".join(f"`{name(k)}={_json_inline(params[k])}`" for k in sorted(params)))


def _cell_label(cell: Mapping[str, Any], groups: list[str]) -> list[str]:
    return [str(cell.get(g, "")) for g in groups]


def _json_block(value: Any) -> str:
    """Indented JSON for a fenced block, with ``<``, ``>``, ``&`` and backticks as ``\\uXXXX`` escapes."""
    return _escape_json(json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False), "<>&`")


def _fenced(text: str, lang: str) -> str:
    """``text`` in a code fence longer than any run of backticks inside it (so it cannot close it)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


def _py(value: Any) -> str:
    """A Python string literal for ``value``: JSON's escapes are Python's, and ``<``, ``>``, ``&`` and
    backticks are escaped too, so no tag or fence can appear in the card's text."""
    return _escape_json(json.dumps(str(value), ensure_ascii=False), "<>&`", python=True)


def _sql_name(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else '"' + name.replace('"', '""') + '"'


def _shard_urls(variant: str, split: str, shards: list[str]) -> str:
    """A Python expression for the shards of one split: brace notation when they are numbered
    ``00000`` upwards, else the list of their paths."""
    names = sorted(shards)
    numbered = [f"shards/{variant}/{split}-{i:05d}.tar" for i in range(len(names))]
    if names == numbered and len(names) > 1:
        return _py(f"shards/{variant}/{split}-{{00000..{len(names) - 1:05d}}}.tar")
    if len(names) == 1:
        return _py(names[0])
    return "[" + ", ".join(_py(n) for n in names) + "]"


def load_snippets(summary: Mapping[str, Any]) -> list[tuple[Md, Md]]:
    """The card's loading snippets, ``(introduction, python code)``, written from the files that
    exist: the splits and shards listed in ``summary["variants"]`` for the default config.

    Every snippet but the first runs in the dataset's folder; the first loads from the Hub and runs
    on a local copy too once ``repo`` is set to the folder's path (``tests/publish/
    test_card_snippets.py`` runs them all against the built example).
    """
    variants = summary["variants"]
    default = _default_variant(summary)
    splits = [sp for sp in _split_order(variants[default]) if variants[default][sp].get("shards")]
    first = splits[0] if splits else _split_order(variants[default])[0]
    repo = summary.get("repo_id") or f"YOUR-ORG/{summary['name']}"
    groups = [str(g) for g in summary.get("groups") or []] or ["license"]
    config = md_code(default)
    hub = "\n".join(
        [
            "from datasets import load_dataset",
            "",
            f"repo = {_py(repo)}  # or the path of a local copy of this folder",
            f"ds = load_dataset(repo, {_py(default)}, split={_py(first)})",
            'image, meta = ds[0]["jpg"], ds[0]["json"]',
            "print(ds, image.size, meta)",
        ]
    )
    files = ", ".join(f"{_py(sp)}: {_py(f'shards/{default}/{sp}-*.tar')}" for sp in splits)
    local = "\n".join(
        [
            "from datasets import load_dataset",
            "",
            f'ds = load_dataset("webdataset", data_files={{{files}}})',
            "print(ds)",
        ]
    )
    urls = _shard_urls(default, first, list(variants[default][first].get("shards") or []))
    webds = "\n".join(
        [
            "import webdataset as wds",
            "",
            f"urls = {urls}",
            'ds = wds.WebDataset(urls, shardshuffle=False).decode("pil").to_tuple("__key__", "jpg", "json")',
            "key, image, meta = next(iter(ds))",
            "print(key, image.size, meta)",
        ]
    )
    columns = ", ".join(_sql_name(g) for g in groups)
    sql = (
        f"SELECT {columns}, split, count(*) AS samples FROM 'metadata/{default}/*.parquet' "
        "GROUP BY ALL ORDER BY ALL"
    )
    duck = "\n".join(["import duckdb", "", f"duckdb.sql({_py(sql)}).show()"])
    intros = [
        f"With 🤗 Datasets, from the Hub (config {config}; for a local copy set `repo` to its folder):",
        f"From a local copy with 🤗 Datasets, run in its folder (config {config}, every split):",
        f"With WebDataset, in the dataset's folder (config {config}, split {md_code(first)}):",
        "The metadata tables are plain Parquet, e.g. with DuckDB, in the dataset's folder:",
    ]
    return [(Md(i), Md(c)) for i, c in zip(intros, [hub, local, webds, duck], strict=True)]


def _finalize(value: Any) -> Any:
    """Jinja ``finalize``: every ``{{ value }}`` is data, escaped by :func:`md_text`, unless it is
    :class:`Md` (Markdown written by this module)."""
    if isinstance(value, Md):
        return value
    return md_text("" if value is None else value)


def _context(summary: Mapping[str, Any]) -> dict[str, Any]:
    variants: dict[str, Any] = summary["variants"]
    default = _default_variant(summary)
    vnames = [default, *sorted(set(variants) - {default})]
    order = {"imbalanced": 0, "balanced": 1, "augmented": 2}
    table_variants = sorted(variants, key=lambda v: (order.get(v, 9), v))
    groups: list[str] = list(summary.get("groups") or [])
    cells = list(summary.get("cells") or [])
    if not groups and cells:
        groups = sorted({k for c in cells for k in c.get("cell", {})})
    cells.sort(key=lambda c: _cell_label(c.get("cell", {}), groups))

    variant_rows = []
    for v in vnames:
        for split in _split_order(variants[v]):
            info = variants[v][split]
            n_shards = len(info.get("shards") or [])
            variant_rows.append([md_code(v), split, info.get("num_samples", ""), n_shards])
    variants_table = _table(
        ["Config", "Split", "Published samples (incl. augmented copies)", "Shards"],
        variant_rows,
        ["---", "---", "---:", "---:"],
    )

    steps = summary.get("steps") or []
    steps_table = (
        _table(
            [Md("#"), "Step", "Parameters", "Rejected", "Failed"],
            [
                [
                    i + 1,
                    md_code(st["name"]),
                    _params(st.get("params")),
                    st.get("rejected", 0),
                    st.get("failed", 0),
                ]
                for i, st in enumerate(steps)
            ],
            ["---:", "---", "---", "---:", "---:"],
        )
        if steps
        else ""
    )

    aug_variants = {
        v for v in variants if any((c.get("variants", {}).get(v) or {}).get("augmented") for c in cells)
    }
    head = [*groups, "Available (real source images)", "Identities"]
    align = ["---"] * len(groups) + ["---:", "---:"]
    for v in table_variants:
        head += [f"{v} train (samples)", f"{v} test (samples)"]
        align += ["---:", "---:"]
        if v in aug_variants:
            head.append(f"{v} (of which augmented)")
            align.append("---:")
    cell_rows = []
    for c in cells:
        row: list[Any] = [
            *_cell_label(c.get("cell", {}), groups),
            c.get("available", ""),
            c.get("identities", ""),
        ]
        for v in table_variants:
            counts = c.get("variants", {}).get(v) or {}
            row += [counts.get("train", 0), counts.get("test", 0)]
            if v in aug_variants:
                row.append(counts.get("augmented", 0))
        cell_rows.append(row)
    cells_table = _table(head, cell_rows, align) if cells else ""

    empty_cells = [
        md_text(", ".join(f"{g}={c['cell'].get(g)}" for g in groups)) for c in cells if not c.get("available")
    ]
    cell_notes = [
        (md_text(", ".join(f"{g}={c['cell'].get(g)}" for g in groups)), md_text(note))
        for c in cells
        for note in c.get("notes") or []
    ]

    def counts_table(
        mapping: Mapping[str, int] | None,
        what: str,
        count: str = "Source images",
        link: bool = False,
        extra: tuple[str, Mapping[str, int]] | None = None,
    ) -> Md:
        if not mapping:
            return Md("")
        rows = []
        for k in sorted(mapping):
            label: Any = k
            if link:
                info = license_info(k)
                url = safe_link_url(info["url"]) if info else None  # never a javascript: link
                label = Md(f"[{md_text(info['name'])}]({url})") if url else (info["name"] if info else k)
            rows.append([label, mapping[k], *([extra[1].get(k, 0)] if extra else [])])
        head = [what, count, *([extra[0]] if extra else [])]
        return _table(head, rows, ["---"] + ["---:"] * (len(head) - 1))

    first_split = _split_order(variants[default])[0]
    return {
        "s": summary,
        "name": summary["name"],
        "pretty_name": summary.get("pretty_name") or summary["name"],
        "description": summary.get("description") or "",
        "groups": groups,
        "default_variant": default,
        "variant_names": vnames,
        "variant_docs": [(v, Md(VARIANT_DOCS.get(v, ""))) for v in table_variants],
        "variants_table": variants_table,
        "steps_table": steps_table,
        "cells_table": cells_table,
        "empty_cells": empty_cells,
        "cell_notes": cell_notes,
        "warnings": list(summary.get("warnings") or []),
        "sources_table": counts_table(summary.get("sources"), "Source"),
        "licenses_table": counts_table(
            summary.get("licenses"),
            "Licence",
            link=True,
            extra=("Published files (all configs, incl. augmented copies)", summary["license_files"])
            if summary.get("license_files")
            else None,
        ),
        "versions_table": counts_table(summary.get("versions"), "Package", "Version"),
        "recipe_json": Md(_json_block(summary["recipe"])) if summary.get("recipe") else "",
        "duplicates": summary.get("duplicates") or {},
        "first_split": first_split,
        "snippets": load_snippets(summary),
        "citation": Md(_fenced(str(summary["citation"]), "bibtex")) if summary.get("citation") else "",
        "notes": [summary["notes"]]
        if isinstance(summary.get("notes"), str) and summary["notes"]
        else list(summary.get("notes") or []),
        "biases": list(summary.get("biases") or []),
        "limitations": list(summary.get("limitations") or []),
    }


# --------------------------------------------------------------------------- rendering


def _template_path(template: str | os.PathLike[str] | None) -> Path:
    return Path(template) if template is not None else find_data_file("cards", TEMPLATE_NAME)


def render_card(
    summary: Mapping[str, Any],
    template: str | os.PathLike[str] | None = None,
    *,
    out_dir: str | os.PathLike[str] | None = None,
) -> str:
    """Render the dataset card for ``summary``; raise ``ValueError`` if :func:`check_card` fails.

    Args:
        summary: build summary (module docstring).
        template: Jinja2 template path (default ``cards/face_dataset.md.j2``).
        out_dir: if given, the ``configs`` globs must match shards under it.
    """
    import jinja2

    path = _template_path(template)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(path.parent)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        finalize=_finalize,
    )
    header = dump_header(card_header(summary))
    body = env.get_template(path.name).render(header=Md(header.rstrip("\n")), **_context(summary))
    text = body.rstrip("\n") + "\n"
    problems = check_card(text, out_dir)
    if problems:
        raise ValueError("dataset card problems:\n- " + "\n- ".join(problems))
    return text


def render_empty_card(summary: Mapping[str, Any]) -> str:
    """The card of a build that published nothing: why (the per-step drop table), and no configs.

    Uses ``name``, optional ``pretty_name``, ``description``, ``candidates``, ``steps`` and
    ``duplicates`` of the summary; there is nothing to load, so there are no loading snippets.
    """
    header: dict[str, Any] = {"pretty_name": summary.get("pretty_name") or summary["name"]}
    header.update(hf_license([]))
    header["task_categories"] = list(summary.get("task_categories") or DEFAULT_TASKS)
    header["tags"] = list(DEFAULT_TAGS)
    header["size_categories"] = [size_category(0)]
    steps = summary.get("steps") or []
    steps_table = _table(
        [Md("#"), "Step", "Parameters", "Rejected", "Failed"],
        [
            [i + 1, md_code(s["name"]), _params(s.get("params")), s.get("rejected", 0), s.get("failed", 0)]
            for i, s in enumerate(steps)
        ],
        ["---:", "---", "---", "---:", "---:"],
    )
    title, description = header["pretty_name"], summary.get("description") or ""
    dups = summary.get("duplicates") or {}
    head = dump_header(header)
    lines = [
        "---",
        head.rstrip(),
        "---",
        "",
        f"# {_md_cell(title)}",
        "",
        *([_md_cell(description), ""] if description else []),
        f"**Nothing was published.** None of the {int(summary.get('candidates') or 0)} candidates "
        "survived the build, so there are no shards, no metadata tables and no Croissant file. "
        "`rejects.parquet` lists every candidate with the step that dropped it and the reason.",
        "",
        "## Where the candidates went",
        "",
        steps_table if steps else "No per-sample steps ran.",
        "",
        f"Exact duplicates removed: {int(dups.get('exact') or 0)}; "
        f"near duplicates removed: {int(dups.get('near') or 0)}.",
    ]
    return "\n".join(lines) + "\n"


def write_card(
    path: str | os.PathLike[str], summary: Mapping[str, Any], template: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """Render and atomically write the card; returns ``{"path", "sha256", "bytes"}``."""
    target = Path(path)
    text = render_card(summary, template, out_dir=target.parent)
    atomic_write_text(target, text)
    return {"path": str(target), "sha256": sha256_file(target), "bytes": target.stat().st_size}
