"""Self-contained HTML report of a persons audit (the ``audit.json`` of ``fairsets audit persons``).

The report renders exactly the audit document of :mod:`fairsets.audit.persons.run` (schema
``fairsets.audit.persons/1``) as **one HTML file**: inline CSS, every plot a base64 PNG
(``data:image/png;base64,...``), no script, no font, no stylesheet and no image fetched from
anywhere, so the file can be archived, mailed or opened offline. It is built like the VLM audit's
report (:mod:`fairsets.audit.report`) and draws with its helpers
(:mod:`fairsets.audit.report.plots`: matplotlib's Agg canvas, imported only when a report is
rendered, 100 dpi, no ``Software`` stamp), so the same audit gives the same bytes.

**Hostile text.** Captions, alt-texts, group labels and file names in the audit are data a user
did not write: everything goes through Jinja2's autoescaping, a displayed caption is cut to
:data:`CAPTION_CHARS` characters (the full text stays in ``audit.json``), any other string to
:data:`TEXT_CHARS`, control characters become spaces, and plot labels are cut to 40 characters
with ``$`` kept from matplotlib's mathtext.

Layout, top to bottom (any section that is null or absent in the audit gets one sentence that says
why, taken from ``skipped`` or the section's own reason):

1. **Setup** — annotation folder name, fairsets version, attributes, shards, settings (minimum
   count, crime-word list, sentiment scorer, themes settings) and the definitions of the
   composition (the image-level gender rule among them).
2. **Composition** — box and image shares by perceived gender and race with 95 % Wilson intervals
   and counts (bar charts with error bars), both-gender share, unclear shares, the persons-per-image
   histogram (with the maximum) and the box-area histogram.
3. **Crime words** — Δ % per group with matches / texts / rate / interval and the reason of every
   null Δ, for the alt-texts and for each person captioner (bar chart of Δ % with the zero line);
   the word list in a collapsible block.
4. **Sentiment** — per group the mean score with its interval and the negative and positive shares
   (bar charts), for each kind of text.
5. **Themes** — the SAE's metrics (FVU, L0, dead latents); per identity the top themes with PMI,
   interval and support counts; every reported latent named by its top words and top captions
   (collapsible).
6. **Skipped** — the sections that were not computed, with their reasons.

Shares are shown as percentages with one decimal (``"12.5%"``), intervals as ``"[lo, hi]%"``,
Δ with a sign (``"+25.0%"``), sentiment means and PMI with three decimals.

Modules: ``checks`` (the schema id and :func:`check_persons_audit`), ``common`` (display text,
numbers, the error-bar plot and the blocks every section is made of), one module per computed
section (``composition``, ``crime``, ``sentiment``, ``themes``), ``context`` (setup, skipped and
the template's values) and ``template`` (the Jinja2 template).

API:
    * ``PERSONS_SCHEMA`` — the schema id (``"fairsets.audit.persons/1"``).
    * ``check_persons_audit(audit) -> list[str]`` — structural problems (empty: it can be reported).
    * ``render_persons_report(audit, path) -> Path`` — write the report atomically.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fairsets.audit.report.page import write_page

from .checks import PERSONS_SCHEMA, check_persons_audit
from .common import CAPTION_CHARS, TEXT_CHARS, format_ci, format_delta, format_share
from .context import build_context
from .template import TEMPLATE

__all__ = [
    "CAPTION_CHARS",
    "PERSONS_SCHEMA",
    "TEXT_CHARS",
    "check_persons_audit",
    "format_ci",
    "format_delta",
    "format_share",
    "render_persons_report",
]


def render_persons_report(audit: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Render the persons audit as one self-contained HTML file and write it atomically.

    Args:
        audit: the audit document (schema ``fairsets.audit.persons/1``, see :func:`check_persons_audit`).
        path: the HTML file to write (parent directories are created).

    Returns:
        The path written.

    Raises:
        ValueError: if :func:`check_persons_audit` finds problems (one line each).
    """
    problems = check_persons_audit(audit)
    if problems:
        raise ValueError("cannot report this persons audit:\n- " + "\n- ".join(problems))
    return write_page(TEMPLATE, build_context(audit), path)
