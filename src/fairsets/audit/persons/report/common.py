"""Shared helpers of the persons report: display text, numbers, the error-bar plot and the blocks.

Every section module builds its part of the report as a list of *blocks* (dicts with a ``kind``:
paragraph, note, heading, key-value table, table, image, list, collapsible details) that the
template (:mod:`.template`) renders. The helpers here turn audit values into display text —
cut to :data:`CAPTION_CHARS` or :data:`TEXT_CHARS` characters, control characters made spaces,
escaping left to the template — and draw grouped bars with 95 % error bars as embedded PNGs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from fairsets.audit.report.formatting import format_number
from fairsets.audit.report.plots import figure, group_ticks, mpl_label, png_uri

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


class _Chart(NamedTuple):
    """One bar chart of per-group values: :func:`_ci_bar_png`'s series, title, y label and options,
    and the image's alt text."""

    series: Sequence[tuple[str, Sequence[Any], Sequence[Any] | None]]
    title: str
    ylabel: str
    alt: str
    scale: float = 1.0
    zero_line: bool = False


def _charts(
    names: Sequence[str], values: Sequence[Any], charts: Sequence[_Chart], note: str | None = None
) -> list[dict[str, Any]]:
    """The ``charts`` of the groups ``names`` when some group has a number in ``values``; otherwise,
    when there are groups, the ``note`` that says why there is no chart."""
    if any(_is_num(v) for v in values):
        return [
            _img(
                _ci_bar_png(
                    names, c.series, title=c.title, ylabel=c.ylabel, scale=c.scale, zero_line=c.zero_line
                ),
                c.alt,
            )
            for c in charts
        ]
    return [_p(note, note=True)] if note and names else []


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
# Shared by the sections


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


def _per_kind(
    section: Mapping[str, Any], body: Callable[[str, Mapping[str, Any]], list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """For the alt-texts and each person captioner (:func:`_kinds`): its heading, then
    ``body(title, result)``, or the sentence that says why that kind of text was not computed."""
    blocks: list[dict[str, Any]] = []
    for title, sec in _kinds(section):
        blocks.append(_h(title))
        if isinstance(sec, str):
            blocks.append(_p(f"Not computed: {sec}."))
        elif not isinstance(sec, Mapping):
            blocks.append(_p("Not computed for this kind of text."))
        else:
            blocks += body(title, sec)
    return blocks


def _skip_reason(audit: Mapping[str, Any], key: str) -> str:
    reason = _map(audit.get("skipped")).get(key)
    return _text(reason) if reason else "the audit has no such section"
