"""The card's YAML header: built as a dict from the summary (:func:`card_header`) and dumped with
PyYAML so that it is always valid YAML and holds no HTML tag (:func:`dump_header`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from .hub_values import (
    DEFAULT_TAGS,
    DEFAULT_TASKS,
    hf_license,
    size_category,
)
from .markdown import (
    _printable,
)


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
    # the images and their group values come from the sources (found), nothing is new data
    header["source_datasets"] = ["original"]
    header["annotations_creators"] = ["found"]
    header["language_creators"] = ["found"]
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
