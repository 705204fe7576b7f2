"""What changed between revisions of a built dataset: the card's section and ``CHANGELOG.md``.

Both are generated from ``summary["removals"]`` (written by the build from its deny list; see
``fairsets.pipeline.removal_summary`` for the definitions): counts per cell and the reasons the
curator wrote — never who asked, nor the key, URL or identity removed. Reasons are data: each is
escaped as one line of text (:func:`~.markdown.md_text`), never rendered as Markdown.

API:
    * ``changes_section(summary) -> list[str]`` — the card's Markdown lines (empty without removals);
    * ``changelog_markdown(summary) -> str`` — the whole ``CHANGELOG.md``.
"""

from __future__ import annotations

from typing import Any

from .markdown import Md, _table, md_text

__all__ = ["changelog_markdown", "changes_section"]


def _n(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _cell_rows(change: dict[str, Any]) -> list[list[Any]]:
    """One row per cell the change touched: removed candidates, refilled, shrunk, real images left."""
    cells = sorted(
        set(change.get("removed_by_cell") or {})
        | set(change.get("refilled_by_cell") or {})
        | set(change.get("shrunk_cells") or {})
    )
    rows = []
    for cell in cells:
        shrunk = (change.get("shrunk_cells") or {}).get(cell, 0)
        left = (change.get("real_after") or {}).get(cell)
        if not shrunk:
            effect = "—"
        elif left == 0:
            effect = "no real image left: the cell is empty"
        else:
            effect = "quota filled with augmentations of the remaining real images"
        rows.append(
            [
                cell,
                Md(str((change.get("removed_by_cell") or {}).get(cell, 0))),
                Md(str((change.get("refilled_by_cell") or {}).get(cell, 0))),
                Md(str(shrunk)),
                Md("?" if left is None else str(left)),
                effect,
            ]
        )
    return rows


def _reasons(change: dict[str, Any]) -> list[str]:
    return [f"- {md_text(reason)}: {_n(n, 'request')}" for reason, n in (change.get("reasons") or {}).items()]


def _change_lines(change: dict[str, Any], variant: str) -> list[str]:
    removed = sum((change.get("removed_by_cell") or {}).values())
    dates = change.get("dates") or []
    when = f" ({', '.join(dates)})" if dates else ""
    lines = [
        f"{_n(change['requests'], 'removal request')} made against revision {change['against']}{when} "
        f"left out {_n(removed, 'candidate image')} before download.",
        "",
    ]
    rows = _cell_rows(change)
    if rows:
        head = [
            "cell",
            "candidates removed",
            f"refilled ({variant})",
            f"shrunk ({variant})",
            f"real images ({variant})",
            "effect",
        ]
        lines += [_table(head, rows, ["---", "---:", "---:", "---:", "---:", "---"]), ""]
    lines += ["Reasons:", "", *_reasons(change), ""]
    return lines


def changes_section(summary: dict[str, Any]) -> list[str]:
    """The card's "Changes and removals" section: the latest revision's change, then where the rest is."""
    rem = summary.get("removals")
    if not rem:
        return []
    variant = rem.get("variant") or summary.get("default_variant") or "balanced"
    latest = (rem.get("history") or [{**rem, "against": rem["revision"] - 1}])[-1]
    lines = [
        "## Changes and removals",
        "",
        f"This is revision {rem['revision']} of the dataset. Images are taken out on request (consent "
        "withdrawn, a licence found wrong, unsafe content) with `fairsets remove`; the build then leaves "
        "those candidates out before download and refills each cell from its remaining pool where it can. "
        "Counts are per cell; who asked, and what was removed, are not published.",
        "",
        *_change_lines(latest, variant),
        f"In all, {_n(rem.get('total_requests', rem['requests']), 'request')} since revision 1; every "
        "revision is described in `CHANGELOG.md`. Refilled: a removed real image of the "
        f"`{variant}` variant replaced by another real image of its cell; shrunk: a real image the cell "
        "lost (its quota is then filled with augmentations of the remaining real images).",
        "",
    ]
    return lines


def changelog_markdown(summary: dict[str, Any]) -> str:
    """``CHANGELOG.md`` of a built dataset: one section per revision, newest first."""
    rem = summary["removals"]
    variant = rem.get("variant") or "balanced"
    name = summary.get("pretty_name") or summary.get("name") or "dataset"
    lines = [
        f"# Changelog of {md_text(name)}",
        "",
        "Every revision after the first is a rebuild of the same recipe with removal requests "
        "(`fairsets remove`) applied: counts per cell and the reasons given, never who asked or what "
        "was removed. Definitions:",
        "",
        *(f"- `{k}`: {md_text(v)}" for k, v in (rem.get("definitions") or {}).items()),
        "",
    ]
    for change in reversed(rem.get("history") or []):
        lines += [f"## Revision {change['revision']}", "", *_change_lines(change, variant)]
    lines += ["## Revision 1", "", "The first build.", ""]
    return "\n".join(lines)
