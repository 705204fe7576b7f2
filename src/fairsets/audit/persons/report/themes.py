"""Section 5 of the persons report: caption themes.

The SAE's metrics (FVU, L0, dead latents); per identity the top themes with PMI, interval and
support counts (table and bar chart); every reported latent named by its top words and top
captions (collapsible).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import (
    _caption,
    _Chart,
    _charts,
    _count,
    _definitions,
    _details,
    _h,
    _kv,
    _list,
    _map,
    _metric,
    _num,
    _p,
    _seq,
    _skip_reason,
    _table,
    _text,
    format_ci,
    format_share,
)


def _latent_name(latent: Any, n: int = 4) -> str:
    words = [_text(w.get("word"), 40) for w in _seq(latent.get("words")) if isinstance(w, Mapping)]
    return ", ".join(words[:n]) if words else "(no distinctive word)"


def _mask(mask: Any) -> str:
    mask = _map(mask)
    if not mask:
        return "–"
    if not mask.get("masked"):
        return f"not masked ({_text(mask.get('reason') or 'not asked for')})"
    sources = ", ".join(f"{_text(a)}: {_text(f)}" for a, f in _map(mask.get("sources")).items())
    return (
        f"masked as “{_text(mask.get('replacement'))}” ({sources}); {_count(mask.get('words_masked'))} "
        f"words in {_count(mask.get('texts_masked'))} texts"
    )


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
                ("Identity words", _mask(th.get("identity_mask"))),
                ("PMI", _text(th.get("pmi") or "binary")),
                ("Group rule (alt-texts)", _text(th.get("group_rule")) if th.get("group_rule") else "–"),
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
            chart = _Chart(
                [("PMI", pmis, cis)],
                title=f"Top themes of {attr} {ident} (PMI)",
                ylabel="PMI (natural log)",
                alt=f"PMI of the top themes of {attr} {ident}",
                zero_line=True,
            )
            blocks += _charts(names, pmis, [chart])
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
