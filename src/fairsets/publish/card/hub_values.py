"""The values the Hub allows in a card's metadata (licence ids, size and task categories, embedded
because ``huggingface_hub`` has no offline list) and the mapping of a build onto them.
"""

from __future__ import annotations

from fairsets.publish.attribution import license_info

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
#: Allowed ``annotations_creators`` / ``language_creators`` / ``source_datasets`` values (the
#: documentation of ``huggingface_hub.DatasetCardData``, which lists the Hub's options).
ANNOTATIONS_CREATORS = frozenset(
    ["found", "crowdsourced", "expert-generated", "machine-generated", "no-annotation", "other"]
)
LANGUAGE_CREATORS = frozenset(["found", "crowdsourced", "expert-generated", "machine-generated", "other"])
SOURCE_DATASETS = frozenset(["original", "extended"])
DEFAULT_TAGS = ("fairness", "faces", "webdataset")
MIXED_LICENSE_NAME = "mixed-cc-licenses"


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
