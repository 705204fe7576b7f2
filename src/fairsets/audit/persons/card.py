"""The headline tables of a persons audit in the card of its annotation folder
(``fairsets card update ANN --audit DIR``).

:func:`persons_card_section` renders the audit document that ``fairsets audit persons ANN --out
DIR`` writes (``DIR/audit.json``, schema ``fairsets.audit.persons/1``) as one Markdown block
between two markers carrying the annotations' name::

    <!-- fairsets:audit:persons:ANN start -->
    ### Audit of the perceived labels
    ...what perceived labels are; the numbers describe the dataset, not people...
    composition: person images by perceived gender (with the share that shows a female and a male
      box), kept boxes by perceived race — count, share, 95 % interval
    crime words: per group, texts, matches, rate and Δ, for alt-texts and each captioner's person
      captions
    sentiment: per group, texts, mean score and share of negative texts (when it was run)
    themes: the top 3 themes of each identity by PMI, named by their distinctive words (when run)
    <!-- fairsets:audit:persons:ANN end -->

A ratio of a group with fewer than the audit's ``min_count`` texts (crime words, sentiment,
themes) is shown as ``n < min_count``, never as a number; composition shares are of all person
images (or all labelled boxes) and are always shown with their counts. The block never holds a
caption: a theme is named by its distinctive words only.

Every value taken from the audit is data (group names, words, captioner and scorer names, reasons
may be anything a folder or a user file held): it is escaped as one line of Markdown text
(:func:`fairsets.publish.card.md_text`), or shown as a code span when it is a plain name; braces and a
bare ``None`` are written as HTML entities, so no value can form a link, an HTML tag, a table
column, template syntax or what the card check reads as a missing value. The same audit gives the
same bytes.

:func:`update_annotation_card` stores the block in the annotation folder's working area
(:func:`fairsets.annotate.publish.write_card_block`, ``ANN/.fairsets/card/``), where
``fairsets publish ANN`` (:func:`fairsets.annotate.publish.prepare`) finds it every time it renders
the card, into a ``## Bias, risks and limitations`` section; when ``ANN`` is already prepared, the
prepared card and its manifest entry are brought up to date at once
(:func:`fairsets.annotate.publish.refresh_prepared_card`), so the prepared folder still verifies.
It holds the folder's lock (the one ``fairsets publish`` takes) while it writes. An audit of
another folder (its ``annotations`` name differs from ``ANN``'s) is refused.

:func:`fairsets.audit.card.update_card` (``fairsets card update``) sends persons audits here and
VLM audits to face dataset cards.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fairsets.audit.report.formatting import markdown_table as _table
from fairsets.audit.report.formatting import marker_id as _marker_id

__all__ = ["SCHEMA", "check_audit", "persons_card_section", "update_annotation_card"]

#: The schema id of ``fairsets audit persons``' ``audit.json`` (``fairsets.audit.persons.run.SCHEMA``).
SCHEMA = "fairsets.audit.persons/1"
#: Themes shown per identity.
TOP_THEMES = 3
#: Distinctive words shown per theme.
THEME_WORDS = 4
_MARK = "<!-- fairsets:audit:{id} {which} -->"
_NONE = re.compile(r"(?<!\S)None(?!\S)")
_PLAIN = re.compile(r"[A-Za-z0-9_.:/@+\-]+")


# --------------------------------------------------------------------------- escaping
#
# fairsets.audit.card dispatches to this module, so this module does not import it (no import
# circle): the text escaping is the same function (fairsets.publish.card.md_text), and


def _text(value: Any) -> str:
    """One line of inert Markdown text (:func:`fairsets.publish.card.md_text`)."""
    from fairsets.publish.card import md_text

    return str(md_text(value))


def _inert(md: str) -> str:
    """Escaped Markdown with braces and a bare ``None`` word as entities (the card refuses both)."""
    md = md.replace("{", "&#123;").replace("}", "&#125;")
    return _NONE.sub("&#78;one", md)


def _t(value: Any) -> str:
    """A value as one line of inert Markdown text."""
    return _inert(_text(value)) or "“”"


def _name(value: Any) -> str:
    """A name (group, captioner, scorer, model): a code span when plain (letters, digits, ``_.:/@+-``),
    else escaped text (braces would show as entities inside a code span)."""
    s = str(value)
    return f"`{s}`" if _PLAIN.fullmatch(s) else _t(s)


def _int(value: Any) -> str:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else "–"


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x and abs(x) != float("inf")


def _pct(x: Any) -> str:
    return f"{100.0 * x:.1f} %" if _is_num(x) else "–"


def _ci_pct(ci: Any) -> str:
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_is_num(v) for v in ci):
        return f"{100.0 * ci[0]:.1f}–{100.0 * ci[1]:.1f} %"
    return "–"


def _ci_num(ci: Any, digits: int) -> str:
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_is_num(v) for v in ci):
        return f"{_fixed(ci[0], digits)} to {_fixed(ci[1], digits)}"
    return "–"


def _fixed(x: Any, digits: int, sign: str = "") -> str:
    """``x`` with ``digits`` decimals ("–" if not a number); no "-0.000" for a value that rounds to 0."""
    if not _is_num(x):
        return "–"
    s = f"{x:{sign}.{digits}f}"
    return f"{0.0:.{digits}f}" if float(s) == 0 else s


def _signed_pct(x: Any) -> str:
    return f"{_fixed(x, 1, '+')} %" if _is_num(x) else "–"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


# --------------------------------------------------------------------------- the audit


def check_audit(audit: Any) -> list[str]:
    """The problems that keep ``audit`` from being rendered (empty: it can be).

    Uses ``fairsets.audit.persons.report.check_persons_audit`` when that module has it, and checks
    the parts this card reads itself.
    """
    if not isinstance(audit, Mapping):
        return ["audit.json does not hold a JSON object"]
    if audit.get("schema") != SCHEMA:
        return [f"schema is {audit.get('schema')!r}, not {SCHEMA!r}"]
    problems: list[str] = []
    try:
        from fairsets.audit.persons.report import check_persons_audit  # type: ignore[attr-defined]
    except ImportError:
        check_persons_audit = None
    if check_persons_audit is not None:
        try:
            problems += [str(p) for p in check_persons_audit(audit) or []]
        except (ValueError, TypeError, KeyError) as e:
            problems.append(str(e))
    name = audit.get("annotations")
    if not isinstance(name, str) or not name.strip() or "/" in name or "\\" in name:
        problems.append("annotations must be the annotation folder's name")
    min_count = _map(audit.get("settings")).get("min_count")
    if not isinstance(min_count, int) or isinstance(min_count, bool) or min_count < 1:
        problems.append("settings.min_count must be a positive integer")
    comp = audit.get("composition")
    if not isinstance(comp, Mapping):
        problems.append("composition is missing")
    else:
        for key in ("n_images", "n_person_images", "n_boxes"):
            if not isinstance(comp.get(key), int):
                problems.append(f"composition.{key} must be an integer")
        for key in ("images", "boxes"):
            if not isinstance(comp.get(key), Mapping):
                problems.append(f"composition.{key} is missing")
    crime = audit.get("crime")
    if not isinstance(crime, Mapping) or not isinstance(crime.get("alt"), Mapping):
        problems.append("crime.alt is missing")
    for key in ("sentiment", "themes"):
        if audit.get(key) is not None and not isinstance(audit.get(key), Mapping):
            problems.append(f"{key} must be an object or null")
    return list(dict.fromkeys(problems))


def _block_id(audit: Mapping[str, Any]) -> str:
    return _marker_id(f"persons:{audit.get('annotations')}")


# --------------------------------------------------------------------------- the Markdown block


def _composition(comp: Mapping[str, Any]) -> list[str]:
    lines = [
        "",
        f"**Composition.** {_int(comp.get('n_person_images'))} person images (at least one kept box) "
        f"of {_int(comp.get('n_images'))} images, {_int(comp.get('n_boxes'))} kept boxes. An image is "
        "`female` or `male` when every labelled box in it is, `mixed` when it shows both (or a box "
        "labelled mixed), `unclear` otherwise.",
    ]
    head = ["Group", "Count", "Of", "Share", "95 % CI"]
    align = ["---", "---:", "---:", "---:", "---:"]

    def row(label: str, s: Any) -> list[str]:
        s = _map(s)
        return [label, _int(s.get("count")), _int(s.get("n")), _pct(s.get("share")), _ci_pct(s.get("ci95"))]

    images = _map(comp.get("images"))
    gender = images.get("gender")
    if isinstance(gender, Mapping):
        rows = [row(f"images {_name(g)}", s) for g, s in _map(gender.get("groups")).items()]
        if images.get("both_genders") is not None:
            rows.append(row("images with a `female` and a `male` box", images["both_genders"]))
        if _map(gender.get("missing")).get("count"):
            rows.append(row("images with no gender label", gender["missing"]))
        lines += ["", "Person images by perceived gender:", "", *_table(head, rows, align)]
    race = _map(comp.get("boxes")).get("race")
    if isinstance(race, Mapping):
        rows = [row(f"boxes {_name(g)}", s) for g, s in _map(race.get("groups")).items()]
        if _map(race.get("missing")).get("count"):
            rows.append(row("boxes with no race label (of all kept boxes)", race["missing"]))
        lines += [
            "",
            "Kept boxes by perceived race (of the boxes with a race label):",
            "",
            *_table(head, rows, align),
        ]
    for attr, reason in sorted(_map(comp.get("missing_attributes")).items()):
        lines += ["", f"No perceived {_t(attr)}: {_t(reason)}."]
    return lines


def _groups(section: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    out = []
    for attr in ("gender", "race"):
        groups = section.get(attr)
        if isinstance(groups, Mapping):
            out += [(f"{attr} {_name(g)}", _map(r)) for g, r in groups.items()]
    return out


def _crime_table(section: Mapping[str, Any], min_count: int) -> list[str]:
    small = f"n < {min_count}"
    overall = _map(section.get("overall"))
    rows = [
        ["all", _int(overall.get("n")), _int(overall.get("matches")), _pct(overall.get("rate")), "baseline"]
    ]
    for label, r in _groups(section):
        n = r.get("n")
        if isinstance(n, int) and n < min_count:
            rows.append([label, _int(n), small, small, small])
            continue
        delta = (
            _signed_pct(r.get("delta_pct")) if r.get("delta_pct") is not None else _t(r.get("reason") or "–")
        )
        rows.append([label, _int(n), _int(r.get("matches")), _pct(r.get("rate")), delta])
    head = ["Texts of", "Texts", "Matches", "Rate", "Δ"]
    return _table(head, rows, ["---", "---:", "---:", "---:", "---:"])


def _crime(crime: Mapping[str, Any], audit: Mapping[str, Any], min_count: int) -> list[str]:
    words = crime.get("words")
    n_words = len(words) if isinstance(words, list) else None
    source = _map(audit.get("settings")).get("crime_words") or "default"
    lines = [
        "",
        f"**Crime words.** Texts that contain at least one of {_int(n_words)} crime "
        f"{'word' if n_words == 1 else 'words'} (list "
        f"{_name(source)}; whole words, any case, plurals). Δ = rate of the group / rate of all texts of "
        "that kind − 1: how much more (+) or less (−) often the group's texts use a crime word. An "
        "alt-text belongs to its image's gender group and to every race of a box in the image.",
        "",
        "Alt-texts of person images:",
        "",
        *_crime_table(_map(crime.get("alt")), min_count),
    ]
    person = crime.get("person")
    if isinstance(person, Mapping):
        for captioner, section in person.items():
            lines += [
                "",
                f"Person captions by {_name(captioner)} (each in its own box's groups):",
                "",
                *_crime_table(_map(section), min_count),
            ]
    return lines


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
    head = ["Texts of", "Texts", "Mean score", "Negative", "95 % CI"]
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


def persons_card_section(audit: Mapping[str, Any]) -> str:
    """Render the card block of a persons audit (markers included, no trailing newline).

    Args:
        audit: the audit document (``audit.json`` of ``fairsets audit persons``).

    Returns:
        Markdown: the heading, what the numbers are, the composition, crime-word, sentiment and
        theme tables (see the module docstring).
    """
    mid = _block_id(audit)
    settings = _map(audit.get("settings"))
    min_count = settings.get("min_count") if isinstance(settings.get("min_count"), int) else 100
    skipped = _map(audit.get("skipped"))
    lines = [
        _MARK.format(id=mid, which="start"),
        "### Audit of the perceived labels",
        "",
        "Perceived labels are a classifier's guess of how a person in a box appears, from the crop "
        "alone: not how anyone identifies, and wrong more often for some people than others (see the "
        "limitations below). The numbers describe this dataset, what its images show and how its texts "
        "speak, not people or groups of people. Shares come with their counts and 95 % Wilson "
        f"intervals; the ratios of a group with fewer than {min_count} texts are not shown "
        f"(n < {min_count}).",
        "",
        f"Audit of {_name(audit.get('annotations'))} ({_int(audit.get('n_shards'))} shards) by "
        f"`fairsets audit persons`, fairsets {_t(audit.get('fairsets_version') or '?')}.",
    ]
    lines += _composition(_map(audit.get("composition")))
    lines += _crime(_map(audit.get("crime")), audit, min_count)
    lines += _sentiment(audit.get("sentiment"), skipped.get("sentiment"), min_count)
    lines += _themes(audit.get("themes"), skipped.get("themes"), min_count)
    lines += ["", _MARK.format(id=mid, which="end")]
    return "\n".join(lines)


# --------------------------------------------------------------------------- into the card


def update_annotation_card(
    ann: str | os.PathLike[str], audit: Mapping[str, Any], *, source: str = "audit.json", wait: float = 10.0
) -> Path:
    """Store the block of ``audit`` for the card of the annotation folder ``ann``; refresh its
    prepared card when there is one.

    Args:
        ann: the annotation folder.
        audit: the persons audit document (already read).
        source: how errors name the audit file.
        wait: seconds to wait for a ``fairsets publish`` that holds the folder.

    Returns:
        The prepared ``README.md`` when ``ann`` is prepared, else the stored block's file.

    Raises:
        ValueError: the audit is unusable or of another folder, the prepared folder was changed
            after it was prepared, or the folder stays busy ``wait`` seconds.
    """
    from fairsets.annotate.publish import (
        prepared_dir,
        refresh_prepared_card,
        verify_prepared,
        write_card_block,
    )
    from fairsets.core.atomic import LayoutBusy, layout_lock

    problems = check_audit(audit)
    if problems:
        raise ValueError(f"{source}: not a usable persons audit: " + "; ".join(problems))
    root = Path(ann)
    name = root.resolve().name
    if audit["annotations"] != name:
        raise ValueError(
            f"{source} is the audit of annotations {audit['annotations']!r}, not of {name!r}; audit this "
            f"folder with fairsets audit persons {root} --out DIR, then update the card with that DIR"
        )
    block = persons_card_section(audit)
    try:
        with layout_lock(root, wait=wait):
            out = prepared_dir(root)
            if (out / "manifest.json").is_file() and verify_prepared(out):
                # changed after it was prepared: refresh refuses (naming the file) before any write
                refresh_prepared_card(root)
            stored = write_card_block(root, _block_id(audit), block)
            return refresh_prepared_card(root) or stored
    except LayoutBusy as exc:
        raise ValueError(str(exc)) from None
