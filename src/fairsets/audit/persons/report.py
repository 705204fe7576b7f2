"""Self-contained HTML report of a persons audit (the ``audit.json`` of ``fairsets audit persons``).

The report renders exactly the audit document of :mod:`.run` (schema ``fairsets.audit.persons/1``)
as **one HTML file**: inline CSS, every plot a base64 PNG (``data:image/png;base64,...``), no
script, no font, no stylesheet and no image fetched from anywhere, so the file can be archived,
mailed or opened offline. It is built like the VLM audit's report (:mod:`fairsets.audit.report`)
and draws with its helpers (:mod:`fairsets.audit.report.plots`: matplotlib's Agg canvas, imported
only when a report is rendered, 100 dpi, no ``Software`` stamp), so the same audit gives the same
bytes.

**Hostile text.** Captions, alt-texts, group labels and file names in the audit are data a user
did not write: everything goes through Jinja2's autoescaping, a displayed caption is cut to
:data:`CAPTION_CHARS` characters (the full text stays in ``audit.json``), any other string to
:data:`TEXT_CHARS`, control characters become spaces, and plot labels are cut to 40 characters
with ``$`` kept from matplotlib's mathtext.

Layout, top to bottom (any section that is null or absent in the audit gets one sentence that says
why, taken from ``skipped`` or the section's own reason):

1. **Setup** — annotation folder name, fairsets version, attributes, shards, settings (minimum
   count, crime-word list, sentiment scorer, themes settings) and the definitions of the
   composition (the image-level gender rule among them).
2. **Composition** — box and image shares by perceived gender and race with 95 % Wilson intervals
   and counts (bar charts with error bars), both-gender share, unclear shares, the persons-per-image
   histogram (with the maximum) and the box-area histogram.
3. **Crime words** — Δ % per group with matches / texts / rate / interval and the reason of every
   null Δ, for the alt-texts and for each person captioner (bar chart of Δ % with the zero line);
   the word list in a collapsible block.
4. **Sentiment** — per group the mean score with its interval and the negative and positive shares
   (bar charts), for each kind of text.
5. **Themes** — the SAE's metrics (FVU, L0, dead latents); per identity the top themes with PMI,
   interval and support counts; every reported latent named by its top words and top captions
   (collapsible).
6. **Skipped** — the sections that were not computed, with their reasons.

Shares are shown as percentages with one decimal (``"12.5%"``), intervals as ``"[lo, hi]%"``,
Δ with a sign (``"+25.0%"``), sentiment means and PMI with three decimals.

API:
    * ``PERSONS_SCHEMA`` — the schema id (``"fairsets.audit.persons/1"``).
    * ``check_persons_audit(audit) -> list[str]`` — structural problems (empty: it can be reported).
    * ``render_persons_report(audit, path) -> Path`` — write the report atomically.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fairsets.audit.report.formatting import format_number
from fairsets.audit.report.plots import bar_png, figure, group_ticks, mpl_label, png_uri
from fairsets.core.atomic import atomic_write_text

__all__ = [
    "CAPTION_CHARS",
    "PERSONS_SCHEMA",
    "TEXT_CHARS",
    "check_persons_audit",
    "format_ci",
    "format_delta",
    "format_share",
    "render_persons_report",
]

PERSONS_SCHEMA = "fairsets.audit.persons/1"
#: A caption shown in the report is cut to this many characters (the full text is in audit.json).
CAPTION_CHARS = 300
#: Any other string from the audit (labels, names, reasons) is cut to this many characters.
TEXT_CHARS = 500
_PLOT_LABEL = 40
_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52")

# ----------------------------------------------------------------------------------------------------
# Numbers and text


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def format_share(x: Any) -> str:
    """A share in [0, 1] as a percentage with one decimal (``"–"`` when missing)."""
    return f"{100.0 * x:.1f}%" if _is_num(x) else "–"


def format_ci(ci: Any, percent: bool = True, digits: int = 3) -> str:
    """A ``[lo, hi]`` interval: percentages with one decimal, or ``digits`` decimals."""
    if not isinstance(ci, (list, tuple)) or len(ci) != 2 or not all(_is_num(v) for v in ci):
        return "–"
    if percent:
        return f"[{100.0 * ci[0]:.1f}, {100.0 * ci[1]:.1f}]%"
    return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def format_delta(x: Any) -> str:
    """A signed percentage change (Δ %) with one decimal."""
    return f"{x:+.1f}%" if _is_num(x) else "–"


def _count(x: Any) -> str:
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if _is_num(x) and float(x).is_integer():
        return str(int(x))
    return "–" if x is None else _text(x)


def _num(x: Any, digits: int = 3) -> str:
    """A metric with ``digits`` fixed decimals (``"–"`` when missing)."""
    if isinstance(x, int) and not isinstance(x, bool):
        return str(x)
    return f"{x:.{digits}f}" if _is_num(x) else "–" if x is None or isinstance(x, float) else _text(x)


def _metric(x: Any, digits: int = 4) -> str:
    """A metric that may be tiny (FVU): fixed decimals, scientific below ``10**-(digits-1)``."""
    return format_number(x, digits, _text) if _is_num(x) or x is None else _text(x)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


def _clean(text: str) -> str:
    """Control characters (NUL, escape sequences, line breaks, ...) become one space each run."""
    return _CONTROL.sub(" ", text)


def _text(x: Any, limit: int = TEXT_CHARS) -> str:
    """Any value as display text, cut to ``limit`` characters (escaping is the template's)."""
    if x is None:
        return "–"
    if isinstance(x, (list, tuple)):
        return _cut(_clean(", ".join(str(v) for v in x)), limit)
    return _cut(_clean(str(x)), limit)


def _caption(x: Any) -> str:
    return _text(x, CAPTION_CHARS)


def _label(x: Any) -> str:
    return _cut(_clean(str(x)), _PLOT_LABEL)


def _map(x: Any) -> Mapping[str, Any]:
    return x if isinstance(x, Mapping) else {}


def _seq(x: Any) -> list[Any]:
    return list(x) if isinstance(x, (list, tuple)) else []


def _val(ci: Any, i: int) -> float:
    return float(ci[i]) if isinstance(ci, (list, tuple)) and len(ci) == 2 and _is_num(ci[i]) else math.nan


# ----------------------------------------------------------------------------------------------------
# Plots


def _ci_bar_png(
    groups: Sequence[str],
    series: Sequence[tuple[str, Sequence[Any], Sequence[Any] | None]],
    *,
    title: str,
    ylabel: str,
    scale: float = 1.0,
    zero_line: bool = False,
) -> str:
    """Grouped bars with 95 % error bars (``series``: ``(label, values, intervals or None)``)."""
    import numpy as np

    n = len(groups)
    per_group = 0.18 + 0.12 * max(1, len(series))
    width = min(max(6.0, 1.6 + per_group * n), 30.0)
    labels = [_label(g) for g in groups]
    longest = max((len(g) for g in labels), default=1)
    fig = figure(width, 3.2 + min(longest, 40) * 0.055)
    ax = fig.add_subplot()
    x = np.arange(n)
    bar_w = 0.8 / max(1, len(series))
    for i, (name, values, cis) in enumerate(series):
        vals = np.array([float(v) * scale if _is_num(v) else math.nan for v in values])
        offset = (i - (len(series) - 1) / 2) * bar_w
        colour = _COLOURS[i % len(_COLOURS)]
        ax.bar(x + offset, np.nan_to_num(vals), bar_w, label=mpl_label(name), color=colour)
        if cis is not None:
            lo = np.array([_val(c, 0) * scale for c in cis])
            hi = np.array([_val(c, 1) * scale for c in cis])
            ok = np.isfinite(vals) & np.isfinite(lo) & np.isfinite(hi)
            if ok.any():
                err = np.vstack([np.clip(vals[ok] - lo[ok], 0, None), np.clip(hi[ok] - vals[ok], 0, None)])
                ax.errorbar(
                    (x + offset)[ok], vals[ok], yerr=err, fmt="none", ecolor="#222222", capsize=3, linewidth=1
                )
    if zero_line:
        ax.axhline(0.0, color="#333333", linewidth=1)
    group_ticks(ax, labels)
    ax.set_ylabel(mpl_label(ylabel))
    ax.set_title(mpl_label(_cut(title, 120)), fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    if len(series) > 1:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return png_uri(fig)


# ----------------------------------------------------------------------------------------------------
# Blocks: the template renders a list of these per section.


def _p(text: str, note: bool = False) -> dict[str, Any]:
    return {"kind": "note" if note else "p", "text": text}


def _h(text: str, level: int = 3) -> dict[str, Any]:
    return {"kind": "h", "level": level, "text": _text(text)}


def _kv(rows: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    return {"kind": "kv", "rows": [(_text(k), _text(v)) for k, v in rows]}


_NUMERIC = re.compile(r"^[-+–\d.,\[\]% e]*$")


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], caption: str = "") -> dict[str, Any]:
    """A table; the columns whose cells are all numbers (or "–") are right-aligned, never wrapped."""
    width = max((len(r) for r in rows), default=0)
    numeric = [i > 0 and all(i >= len(r) or _NUMERIC.match(r[i]) for r in rows) for i in range(width)]
    cells = [[(c, numeric[i]) for i, c in enumerate(r)] for r in rows]
    return {"kind": "table", "head": list(head), "rows": cells, "caption": caption}


def _img(src: str, alt: str) -> dict[str, Any]:
    return {"kind": "img", "src": src, "alt": _text(alt, 200)}


def _details(summary: str, blocks: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": "details", "summary": summary, "blocks": list(blocks)}


def _list(items: Sequence[str]) -> dict[str, Any]:
    return {"kind": "list", "entries": list(items)}


def _definitions(defs: Any, what: str) -> list[dict[str, Any]]:
    defs = _map(defs)
    if not defs:
        return []
    rows = [(_text(k), _text(v) if not isinstance(v, Mapping) else _text(dict(v))) for k, v in defs.items()]
    return [_details(f"Definitions: {what}", [_kv(rows)])]


def _share_row(name: str, s: Any) -> list[str]:
    s = _map(s)
    return [
        _text(name),
        _count(s.get("count")),
        _count(s.get("n")),
        format_share(s.get("share")),
        format_ci(s.get("ci95")),
    ]


_SHARE_HEAD = ["", "count", "of", "share", "95% CI"]


# ----------------------------------------------------------------------------------------------------
# 1. Setup


def _setup(audit: Mapping[str, Any]) -> list[dict[str, Any]]:
    settings = _map(audit.get("settings"))
    rows: list[tuple[str, Any]] = [
        ("Annotation folder", audit.get("annotations")),
        ("fairsets version", audit.get("fairsets_version")),
        ("Attributes", ", ".join(map(str, _seq(audit.get("attributes")))) or "none"),
        ("Shards", _count(audit.get("n_shards"))),
        ("Minimum count", _count(settings.get("min_count"))),
        ("Crime words", settings.get("crime_words")),
        ("Sentiment scorer", settings.get("sentiment") or "none"),
    ]
    themes = settings.get("themes")
    if isinstance(themes, Mapping):
        for key, value in themes.items():
            rows.append((f"Themes {key}", _count(value) if isinstance(value, int) else value))
    else:
        rows.append(("Themes", "not run"))
    blocks = [_kv(rows)]
    comp_defs = _map(_map(audit.get("composition")).get("definitions"))
    if comp_defs:
        blocks.append(_h("Definitions", 3))
        blocks.append(_kv([(_text(k), _text(v)) for k, v in comp_defs.items()]))
    return blocks


# ----------------------------------------------------------------------------------------------------
# 2. Composition


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
        rows.append(_share_row("no label (of all kept boxes)", b.get("missing")))
        blocks.append(
            _table(
                _SHARE_HEAD,
                rows,
                f"Kept boxes by perceived {attr} (of the {_count(b.get('n_labelled'))} labelled boxes)",
            )
        )
        if isinstance(im, Mapping):
            rows = [_share_row(g, s) for g, s in igroups.items()]
            if attr == "gender":
                rows.append(_share_row("both female and male boxes", images.get("both_genders")))
                cap = "Person images by the image-level gender rule"
            else:
                rows.append(_share_row("only unclear race labels", im.get("only_unclear")))
                cap = "Person images with at least one box of each perceived race (may sum over 100%)"
            rows.append(_share_row("no label on any box", im.get("missing")))
            blocks.append(_table(_SHARE_HEAD, rows, cap))
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
                title=f"Share by perceived {attr} (95% Wilson intervals)",
                ylabel="share (%)",
                scale=100.0,
            )
            blocks.append(_img(png, f"Box and image shares by perceived {attr}"))
    unclear = _map(comp.get("unclear"))
    blocks.append(_h("Unclear labels"))
    if unclear:
        names = {
            "boxes_gender": "boxes labelled unclear (gender)",
            "images_gender": "person images unclear by the gender rule",
            "boxes_race": "boxes labelled unclear (race)",
            "images_race": "person images whose race labels are all unclear",
        }
        blocks.append(_table(_SHARE_HEAD, [_share_row(names.get(k, k), s) for k, s in unclear.items()]))
    else:
        blocks.append(_p("No unclear shares: the folder has no gender or race labels."))
    blocks += _persons_per_image(comp.get("persons_per_image"))
    blocks += _box_area(comp.get("box_area"))
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


# ----------------------------------------------------------------------------------------------------
# 3. Crime words


def _kinds(section: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``(title, SECTION)`` for the alt-texts and each person captioner (None: see the reason)."""
    out: list[tuple[str, Any]] = []
    if "alt" in section:
        out.append(("Alt-texts of person images", section.get("alt")))
    person = section.get("person")
    if isinstance(person, Mapping):
        out += [(f"Person captions by {_text(name, 100)}", s) for name, s in person.items()]
    elif "person" in section or "person_reason" in section:
        reason = section.get("person_reason") or "the audit has no person-caption results"
        out.append(("Person captions", _text(reason)))
    return out


def _crime(audit: Mapping[str, Any]) -> list[dict[str, Any]]:
    crime = audit.get("crime")
    if not isinstance(crime, Mapping):
        return [_p("The crime-word association was not computed (the audit has no crime section).")]
    words = [str(w) for w in _seq(crime.get("words"))]
    blocks: list[dict[str, Any]] = [
        _p(
            f"Δ% = 100 × (rate of the group / overall rate − 1); Δ is shown only for groups with at least "
            f"{_count(crime.get('min_count'))} texts and when some text of the baseline matches."
        )
    ]
    blocks.append(_details(f"Crime words ({len(words)})", [_p(_cut(_clean(", ".join(words)), 20_000))]))
    for title, sec in _kinds(crime):
        blocks.append(_h(title))
        if isinstance(sec, str):
            blocks.append(_p(f"Not computed: {sec}."))
            continue
        if not isinstance(sec, Mapping):
            blocks.append(_p("Not computed for this kind of text."))
            continue
        o = _map(sec.get("overall"))
        blocks.append(
            _p(
                f"Overall: {_count(o.get('matches'))} of {_count(o.get('n'))} texts contain a crime word "
                f"({format_share(o.get('rate'))}, 95% CI {format_ci(o.get('ci95'))}); "
                f"{_count(sec.get('no_text'))} empty texts left out."
            )
        )
        plot_names, plot_values = [], []
        for attr in ("gender", "race"):
            groups = sec.get(attr)
            if not isinstance(groups, Mapping):
                blocks.append(_p(f"No perceived {attr} labels for these texts.", note=True))
                continue
            rows = []
            for g, r in groups.items():
                r = _map(r)
                rows.append(
                    [
                        _text(g),
                        _count(r.get("matches")),
                        _count(r.get("n")),
                        format_share(r.get("rate")),
                        format_ci(r.get("ci95")),
                        format_delta(r.get("delta_pct")),
                        _text(r.get("reason")) if r.get("reason") else "",
                    ]
                )
                plot_names.append(f"{attr}: {g}")
                plot_values.append(r.get("delta_pct"))
            cap = f"By perceived {attr}; {_count(sec.get(attr + '_missing'))} texts have no {attr} label"
            blocks.append(_table([attr, "matches", "texts", "rate", "95% CI", "Δ%", "why no Δ"], rows, cap))
        if any(_is_num(v) for v in plot_values):
            png = _ci_bar_png(
                plot_names,
                [("Δ%", plot_values, None)],
                title=f"Crime-word Δ% by group — {title}",
                ylabel="Δ% vs all texts",
                zero_line=True,
            )
            blocks.append(_img(png, f"Crime-word Δ% by group, {title}"))
        elif plot_names:
            blocks.append(_p("No group has a Δ (see the reasons in the tables).", note=True))
    blocks += _definitions(crime.get("definitions"), "crime words")
    return blocks


# ----------------------------------------------------------------------------------------------------
# 4. Sentiment


def _skip_reason(audit: Mapping[str, Any], key: str) -> str:
    reason = _map(audit.get("skipped")).get(key)
    return _text(reason) if reason else "the audit has no such section"


def _sentiment(audit: Mapping[str, Any]) -> list[dict[str, Any]]:
    sent = audit.get("sentiment")
    if not isinstance(sent, Mapping):
        return [_p(f"Sentiment was not computed: {_skip_reason(audit, 'sentiment')}.")]
    scorer = _map(sent.get("scorer"))
    blocks: list[dict[str, Any]] = [
        _kv(
            [
                ("Scorer", scorer.get("name")),
                ("Kind", scorer.get("kind")),
                ("Minimum count", _count(sent.get("min_count"))),
            ]
        )
    ]
    for title, sec in _kinds(sent):
        blocks.append(_h(title))
        if isinstance(sec, str):
            blocks.append(_p(f"Not computed: {sec}."))
            continue
        if not isinstance(sec, Mapping):
            blocks.append(_p("Not computed for this kind of text."))
            continue
        head = [
            "group",
            "texts",
            "mean",
            "95% CI",
            "negative",
            "share",
            "95% CI",
            "positive",
            "share",
            "95% CI",
            "why missing",
        ]
        rows = [_sent_row("all texts", sec.get("overall"))]
        names, means, mean_cis, negs, neg_cis, poss, pos_cis = [], [], [], [], [], [], []
        missing = []
        for attr in ("gender", "race"):
            groups = sec.get(attr)
            if not isinstance(groups, Mapping):
                missing.append(f"no perceived {attr} labels")
                continue
            missing.append(f"{_count(sec.get(attr + '_missing'))} texts without a {attr} label")
            for g, r in groups.items():
                r = _map(r)
                rows.append(_sent_row(f"{attr}: {g}", r))
                names.append(f"{attr}: {g}")
                means.append(r.get("mean"))
                mean_cis.append(r.get("mean_ci95"))
                negs.append(_map(r.get("negative")).get("share"))
                neg_cis.append(_map(r.get("negative")).get("ci95"))
                poss.append(_map(r.get("positive")).get("share"))
                pos_cis.append(_map(r.get("positive")).get("ci95"))
        cap = f"{_count(sec.get('no_text'))} empty texts left out; " + "; ".join(missing)
        blocks.append(_table(head, rows, cap))
        if any(_is_num(v) for v in means):
            png = _ci_bar_png(
                names,
                [("mean score", means, mean_cis)],
                title=f"Mean sentiment — {title}",
                ylabel="mean score",
                zero_line=True,
            )
            blocks.append(_img(png, f"Mean sentiment by group, {title}"))
            png = _ci_bar_png(
                names,
                [("negative", negs, neg_cis), ("positive", poss, pos_cis)],
                title=f"Negative and positive shares — {title}",
                ylabel="share (%)",
                scale=100.0,
            )
            blocks.append(_img(png, f"Negative and positive sentiment shares by group, {title}"))
        elif names:
            blocks.append(_p("No group has enough texts for a mean (see the reasons).", note=True))
    blocks += _definitions(sent.get("definitions"), "sentiment")
    return blocks


def _sent_row(name: str, r: Any) -> list[str]:
    r = _map(r)
    neg, pos = _map(r.get("negative")), _map(r.get("positive"))
    return [
        _text(name),
        _count(r.get("n")),
        _num(r.get("mean")),
        format_ci(r.get("mean_ci95"), percent=False),
        _count(neg.get("count")),
        format_share(neg.get("share")),
        format_ci(neg.get("ci95")),
        _count(pos.get("count")),
        format_share(pos.get("share")),
        format_ci(pos.get("ci95")),
        _text(r.get("reason")) if r.get("reason") else "",
    ]


# ----------------------------------------------------------------------------------------------------
# 5. Themes


def _latent_name(latent: Any, n: int = 4) -> str:
    words = [_text(w.get("word"), 40) for w in _seq(latent.get("words")) if isinstance(w, Mapping)]
    return ", ".join(words[:n]) if words else "(no distinctive word)"


def _themes(audit: Mapping[str, Any]) -> list[dict[str, Any]]:
    th = audit.get("themes")
    if not isinstance(th, Mapping):
        return [_p(f"Themes were not computed: {_skip_reason(audit, 'themes')}.")]
    sae = _map(th.get("sae"))
    m = _map(sae.get("metrics"))
    text = {"person": "person captions", "alt": "alt-texts"}.get(str(th.get("text")), th.get("text"))
    blocks: list[dict[str, Any]] = [
        _kv(
            [
                ("Texts", f"{text} ({_text(th.get('source')) if th.get('source') else 'all'})"),
                ("Texts used", _count(th.get("n_texts"))),
                ("Texts available", _count(th.get("n_available")) if "n_available" in th else "–"),
                ("Sampled", "yes" if th.get("sampled") else "no"),
                (
                    "SAE latents / k / steps",
                    f"{_count(sae.get('latents'))} / {_count(sae.get('k'))} / {_count(sae.get('steps'))}",
                ),
                ("FVU (held-out)", _metric(m.get("fvu"), 4)),
                ("L0 (mean active latents)", _num(m.get("l0"), 2)),
                (
                    "Dead latents",
                    f"{_count(m.get('dead_latents'))} of {_count(m.get('latents', sae.get('latents')))}",
                ),
                (
                    "Rows (train / held-out)",
                    f"{_count(m.get('n_rows'))} ({_count(m.get('n_train'))} / {_count(m.get('n_heldout'))})",
                ),
            ]
        )
    ]
    blocks += _definitions(m.get("definitions"), "SAE metrics")
    blocks += _definitions(th.get("definitions"), "theme texts")
    by_attr = _map(th.get("by_attribute"))
    if not by_attr:
        blocks.append(_p("No identity has themes: the theme texts carry no perceived gender or race label."))
    for attr, res in by_attr.items():
        blocks.append(_h(f"Themes by perceived {_text(attr, 100)}"))
        if not isinstance(res, Mapping):
            blocks.append(_p(f"Not computed for {_text(attr, 100)}."))
            continue
        latents = _map(res.get("latents"))
        blocks.append(
            _p(
                f"{_count(res.get('n_captions'))} texts, {_count(res.get('n_active_latents'))} of "
                f"{_count(res.get('n_latents'))} latents active; a pair needs at least "
                f"{_count(res.get('min_support'))} texts of the identity with the latent active.",
                note=True,
            )
        )
        for ident, info in _map(res.get("identities")).items():
            info = _map(info)
            blocks.append(_h(f"{attr}: {ident}", 4))
            blocks.append(
                _p(
                    f"{_count(info.get('n_captions'))} texts ({format_share(info.get('share'))}); "
                    f"{_count(info.get('n_pairs_supported'))} supported pairs, "
                    f"{_count(info.get('n_pairs_dropped'))} dropped below the minimum support.",
                    note=True,
                )
            )
            rows, names, pmis, cis = [], [], [], []
            for t in _seq(info.get("themes")):
                t = _map(t)
                lat = _map(latents.get(str(t.get("latent"))))
                name = _latent_name(lat)
                rows.append(
                    [
                        _count(t.get("latent")),
                        name,
                        _num(t.get("pmi")),
                        format_ci(t.get("ci95"), False),
                        _count(t.get("n_boot_used")),
                        _count(t.get("n_together")),
                        _count(t.get("n_identity")),
                        _count(t.get("n_latent")),
                    ]
                )
                names.append(f"#{t.get('latent')} {_latent_name(lat, 2)}")
                pmis.append(t.get("pmi"))
                cis.append(t.get("ci95"))
            if not rows:
                blocks.append(_p("No latent reaches the minimum support with this identity."))
                continue
            head = [
                "latent",
                "top words",
                "PMI",
                "95% CI",
                "bootstraps",
                "together",
                "identity texts",
                "latent texts",
            ]
            blocks.append(_table(head, rows))
            if any(_is_num(v) for v in pmis):
                png = _ci_bar_png(
                    names,
                    [("PMI", pmis, cis)],
                    title=f"Top themes of {attr} {ident} (PMI)",
                    ylabel="PMI (natural log)",
                    zero_line=True,
                )
                blocks.append(_img(png, f"PMI of the top themes of {attr} {ident}"))
        if latents:
            inner = []
            for lid, lat in latents.items():
                lat = _map(lat)
                words = [
                    [_text(w.get("word"), 60), _num(w.get("lift"), 2), _count(w.get("count"))]
                    for w in _seq(lat.get("words"))
                    if isinstance(w, Mapping)
                ]
                caps = [
                    f"{_num(c.get('activation'), 3)} — {_caption(c.get('caption'))}"
                    for c in _seq(lat.get("top_captions"))
                    if isinstance(c, Mapping)
                ]
                body = [
                    _p(f"Active on {_count(lat.get('n_active'))} texts ({format_share(lat.get('share'))}).")
                ]
                body.append(_table(["word", "lift", "texts"], words) if words else _p("No distinctive word."))
                body.append(_list(caps) if caps else _p("No caption."))
                inner.append(_details(f"Latent #{_text(lid, 20)}: {_latent_name(lat)}", body))
            blocks.append(_details(f"The {len(latents)} reported latents of {_text(attr, 100)}", inner))
        blocks += _definitions(res.get("definitions"), f"themes by {_text(attr, 100)}")
    return blocks


# ----------------------------------------------------------------------------------------------------
# 6. Skipped


def _skipped(audit: Mapping[str, Any]) -> list[dict[str, Any]]:
    skipped = {k: v for k, v in _map(audit.get("skipped")).items() if v}
    missing = [
        k for k in ("composition", "crime", "sentiment", "themes") if not isinstance(audit.get(k), Mapping)
    ]
    rows = [[_text(k), _text(v)] for k, v in skipped.items()]
    rows += [[k, "not in the audit"] for k in missing if k not in skipped]
    if not rows:
        return [_p("Nothing was skipped.")]
    return [_table(["section", "reason"], rows)]


# ----------------------------------------------------------------------------------------------------
# Check and render


def check_persons_audit(audit: Any) -> list[str]:
    """Return the structural problems of a persons-audit dict (empty list: it can be reported).

    Checks the schema id; that ``annotations`` is a folder name (not a path), ``fairsets_version`` a
    string, ``attributes`` a list of strings, ``n_shards`` a non-negative integer, ``settings`` an
    object with an integer ``min_count``; and that ``composition``, ``crime``, ``sentiment``,
    ``themes`` and ``skipped`` are objects or null (absent counts as null).
    """
    if not isinstance(audit, Mapping):
        return [f"the audit must be a JSON object, got {type(audit).__name__}"]
    problems: list[str] = []
    if audit.get("schema") != PERSONS_SCHEMA:
        problems.append(f"schema is {_cut(repr(audit.get('schema')), 80)}, expected {PERSONS_SCHEMA!r}")
    name = audit.get("annotations")
    if not isinstance(name, str) or not name:
        problems.append("'annotations' must be a non-empty string (the annotation folder's name)")
    elif "/" in name or "\\" in name:
        problems.append("'annotations' must be the folder's name, not a path")
    if not isinstance(audit.get("fairsets_version"), str):
        problems.append("'fairsets_version' must be a string")
    attrs = audit.get("attributes")
    if not isinstance(attrs, list) or not all(isinstance(a, str) for a in attrs):
        problems.append("'attributes' must be a list of strings")
    n = audit.get("n_shards")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        problems.append("'n_shards' must be a non-negative integer")
    settings = audit.get("settings")
    if not isinstance(settings, Mapping):
        problems.append("'settings' must be an object")
    else:
        mc = settings.get("min_count")
        if not isinstance(mc, int) or isinstance(mc, bool):
            problems.append("'settings.min_count' must be an integer")
        if settings.get("themes") is not None and not isinstance(settings.get("themes"), Mapping):
            problems.append("'settings.themes' must be an object or null")
    for key in ("composition", "crime", "sentiment", "themes", "skipped"):
        if audit.get(key) is not None and not isinstance(audit.get(key), Mapping):
            problems.append(f"{key!r} must be an object or null")
    for key in ("sentiment", "crime"):
        sec = audit.get(key)
        if isinstance(sec, Mapping):
            person = sec.get("person")
            if person is not None and not isinstance(person, Mapping):
                problems.append(f"'{key}.person' must be an object or null")
    themes = audit.get("themes")
    if isinstance(themes, Mapping):
        by = themes.get("by_attribute")
        if by is not None and not isinstance(by, Mapping):
            problems.append("'themes.by_attribute' must be an object")
    return problems


TEMPLATE = """\
{%- macro render(blocks) -%}
{%- for b in blocks -%}
{%- if b.kind == "p" %}
<p>{{ b.text }}</p>
{%- elif b.kind == "note" %}
<p class="note">{{ b.text }}</p>
{%- elif b.kind == "h" %}
<h{{ b.level }}>{{ b.text }}</h{{ b.level }}>
{%- elif b.kind == "kv" %}
<table class="kv">
{%- for k, v in b.rows %}
<tr><th>{{ k }}</th><td>{{ v }}</td></tr>
{%- endfor %}
</table>
{%- elif b.kind == "table" %}
<table>
{%- if b.caption %}<caption>{{ b.caption }}</caption>{% endif %}
<tr>{% for h in b.head %}<th>{{ h }}</th>{% endfor %}</tr>
{%- for r in b.rows %}
<tr>{% for c, n in r %}<td{% if n %} class="n"{% endif %}>{{ c }}</td>{% endfor %}</tr>
{%- endfor %}
</table>
{%- elif b.kind == "img" %}
<div class="fig"><img alt="{{ b.alt }}" src="{{ b.src }}"></div>
{%- elif b.kind == "list" %}
<ol>
{%- for item in b.entries %}
<li>{{ item }}</li>
{%- endfor %}
</ol>
{%- elif b.kind == "details" %}
<details><summary>{{ b.summary }}</summary>
{{- render(b.blocks) }}
</details>
{%- endif -%}
{%- endfor -%}
{%- endmacro -%}
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Persons audit: {{ title }}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 1.5rem auto;
       max-width: 1200px; padding: 0 1rem; color: #1a1a1a; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: .2rem; margin-top: 2rem; }
h3 { margin-top: 1.6rem; }
table { border-collapse: collapse; margin: .6rem 0; font-size: .88rem; }
caption { text-align: left; color: #555; padding: .2rem 0; }
th, td { border: 1px solid #d0d0d0; padding: .25rem .5rem; text-align: left; vertical-align: top;
         overflow-wrap: anywhere; }
th { background: #f3f3f3; white-space: nowrap; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.kv th { width: 14rem; }
.fig { overflow-x: auto; margin: .6rem 0; }
.fig img { display: block; max-width: none; }
.note { color: #555; font-size: .88rem; }
details { margin: .5rem 0; }
details details { margin-left: 1rem; }
summary { cursor: pointer; }
li { overflow-wrap: anywhere; }
.sub { color: #555; font-size: .95rem; margin-top: 0; }
</style>
</head>
<body>
<h1>Persons audit: {{ title }}</h1>
<p class="sub">Perceived gender and race in the person annotations: composition, crime words,
sentiment and caption themes. Labels are what classifiers perceive in images, not anyone's identity.</p>
<nav><ol>
{%- for s in sections %}
<li><a href="#{{ s.id }}">{{ s.title }}</a></li>
{%- endfor %}
</ol></nav>
{%- for s in sections %}
<h2 id="{{ s.id }}">{{ loop.index }}. {{ s.title }}</h2>
{{- render(s.blocks) }}
{%- endfor %}
<p class="note">Generated by fairsets {{ version }} ({{ schema }}).</p>
</body>
</html>
"""


def build_context(audit: Mapping[str, Any]) -> dict[str, Any]:
    """The template's values: the title and the sections as lists of blocks (plots included)."""
    sections = [
        ("setup", "Setup", _setup),
        ("composition", "Composition", _composition),
        ("crime", "Crime words", _crime),
        ("sentiment", "Sentiment", _sentiment),
        ("themes", "Themes", _themes),
        ("skipped", "Skipped sections", _skipped),
    ]
    return {
        "title": _text(audit.get("annotations"), 200),
        "version": _text(audit.get("fairsets_version"), 100),
        "schema": PERSONS_SCHEMA,
        "sections": [{"id": i, "title": t, "blocks": fn(audit)} for i, t, fn in sections],
    }


def render_persons_report(audit: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Render the persons audit as one self-contained HTML file and write it atomically.

    Args:
        audit: the audit document (schema ``fairsets.audit.persons/1``, see :func:`check_persons_audit`).
        path: the HTML file to write (parent directories are created).

    Returns:
        The path written.

    Raises:
        ValueError: if :func:`check_persons_audit` finds problems (one line each).
    """
    problems = check_persons_audit(audit)
    if problems:
        raise ValueError("cannot report this persons audit:\n- " + "\n- ".join(problems))
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    html = env.from_string(TEMPLATE).render(**build_context(audit))
    return atomic_write_text(path, html)
