"""Section 3 of the persons report: crime words.

Δ % per group with matches, texts, rate, interval, the reference set's rate, the Δ against the
other reference set and the reason of every null Δ, for the alt-texts and for each person
captioner (bar chart of Δ % with the zero line); the top matched phrases per word; the word list
in a collapsible block; the definitions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import (
    _Chart,
    _charts,
    _clean,
    _count,
    _cut,
    _definitions,
    _details,
    _map,
    _p,
    _per_kind,
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
    reference = str(crime.get("delta_reference") or "all")
    alternative = _map(crime.get("alternative"))
    other = _text(alternative.get("delta_reference") or "–")
    ref_text = "all texts of that kind" if reference == "all" else "the texts of that kind not in the group"
    blocks: list[dict[str, Any]] = [
        _p(
            f"Δ% = 100 × (rate of the group / rate of the reference set − 1); reference set: {ref_text} "
            f"(--delta-reference {_text(reference)}); the column “Δ% ({other})” is the other reading. "
            f"Groups: the {_text(crime.get('group_rule') or 'exclusive')} image-level rule. Δ is shown only "
            f"for groups with at least {_count(crime.get('min_count'))} texts and when some text of the "
            f"reference set matches; {_count(crime.get('n_exclusions'))} innocent-sense phrases are masked "
            "before matching."
        )
    ]
    blocks.append(_details(f"Crime words ({len(words)})", [_p(_cut(_clean(", ".join(words)), 20_000))]))
    alt_by_title = {"Alt-texts of person images": alternative.get("alt")} | {
        f"Person captions by {_text(name, 100)}": sec for name, sec in _map(alternative.get("person")).items()
    }
    blocks += _per_kind(
        crime, lambda title, sec: _crime_kind(title, sec, _map(alt_by_title.get(title)), other)
    )
    blocks += _definitions(crime.get("definitions"), "crime words")
    return blocks


def _crime_kind(
    title: str, sec: Mapping[str, Any], other_sec: Mapping[str, Any], other: str
) -> list[dict[str, Any]]:
    """One kind of text: the overall rate, a table per attribute (with the Δ of the other reference
    set, ``other_sec``), the Δ chart and the matched phrases."""
    o = _map(sec.get("overall"))
    blocks = [
        _p(
            f"Overall: {_count(o.get('matches'))} of {_count(o.get('n'))} texts contain a crime word "
            f"({format_share(o.get('rate'))}, 95% CI {format_ci(o.get('ci95'))}); "
            f"{_count(sec.get('no_text'))} empty texts left out."
        )
    ]
    plot_names, plot_values = [], []
    for attr in ("gender", "race"):
        groups = sec.get(attr)
        if not isinstance(groups, Mapping):
            blocks.append(_p(f"No perceived {attr} labels for these texts.", note=True))
            continue
        rows = []
        for g, r in groups.items():
            r = _map(r)
            ref = _map(r.get("reference"))
            rows.append(
                [
                    _text(g),
                    _count(r.get("matches")),
                    _count(r.get("n")),
                    format_share(r.get("rate")),
                    format_ci(r.get("ci95")),
                    format_delta(r.get("delta_pct")),
                    _text(r.get("reason")) if r.get("reason") else "",
                    format_share(ref.get("rate")),
                    format_delta(_map(_map(other_sec.get(attr)).get(g)).get("delta_pct")),
                ]
            )
            plot_names.append(f"{attr}: {g}")
            plot_values.append(r.get("delta_pct"))
        head = [
            attr,
            "matches",
            "texts",
            "rate",
            "95% CI",
            "Δ%",
            "why no Δ",
            "reference rate",
            f"Δ% ({other})",
        ]
        blocks.append(_table(head, rows, f"By perceived {attr}"))
    chart = _Chart(
        [("Δ%", plot_values, None)],
        title=f"Crime-word Δ% by group — {title}",
        ylabel="Δ% vs all texts",
        alt=f"Crime-word Δ% by group, {title}",
        zero_line=True,
    )
    blocks += _charts(plot_names, plot_values, [chart], "No group has a Δ (see the reasons in the tables).")
    blocks += _phrases(sec.get("top_phrases"), title)
    return blocks


def _phrases(found: Any, title: str) -> list[dict[str, Any]]:
    """The phrases each word matched most, in a collapsible table (what the counts are made of)."""
    found = _map(found)
    rows = [
        [_text(word, 100), _text(_map(p).get("phrase"), 200), _count(_map(p).get("count"))]
        for word, phrases in found.items()
        for p in _seq(phrases)
    ]
    if not rows:
        return []
    return [_details(f"Matched phrases per word — {title}", [_table(["word", "phrase", "texts"], rows)])]
