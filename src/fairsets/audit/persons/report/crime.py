"""Section 3 of the persons report: crime words.

Δ % per group with matches, texts, rate, interval and the reason of every null Δ, for the
alt-texts and for each person captioner (bar chart of Δ % with the zero line); the word list in a
collapsible block.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import (
    _ci_bar_png,
    _clean,
    _count,
    _cut,
    _definitions,
    _details,
    _h,
    _img,
    _is_num,
    _kinds,
    _map,
    _p,
    _seq,
    _table,
    _text,
    format_ci,
    format_delta,
    format_share,
)


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
