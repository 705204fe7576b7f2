"""Section 2 of the persons report: composition by perceived gender and race.

Box and image shares with 95 % Wilson intervals and counts (tables and bar charts with error
bars; each table of one denominator, its rows summing to 100 % under the exclusive group rule), the
shares under the other group rule, the corrected shares (``--correct-with``), the both-gender and
unclear shares, the persons-per-image histogram and the box-area histogram, and the definitions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fairsets.audit.report.plots import bar_png

from .common import (
    _SHARE_HEAD,
    _ci_bar_png,
    _count,
    _definitions,
    _details,
    _h,
    _img,
    _is_num,
    _kv,
    _map,
    _num,
    _p,
    _seq,
    _share_row,
    _table,
    _text,
    format_ci,
    format_share,
)


def _composition(audit: Mapping[str, Any]) -> list[dict[str, Any]]:
    comp = audit.get("composition")
    if not isinstance(comp, Mapping):
        return [_p("The composition was not computed (the audit has no composition section).")]
    blocks: list[dict[str, Any]] = [
        _kv(
            [
                ("Images (ok)", _count(comp.get("n_images"))),
                (
                    "Person images (≥ 1 kept box)",
                    f"{_count(comp.get('n_person_images'))} "
                    f"({format_share(_map(comp.get('person_images')).get('share'))}, "
                    f"95% CI {format_ci(_map(comp.get('person_images')).get('ci95'))})",
                ),
                ("Kept boxes", _count(comp.get("n_boxes"))),
            ]
        )
    ]
    boxes, images = _map(comp.get("boxes")), _map(comp.get("images"))
    missing_attrs = _map(comp.get("missing_attributes"))
    rule = _text(comp.get("group_rule") or "exclusive")
    for attr in ("gender", "race"):
        blocks.append(_h(f"Perceived {attr}"))
        b, im = boxes.get(attr), images.get(attr)
        if not isinstance(b, Mapping):
            why = missing_attrs.get(attr) or f"the folder has no perceived_{attr} labels"
            blocks.append(_p(f"No {attr} composition: {_text(why)}."))
            continue
        bgroups = _map(b.get("groups"))
        igroups = _map(_map(im).get("groups"))
        rows = [_share_row(g, s) for g, s in bgroups.items()]
        blocks.append(
            _table(
                _SHARE_HEAD,
                rows,
                f"Kept boxes by perceived {attr}: all {_count(b.get('n'))} kept boxes, "
                f"{_count(b.get('n_labelled'))} with a label; the rows sum to 100%",
            )
        )
        if isinstance(im, Mapping):
            blocks.append(
                _table(_SHARE_HEAD, [_share_row(g, s) for g, s in igroups.items()], _image_caption(im))
            )
        names = list(bgroups) + [g for g in igroups if g not in bgroups]
        if names:
            series = [
                (
                    "boxes",
                    [_map(bgroups.get(g)).get("share") for g in names],
                    [_map(bgroups.get(g)).get("ci95") for g in names],
                ),
                (
                    "images",
                    [_map(igroups.get(g)).get("share") for g in names],
                    [_map(igroups.get(g)).get("ci95") for g in names],
                ),
            ]
            png = _ci_bar_png(
                names,
                series,
                title=f"Share by perceived {attr} (95% Wilson intervals; images: {rule} rule)",
                ylabel="share (%)",
                scale=100.0,
            )
            blocks.append(_img(png, f"Box and image shares by perceived {attr}"))
        corrected = _map(_map(comp.get("corrected")).get(attr))
        if corrected:
            blocks += _corrected(attr, corrected)
    if images.get("both_genders") is not None:
        both = _share_row("both female and male boxes", images.get("both_genders"))
        cap = "Person images with at least one female and one male box (not a row of the gender table)"
        blocks.append(_table(_SHARE_HEAD, [both], cap))
    alternative = _map(comp.get("alternative"))
    alt_images = _map(alternative.get("images"))
    if any(isinstance(v, Mapping) for v in alt_images.values()):
        inner = [
            _table(
                _SHARE_HEAD, [_share_row(g, s) for g, s in _map(t.get("groups")).items()], _image_caption(t)
            )
            for t in alt_images.values()
            if isinstance(t, Mapping)
        ]
        blocks.append(
            _details(
                f"Person images under the other group rule ({_text(alternative.get('group_rule'))})", inner
            )
        )
    unclear = _map(comp.get("unclear"))
    blocks.append(_h("Unclear labels"))
    if unclear:
        names = {
            "boxes_gender": "boxes labelled unclear (gender)",
            "images_gender": "person images whose gender labels are all unclear",
            "boxes_race": "boxes labelled unclear (race)",
            "images_race": "person images whose race labels are all unclear",
        }
        blocks.append(_table(_SHARE_HEAD, [_share_row(names.get(k, k), s) for k, s in unclear.items()]))
    else:
        blocks.append(_p("No unclear shares: the folder has no gender or race labels."))
    blocks += _persons_per_image(comp.get("persons_per_image"))
    blocks += _box_area(comp.get("box_area"))
    return blocks


def _image_caption(table: Mapping[str, Any]) -> str:
    rule = _text(table.get("group_rule") or "exclusive")
    if table.get("multi_membership"):
        return (
            f"Person images by the '{rule}' rule (an image is in every group one of its boxes has; the "
            f"rows sum to {format_share(table.get('sum_of_shares'))}, over 100%)"
        )
    return f"Person images by the '{rule}' rule (one group per image; the rows sum to 100%)"


def _corrected(attr: str, result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The box shares corrected for the classifier's confusion, beside the raw ones."""
    raw, fixed, cis = _map(result.get("raw")), _map(result.get("corrected")), _map(result.get("ci95"))
    rows = [
        [_text(g), format_share(raw.get(g)), format_share(fixed.get(g)), format_ci(cis.get(g))]
        for g in _seq(result.get("labels"))
    ]
    blocks = [
        _table(
            ["", "raw share", "corrected share", "95% CI"],
            rows,
            f"Labelled boxes by perceived {attr}, corrected for the classifier's confusion "
            f"(from {_text(result.get('source'))})",
        )
    ]
    warnings = [_text(w) for w in _seq(result.get("warnings"))]
    if warnings:
        blocks.append(_p("Warnings: " + "; ".join(warnings), note=True))
    blocks += _definitions(
        {"method": result.get("method"), **_map(result.get("definitions"))}, "corrected shares"
    )
    return blocks


def _persons_per_image(ppi: Any) -> list[dict[str, Any]]:
    blocks = [_h("Persons per image")]
    if not isinstance(ppi, Mapping) or not _seq(ppi.get("bins")):
        return [*blocks, _p("No persons-per-image histogram in the audit.")]
    bins = [str(b) for b in _seq(ppi.get("bins"))]
    counts = _seq(ppi.get("counts"))
    shares = _seq(ppi.get("shares"))
    blocks.append(
        _p(
            f"Most persons in one image: {_count(ppi.get('max'))}; mean per person image: "
            f"{_num(ppi.get('mean'), 2)}."
        )
    )
    if len(counts) == len(bins) and all(_is_num(c) for c in counts):
        png = bar_png(
            bins,
            [("images", counts)],
            title="Person images by number of kept boxes",
            ylabel="person images",
            integer=True,
        )
        blocks.append(_img(png, "Persons-per-image histogram"))
    rows = []
    for i, b in enumerate(bins):
        s = _map(shares[i]) if i < len(shares) else {}
        c = counts[i] if i < len(counts) else s.get("count")
        rows.append([b, _count(c), format_share(s.get("share")), format_ci(s.get("ci95"))])
    blocks.append(_table(["persons", "images", "share", "95% CI"], rows))
    return blocks


def _box_area(area: Any) -> list[dict[str, Any]]:
    blocks = [_h("Box area (share of the image)")]
    if not isinstance(area, Mapping) or not _seq(area.get("counts")):
        return [*blocks, _p("No box-area histogram in the audit.")]
    edges = _seq(area.get("edges"))
    counts = _seq(area.get("counts"))
    shares = _seq(area.get("shares"))
    if len(edges) == len(counts) + 1 and all(_is_num(e) for e in edges):
        labels = [f"{edges[i]:.2f}–{edges[i + 1]:.2f}" for i in range(len(counts))]
    else:
        labels = [str(i) for i in range(len(counts))]
    blocks.append(
        _p(
            f"Mean {_num(area.get('mean'), 3)}, median {_num(area.get('median'), 3)}; "
            f"{_count(area.get('invalid'))} boxes with a missing or out-of-range area are not binned."
        )
    )
    if all(_is_num(c) for c in counts):
        png = bar_png(
            labels,
            [("boxes", counts)],
            title="Kept boxes by box area / image area",
            ylabel="kept boxes",
            integer=True,
        )
        blocks.append(_img(png, "Box-area histogram"))
    rows = []
    for i, lab in enumerate(labels):
        s = _map(shares[i]) if i < len(shares) else {}
        rows.append([lab, _count(counts[i]), format_share(s.get("share")), format_ci(s.get("ci95"))])
    blocks.append(_details("Box-area bins", [_table(["area", "boxes", "share", "95% CI"], rows)]))
    return blocks
