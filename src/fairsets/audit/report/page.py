"""What both audit reports share as HTML pages: the CSS of the page, headings and tables
(:data:`PAGE_CSS`) and of the figures, notes and collapsible blocks (:data:`FIGURE_CSS`), each a
run of whole lines that the VLM audit's template (:mod:`.template`) and the persons audit's
(:mod:`fairsets.audit.persons.report.template`) put inside their ``<style>`` around their own
rules (table cells, the key column's width, warnings); and :func:`write_page`, which renders a
template with Jinja2's autoescaping and writes the page atomically."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fairsets.core.atomic import atomic_write_text

#: The page, the headings and the tables.
PAGE_CSS = """\
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 1.5rem auto;
       max-width: 1200px; padding: 0 1rem; color: #1a1a1a; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: .2rem; margin-top: 2rem; }
h3 { margin-top: 1.6rem; }
table { border-collapse: collapse; margin: .6rem 0; font-size: .88rem; }
"""

#: The figures (scrolled sideways, never shrunk), the notes and the collapsible blocks.
FIGURE_CSS = """\
.fig { overflow-x: auto; margin: .6rem 0; }
.fig img { display: block; max-width: none; }
.note { color: #555; font-size: .88rem; }
details { margin: .5rem 0; }
"""


def write_page(template: str, context: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Render ``template`` with ``context`` (autoescaped, an undefined value an error, the trailing
    newline kept) and write it atomically to ``path``; returns the path written."""
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return atomic_write_text(path, env.from_string(template).render(**context))
