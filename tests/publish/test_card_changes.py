"""The card's "Changes and removals" lines and CHANGELOG.md from ``summary["removals"]``: nothing
without removals; reasons are data (escaped, one line); counts per cell as given."""

from __future__ import annotations

from fairsets.publish.card.changes import changelog_markdown, changes_section

CHANGE = {
    "revision": 3,
    "against": 2,
    "requests": 2,
    "dates": ["2025-01-02"],
    "removed_by_cell": {"state=Goa": 3, "state=Kerala": 1},
    "refilled_by_cell": {"state=Goa": 2},
    "shrunk_cells": {"state=Goa": 1, "state=Kerala": 1},
    "real_after": {"state=Goa": 4, "state=Kerala": 0},
    "reasons": {"<script>alert(1)</script> [x](http://e.vil)\n# heading": 1, "consent withdrawn": 1},
}


def _summary() -> dict:
    first = {**CHANGE, "revision": 2, "against": 1, "requests": 1, "reasons": {"licence": 1}}
    rem = {
        k: CHANGE[k]
        for k in ("revision", "requests", "removed_by_cell", "refilled_by_cell", "shrunk_cells", "reasons")
    }
    return {
        "name": "x",
        "removals": {**rem, "total_requests": 3, "history": [first, CHANGE], "variant": "balanced"},
    }


def test_no_removals_no_lines() -> None:
    assert changes_section({"name": "x"}) == []
    assert changes_section({"name": "x", "removals": None}) == []


def test_lines_give_counts_per_cell_and_escaped_reasons() -> None:
    lines = changes_section(_summary())
    text = "\n".join(lines)
    assert lines[0] == "## Changes and removals" and "This is revision 3" in text
    assert "2 removal requests made against revision 2 (2025-01-02) left out 4 candidate images" in text
    assert "| state=Goa | 3 | 2 | 1 | 4 | quota filled with augmentations" in text
    assert "| state=Kerala | 1 | 0 | 1 | 0 | no real image left: the cell is empty |" in text
    assert "<script>" not in text and "[x](" not in text and "\n# heading" not in text
    assert "\\[x\\](http" in text and "\\# heading" in text
    assert "&lt;script&gt;" in text and "In all, 3 requests since revision 1" in text


def test_changelog_lists_every_revision_newest_first() -> None:
    text = changelog_markdown(_summary())
    assert text.index("## Revision 3") < text.index("## Revision 2") < text.index("## Revision 1")
    assert "- licence: 1 request" in text and "<script>" not in text
