"""The reference set of the VLM audit: the declared groups, never only the groups that are present.

IndicFairFace measures the top-k distribution against the uniform distribution over all 36 states
and union territories. A state with no image must still count (zero retrievals), or an audit of a
dataset that lacks it reports a perfectly uniform retrieval. So the groups of ``fairsets audit
vlm`` are the *declared* ones:

1. ``--groups a,b,c`` on the command line (``groups=`` in the API), when given;
2. otherwise the recipe's cells for the attribute, as the build recorded them in
   ``manifest.json`` (``recipe.cells[attribute]`` and the values of ``cells[].cell[attribute]``,
   empty cells included: the build plans and reports every expected cell);
3. otherwise (no manifest, or the attribute is not a group of the recipe) the values present,
   with a warning saying that a missing group cannot be seen and how to declare the groups.

A value present in the data but not declared is an error (one line, naming the values): the
uniform reference would not contain it, and silently adding or dropping it changes every number.
Groups are reported in sorted order.

:func:`audit_warnings` says what can make the numbers mislead (an empty declared group, a top-k
that holds a whole group or every image, an undeclared reference set) and :func:`definitions`
states the rule of every number of ``audit.json`` (its ``definitions`` block).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairsets.audit.dataset import DatasetError

__all__ = [
    "Reference",
    "audit_warnings",
    "check_labels",
    "declared_groups",
    "definitions",
    "describe",
    "jsonable_sizes",
    "parse_groups",
    "present_values",
    "resolve_reference",
]

FROM_OPTION = "--groups"
FROM_RECIPE = "the recipe's cells in manifest.json"
FROM_PRESENT = "the values present (nothing declared)"


@dataclass(frozen=True)
class Reference:
    """The groups an audit measures against, and where they were declared."""

    groups: tuple[str, ...]
    source: str

    @property
    def declared(self) -> bool:
        return self.source != FROM_PRESENT


def parse_groups(text: str) -> list[str]:
    """``"a, b,c"`` → ``["a", "b", "c"]``; empty or repeated names raise :class:`ValueError`."""
    names = [part.strip() for part in str(text).split(",")]
    if not any(names):
        raise ValueError("--groups is empty; give the expected groups as a,b,c")
    if "" in names:
        raise ValueError(f"--groups {text!r} has an empty name; give the expected groups as a,b,c")
    dup = sorted({g for g in names if names.count(g) > 1})
    if dup:
        raise ValueError(f"--groups names {', '.join(dup)} twice; give each group once")
    return names


def declared_groups(root: str | Path, attribute: str) -> list[str] | None:
    """The groups the build of the dataset at ``root`` declared for ``attribute`` (sorted), or
    ``None`` when there is no readable ``manifest.json`` or the attribute is not one of its cells."""
    path = Path(root) / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(manifest, Mapping):
        return None
    found: set[str] = set()
    recipe = manifest.get("recipe")
    cells = recipe.get("cells") if isinstance(recipe, Mapping) else None
    if isinstance(cells, Mapping) and isinstance(cells.get(attribute), list):
        found.update(str(v) for v in cells[attribute])
    for cell in manifest.get("cells") or []:
        values = cell.get("cell") if isinstance(cell, Mapping) else None
        if isinstance(values, Mapping) and values.get(attribute) is not None:
            found.add(str(values[attribute]))
    return sorted(found) or None


def present_values(root: str | Path, variant: str, splits: Sequence[str], attribute: str) -> set[str]:
    """The non-empty values of ``attribute`` in the metadata of ``variant``/``splits`` (as strings,
    as the audit reads them)."""
    import pyarrow.parquet as pq

    values: set[str] = set()
    for split in splits:
        path = Path(root) / "metadata" / variant / f"{split}.parquet"
        column = pq.read_table(path, columns=[attribute]).column(0)
        values.update(str(v) for v in column.drop_null().unique().to_pylist())
    return {v for v in values if v.strip()}


def resolve_reference(
    root: str | Path | None, attribute: str, groups: Sequence[str] | None, present: Iterable[str]
) -> Reference:
    """The reference set: ``groups`` if given, else the manifest's declared groups, else ``present``."""
    if groups:
        return Reference(tuple(sorted({str(g) for g in groups})), FROM_OPTION)
    declared = declared_groups(root, attribute) if root is not None else None
    if declared:
        return Reference(tuple(declared), FROM_RECIPE)
    return Reference(tuple(sorted({str(v) for v in present})), FROM_PRESENT)


def check_labels(reference: Reference, labels: Iterable[str], attribute: str) -> None:
    """Raise :class:`DatasetError` (one line) when a label present is not a declared group."""
    extra = sorted({str(v) for v in labels} - set(reference.groups))
    if not extra:
        return
    shown = ", ".join(repr(v) for v in extra[:10]) + (
        f" and {len(extra) - 10} more" if len(extra) > 10 else ""
    )
    raise DatasetError(
        f"{attribute!r} has value(s) {shown} that are not among the {len(reference.groups)} groups declared "
        f"by {reference.source}; give every group with --groups (the uniform reference must contain them "
        "all) or choose another --attribute"
    )


def _names(items: Sequence[str], limit: int = 10) -> str:
    text = ", ".join(items[:limit])
    return text + (f" and {len(items) - limit} more" if len(items) > limit else "")


def audit_warnings(
    reference: Reference, sizes: Mapping[str, int], k: int, attribute: str, where: str = ""
) -> list[str]:
    """What can make the audit's numbers mislead, one sentence each (``audit.json`` ``warnings``).

    Args:
        reference: the reference set.
        sizes: images per group (every group of the reference).
        k: the top-k size asked for.
        attribute: the group attribute.
        where: the variant and splits audited, for the text (e.g. ``"balanced/test"``).
    """
    n = sum(sizes.values())
    at = f" in {where}" if where else ""
    out: list[str] = []
    if not reference.declared:
        out.append(
            f"no groups declared for {attribute!r} (no recipe cells in manifest.json, no --groups): the "
            f"reference set is the {len(reference.groups)} value(s) present, so a group with no image cannot "
            "show; declare the expected groups with --groups"
        )
    empty = [g for g in reference.groups if not sizes.get(g)]
    if empty:
        out.append(
            f"{len(empty)} declared {attribute} group(s) have no image{at}: {_names(empty)}; each counts "
            "as zero retrievals in the JSD against the uniform distribution over all "
            f"{len(reference.groups)} groups, and the std of group means over all groups is undefined (null; "
            "mean_similarity_std_present is over the groups with images)"
        )
    if k >= n:
        out.append(
            f"k = {k} >= n = {n} images{at}: the top-k holds every image, so its distribution is the "
            "dataset's composition, not the model's ranking (the JSD then measures the dataset's balance); "
            "choose a k below n"
        )
    else:
        small = [g for g in reference.groups if 0 < sizes.get(g, 0) <= k]
        if small:
            listed = [f"{g} ({sizes[g]})" for g in small]
            out.append(
                f"k = {k} >= the size of {len(small)} {attribute} group(s): {_names(listed)}; such a group "
                "can be retrieved whole, so its top-k count is capped by its size and the top-k distribution "
                "is bounded by the dataset's composition; a k below the smallest group avoids this"
            )
    return out


def definitions(attribute: str, reference: Reference, k: int, k_used: int, n: int) -> dict[str, str]:
    """The rule of every number of the VLM audit (``audit.json`` ``definitions``)."""
    N = len(reference.groups)
    return {
        "reference_set": (
            f"the {N} declared groups of {attribute!r}, from {reference.source}; a declared group with no "
            "image counts as zero retrievals and is named in empty_groups; a value present but not declared "
            "is an error"
        ),
        "images": (
            f"the n = {n} rows of the audited variant and splits that have a value for {attribute!r} "
            "(the others are listed in skipped)"
        ),
        "top_k": (
            f"the images ranked by cosine similarity to the prompt (eq. 14), ties to the earlier row; "
            f"k = {k} asked, {k_used} used (k is clamped to n)"
        ),
        "topk_share": "images of the group among the top-k / the k used",
        "jsd_uniform": (
            "Jensen–Shannon divergence (eq. 16; the divergence, not its square root) between the top-k "
            f"group distribution and the uniform distribution over all {N} declared groups, logarithms "
            "base 2, so in [0, 1]; 0 = uniform"
        ),
        "group_mean_similarity": (
            "mean cosine similarity to the prompt of the group's images (eq. 15); null for a group with "
            "no image"
        ),
        "mean_similarity_std": (
            f"population standard deviation (ddof=0) of the group means across all {N} declared groups "
            "(the paper's σ); null when a declared group has no image, as its mean does not exist"
        ),
        "mean_similarity_std_present": (
            "the same standard deviation over the groups with at least one image only"
        ),
        "mean_similarity": "mean cosine similarity to the prompt over all n images",
        "group_similarity_summary": (
            "per group: n, min, quartiles and median (numpy.quantile, linear interpolation), max and "
            "mean of its images' cosine similarity to the prompt; the report's box plots draw the "
            "quartiles as the box and min and max as the whiskers"
        ),
        "robustness": (
            "per prompt set: the Jensen–Shannon divergence (base 2) between the top-k distributions over "
            "the declared groups of every pair of its prompts; mean and max over the pairs"
        ),
        "job": (
            "per group: its images with cos(image, positive prompt) > cos(image, negative prompt), "
            "strictly, / its images; null for a group with no image"
        ),
    }


def jsonable_sizes(groups: Sequence[str], labels: Iterable[str]) -> dict[str, int]:
    """Images per group, every group of ``groups`` listed (zeros included), in that order."""
    sizes = dict.fromkeys(groups, 0)
    for g in labels:
        sizes[g] = sizes.get(g, 0) + 1
    return sizes


def describe(reference: Reference) -> dict[str, Any]:
    """The ``reference`` record of ``audit.json``."""
    return {"source": reference.source, "declared": reference.declared, "groups": list(reference.groups)}
