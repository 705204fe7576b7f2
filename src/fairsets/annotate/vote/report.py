"""The agreement report of an annotator vote: one self-contained HTML page to read before training.

``fairsets annotate vote`` keeps only the labels its annotators agree on (:mod:`.consensus`); this
page shows whether that agreement can be trusted, from :func:`.consensus.consensus`'s ``stats``
and a sample of the voted items:

* **run**: the attribute, seed, view, annotators (model, host), requests sent, cache hits, tokens
  and items still pending, when the caller passes them;
* **summary**: items voted, kept after consensus (and the per-class cap), without consensus, kept
  by a relaxed rule, Fleiss' κ with the number of items it is over (those every annotator
  answered), and Krippendorff's α (nominal) over every item with two or more answers — an invalid
  or refused answer is missing, the item stays — with its item and answer counts
  (``stats["krippendorff_alpha"]``: :func:`fairsets.annotate.agreement.krippendorff_alpha`'s dict;
  "not computed" when the stats lack it);
* **per class**: each annotator's votes, the consensus before the cap and what the cap kept, as a
  table and a bar chart;
* **invalid and refused** answers per annotator, and under a minimum confidence the answers it
  dropped (``low_confidence``, ``no_confidence``) with the rule;
* **pairs**: per pair of annotators the items both answered, the raw agreement, Cohen's κ, and the
  confusion matrix (rows: the first annotator's label, columns: the second's, in ``stats["labels"]``
  order), shaded by count;
* **confidence calibration** when answers carry a confidence
  (:func:`fairsets.annotate.vote.calibration.calibration_html`: the rule, per annotator its ECE
  and bins);
* **contact sheet**: the examples in two grids, *consensus* and *disagreement*; each thumbnail is
  the view the annotators were sent, captioned with the item id, the consensus label and rule, and
  every annotator's vote, votes that differ from the consensus (or, without one, from the most
  common vote) marked.

The page has no external asset and needs no JavaScript: CSS is inline, charts are inline SVG and
thumbnails are ``data:`` JPEGs (re-encoded to at most :data:`THUMB_SIDE` px, so a few hundred
examples stay a few MB). Everything that comes from data (labels, annotator names, item ids, run
values, model replies) is HTML-escaped, so a hostile name or label shows as text and never becomes
markup. An undefined κ (``None``) shows as "—". An example whose image does not decode shows
"image unavailable" instead of a thumbnail.

API:
    * ``Example(item, jpeg, votes, label, rule)``
    * ``render_vote_report(stats, examples, *, title, run=None, calibration=None) -> str``
    * ``write_vote_report(path, stats, examples, *, title, run=None, calibration=None) -> Path`` (atomic)
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairsets.core.atomic import atomic_write_text

__all__ = ["THUMB_SIDE", "Example", "render_vote_report", "write_vote_report"]

#: Longest side of a contact-sheet thumbnail, in pixels.
THUMB_SIDE = 192
_DASH = "—"
_NO_ANSWER = ("invalid", "refused", "failed", "low_confidence", "no_confidence")


@dataclass(frozen=True)
class Example:
    """One voted item shown on the contact sheet.

    Attributes:
        item: ``"shard/key/box_id"``.
        jpeg: The view the annotators were sent (JPEG bytes).
        votes: Annotator → label, or ``invalid`` / ``refused`` / ``failed`` / ``low_confidence`` /
            ``no_confidence``.
        label: The consensus label, None when there is no consensus.
        rule: ``all`` or ``relaxed``; None when there is no consensus.
    """

    item: str
    jpeg: bytes
    votes: dict[str, str]
    label: str | None
    rule: str | None


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _kappa(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return _DASH
    return f"{float(value):.3f}"


def _num(value: Any) -> str:
    if value is None:
        return _DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return _DASH if math.isnan(value) else f"{value:,.3f}".rstrip("0").rstrip(".")
    return _e(value)


def _pct(part: int, whole: int) -> str:
    return f" ({100 * part / whole:.1f} %)" if whole else ""


# --------------------------------------------------------------------------- run info


def _value(value: Any, depth: int = 0) -> str:
    """Any JSON-like run value as escaped HTML: dicts as key/value tables, lists of dicts as tables."""
    if isinstance(value, Mapping):
        if not value:
            return _DASH
        if depth >= 3:
            return _e(value)
        rows = "".join(f"<tr><th>{_e(k)}</th><td>{_value(v, depth + 1)}</td></tr>" for k, v in value.items())
        return f'<table class="kv">{rows}</table>'
    if isinstance(value, (list, tuple)):
        if not value:
            return _DASH
        if all(isinstance(v, Mapping) for v in value) and depth < 3:
            cols: list[str] = []
            for v in value:
                cols.extend(str(k) for k in v if str(k) not in cols)
            head = "".join(f"<th>{_e(c)}</th>" for c in cols)
            body = "".join(
                "<tr>" + "".join(f"<td>{_value(dict(v).get(c), depth + 1)}</td>" for c in cols) + "</tr>"
                for v in value
            )
            return f"<table><tr>{head}</tr>{body}</table>"
        return ", ".join(_value(v, depth + 1) for v in value)
    return _num(value)


def _run_section(run: Mapping[str, Any] | None) -> str:
    if not run:
        return ""
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_value(v)}</td></tr>" for k, v in run.items())
    return f'<h2 id="run">Run</h2>\n<table class="kv">{rows}</table>\n'


# --------------------------------------------------------------------------- statistics


def _summary(stats: Mapping[str, Any]) -> str:
    items = int(stats.get("items") or 0)
    kept = sum((stats.get("counts") or {}).get("kept", {}).values())
    before = sum((stats.get("counts") or {}).get("consensus", {}).values())
    none = int(stats.get("no_consensus") or 0)
    relaxed = int(stats.get("relaxed") or 0)
    cap = stats.get("per_class_cap")
    rows = [
        ("items voted", _num(items)),
        ("consensus", _num(before) + _pct(before, items)),
        ("kept after consensus" + (f" and the cap of {cap:,} per class" if cap else ""), _num(kept)),
        ("no consensus", _num(none) + _pct(none, items)),
        ("kept by a relaxed rule", _num(relaxed)),
        ("Krippendorff's α (nominal)", _alpha(stats.get("krippendorff_alpha"))),
        (
            "Fleiss' κ",
            f'<span class="kappa">{_kappa(stats.get("fleiss_kappa"))}</span> over '
            f"{_num(int(stats.get('fleiss_items') or 0))} items every annotator answered",
        ),
    ]
    if stats.get("relax"):
        rule = ", ".join(f"{_e(k)}: {_num(v)} votes" for k, v in stats["relax"].items())
        rows.append(("relaxed rules", rule))
    floor = stats.get("min_confidence")
    if isinstance(floor, Mapping):
        low = sum((floor.get("low_confidence") or {}).values())
        none = sum((floor.get("no_confidence") or {}).values())
        rows.append(
            (
                "minimum confidence",
                f"{_num(floor.get('threshold'))}: {_num(low)} answers under it and {_num(none)} without "
                f"a confidence did not count ({_e(floor.get('rule', ''))})",
            )
        )
    body = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<h2 id="summary">Summary</h2>\n<table class="kv">{body}</table>\n'


def _alpha(block: Any) -> str:
    """Krippendorff's α with its counts; items with one answer carry no pair and are left out."""
    if not isinstance(block, Mapping):
        return f"{_DASH} (not computed)"
    ci = block.get("alpha_ci")
    interval = (
        f" [{_kappa(ci[0])}, {_kappa(ci[1])}]" if isinstance(ci, (list, tuple)) and len(ci) == 2 else ""
    )
    return (
        f'<span class="kappa">{_kappa(block.get("alpha"))}</span>{interval} over '
        f"{_num(int(block.get('items') or 0))} items with two or more answers "
        f"({_num(int(block.get('values') or 0))} answers; an invalid or refused answer is missing, the "
        "item stays)"
    )


def _bars(labels: Sequence[str], before: Mapping[str, int], kept: Mapping[str, int]) -> str:
    """A horizontal bar chart (inline SVG): consensus before the cap (light) and kept (dark) per label."""
    if not labels:
        return ""
    top = max([1, *(int(before.get(lab, 0)) for lab in labels), *(int(kept.get(lab, 0)) for lab in labels)])
    left, width, row = 130, 300, 26
    height = row * len(labels) + 24
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 90}" height="{height}" '
        f'role="img" aria-label="consensus and kept items per class">'
    ]
    for i, lab in enumerate(labels):
        y = i * row + 4
        b, k = int(before.get(lab, 0)), int(kept.get(lab, 0))
        wb, wk = width * b / top, width * k / top
        name = _e(lab if len(lab) <= 18 else lab[:17] + "…")
        parts.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end">{name}</text>')
        parts.append(f'<rect x="{left}" y="{y}" width="{wb:.1f}" height="20" fill="#9ecae1"/>')
        parts.append(f'<rect x="{left}" y="{y + 5}" width="{wk:.1f}" height="10" fill="#08519c"/>')
        parts.append(f'<text x="{left + max(wb, wk) + 4:.1f}" y="{y + 15}">{k:,} / {b:,}</text>')
    y = row * len(labels) + 18
    parts.append(
        f'<text x="{left}" y="{y}" class="legend">light: consensus before the cap, dark: kept</text></svg>'
    )
    return '<div class="fig">' + "".join(parts) + "</div>"


def _per_class(stats: Mapping[str, Any]) -> str:
    labels = [str(x) for x in stats.get("labels") or []]
    names = [str(x) for x in stats.get("annotators") or []]
    counts = stats.get("counts") or {}
    votes = counts.get("votes") or {}
    before, kept = counts.get("consensus") or {}, counts.get("kept") or {}
    head = "".join(f"<th>votes: {_e(n)}</th>" for n in names) + "<th>consensus</th><th>kept</th>"
    body = []
    for lab in labels:
        cells = "".join(f'<td class="n">{_num(int((votes.get(n) or {}).get(lab, 0)))}</td>' for n in names)
        body.append(
            f'<tr><th>{_e(lab)}</th>{cells}<td class="n">{_num(int(before.get(lab, 0)))}</td>'
            f'<td class="n">{_num(int(kept.get(lab, 0)))}</td></tr>'
        )
    table = f"<table><tr><th>class</th>{head}</tr>{''.join(body)}</table>" if labels else "<p>No labels.</p>"
    return f'<h2 id="classes">Per class</h2>\n{table}\n{_bars(labels, before, kept)}\n'


def _answers(stats: Mapping[str, Any]) -> str:
    names = [str(x) for x in stats.get("annotators") or []]
    items = int(stats.get("items") or 0)
    columns = {"invalid": stats.get("invalid") or {}, "refused": stats.get("refused") or {}}
    floor = stats.get("min_confidence")
    if isinstance(floor, Mapping):  # the answers a minimum confidence dropped
        columns.update({k: floor.get(k) or {} for k in ("low_confidence", "no_confidence")})

    def cell(count: int) -> str:
        return f'<td class="n">{_num(count)}{_pct(count, items)}</td>'

    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join(
        f"<tr><th>{_e(n)}</th>" + "".join(cell(int(col.get(n, 0))) for col in columns.values()) + "</tr>"
        for n in names
    )
    return (
        '<h2 id="answers">Invalid and refused answers</h2>\n'
        f"<table><tr><th>annotator</th>{head}</tr>{body}</table>\n"
    )


def _confusion(pair: Mapping[str, Any], labels: Sequence[str]) -> str:
    matrix = [[int(c) for c in row] for row in pair.get("confusion") or []]
    top = max([1, *(c for row in matrix for c in row)])
    a, b = _e(pair.get("a", "")), _e(pair.get("b", ""))
    head = "".join(f"<th>{_e(lab)}</th>" for lab in labels)
    body = []
    for i, row in enumerate(matrix):
        name = _e(labels[i]) if i < len(labels) else str(i)
        cells = []
        for j, c in enumerate(row):
            alpha = c / top
            colour = "#fff" if alpha > 0.55 else "#1a1a1a"
            diag = ' class="n diag"' if i == j else ' class="n"'
            cells.append(f'<td{diag} style="background:rgba(8,81,156,{alpha:.3f});color:{colour}">{c:,}</td>')
        body.append(f"<tr><th>{name}</th>{''.join(cells)}</tr>")
    return (
        f'<div class="cm"><table><caption>{a} (rows) × {b} (columns)</caption>'
        f"<tr><th></th>{head}</tr>{''.join(body)}</table></div>"
    )


def _pairs(stats: Mapping[str, Any]) -> str:
    pairs = stats.get("pairs") or []
    labels = [str(x) for x in stats.get("labels") or []]
    if not pairs:
        return '<h2 id="pairs">Pairs of annotators</h2>\n<p>No pairs.</p>\n'
    body = "".join(
        f"<tr><td>{_e(p.get('a', ''))}</td><td>{_e(p.get('b', ''))}</td>"
        f'<td class="n">{_num(int(p.get("items") or 0))}</td>'
        f'<td class="n">{_kappa(p.get("agreement"))}</td>'
        f'<td class="n">{_kappa(p.get("cohen_kappa"))}</td></tr>'
        for p in pairs
    )
    table = (
        "<table><tr><th>a</th><th>b</th><th>items both answered</th><th>raw agreement</th>"
        f"<th>Cohen's κ</th></tr>{body}</table>"
    )
    matrices = "".join(_confusion(p, labels) for p in pairs)
    return (
        f'<h2 id="pairs">Pairs of annotators</h2>\n{table}\n'
        '<h3>Confusion matrices</h3>\n<p class="note">Rows: the first annotator\'s label, columns: the '
        f'second\'s; the diagonal is agreement.</p>\n<div class="cms">{matrices}</div>\n'
    )


# --------------------------------------------------------------------------- contact sheet


def _thumbnail(data: bytes) -> str | None:
    """A ``data:image/jpeg;base64,…`` thumbnail (≤ THUMB_SIDE px), or None if ``data`` is not an image."""
    if not data:
        return None
    from PIL import Image

    from fairsets.vision.imageformat import ImageDecodeError, image_errors, open_image

    try:
        with open_image(data) as im, image_errors():
            im = im.convert("RGB")
            im.thumbnail((THUMB_SIDE, THUMB_SIDE), Image.Resampling.LANCZOS)
            buf = io.BytesIO()
            im.save(buf, format="JPEG", quality=82)
    except ImageDecodeError:
        return None
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _reference(ex: Example) -> str | None:
    """The vote others are compared with: the consensus label, else the single most common label."""
    if ex.label is not None:
        return ex.label
    tally = Counter(v for v in ex.votes.values() if v not in _NO_ANSWER).most_common(2)
    if not tally or (len(tally) > 1 and tally[0][1] == tally[1][1]):
        return None
    return tally[0][0]


def _card(ex: Example) -> str:
    uri = _thumbnail(ex.jpeg)
    item = _e(ex.item)
    img = f'<img src="{uri}" alt="{item}">' if uri else '<div class="missing">image unavailable</div>'
    if ex.label is not None:
        head = f'<div class="label">{_e(ex.label)} <span class="rule">({_e(ex.rule or "?")})</span></div>'
    else:
        head = '<div class="label none">no consensus</div>'
    ref = _reference(ex)
    votes = []
    for name, vote in ex.votes.items():
        classes = []
        if vote in _NO_ANSWER:
            classes.append("noans")
        if ref is None or vote != ref:
            classes.append("off")
        cls = f' class="{" ".join(classes)}"' if classes else ""
        mark = " ✗" if "off" in classes else ""
        votes.append(f"<li{cls}><b>{_e(name)}</b>: {_e(vote)}{mark}</li>")
    return (
        f'<figure class="card">{img}<figcaption><code>{item}</code>{head}'
        f"<ul>{''.join(votes)}</ul></figcaption></figure>"
    )


def _sheet(examples: Sequence[Example]) -> str:
    agreed = [ex for ex in examples if ex.label is not None]
    disputed = [ex for ex in examples if ex.label is None]
    out = ['<h2 id="examples">Examples</h2>\n']
    if not examples:
        out.append("<p>No examples.</p>\n")
        return "".join(out)
    out.append(
        '<p class="note">Each thumbnail is the view the annotators were sent. A vote marked ✗ differs '
        "from the consensus (or, without one, from the most common vote).</p>\n"
    )
    for anchor, name, group in (
        ("consensus", "Consensus", agreed),
        ("disagreement", "Disagreement", disputed),
    ):
        out.append(f'<h3 id="{anchor}">{name} ({len(group):,})</h3>\n')
        if group:
            out.append('<div class="grid">' + "".join(_card(ex) for ex in group) + "</div>\n")
        else:
            out.append("<p>None.</p>\n")
    return "".join(out)


# --------------------------------------------------------------------------- page

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.5rem auto;max-width:1200px;
padding:0 1rem;color:#1a1a1a;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:.2rem}
h2{border-bottom:1px solid #ccc;padding-bottom:.2rem;margin-top:2rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.88rem}
th,td{border:1px solid #d0d0d0;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f3f3}
td.n{text-align:right;font-variant-numeric:tabular-nums}
td.diag{outline:2px solid #444;outline-offset:-2px}
table.kv th{width:14rem}
table.kv table.kv th{width:auto}
caption{font-weight:600;text-align:left;padding:.2rem 0}
.cms{display:flex;flex-wrap:wrap;gap:1rem}
.fig svg{font-size:12px;font-family:inherit}
.fig .legend{fill:#555}
.note{color:#555;font-size:.88rem}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(210px,1fr));gap:.7rem}
.card{margin:0;background:#fff;border:1px solid #ddd;border-radius:6px;padding:.4rem;font-size:.8rem;
overflow-wrap:anywhere}
.card img{display:block;max-width:100%;margin:0 auto .3rem}
.card ul{margin:.2rem 0 0;padding-left:1rem}
.card .label{font-weight:600}
.card .none{color:#a50f15}
.card .rule{font-weight:400;color:#555}
.card li.off{color:#a50f15}
.card li.noans{font-style:italic}
.missing{height:120px;display:flex;align-items:center;justify-content:center;background:#eee;color:#777}
.kappa{font-weight:600}
"""


def render_vote_report(
    stats: Mapping[str, Any],
    examples: Sequence[Example],
    *,
    title: str,
    run: Mapping[str, Any] | None = None,
    calibration: Mapping[str, Any] | None = None,
) -> str:
    """The report page (a complete HTML document) for a vote's ``stats`` and a sample of its items.

    Args:
        stats: :func:`fairsets.annotate.vote.consensus.consensus`'s ``stats``.
        examples: The items to show on the contact sheet, in the order to show them.
        title: The page title (escaped).
        run: Run information to show first (attribute, seed, view, annotators, requests sent, cache
            hits, tokens, pending items, ...): any JSON-like mapping, shown key by key.
        calibration: ``agreement.json``'s ``calibration`` (:mod:`fairsets.annotate.vote.calibration`).
    """
    from .calibration import calibration_html

    parts = [
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n",
        f"<h1>{_e(title)}</h1>\n",
        _run_section(run),
        _summary(stats),
        _per_class(stats),
        _answers(stats),
        _pairs(stats),
        calibration_html(calibration),
        _sheet(examples),
        "</body>\n</html>\n",
    ]
    return "".join(parts)


def write_vote_report(
    path: str | os.PathLike[str],
    stats: Mapping[str, Any],
    examples: Sequence[Example],
    *,
    title: str,
    run: Mapping[str, Any] | None = None,
    calibration: Mapping[str, Any] | None = None,
) -> Path:
    """Render the report (:func:`render_vote_report`) and write it to ``path`` atomically.

    The page is rendered completely before anything is written, so an error leaves no file (and an
    existing report at ``path`` untouched). Returns ``path``.
    """
    text = render_vote_report(stats, examples, title=title, run=run, calibration=calibration)
    target = Path(path)
    atomic_write_text(target, text)
    return target
