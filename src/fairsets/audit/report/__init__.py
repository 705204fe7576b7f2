"""Self-contained HTML report of a VLM retrieval audit (the ``audit.json`` of ``fairsets audit vlm``).

The report is one HTML file with inline CSS and every plot embedded as a base64 PNG
(``data:image/png;base64,...``): no script, no font, no stylesheet and no image is fetched from
anywhere, so the file can be archived, mailed or opened offline. Text from the audit (dataset,
group and prompt names, ...) is HTML-escaped by Jinja2's autoescaping. Plots are drawn with
matplotlib's Agg canvas (imported only when a report is rendered; pyplot and the global backend
are not touched), at 100 dpi; figures grow with the number of groups and rotate the group labels,
so 36 groups stay readable.

Layout, top to bottom:

0. The audit's ``warnings`` (an empty declared group, ``k`` at or above a group's size or ``n``,
   an undeclared reference set), in a box at the top.
1. Setup: dataset, variant, splits, model, pretrained weights, attribute, ``k``, image and group
   counts, the reference set (where the groups were declared) and its empty groups, prompt
   source, the debiasing transform (if any), notes on the metrics (JSD with logarithms base 2
   against the uniform distribution over all declared groups, in ``[0, 1]``; standard deviation
   of the per-group means with ``ddof=0``) and the audit's ``definitions`` block.
2. Summary of the primary prompts: JSD, std and mean similarity, original and debiased with the
   relative change ("undefined" where the audit records that a number does not exist).
3. One section per primary prompt: a bar chart of the top-``k`` distribution per group (original
   and debiased side by side, with the uniform count as a dashed line), a bar chart of the
   per-group mean similarity (std in the title), box plots of each group's similarities beside
   it, and a per-group table.
4. Prompt robustness: per prompt set, the mean and max pairwise JSD between the top-``k``
   distributions of its prompts, with every pair in a collapsible list, and box plots of each
   group's top-``k`` share over the set's prompts.
5. Job-application simulation: bar chart and table of the per-group share of images closer to
   the positive than to the negative prompt.
6. Every prompt: JSD, std and mean similarity of each prompt of each set.

Modules: ``checks`` (the schema id and :func:`check_audit`), ``formatting`` (numbers and changes
for tables, also used by :mod:`fairsets.audit.card`), ``plots`` (matplotlib figures as embedded
PNGs, also used by :mod:`fairsets.geo.report`), ``context`` (the template's values) and
``template`` (the Jinja2 template).

API:
    * ``AUDIT_SCHEMA`` — the schema id the audit JSON carries (``"fairsets.audit.vlm/1"``).
    * ``check_audit(audit) -> list[str]`` — structural problems of an audit dict (empty: OK).
    * ``render_report(audit, path) -> Path`` — write the report atomically.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .checks import AUDIT_SCHEMA, check_audit
from .checks import EMBEDDINGS as EMBEDDINGS
from .context import build_context
from .formatting import format_change as format_change
from .formatting import format_number as format_number
from .page import write_page
from .template import TEMPLATE

__all__ = ["AUDIT_SCHEMA", "check_audit", "render_report"]


def render_report(audit: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Render the audit as one self-contained HTML file and write it atomically.

    Args:
        audit: the audit JSON (schema ``fairsets.audit.vlm/1``, see :func:`check_audit`).
        path: the HTML file to write (parent directories are created).

    Returns:
        The path written.

    Raises:
        ValueError: if :func:`check_audit` finds problems.
    """
    problems = check_audit(audit)
    if problems:
        raise ValueError("cannot report this audit:\n- " + "\n- ".join(problems))
    return write_page(TEMPLATE, build_context(audit), path)
