"""Add the results of a VLM retrieval audit to a published dataset card (``fairsets card update``).

:func:`update_card` reads ``AUDIT_DIR/audit.json`` (written by ``fairsets audit vlm``, schema
``fairsets.audit.vlm/1``, checked with :func:`fairsets.audit.report.check_audit`), renders a
Markdown section with :func:`card_audit_section` and puts it into the dataset's ``README.md``,
inside the ``## Bias, risks and limitations`` section, before that section's bullet list::

    ## Bias, risks and limitations

    <!-- fairsets:audit:open_clip:ViT-B-32:none start -->
    ### Audit: ViT-B-32 (none), attribute state
    ...
    <!-- fairsets:audit:open_clip:ViT-B-32:none end -->

    - The sources decide who is represented: ...

Each block is delimited by markers carrying the audit's ``model_id``. Updating again with the same
``model_id`` replaces that block in place (same input, same bytes); another model adds a block
after the existing ones. A card without the section gets a new one before ``## Licences and
attribution`` (or at the end). The YAML header is never touched, so
:func:`fairsets.publish.card.check_card` gives the same answer as before.

The README is written atomically; then, if the layout has a ``manifest.json``, its
``files["README.md"]`` entry (sha256, bytes) is updated and the manifest rewritten atomically, so
:func:`fairsets.publish.manifest.verify_layout` still passes. The audit directory should live
outside the dataset directory (files in the layout that the manifest does not list are reported by
``verify_layout``).

**Persons audits.** ``update_card`` dispatches on the audit's ``schema`` and the folder's kind:
a ``fairsets.audit.persons/1`` audit (``fairsets audit persons``) goes into the card of its
annotation folder ``ANN`` (a ``manifest.json`` of kind ``fairsets.person_annotations``), through
:func:`fairsets.audit.persons.card.update_annotation_card`: the block is stored in
``ANN/.fairsets/card/`` so that every ``fairsets publish ANN`` renders it into the card it
prepares, and an already prepared card is updated in place. A persons audit given to a face
dataset, a VLM audit given to an annotation folder, or a prepared annotation folder
(``ANN/.fairsets/publish``) given instead of ``ANN`` are refused with a one-line reason.

API:
    * ``load_audit(audit_dir) -> dict`` — read and check ``audit.json``.
    * ``card_audit_section(audit) -> str`` — the Markdown block, markers included.
    * ``update_card(dataset, audit_dir) -> Path`` — update ``README.md`` (+ manifest); returns its path
      (for an annotation folder: the prepared card, or the stored block when it is not prepared).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fairsets.audit.report import format_change, format_number
from fairsets.audit.report.formatting import markdown_table as _table
from fairsets.audit.report.formatting import marker_id as _marker_id
from fairsets.core.atomic import LayoutBusy, atomic_write_text, layout_lock, sha256_file
from fairsets.publish.manifest import MANIFEST, write_manifest

__all__ = ["AUDIT_FILE", "SECTION_HEADING", "card_audit_section", "load_audit", "update_card"]

AUDIT_FILE = "audit.json"
SECTION_HEADING = "## Bias, risks and limitations"
NEXT_HEADING = "## Licences and attribution"
_MARK = "<!-- fairsets:audit:{id} {which} -->"
_MARK_RE = re.compile(r"^<!-- fairsets:audit:(?P<id>\S+) (?P<which>start|end) -->$")


# --------------------------------------------------------------------------- helpers


def _model_id(audit: Mapping[str, Any]) -> str:
    return str(audit.get("model_id") or f"{audit.get('model')}:{audit.get('pretrained')}")


def _text(value: Any) -> str:
    """Plain text safe in Markdown running text and table cells: the card's escaping
    (:func:`fairsets.publish.card.md_text`: no HTML, no link, no emphasis, no column break)."""
    from fairsets.publish.card import md_text

    return str(md_text(value))


def _code(value: Any) -> str:
    """An inline code span for a name (split, config, model id), or escaped text if it holds
    what a code span cannot show literally (backticks, ``|``, ``<``, ``&``, backslashes)."""
    s = " ".join(str(value).split())
    return f"`{s}`" if s and not re.search(r"[`|<>&\\]", s) else _text(s)


def _num(x: Any, digits: int = 4) -> str:
    return format_number(x, digits, text=_text)


_pct = format_change


def _read_audit(audit_dir: str | os.PathLike[str], command: str = "vlm") -> tuple[Path, Any]:
    """``(path, parsed JSON)`` of ``audit_dir/audit.json``; ``command`` names the audit the errors
    suggest (``vlm`` or ``persons``)."""
    folder = Path(audit_dir)
    path = folder / AUDIT_FILE
    target = "ANN" if command == "persons" else "DATASET"
    expected = (
        f"the audit folder must be the folder written by `fairsets audit {command} --out` "
        f"(it holds {AUDIT_FILE})"
    )
    if folder.is_file():
        raise FileNotFoundError(f"{folder} is a file, not an audit folder; {expected}")
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder; {expected}")
    if not path.is_file():
        raise FileNotFoundError(
            f"{folder} holds no {AUDIT_FILE}, so it is not an audit folder; {expected}, "
            f"e.g. `fairsets audit {command} {target} --out {folder}`"
        )
    try:
        return path, json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from e


def _check_vlm(path: Path, audit: Any) -> dict[str, Any]:
    from fairsets.audit.report import check_audit

    problems = check_audit(audit)
    if problems:
        raise ValueError(f"{path}: not a usable audit:\n- " + "\n- ".join(problems))
    return audit


def load_audit(audit_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Read ``audit_dir/audit.json`` and check it.

    Raises:
        FileNotFoundError: if the file is missing.
        ValueError: if it is not valid JSON or not a ``fairsets.audit.vlm/1`` audit.
    """
    return _check_vlm(*_read_audit(audit_dir))


# --------------------------------------------------------------------------- the Markdown section


def card_audit_section(audit: Mapping[str, Any]) -> str:
    """Render the card's audit block (markers included, no trailing newline).

    Args:
        audit: the audit dict (see :mod:`fairsets.audit.report` for the schema).

    Returns:
        Markdown: heading, description, the reference set (its empty groups named), the warnings and
        the definitions of the audit, a metrics table per primary prompt, the top-k distribution
        table and, if present, the job-simulation table.
    """
    mid = _marker_id(_model_id(audit))
    model, attribute = audit.get("model") or "?", audit["attribute"]
    pretrained = audit.get("pretrained") or "none"
    groups: list[str] = list(audit["groups"])
    sizes: Mapping[str, Any] = audit.get("group_sizes") or {}
    index = {(r.get("prompt_set"), r["prompt"], r["embeddings"]): r["metrics"] for r in audit["results"]}
    primaries: list[tuple[Any, str]] = []
    for r in audit["results"]:
        key = (r.get("prompt_set"), r["prompt"])
        if r.get("primary") and key not in primaries:
            primaries.append(key)
    has_debiased = any(r["embeddings"] == "debiased" for r in audit["results"])
    k_values = sorted({int(m["k"]) for m in index.values()})
    k = k_values[0] if len(k_values) == 1 else audit.get("k")

    splits = audit.get("splits")
    split_text = ", ".join(_code(s) for s in splits) if isinstance(splits, list) and splits else "–"
    created = str(audit.get("created") or "")
    date = created[:10] if re.match(r"^\d{4}-\d{2}-\d{2}", created) else (created or "unknown date")
    variant = f" (config {_code(audit['variant'])})" if audit.get("variant") else ""

    lines = [
        _MARK.format(id=mid, which="start"),
        f"### Audit: {_text(model)} ({_text(pretrained)}), attribute {_text(attribute)}",
        "",
        f"Text-to-image retrieval audit of split(s) {split_text}{variant}: "
        f"{_num(audit.get('n_images'))} images in {len(groups)} {_text(attribute)} groups, ranked by cosine "
        f"similarity to each prompt; the top-{_num(k)} images are counted per group. "
        "JSD is the Jensen–Shannon divergence (logarithms base 2, in [0, 1], 0 = uniform) between the "
        "top-k distribution and the uniform distribution over all declared groups; std is the population "
        "standard deviation (ddof=0) across all declared groups of the per-group mean cosine similarity to "
        "the prompt (undefined when a declared group has no image). Lower is fairer for both. Mean "
        "similarity is over all images.",
        "",
        f"Model id {_code(_model_id(audit))}; prompts: {_text(audit.get('prompt_source', 'unknown'))}; "
        f"audited on {_text(date)} with fairsets {_text(audit.get('fairsets_version', '?'))}.",
    ]
    lines += _reference_lines(audit, groups, attribute)
    debias = audit.get("debias")
    if isinstance(debias, Mapping):
        parts = [f"{key} {_text(debias[key])}" for key in ("method", "alpha", "beta") if key in debias]
        fit = debias.get("fit_splits")
        if isinstance(fit, list) and fit:
            parts.append("fitted on " + ", ".join(_code(s) for s in fit))
        lines += [
            "",
            "Debiased: the embeddings were transformed with `"
            + _text(Path(str(debias.get("transform", "?"))).name)
            + "`"
            + (f" ({'; '.join(parts)})" if parts else "")
            + "; change is (debiased − original) / original.",
        ]

    for pset, prompt in primaries:
        o = index.get((pset, prompt, "original"))
        d = index.get((pset, prompt, "debiased"))
        head = ["Metric", "Original"]
        align = ["---", "---:"]
        if has_debiased:
            head += ["Debiased", "Change"]
            align += ["---:", "---:"]
        rows = []
        for label, key in (
            ("JSD vs uniform", "jsd_uniform"),
            ("Std of group means", "mean_similarity_std"),
            ("Mean similarity", "mean_similarity"),
        ):
            before = o.get(key) if o else None
            row = [label, _metric(o, key)]
            if has_debiased:
                after = d.get(key) if d else None
                row += [_metric(d, key), _pct(before, after)]
            rows.append(row)
        set_text = f" ({_text(pset)})" if pset else ""
        lines += ["", f"Prompt “{_text(prompt)}”{set_text}:", "", *_table(head, rows, align)]

    if primaries:
        head = [_text(attribute), "Images"]
        align = ["---", "---:"]
        columns: list[Mapping[str, Any] | None] = []
        for pset, prompt in primaries:
            head.append(f"“{_text(prompt)}”")
            align.append("---:")
            columns.append(index.get((pset, prompt, "original")))
            if has_debiased:
                head.append(f"“{_text(prompt)}” debiased")
                align.append("---:")
                columns.append(index.get((pset, prompt, "debiased")))
        rows = []
        for g in groups:
            row = [_text(g), _num(sizes.get(g))]
            row += [_num(int(m["topk"].get(g, 0))) if m else "–" for m in columns]
            rows.append(row)
        lines += ["", f"Top-{_num(k)} images per {_text(attribute)}:", "", *_table(head, rows, align)]

    job = audit.get("job")
    if isinstance(job, Mapping) and isinstance(job.get("original"), Mapping):
        deb = job.get("debiased") if isinstance(job.get("debiased"), Mapping) else None
        head = [_text(attribute), "Original"]
        align = ["---", "---:"]
        if deb is not None:
            head += ["Debiased"]
            align += ["---:"]
        rows = []
        for g in groups:
            row = [_text(g), _num(job["original"].get(g), 3)]
            if deb is not None:
                row.append(_num(deb.get(g), 3))
            rows.append(row)
        lines += [
            "",
            f"Job-application simulation: share of each group's images closer to "
            f"“{_text(job.get('positive', '?'))}” than to “{_text(job.get('negative', '?'))}”:",
            "",
            *_table(head, rows, align),
        ]
    lines += ["", _MARK.format(id=mid, which="end")]
    return "\n".join(lines)


def _metric(m: Mapping[str, Any] | None, key: str) -> str:
    """A metric cell: "undefined" where the audit says a number does not exist (the std of group
    means when a declared group has no image), "–" where the record is missing."""
    if not m:
        return "–"
    if key in m and m[key] is None:
        return "undefined"
    return _num(m.get(key))


def _reference_lines(audit: Mapping[str, Any], groups: list[str], attribute: str) -> list[str]:
    """The reference set, its empty groups, the warnings and the definitions of the audit (absent
    from audits written before they were recorded)."""
    ref = audit.get("reference")
    lines: list[str] = []
    if isinstance(ref, Mapping):
        empty = [str(g) for g in audit.get("empty_groups") or []]
        lines += [
            "",
            f"Reference set: the {len(groups)} {_text(attribute)} groups declared by "
            f"{_text(ref.get('source', '?'))}; "
            + (
                f"{len(empty)} with no image, counted as zero retrievals: {_text(', '.join(empty))}."
                if empty
                else "every one has images."
            ),
        ]
    warnings = [str(w) for w in audit.get("warnings") or []]
    if warnings:
        lines += ["", "Warnings:", ""] + [f"- {_text(w)}" for w in warnings]
    defs = audit.get("definitions")
    if isinstance(defs, Mapping) and defs:
        rows = [[_code(k), _text(v)] for k, v in defs.items()]
        lines += ["", "Definitions:", "", *_table(["Number", "Rule"], rows, ["---", "---"])]
    return lines


# --------------------------------------------------------------------------- README surgery


def _split_header(text: str) -> tuple[str, str]:
    """Split the YAML header (``---`` ... ``---`` and its newline) from the body."""
    if text.startswith("---\n"):
        end = text.find("\n---\n", 3)
        if end != -1:
            return text[: end + 5], text[end + 5 :]
        if text.endswith("\n---"):
            return text, ""
    return "", text


def _outside_fences(lines: list[str]) -> list[bool]:
    flags, fence = [], False
    for line in lines:
        if line.lstrip().startswith("```"):
            flags.append(False)
            fence = not fence
        else:
            flags.append(not fence)
    return flags


def _insert_block(body: str, block: str, mid: str) -> str:
    lines = body.split("\n")
    block_lines = block.split("\n")
    outside = _outside_fences(lines)
    marks = []
    for i, line in enumerate(lines):
        m = _MARK_RE.match(line.strip()) if outside[i] else None
        if m:
            marks.append((i, m.group("id"), m.group("which")))
    # Replace an existing block of the same model in place.
    starts = [i for i, ident, which in marks if ident == mid and which == "start"]
    ends = [i for i, ident, which in marks if ident == mid and which == "end"]
    if starts or ends:
        if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
            raise ValueError(f"README.md: unbalanced audit markers for {mid!r} (edit the card by hand)")
        return "\n".join(lines[: starts[0]] + block_lines + lines[ends[0] + 1 :])

    heading = next(
        (i for i, line in enumerate(lines) if outside[i] and line.rstrip() == SECTION_HEADING),
        None,
    )
    if heading is None:
        section = [SECTION_HEADING, "", *block_lines, ""]
        nxt = next((i for i, line in enumerate(lines) if outside[i] and line.rstrip() == NEXT_HEADING), None)
        if nxt is None:
            while lines and lines[-1] == "":
                lines.pop()
            return "\n".join([*lines, "", *section])
        return "\n".join(lines[:nxt] + section + lines[nxt:])

    # After the heading and its blank lines, and after any audit block already there.
    pos = heading + 1
    while pos < len(lines) and lines[pos].strip() == "":
        pos += 1
    while pos < len(lines) and outside[pos] and (m := _MARK_RE.match(lines[pos].strip())):
        end = next(
            (j for j, ident, which in marks if ident == m.group("id") and which == "end" and j > pos), None
        )
        if m.group("which") != "start" or end is None:
            break
        pos = end + 1
        while pos < len(lines) and lines[pos].strip() == "":
            pos += 1
    new = [*block_lines, ""]
    if lines[pos - 1].strip() != "":
        new = ["", *new]
    return "\n".join(lines[:pos] + new + lines[pos:])


def update_card(
    dataset: str | os.PathLike[str], audit_dir: str | os.PathLike[str], *, wait: float = 10.0
) -> Path:
    """Put the audit of ``audit_dir`` into the card of the published layout ``dataset``.

    A persons audit goes to an annotation folder instead (see the module docstring).

    Args:
        dataset: the dataset's output directory (holds ``README.md`` and ``manifest.json``), or an
            annotation folder for a persons audit.
        audit_dir: the audit output directory (holds ``audit.json``).

    Returns:
        The path of the updated ``README.md``.

    Raises:
        FileNotFoundError: if the README or the audit is missing.
        ValueError: if the audit is invalid or of the other kind than the folder, the manifest
            unreadable, the card's audit markers are unbalanced, or a build (or another update)
            still holds the layout after ``wait`` seconds.
    """
    from fairsets.annotate.publish import PUBLISHED_KIND, folder_kind, is_annotation_folder
    from fairsets.audit.persons.card import SCHEMA as PERSONS_SCHEMA

    root = Path(dataset)
    if folder_kind(root) == PUBLISHED_KIND:
        raise ValueError(
            f"{root} is a prepared annotation folder; give the annotation folder it was prepared from "
            "(ANN, not ANN/.fairsets/publish): its card is rendered from the audits stored there"
        )
    if is_annotation_folder(root):
        path, doc = _read_audit(audit_dir, "persons")
        schema = doc.get("schema") if isinstance(doc, dict) else None
        if schema != PERSONS_SCHEMA:
            raise ValueError(
                f"{path} is not a persons audit (schema {schema!r}); the card of the annotation folder "
                f"{root} takes the audit of `fairsets audit persons {root} --out DIR`"
            )
        from fairsets.audit.persons.card import update_annotation_card

        return update_annotation_card(root, doc, source=str(path), wait=wait)
    readme = root / "README.md"
    if not readme.is_file():
        raise FileNotFoundError(
            f"{readme}: no dataset card (is {root} a published fairsets layout, or an annotation folder?)"
        )
    path, doc = _read_audit(audit_dir)
    if isinstance(doc, dict) and doc.get("schema") == PERSONS_SCHEMA:
        raise ValueError(
            f"{path} is a persons audit (of annotations {doc.get('annotations')!r}); it goes into the card "
            f"of its annotation folder (`fairsets card update ANN --audit {Path(audit_dir)}`), not into "
            f"the card of the face dataset {root}"
        )
    audit = _check_vlm(path, doc)
    try:
        with layout_lock(root, wait=wait):
            return _update_card(root, readme, audit)
    except LayoutBusy as exc:  # a build publishes there, or another update runs
        raise ValueError(str(exc)) from None


def _update_card(root: Path, readme: Path, audit: dict[str, Any]) -> Path:
    manifest_path = root / MANIFEST
    manifest: dict[str, Any] | None = None
    if manifest_path.is_file():
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise ValueError(f"{manifest_path}: unreadable ({e})") from e
        if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
            raise ValueError(f"{manifest_path}: no 'files' map")

    text = readme.read_text(encoding="utf-8")
    header, body = _split_header(text)
    block = card_audit_section(audit)
    new_body = _insert_block(body, block, _marker_id(_model_id(audit)))
    new_text = header + new_body
    if not new_text.endswith("\n"):
        new_text += "\n"
    if new_text != text:
        atomic_write_text(readme, new_text)
    if manifest is not None:
        entry = {"sha256": sha256_file(readme), "bytes": readme.stat().st_size}
        if manifest["files"].get("README.md") != entry:
            manifest["files"]["README.md"] = entry
            write_manifest(manifest_path, manifest)
    return readme
