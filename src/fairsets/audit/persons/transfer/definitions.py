"""The ``definitions`` block of ``transfer.json``: the rule behind every headline number of the
bias-transfer audit (group rule, denominators, category matching with the exclusions file and its
SHA-256, the count rule, ``d(c)``, R², the cross-validation), in one place, rendered in the report.
"""

from __future__ import annotations

from typing import Any

from .fit import DEFINITIONS as RELATION

__all__ = ["definitions"]

GROUP_RULE = (
    "exclusive image-level rule (the study's single-gender filter): an image is female when every "
    "gender-labelled kept box is female (unclear boxes beside them allowed), male likewise; mixed "
    "(women and men), unclear-only and unlabelled (no gender label) images count on neither side. "
    "The any rule (an image in every group one of its boxes has) does not apply here: an image of a "
    "woman and a man would count on both sides of the same difference"
)
DENOMINATOR = (
    "data bias of c: female(c) + male(c), the single-gender images whose alt-text names c; "
    "n_single_gender: the single-gender images whose alt-text is not NULL or blank (whitespace only). "
    "A NULL or blank alt-text counts in no number"
)
D = (
    "d(c) = (mean cos(female probe image, prompt) − mean cos(male probe image, prompt)) / std of cos "
    "over all probe images (population std, ddof 0); positive: the model puts c nearer the women"
)


def _scheme(doc: dict[str, Any]) -> str | None:
    rels = list(doc["relations"].values()) + list(((doc.get("race") or {}).get("relations") or {}).values())
    schemes = sorted({r["relation"]["chebyshev"]["cv"]["scheme"] for r in rels if r["relation"]})
    return ", ".join(schemes) or None


def definitions(doc: dict[str, Any], exclusions: dict[str, Any]) -> dict[str, str]:
    """The block for ``doc`` (a ``transfer.json`` document without it); ``exclusions`` is the
    record of :func:`.data.exclusions_record`."""
    data = doc["data_bias"]
    out = {
        "group_rule": GROUP_RULE,
        "images": data["definitions"]["images"],
        "denominator": DENOMINATOR,
        "match": data["definitions"]["match"],
        "exclusions": (
            f"{exclusions['file']}, sha256 {exclusions['sha256']}: {exclusions['phrases']} innocent-sense "
            "phrases masked out of every alt-text before matching (--exclusions FILE replaces the file, "
            "--no-exclusions masks nothing)"
            if exclusions["file"]
            else "none (--no-exclusions): no phrase is masked before matching"
        ),
        "min_count": data["definitions"]["kept"],
        "bias": data["definitions"]["bias"],
        "share_female": data["definitions"]["share_female"],
        "d": D,
        "probe": "the kept boxes of the probe labelled female or male, at most --max-probe per gender, "
        "the smallest MD5 of seed/shard/key/box_id (a dataset probe: its gender column, MD5 of seed/key)",
    }
    out.update({f"relation.{k}": v for k, v in RELATION.items()})
    scheme = _scheme(doc)
    if scheme:
        seed = f" (shuffle seed {doc['settings']['seed']})" if "fold" in scheme else ""
        out["relation.cv_scheme"] = f"used here: {scheme}{seed}"
    if doc.get("generated"):
        out.update({f"generated.{k}": v for k, v in doc["generated"]["definitions"].items()})
    race = doc.get("race")
    if race:
        out.update({f"race.{k}": v for k, v in race["data_bias"]["definitions"].items() if k != "match"})
        if race.get("model_bias"):
            out.update({f"race.{k}": v for k, v in race["model_bias"]["definitions"].items()})
        else:
            out["race.d_g"] = f"not computed: {race['reason']}"
    return out
