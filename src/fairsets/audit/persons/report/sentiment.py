"""Section 4 of the persons report: sentiment.

Per group the mean score with its interval and the negative and positive shares (tables and bar
charts), for the alt-texts and for each person captioner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import (
    _Chart,
    _charts,
    _count,
    _definitions,
    _kv,
    _map,
    _num,
    _p,
    _per_kind,
    _skip_reason,
    _table,
    _text,
    format_ci,
    format_share,
)


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
                ("Group rule (alt-texts)", sent.get("group_rule") or "exclusive"),
            ]
        )
    ]
    blocks += _per_kind(sent, _sentiment_kind)
    blocks += _definitions(sent.get("definitions"), "sentiment")
    return blocks


def _sentiment_kind(title: str, sec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One kind of text: the table of every group (overall first) and the charts of the means and
    of the negative and positive shares."""
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
    cap = "; ".join([f"{_count(sec.get('no_text'))} empty texts left out", *missing])
    cap += "; negative = the paper's negative ratio"
    charts = [
        _Chart(
            [("mean score", means, mean_cis)],
            title=f"Mean sentiment — {title}",
            ylabel="mean score",
            alt=f"Mean sentiment by group, {title}",
            zero_line=True,
        ),
        _Chart(
            [("negative", negs, neg_cis), ("positive", poss, pos_cis)],
            title=f"Negative and positive shares — {title}",
            ylabel="share (%)",
            alt=f"Negative and positive sentiment shares by group, {title}",
            scale=100.0,
        ),
    ]
    note = "No group has enough texts for a mean (see the reasons)."
    return [_table(head, rows, cap), *_charts(names, means, charts, note)]


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
