"""Self-contained HTML report of a geographic analysis (the ``analysis.json`` of ``fairsets geo analyze``).

One HTML file with inline CSS and every plot embedded as a base64 PNG: nothing is fetched from
anywhere (no script, font, stylesheet or image URL), so the file can be archived or mailed. Text
from the analysis (entity names, paths) is HTML-escaped by Jinja2's autoescaping. Plots are drawn
with matplotlib's Agg canvas (pyplot and the global backend are not touched), as in
:mod:`fairsets.audit.report`, whose number formatting (:mod:`fairsets.audit.report.formatting`)
and plot helpers (:mod:`fairsets.audit.report.plots`) are reused.

Layout: setup; Table 1 (shares); the most frequent countries; continents (Table 11); the power
law (rank–frequency on log–log axes with the fitted law, and the fit table); correlations with GDP
and population (scatter plots and table); geographic representativeness (Table 2 and the most
over/under-represented countries); diversity (Tables 16, 3 and 15, and frequency vs diversity).

Modules: ``formatting`` (table cells), ``plots`` (the figures), ``context`` (the template's
values) and ``template`` (the Jinja2 template). The structural check lives with the schema id in
:mod:`fairsets.geo.analysis_schema`, so the report does not import the analysis.

API:
    * ``check_analysis(doc) -> list[str]`` — structural problems (empty: OK).
    * ``render_report(doc, path) -> Path`` — write the report atomically.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fairsets.core.atomic import atomic_write_text

from ..analysis_schema import check_analysis
from .context import build_context
from .template import TEMPLATE

__all__ = ["check_analysis", "render_report"]


def render_report(doc: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Render an analysis as one self-contained HTML file and write it atomically.

    Args:
        doc: the analysis (schema ``fairsets.geo.analysis/1``).
        path: the HTML file to write (parent folders are created).

    Returns:
        The path written.

    Raises:
        ValueError: :func:`check_analysis` finds problems.
    """
    problems = check_analysis(doc)
    if problems:
        raise ValueError("cannot report this analysis:\n- " + "\n- ".join(problems))
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    html = env.from_string(TEMPLATE).render(**build_context(doc))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(out, html)
