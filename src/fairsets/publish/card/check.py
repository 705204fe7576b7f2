"""Offline checks of a rendered card (:func:`check_card`): the Hub has no offline validator."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import yaml

from .hub_values import (
    ANNOTATIONS_CREATORS,
    HF_LICENSES,
    LANGUAGE_CREATORS,
    SIZE_CATEGORIES,
    SOURCE_DATASETS,
    TASK_CATEGORIES,
)


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
    for key, allowed in (
        ("annotations_creators", ANNOTATIONS_CREATORS),
        ("language_creators", LANGUAGE_CREATORS),
        ("source_datasets", SOURCE_DATASETS),
    ):
        values = data.get(key)
        for value in values if isinstance(values, list) else [] if values is None else [values]:
            # "extended|<dataset>" names the dataset a source_datasets entry extends
            if value not in allowed and not (key == "source_datasets" and str(value).startswith("extended|")):
                problems.append(f"{key} value {value!r} is not allowed")
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
