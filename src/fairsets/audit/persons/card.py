"""The headline tables of a persons audit in the card of its annotation folder
(``fairsets card update ANN --audit DIR``).

:func:`persons_card_section` renders the audit document that ``fairsets audit persons ANN --out
DIR`` writes (``DIR/audit.json``, schema ``fairsets.audit.persons/1``) as one Markdown block
between two markers carrying the annotations' name::

    <!-- fairsets:audit:persons:ANN start -->
    ### Audit of the perceived labels
    ...what perceived labels are; the numbers describe the dataset, not people...
    composition: person images by perceived gender and by perceived race (the group rule stated;
      the rows of a table sum to 100 %), the share showing a female and a male box, kept boxes by
      perceived race — count, share, 95 % interval; shares corrected for the classifier's
      confusion beside the raw ones (with --correct-with)
    crime words: per group (every group, the paper's table), texts, matches, rate and Δ against
      the stated reference, with the other reference's Δ beside it, for alt-texts and each
      captioner's person captions
    sentiment: per group, texts, mean score and negative ratio (when it was run)
    themes: the top 3 themes of each identity by PMI, named by their distinctive words (when run)
    definitions: the rule behind every number (the audit's shared and per-section definitions)
    <!-- fairsets:audit:persons:ANN end -->

A ratio of a group with fewer than the audit's ``min_count`` texts (crime words, sentiment,
themes) is shown as ``n < min_count``, never as a number; composition shares are of all person
images (or all kept boxes) and are always shown with their counts. The block never holds a
caption: a theme is named by its distinctive words only.

Every value taken from the audit is data: it is escaped by :mod:`.card_format` (inert Markdown
text, or a code span for a plain name; braces and a bare ``None`` as HTML entities). The same audit
gives the same bytes.

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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fairsets.audit.report.formatting import markdown_table as _table
from fairsets.audit.report.formatting import marker_id as _marker_id

from .card_format import _ci_pct, _int, _map, _name, _pct, _signed_pct, _t
from .card_sections import _definitions, _sentiment, _themes

__all__ = ["SCHEMA", "check_audit", "persons_card_section", "update_annotation_card"]

#: The schema id of ``fairsets audit persons``' ``audit.json`` (``fairsets.audit.persons.run.SCHEMA``).
SCHEMA = "fairsets.audit.persons/1"
_MARK = "<!-- fairsets:audit:{id} {which} -->"


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


_HEAD = ["Group", "Count", "Of", "Share", "95 % CI"]
_ALIGN = ["---", "---:", "---:", "---:", "---:"]


def _share_row(label: str, s: Any) -> list[str]:
    s = _map(s)
    return [label, _int(s.get("count")), _int(s.get("n")), _pct(s.get("share")), _ci_pct(s.get("ci95"))]


def _composition(comp: Mapping[str, Any]) -> list[str]:
    rule = str(comp.get("group_rule") or "exclusive")
    if rule == "any":
        how = (
            "An image is in every group one of its boxes is labelled with (`any` rule), so the rows of an "
            "image table may sum over 100 %."
        )
    else:
        how = (
            "Each image is in one group (`exclusive` rule): the one label of its boxes besides `unclear`; "
            "`mixed` when they carry two or more (a `female` and a `male` box, two races, or a box labelled "
            "mixed); `unclear` when every labelled box is unclear; `unlabelled` when no box has a label. "
            "The rows of each table sum to 100 %."
        )
    lines = [
        "",
        f"**Composition.** {_int(comp.get('n_person_images'))} person images (at least one kept box) "
        f"of {_int(comp.get('n_images'))} images, {_int(comp.get('n_boxes'))} kept boxes. {how}",
    ]
    images = _map(comp.get("images"))
    for attr in ("gender", "race"):
        table = images.get(attr)
        if isinstance(table, Mapping):
            rows = [_share_row(f"images {_name(g)}", s) for g, s in _map(table.get("groups")).items()]
            lines += ["", f"Person images by perceived {attr}:", "", *_table(_HEAD, rows, _ALIGN)]
    both = images.get("both_genders")
    if isinstance(both, Mapping):
        lines += [
            "",
            f"Person images with a `female` and a `male` box: {_int(both.get('count'))} of "
            f"{_int(both.get('n'))} ({_pct(both.get('share'))}, 95 % CI {_ci_pct(both.get('ci95'))}).",
        ]
    race = _map(comp.get("boxes")).get("race")
    if isinstance(race, Mapping):
        rows = [_share_row(f"boxes {_name(g)}", s) for g, s in _map(race.get("groups")).items()]
        lines += [
            "",
            "Kept boxes by perceived race (all kept boxes; `unlabelled`: no label):",
            "",
            *_table(_HEAD, rows, _ALIGN),
        ]
    for attr, result in _map(comp.get("corrected")).items():
        lines += _corrected(str(attr), _map(result))
    for attr, reason in sorted(_map(comp.get("missing_attributes")).items()):
        lines += ["", f"No perceived {_t(attr)}: {_t(reason)}."]
    return lines


def _corrected(attr: str, result: Mapping[str, Any]) -> list[str]:
    raw, fixed, cis = _map(result.get("raw")), _map(result.get("corrected")), _map(result.get("ci95"))
    labels = result.get("labels") if isinstance(result.get("labels"), list) else []
    rows = [[f"boxes {_name(g)}", _pct(raw.get(g)), _pct(fixed.get(g)), _ci_pct(cis.get(g))] for g in labels]
    lines = [
        "",
        f"Labelled boxes by perceived {_t(attr)}, corrected for the classifier's confusion measured by "
        f"`annotate verify` ({_name(result.get('source') or '?')}; matrix inversion with bootstrap "
        "intervals):",
        "",
        *_table(["Group", "Raw share", "Corrected share", "95 % CI"], rows, ["---", "---:", "---:", "---:"]),
    ]
    warnings = result.get("warnings") if isinstance(result.get("warnings"), list) else []
    if warnings:
        lines += ["", "Warnings: " + "; ".join(_t(w) for w in warnings) + "."]
    return lines


def _groups(section: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    out = []
    for attr in ("gender", "race"):
        groups = section.get(attr)
        if isinstance(groups, Mapping):
            out += [(f"{attr} {_name(g)}", _map(r)) for g, r in groups.items()]
    return out


def _crime_table(
    section: Mapping[str, Any], other: Mapping[str, Any], name: str, min_count: int
) -> list[str]:
    small = f"n < {min_count}"
    overall = _map(section.get("overall"))
    rows = [
        [
            "all",
            _int(overall.get("n")),
            _int(overall.get("matches")),
            _pct(overall.get("rate")),
            "baseline",
            "",
        ]
    ]
    for (label, r), (_, o) in zip(_groups(section), _other_groups(section, other), strict=True):
        n = r.get("n")
        if isinstance(n, int) and n < min_count:
            rows.append([label, _int(n), small, small, small, small])
            continue
        delta = (
            _signed_pct(r.get("delta_pct")) if r.get("delta_pct") is not None else _t(r.get("reason") or "–")
        )
        rows.append(
            [
                label,
                _int(n),
                _int(r.get("matches")),
                _pct(r.get("rate")),
                delta,
                _signed_pct(o.get("delta_pct")),
            ]
        )
    head = ["Texts of", "Texts", "Matches", "Rate", "Δ", f"Δ ({name})"]
    return _table(head, rows, ["---", "---:", "---:", "---:", "---:", "---:"])


def _other_groups(
    section: Mapping[str, Any], other: Mapping[str, Any]
) -> list[tuple[str, Mapping[str, Any]]]:
    """The alternative rows in the order of :func:`_groups` (empty where missing)."""
    return [
        (attr, _map(_map(other.get(attr)).get(g)))
        for attr in ("gender", "race")
        if isinstance(section.get(attr), Mapping)
        for g in section[attr]
    ]


def _crime(crime: Mapping[str, Any], audit: Mapping[str, Any], min_count: int) -> list[str]:
    words = crime.get("words")
    n_words = len(words) if isinstance(words, list) else None
    settings = _map(audit.get("settings"))
    source = settings.get("crime_words") or "default"
    exclusions = settings.get("exclusions") or "default"
    reference = str(crime.get("delta_reference") or "all")
    alternative = _map(crime.get("alternative"))
    other = str(alternative.get("delta_reference") or ("complement" if reference == "all" else "all"))
    readings = {
        "all": "all texts of that kind (the paper's reading)",
        "complement": "the texts not in the group",
    }
    lines = [
        "",
        f"**Crime words.** Texts that contain at least one of {_int(n_words)} crime "
        f"{'word' if n_words == 1 else 'words'} (list {_name(source)}; whole words, any case, plurals; "
        f"innocent senses such as “killer whale” masked first, table {_name(exclusions)}). "
        f"Δ = rate of the group / rate of {readings.get(reference, reference)} − 1: how much more (+) or "
        "less (−) often the group's texts use a crime word; the last column is Δ against "
        f"{readings.get(other, other)}. "
        "An alt-text belongs to its image's groups by the rule above.",
        "",
        "Alt-texts of person images:",
        "",
        *_crime_table(_map(crime.get("alt")), _map(alternative.get("alt")), other, min_count),
    ]
    person = crime.get("person")
    if isinstance(person, Mapping):
        others = _map(alternative.get("person"))
        for captioner, section in person.items():
            lines += [
                "",
                f"Person captions by {_name(captioner)} (each in its own box's groups):",
                "",
                *_crime_table(_map(section), _map(others.get(captioner)), other, min_count),
            ]
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
    lines += _definitions(audit)
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
