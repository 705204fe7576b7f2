"""The sentiment, theme and definition parts of the persons audit's card block (:mod:`.card`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fairsets.audit.report.formatting import markdown_table as _table

from .card_format import _ci_num, _ci_pct, _fixed, _int, _is_num, _map, _name, _pct, _t

__all__ = ["THEME_WORDS", "TOP_THEMES", "_definitions", "_sentiment", "_themes"]

#: Themes shown per identity.
TOP_THEMES = 3
#: Distinctive words shown per theme.
THEME_WORDS = 4


def _groups(section: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    out = []
    for attr in ("gender", "race"):
        groups = section.get(attr)
        if isinstance(groups, Mapping):
            out += [(f"{attr} {_name(g)}", _map(r)) for g, r in groups.items()]
    return out


def _sentiment_table(section: Mapping[str, Any], min_count: int) -> list[str]:
    small = f"n < {min_count}"
    rows = []
    for label, r in [("all", _map(section.get("overall"))), *_groups(section)]:
        n = r.get("n")
        if isinstance(n, int) and n < min_count:
            rows.append([label, _int(n), small, small, small])
            continue
        neg = _map(r.get("negative"))
        mean = _fixed(r["mean"], 3) if _is_num(r.get("mean")) else _t(r.get("reason") or "–")
        rows.append([label, _int(n), mean, _pct(neg.get("share")), _ci_pct(neg.get("ci95"))])
    head = ["Texts of", "Texts", "Mean score", "Negative ratio", "95 % CI"]
    return _table(head, rows, ["---", "---:", "---:", "---:", "---:"])


def _sentiment(sent: Mapping[str, Any] | None, reason: Any, min_count: int) -> list[str]:
    if not isinstance(sent, Mapping):
        return ["", f"**Sentiment.** Not measured: {_t(reason or 'not run')}."]
    scorer = _map(sent.get("scorer"))
    if scorer.get("kind") == "vader":
        how = "VADER compound score in [−1, 1]; negative: compound ≤ −0.05"
    else:
        how = "P(positive) − P(negative) of the model, in [−1, 1]; negative: the model's top label"
    lines = [
        "",
        f"**Sentiment.** Scorer {_name(scorer.get('name', '?'))} ({how}).",
        "",
        "Alt-texts of person images:",
        "",
        *_sentiment_table(_map(sent.get("alt")), min_count),
    ]
    person = sent.get("person")
    if isinstance(person, Mapping):
        for captioner, section in person.items():
            lines += [
                "",
                f"Person captions by {_name(captioner)}:",
                "",
                *_sentiment_table(_map(section), min_count),
            ]
    return lines


def _themes(themes: Mapping[str, Any] | None, reason: Any, min_count: int) -> list[str]:
    if not isinstance(themes, Mapping):
        return ["", f"**Themes.** Not measured: {_t(reason or 'not run')}."]
    text = "person captions" if themes.get("text") == "person" else "alt-texts"
    sampled = " (a fixed sample)" if themes.get("sampled") else ""
    lines = [
        "",
        f"**Themes.** {_int(themes.get('n_texts'))} {text}{sampled}, embedded and split into themes by a "
        "sparse autoencoder; for each perceived identity, the themes that go with it most by PMI "
        "(log of how much more often than chance; 0.69 = twice as often), named by their most "
        "distinctive words.",
    ]
    small = f"n < {min_count}"
    head = ["Identity", "Texts", "Theme", "Words", "PMI", "95 % CI", "Together"]
    align = ["---", "---:", "---:", "---", "---:", "---:", "---:"]
    for attr, result in _map(themes.get("by_attribute")).items():
        result = _map(result)
        latents = _map(result.get("latents"))
        rows = []
        for ident, entry in _map(result.get("identities")).items():
            entry = _map(entry)
            n = entry.get("n_captions")
            label = _name(ident)
            if isinstance(n, int) and n < min_count:
                rows.append([label, _int(n), small, "", "", "", ""])
                continue
            picked = [t for t in entry.get("themes") or [] if isinstance(t, Mapping)][:TOP_THEMES]
            if not picked:
                rows.append([label, _int(n), "–", "no theme with enough support", "", "", ""])
            for t in picked:
                words = _map(latents.get(str(t.get("latent")))).get("words") or []
                named = ", ".join(_t(w.get("word")) for w in words[:THEME_WORDS] if isinstance(w, Mapping))
                pmi = _fixed(t.get("pmi"), 2)
                rows.append(
                    [label, _int(n), _int(t.get("latent")), named or "–", pmi, _ci_num(t.get("ci95"), 2),
                     _int(t.get("n_together"))]
                )  # fmt: skip
        if rows:
            lines += ["", f"By perceived {_t(attr)}:", "", *_table(head, rows, align)]
    return lines


#: The sections whose ``definitions`` the card lists, in order.
_DEFINED = ("composition", "crime", "sentiment", "themes")


def _definitions(audit: Mapping[str, Any]) -> list[str]:
    """Every rule behind the numbers above: the audit's shared ``definitions``, then each section's."""
    lines = ["", "**Definitions.** The rules behind every number above (also in `audit.json`):", ""]
    shared = _map(audit.get("definitions"))
    lines += [f"- {_name(k)}: {_t(v)}" for k, v in shared.items()]
    for key in _DEFINED:
        defs = _map(_map(audit.get(key)).get("definitions"))
        if defs:
            lines += [f"- {key} — {_name(k)}: {_t(v)}" for k, v in defs.items() if isinstance(v, str)]
    return lines if len(lines) > 3 else []
