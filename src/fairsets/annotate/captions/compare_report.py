"""``report.html`` of ``annotate compare-captioners``: one self-contained page.

:func:`report_html` renders the headline rate with its interval, the counts and a few example pairs
(:func:`pick_examples`: :data:`EXAMPLES_PER_VERDICT` of each verdict) with a thumbnail of the red-box
view (:func:`thumbnails`) and both captions; every text that came from a model or a file is escaped.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["EXAMPLES_PER_VERDICT", "THUMB_SIDE", "items_of", "pick_examples", "report_html", "thumbnails"]

#: Example pairs shown per verdict.
EXAMPLES_PER_VERDICT = 2
#: The thumbnails' longest side (px).
THUMB_SIDE = 320


def thumbnails(ann: Path, items: Sequence[Any]) -> dict[str, bytes]:
    from ..chat.items import views

    return {
        it.item: jpeg
        for it, jpeg, _ in views(ann, items, view="redbox", max_side=THUMB_SIDE, width=3)
        if jpeg is not None
    }


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def report_html(summary: dict[str, Any], examples: Sequence[dict[str, Any]], thumbs: dict[str, bytes]) -> str:
    """``report.html``: the headline, the counts and ``examples`` (verdict rows) with thumbnails.

    Every text that came from a model or a file is escaped; images are inline ``data:`` URLs, so
    the page needs nothing else."""
    e = html.escape
    a, b, j = summary["a"], summary["b"], summary["judge"]
    c = summary["counts"]
    if summary["rate"] is None:
        head = "No valid verdict: the win rate is undefined."
    else:
        head = (
            f"{e(a['name'])} beats {e(b['name'])} in {_pct(summary['rate'])} of "
            f"{summary['n_valid']} judged pairs ({100 * summary['level']:.0f} % {e(summary['method'])} "
            f"interval {_pct(summary['low'])} – {_pct(summary['high'])})"
        )
    pos = summary["position"]
    skipped = summary["skipped"]["by_reason"]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(a['name'])} vs {e(b['name'])}: captioner comparison</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .6em;vertical-align:top}"
        ".pair{display:flex;gap:1em;margin:1em 0;border-top:1px solid #ccc;padding-top:1em}"
        ".pair img{max-width:320px;height:auto}.win{background:#e6f4e6}</style></head><body>",
        f"<h1>Captioner comparison: {e(a['name'])} (A) vs {e(b['name'])} (B)</h1>",
        f"<p><strong>{head}</strong></p>",
        "<table><tr><th>role</th><th>name</th><th>model</th><th>host</th></tr>",
        *(
            f"<tr><td>{role}</td><td>{e(m['name'])}</td><td>{e(m['model'])}</td><td>{e(m['host'])}</td></tr>"
            for role, m in (("A", a), ("B", b), ("judge", j))
        ),
        "</table>",
        "<h2>Counts</h2><table>",
        f"<tr><td>boxes asked / sampled / judged</td><td>{summary['n_asked']} / {summary['n_sampled']} / "
        f"{summary['n_judged']}</td></tr>",
        f"<tr><td>A wins / B wins / ties / invalid</td><td>{c['A']} / {c['B']} / {c['tie']} / "
        f"{c['invalid']}</td></tr>",
        f"<tr><td>A shown first</td><td>{pos['a_first']} of {pos['judged']}</td></tr>",
        f"<tr><td>judge chose the first position</td><td>{pos['first_chosen']} of {pos['decisive']} "
        f"decisive verdicts ({_pct(pos['first_preference'])})</td></tr>",
        *(f"<tr><td>skipped: {e(reason)}</td><td>{k}</td></tr>" for reason, k in skipped.items()),
        "</table>",
        *(f"<p><strong>Warning:</strong> {e(w)}</p>" for w in summary["warnings"]),
        "<p>A tie counts as half a win for each side; invalid verdicts are left out of the rate.</p>",
        "<h2>Examples</h2>",
    ]
    for row in examples:
        jpeg = thumbs.get(row["item"])
        img = (
            f'<img alt="{e(row["item"])}" src="data:image/jpeg;base64,{base64.b64encode(jpeg).decode()}">'
            if jpeg
            else "<p>(image unavailable)</p>"
        )
        shown = "first" if row["a_first"] else "second"
        cls_a = ' class="win"' if row["verdict"] == "A" else ""
        cls_b = ' class="win"' if row["verdict"] == "B" else ""
        parts.append(
            f'<div class="pair"><div>{img}<br><code>{e(row["item"])}</code></div><div>'
            f"<p><strong>verdict: {e(row['verdict'])}</strong> (A shown {shown})</p>"
            f"<p{cls_a}><strong>A ({e(a['name'])}):</strong> {e(row['caption_a'])}</p>"
            f"<p{cls_b}><strong>B ({e(b['name'])}):</strong> {e(row['caption_b'])}</p>"
            f"<details><summary>judge's reply</summary><pre>{e(row['judge_reply'] or '')}</pre></details>"
            "</div></div>"
        )
    parts.append("</body></html>\n")
    return "\n".join(parts)


def pick_examples(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A few rows of each verdict, in item order (deterministic)."""
    picked: list[dict[str, Any]] = []
    for v in ("A", "B", "tie", "invalid"):
        picked += [r for r in rows if r["verdict"] == v][:EXAMPLES_PER_VERDICT]
    return picked


def items_of(chosen: Sequence[Any], rows: Sequence[dict[str, Any]]) -> list[Any]:
    wanted = {r["item"] for r in rows}
    return [it for it in chosen if it.item in wanted]
